/**
 * Error statuses every route of a kind can answer, declared once here rather than remembered route by route, so
 * the OpenAPI document lists every status the server sends: 401 and 403 on authenticated routes; 400 (invalid
 * JSON, unsupported Content-Type, validation) and 413 (body over the limit) wherever a body is read; 400 wherever
 * a path, query or header value is validated.
 */
import type { RouteOptions } from 'fastify';
import { errorResponses } from './schemas/common.ts';

/** Methods whose body Fastify reads (DELETE only when one is sent, which is enough to be answered). */
const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

export function declareCommonErrors(route: RouteOptions): void {
  const schema = route.schema;
  if (schema === undefined) return;
  const statuses = new Set<number>();
  const methods = Array.isArray(route.method) ? route.method : [route.method];
  if (route.config?.scopes !== undefined) {
    statuses.add(401);
    statuses.add(403);
  }
  if (methods.some((method) => BODY_METHODS.has(String(method)))) {
    statuses.add(400);
    statuses.add(413);
  }
  if (schema.params !== undefined || schema.querystring !== undefined || schema.headers !== undefined) {
    statuses.add(400);
  }
  if (statuses.size === 0) return;
  const declared: Record<string, unknown> =
    typeof schema.response === 'object' && schema.response !== null ? { ...schema.response } : {};
  for (const [status, body] of Object.entries(errorResponses(...statuses))) {
    if (!Object.hasOwn(declared, status)) declared[status] = body;
  }
  schema.response = declared;
}
