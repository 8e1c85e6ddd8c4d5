import type { Deps } from '../../deps.ts';
import { orgOf } from '../auth.ts';
import { errorResponses, IdParams } from '../schemas/common.ts';
import { ResponseIdParams, Run, RunList, RunListQuery, SpanList, TraceQuery } from '../schemas/runs.ts';
import type { App } from '../types.ts';

const tags = ['Runs'];

/** `conv_<uuid>` / `resp_<uuid>` → the lower-case uuid (the schemas have checked the form). */
const idAfter = (prefix: string, value: string): string => value.slice(prefix.length).toLowerCase();

export function runRoutes(app: App, deps: Deps): void {
  const runs = deps.runs;

  app.route({
    method: 'GET',
    url: '/v1/runs',
    config: { scopes: ['sessions:read'] },
    schema: {
      summary: 'List runs',
      description:
        'Runs of the organization from every surface, newest first; filter by agent_id or conversation_id. Cursor-paginated: pass next_cursor as cursor while has_more is true.',
      tags,
      querystring: RunListQuery,
      response: { 200: RunList, ...errorResponses(400, 401, 403) },
    },
    handler: async (request) => {
      const { agent_id: agentId, conversation_id: conversationId, limit, cursor } = request.query;
      return runs.list(
        orgOf(request),
        {
          ...(agentId === undefined ? {} : { agentId: agentId.toLowerCase() }),
          ...(conversationId === undefined ? {} : { sessionId: idAfter('conv_', conversationId) }),
        },
        cursor === undefined ? { limit } : { limit, cursor },
      );
    },
  });

  app.route({
    method: 'GET',
    url: '/v1/runs/:id',
    config: { scopes: ['sessions:read'] },
    schema: {
      summary: 'Get a run',
      description: 'Identity, status, bounded input/output previews, usage and cost of one run.',
      tags,
      params: IdParams,
      response: { 200: Run, ...errorResponses(400, 401, 403, 404) },
    },
    handler: async (request) => runs.get(orgOf(request), request.params.id.toLowerCase()),
  });

  app.route({
    method: 'GET',
    url: '/v1/runs/:id/trace',
    config: { scopes: ['sessions:read'] },
    schema: {
      summary: 'Get the trace of a run',
      description: 'Agent steps, model calls and tool calls of the run, parent-first (pre-order), cursor-paginated.',
      tags,
      params: IdParams,
      querystring: TraceQuery,
      response: { 200: SpanList, ...errorResponses(400, 401, 403, 404) },
    },
    handler: async (request) => {
      const { limit, cursor } = request.query;
      return runs.trace(
        orgOf(request),
        request.params.id.toLowerCase(),
        cursor === undefined ? { limit } : { limit, cursor },
      );
    },
  });

  app.route({
    method: 'GET',
    url: '/v1/responses/:id/trace',
    config: { scopes: ['sessions:read'] },
    schema: {
      summary: 'Get the trace of a response',
      description: 'The trace of the run behind a Response (resp_ + its message id); same spans as the run trace.',
      tags: ['Responses'],
      params: ResponseIdParams,
      querystring: TraceQuery,
      response: { 200: SpanList, ...errorResponses(400, 401, 403, 404) },
    },
    handler: async (request) => {
      const { limit, cursor } = request.query;
      return runs.responseTrace(
        orgOf(request),
        idAfter('resp_', request.params.id),
        cursor === undefined ? { limit } : { limit, cursor },
      );
    },
  });
}
