/**
 * Legacy Tasks (spec 4.5; docs/legacy.md): list, create, read, delete, content, follow-up prompts, cancel and the
 * event stream. Each prompt is a turn of the Task's hidden workspace Session (domain/tasks/task-service.ts).
 */

import { Type } from 'typebox';
import type { Deps } from '../../deps.ts';
import { orgOf } from '../auth.ts';
import { errorResponses, IdParams, NoContent } from '../schemas/common.ts';
import {
  Task,
  TaskContent,
  TaskContentQuery,
  TaskCreateBody,
  TaskList,
  TaskListQuery,
  TaskPromptAccepted,
  TaskPromptBody,
} from '../schemas/tasks.ts';
import { streamSse } from '../sse.ts';
import type { App } from '../types.ts';

const tags = ['Tasks'];
const MAX_LIMIT = 100;

export function taskRoutes(app: App, deps: Deps): void {
  app.route({
    method: 'GET',
    url: '/v1/tasks',
    config: { scopes: ['tasks:read'] },
    schema: {
      summary: 'List tasks',
      description: 'Tasks that are not deleted, newest first. limit above 100 is treated as 100.',
      tags,
      querystring: TaskListQuery,
      response: { 200: TaskList, ...errorResponses(400, 401, 403) },
    },
    handler: async (request) =>
      deps.tasks.list(orgOf(request), {
        limit: Math.min(request.query.limit, MAX_LIMIT),
        offset: request.query.offset,
      }),
  });

  app.route({
    method: 'POST',
    url: '/v1/tasks',
    config: { scopes: ['tasks:write'] },
    schema: {
      summary: 'Create a task',
      description:
        "Creates a Task and accepts its first prompt; it runs asynchronously. Omit workspaceId for a new workspace, or give the workspace of an earlier Task. 404 for an unknown workspace or agent, 409 workspace_reserved for a Session of the Agents API, 402 when the organization's credits are spent.",
      tags,
      body: TaskCreateBody,
      response: { 201: Task, ...errorResponses(400, 401, 402, 403, 404, 409, 413) },
    },
    handler: async (request, reply) => reply.code(201).send(await deps.tasks.create(orgOf(request), request.body)),
  });

  app.route({
    method: 'GET',
    url: '/v1/tasks/:id',
    config: { scopes: ['tasks:read'] },
    schema: {
      summary: 'Get a task',
      description: 'Task metadata, its derived status and the status of each prompt.',
      tags,
      params: IdParams,
      response: { 200: Task, ...errorResponses(400, 401, 403, 404) },
    },
    handler: async (request) => deps.tasks.get(orgOf(request), request.params.id),
  });

  app.route({
    method: 'DELETE',
    url: '/v1/tasks/:id',
    config: { scopes: ['tasks:write'] },
    schema: {
      summary: 'Delete a task',
      description: 'Soft delete: unfinished prompts are cancelled and the Task leaves every read. Its workspace stays.',
      tags,
      params: IdParams,
      response: { 204: NoContent, ...errorResponses(400, 401, 403, 404) },
    },
    handler: async (request, reply) => {
      await deps.tasks.delete(orgOf(request), request.params.id);
      return reply.code(204).send(null);
    },
  });

  app.route({
    method: 'GET',
    url: '/v1/tasks/:id/content',
    config: { scopes: ['tasks:read'] },
    schema: {
      summary: 'Get task content',
      description: 'The top-level prompts and their final responses; include=events adds normalized per-prompt events.',
      tags,
      params: IdParams,
      querystring: TaskContentQuery,
      response: { 200: TaskContent, ...errorResponses(400, 401, 403, 404) },
    },
    handler: async (request) =>
      deps.tasks.content(orgOf(request), request.params.id, request.query.include === 'events'),
  });

  app.route({
    method: 'POST',
    url: '/v1/tasks/:id/prompts',
    config: { scopes: ['tasks:write'] },
    schema: {
      summary: 'Add a follow-up prompt',
      description: 'Runs after the prompts before it, in the same workspace and conversation.',
      tags,
      params: IdParams,
      body: TaskPromptBody,
      response: { 201: TaskPromptAccepted, ...errorResponses(400, 401, 402, 403, 404, 409, 413) },
    },
    handler: async (request, reply) =>
      reply.code(201).send(await deps.tasks.addPrompt(orgOf(request), request.params.id, request.body.prompt)),
  });

  app.route({
    method: 'POST',
    url: '/v1/tasks/:id/cancel',
    config: { scopes: ['tasks:write'] },
    schema: {
      summary: 'Cancel a task',
      description:
        'Cancels every unfinished prompt: queued ones at once, a running one within a second (read the Task again to see it canceled).',
      tags,
      params: IdParams,
      response: { 200: Task, ...errorResponses(400, 401, 403, 404) },
    },
    handler: async (request) => deps.tasks.cancel(orgOf(request), request.params.id),
  });

  app.route({
    method: 'GET',
    url: '/v1/tasks/:id/events',
    config: { scopes: ['tasks:read'] },
    schema: {
      summary: 'Stream task events',
      description:
        'text/event-stream of normalized events (TaskStreamEvent: {seq, timestamp, promptId, eventType, payload}, the frame id its seq) from the first, while the Task runs; then `event: done` with TaskStreamDone {status, lastSeq, finalResult} (lastSeq -1 when there were none) and the stream ends.',
      tags,
      params: IdParams,
      response: {
        200: Type.Unsafe<string>({
          description:
            'Server-Sent Events: one TaskStreamEvent JSON object per data line, then an event named done whose data is a TaskStreamDone',
          content: { 'text/event-stream': { schema: { type: 'string' } } },
        }),
        ...errorResponses(400, 401, 403, 404),
      },
    },
    handler: async (request, reply) => {
      const orgId = orgOf(request);
      await deps.tasks.exists(orgId, request.params.id);
      await streamSse(reply, deps, { surface: 'tasks', heartbeat: 'heartbeat' }, async (stream) => {
        stream.comment('connected');
        await stream.pipe(deps.tasks.follow(orgId, request.params.id, stream.signal), (item) =>
          item.type === 'event'
            ? stream.send({ id: String(item.event.seq), data: item.event })
            : stream.send({ event: 'done', data: item.data }),
        );
      });
      return reply;
    },
  });
}
