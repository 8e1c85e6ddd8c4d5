/** An agent's memories across sessions (`/v1/agents/{id}/memories`, docs/memory.md), scoped as agents are. */
import type { Deps } from '../../deps.ts';
import { auditOf, orgOf } from '../auth.ts';
import { errorResponses, IdParams } from '../schemas/common.ts';
import {
  Memory,
  MemoryCreateBody,
  MemoryDeleted,
  MemoryList,
  MemoryListQuery,
  MemoryParams,
  MemoryUpdateBody,
} from '../schemas/memories.ts';
import type { App } from '../types.ts';

const tags = ['Memories'];

export function memoryRoutes(app: App, deps: Deps): void {
  const service = deps.memories;

  app.route({
    method: 'GET',
    url: '/v1/agents/:id/memories',
    config: { scopes: ['agents:read'] },
    schema: {
      summary: "List an agent's memories",
      description:
        'Newest first; pass last_id as after for the next page. endUser keeps that end user’s memories only.',
      tags,
      params: IdParams,
      querystring: MemoryListQuery,
      response: { 200: MemoryList, ...errorResponses(400, 401, 403, 404) },
    },
    handler: async (request) => {
      const { limit = 20, after, endUser } = request.query;
      return service.list(orgOf(request), request.params.id, {
        limit,
        ...(after === undefined ? {} : { after }),
        ...(endUser === undefined ? {} : { endUser }),
      });
    },
  });

  app.route({
    method: 'POST',
    url: '/v1/agents/:id/memories',
    config: { scopes: ['agents:write'] },
    schema: {
      summary: 'Add a memory to an agent',
      description:
        "With endUser, the memory belongs to that end user's sessions; without, to the agent's sessions that have no end user. At most 1,000 per end user (400 limit_exceeded).",
      tags,
      params: IdParams,
      body: MemoryCreateBody,
      response: { 201: Memory, ...errorResponses(400, 401, 403, 404, 413) },
    },
    handler: async (request, reply) => {
      const { content, endUser } = request.body;
      const input = endUser === undefined ? { content } : { content, endUser };
      return reply.code(201).send(await service.create(orgOf(request), request.params.id, input, auditOf(request)));
    },
  });

  app.route({
    method: 'GET',
    url: '/v1/agents/:id/memories/:memoryId',
    config: { scopes: ['agents:read'] },
    schema: {
      summary: 'Get a memory',
      tags,
      params: MemoryParams,
      response: { 200: Memory, ...errorResponses(400, 401, 403, 404) },
    },
    handler: async (request) => service.get(orgOf(request), request.params.id, request.params.memoryId),
  });

  app.route({
    method: 'PATCH',
    url: '/v1/agents/:id/memories/:memoryId',
    config: { scopes: ['agents:write'] },
    schema: {
      summary: 'Change a memory',
      tags,
      params: MemoryParams,
      body: MemoryUpdateBody,
      response: { 200: Memory, ...errorResponses(400, 401, 403, 404, 413) },
    },
    handler: async (request) =>
      service.update(orgOf(request), request.params.id, request.params.memoryId, request.body, auditOf(request)),
  });

  app.route({
    method: 'DELETE',
    url: '/v1/agents/:id/memories/:memoryId',
    config: { scopes: ['agents:write'] },
    schema: {
      summary: 'Delete a memory',
      tags,
      params: MemoryParams,
      response: { 200: MemoryDeleted, ...errorResponses(400, 401, 403, 404) },
    },
    handler: async (request) =>
      service.delete(orgOf(request), request.params.id, request.params.memoryId, auditOf(request)),
  });
}
