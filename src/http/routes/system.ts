import { createHash, timingSafeEqual } from 'node:crypto';
import { Type } from 'typebox';
import type { Deps } from '../../deps.ts';
import { AppError } from '../../errors/app-error.ts';
import { databaseUnavailable } from '../error-handler.ts';
import { type Lifecycle, startingError } from '../lifecycle.ts';
import { renderOpenApiMarkdown } from '../openapi-markdown.ts';
import { errorResponses } from '../schemas/common.ts';
import type { App } from '../types.ts';

const Status = Type.Object({ status: Type.String() });

/** Liveness and readiness: the only routes a worker process serves. */
export function probeRoutes(app: App, deps: Deps, lifecycle: Lifecycle): void {
  app.route({
    method: 'GET',
    url: '/healthz',
    config: { public: true, probe: true },
    schema: {
      summary: 'Health: the server is up and serves requests (503 while it is still starting)',
      tags: ['System'],
      response: { 200: Status, ...errorResponses(503) },
    },
    handler: async (_request, reply) => {
      if (!lifecycle.ready) throw startingError(reply, lifecycle);
      return { status: 'ok' };
    },
  });
  if (deps.metrics.enabled) metricsRoute(app, deps);

  app.route({
    method: 'GET',
    url: '/readyz',
    config: { public: true, probe: true },
    schema: {
      summary: 'Readiness: the server has started, the database is reachable and the server accepts work',
      tags: ['System'],
      response: { 200: Status, ...errorResponses(503) },
    },
    handler: async (request, reply) => {
      if (!lifecycle.ready) throw startingError(reply, lifecycle);
      if (!lifecycle.accepting) {
        throw new AppError('service_unavailable', 'the server is shutting down');
      }
      try {
        await deps.storage.ping();
      } catch (error) {
        request.log.warn({ err: error }, 'readiness check failed');
        throw databaseUnavailable(reply, error);
      }
      const { space } = deps.storage;
      if (!space.writable) {
        // Logged once per episode by storage-space.ts, not once per probe.
        reply.header('retry-after', String(space.retryAfterS));
        throw new AppError('service_unavailable', 'the server is read-only: writes fail for lack of space');
      }
      return { status: 'ready' };
    },
  });
}

/**
 * Prometheus metrics, when AGENTRY_METRICS is on; behind `Authorization: Bearer <AGENTRY_METRICS_TOKEN>` when
 * that is set (compared in constant time).
 */
function metricsRoute(app: App, deps: Deps): void {
  const token = deps.config.metrics.token;
  const expected = token === null ? null : createHash('sha256').update(token).digest();
  app.route({
    method: 'GET',
    url: '/metrics',
    config: { public: true },
    schema: {
      summary: 'Prometheus metrics (text exposition format 0.0.4)',
      description:
        'Turns, model and tool calls, streams, webhooks, leases and HTTP requests of this process (docs/observability.md). Served when AGENTRY_METRICS is on; when AGENTRY_METRICS_TOKEN is set it needs `Authorization: Bearer <token>`.',
      tags: ['System'],
      response: {
        200: Type.Unsafe<string>({
          description: 'Prometheus text exposition format',
          content: { 'text/plain': { schema: { type: 'string' } } },
        }),
        ...errorResponses(401),
      },
    },
    handler: async (request, reply) => {
      if (expected !== null) {
        const sent = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? '')?.[1] ?? '';
        if (!timingSafeEqual(createHash('sha256').update(sent).digest(), expected)) {
          throw new AppError(
            'invalid_metrics_token',
            'GET /metrics needs Authorization: Bearer <AGENTRY_METRICS_TOKEN>',
          );
        }
      }
      const scraped = await deps.metrics.scrape();
      return reply.header('content-type', scraped.contentType).header('cache-control', 'no-store').send(scraped.body);
    },
  });
}

/** The probes and the API's own description. */
export function systemRoutes(app: App, deps: Deps, lifecycle: Lifecycle): void {
  probeRoutes(app, deps, lifecycle);

  app.route({
    method: 'GET',
    url: '/v1/openapi.json',
    config: { public: true },
    schema: {
      summary: 'OpenAPI 3.1 document of this API',
      tags: ['Specification'],
      response: { 200: Type.Object({}, { additionalProperties: true, description: 'OpenAPI 3.1 document' }) },
    },
    handler: async (_request, reply) =>
      reply.type('application/json; charset=utf-8').serializer(JSON.stringify).send(app.swagger()),
  });

  let markdown: string | null = null;
  app.route({
    method: 'GET',
    url: '/v1/openapi.md',
    config: { public: true },
    schema: {
      summary: 'Markdown rendering of the OpenAPI document',
      tags: ['Specification'],
      response: {
        200: Type.Unsafe<string>({
          description: 'The document as Markdown',
          content: { 'text/markdown': { schema: { type: 'string' } } },
        }),
      },
    },
    handler: async (_request, reply) => {
      markdown ??= renderOpenApiMarkdown(app.swagger());
      return reply
        .type('text/markdown; charset=utf-8')
        .serializer((text: unknown) => String(text))
        .send(markdown);
    },
  });
}
