import type { Deps } from '../../deps.ts';
import { auditOf, orgOf } from '../auth.ts';
import { errorResponses, IdempotencyHeaders, IdParams, NoContent } from '../schemas/common.ts';
import {
  SessionCreateBody,
  SessionEnvelope,
  SessionList,
  SessionListQuery,
  SessionUpdateBody,
} from '../schemas/sessions.ts';
import type { App } from '../types.ts';

const tags = ['Sessions'];

export function sessionRoutes(app: App, deps: Deps): void {
  app.route({
    method: 'GET',
    url: '/v1/sessions',
    config: { scopes: ['sessions:read'] },
    schema: {
      summary: 'List sessions',
      description: 'Newest first; filter by agentId.',
      tags,
      querystring: SessionListQuery,
      response: { 200: SessionList, ...errorResponses(400, 401, 403) },
    },
    handler: async (request) => {
      const { agentId, limit, offset } = request.query;
      return deps.sessions.list(orgOf(request), agentId === undefined ? { limit, offset } : { agentId, limit, offset });
    },
  });

  app.route({
    method: 'POST',
    url: '/v1/sessions',
    config: { scopes: ['sessions:write'] },
    schema: {
      summary: 'Create a session',
      description: 'Creates an idle Session of an Agent; execution starts with its first Message.',
      tags,
      headers: IdempotencyHeaders,
      body: SessionCreateBody,
      response: { 201: SessionEnvelope, ...errorResponses(400, 401, 403, 404, 409, 413) },
    },
    handler: async (request, reply) => {
      const orgId = orgOf(request);
      const result = await deps.idempotency.run(
        { orgId, scope: 'POST /v1/sessions', key: request.headers['idempotency-key'], request: request.body },
        async (trx) => ({ status: 201, body: { session: await deps.sessions.create(orgId, request.body, trx) } }),
      );
      if (result.replayed) reply.header('idempotent-replayed', 'true');
      else deps.bus.publish('outbox', { sessionId: result.body.session.id });
      return reply.code(201).send(result.body);
    },
  });

  app.route({
    method: 'GET',
    url: '/v1/sessions/:id',
    config: { scopes: ['sessions:read'] },
    schema: {
      summary: 'Get a session',
      tags,
      params: IdParams,
      response: { 200: SessionEnvelope, ...errorResponses(400, 401, 403, 404) },
    },
    handler: async (request) => ({ session: await deps.sessions.get(orgOf(request), request.params.id) }),
  });

  app.route({
    method: 'PATCH',
    url: '/v1/sessions/:id',
    config: { scopes: ['sessions:write'] },
    schema: {
      summary: 'Update a session',
      description:
        "Extension: changes the session's title and its budget (null removes either); the budget's spend is recomputed from the session's stored cost. See docs/budgets.md.",
      tags,
      params: IdParams,
      body: SessionUpdateBody,
      response: { 200: SessionEnvelope, ...errorResponses(400, 401, 403, 404, 413) },
    },
    handler: async (request) => ({
      session: await deps.sessions.update(orgOf(request), request.params.id, request.body, auditOf(request)),
    }),
  });

  app.route({
    method: 'DELETE',
    url: '/v1/sessions/:id',
    config: { scopes: ['sessions:write'] },
    schema: {
      summary: 'Delete a session',
      description: 'Interrupts its active turn first; the agent and its workspace remain.',
      tags,
      params: IdParams,
      response: { 204: NoContent, ...errorResponses(400, 401, 403, 404) },
    },
    handler: async (request, reply) => {
      await deps.messages.deleteSession(orgOf(request), request.params.id.toLowerCase());
      return reply.code(204).send(null);
    },
  });
}
