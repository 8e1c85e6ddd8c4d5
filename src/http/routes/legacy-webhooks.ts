/**
 * Legacy organization webhooks (`/v1/webhooks`; docs/legacy.md): task.* notifications, best-effort (one attempt,
 * no retry). Separate from webhook endpoints (/v1/webhook_endpoints), which sign and retry.
 */
import { Type } from 'typebox';
import type { Deps } from '../../deps.ts';
import { MAX_LEGACY_WEBHOOKS_PER_ORG } from '../../domain/tasks/legacy-webhooks.ts';
import { TASK_EVENT_TYPES } from '../../domain/tasks/task-types.ts';
import { auditOf, orgOf } from '../auth.ts';
import { errorResponses, IdParams, NoContent, StringEnum } from '../schemas/common.ts';
import type { App } from '../types.ts';

const tags = ['Legacy webhooks'];

const LegacyWebhook = Type.Object(
  {
    id: Type.String({ format: 'uuid' }),
    object: Type.Literal('webhook'),
    url: Type.String(),
    events: Type.Array(StringEnum(TASK_EVENT_TYPES)),
    description: Type.Union([Type.String(), Type.Null()]),
    hasSecret: Type.Boolean({ description: 'Whether X-Webhook-Secret is sent; the secret is never returned' }),
    isActive: Type.Boolean(),
    createdAt: Type.String({ format: 'date-time' }),
    lastTriggeredAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
    failureCount: Type.Integer({ description: 'Attempts that got no 2xx answer' }),
  },
  { additionalProperties: false },
);

const LegacyWebhookCreateBody = Type.Object(
  {
    url: Type.String({
      minLength: 1,
      maxLength: 2000,
      description: 'Public HTTPS URL; the same URL again updates that webhook',
    }),
    events: Type.Array(StringEnum(TASK_EVENT_TYPES), { minItems: 1, maxItems: TASK_EVENT_TYPES.length }),
    description: Type.Optional(Type.String({ maxLength: 500 })),
    secret: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 255,
        pattern: '^[\\x21-\\x7E]+$',
        description: 'Sent as is in the X-Webhook-Secret header of every attempt',
      }),
    ),
  },
  { additionalProperties: false },
);

export function legacyWebhookRoutes(app: App, deps: Deps): void {
  const service = deps.legacyWebhooks;

  app.route({
    method: 'POST',
    url: '/v1/webhooks',
    config: { scopes: ['webhooks:write'] },
    schema: {
      summary: 'Create a legacy task webhook',
      description: `Best-effort task.* notifications: one attempt per event, no retry. At most ${MAX_LEGACY_WEBHOOKS_PER_ORG} per organization (400 limit_exceeded); the same URL again updates that webhook.`,
      tags,
      body: LegacyWebhookCreateBody,
      response: { 201: LegacyWebhook, ...errorResponses(400, 401, 403, 413) },
    },
    handler: async (request, reply) =>
      reply.code(201).send(await service.create(orgOf(request), request.body, auditOf(request))),
  });

  app.route({
    method: 'GET',
    url: '/v1/webhooks',
    config: { scopes: ['webhooks:read'] },
    schema: {
      summary: 'List legacy task webhooks',
      tags,
      response: { 200: Type.Object({ data: Type.Array(LegacyWebhook) }), ...errorResponses(401, 403) },
    },
    handler: async (request) => service.list(orgOf(request)),
  });

  app.route({
    method: 'GET',
    url: '/v1/webhooks/:id',
    config: { scopes: ['webhooks:read'] },
    schema: {
      summary: 'Get a legacy task webhook',
      tags,
      params: IdParams,
      response: { 200: LegacyWebhook, ...errorResponses(400, 401, 403, 404) },
    },
    handler: async (request) => service.get(orgOf(request), request.params.id),
  });

  app.route({
    method: 'DELETE',
    url: '/v1/webhooks/:id',
    config: { scopes: ['webhooks:write'] },
    schema: {
      summary: 'Delete a legacy task webhook',
      tags,
      params: IdParams,
      response: { 204: NoContent, ...errorResponses(400, 401, 403, 404) },
    },
    handler: async (request, reply) => {
      await service.delete(orgOf(request), request.params.id, auditOf(request));
      return reply.code(204).send(null);
    },
  });
}
