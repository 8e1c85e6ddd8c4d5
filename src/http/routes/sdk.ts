/**
 * The older API under /api/sdk (spec 4.7; docs/legacy.md): threads and their messages, and the tool-run route
 * with its status read. Bearer auth; errors in the older {"error":{"type","message"}} form (http/error-handler.ts).
 * Files are in sdk-files.ts.
 */
import { Type } from 'typebox';
import type { Deps } from '../../deps.ts';
import { sdkContentBody, sdkRunBody, streamToolRun } from '../../domain/workflows/sdk-run.ts';
import { newId } from '../../lib/ids.ts';
import { orgOf } from '../auth.ts';
import { errorResponses } from '../schemas/common.ts';
import {
  NewThreadMessage,
  SdkContentBody,
  SdkRunBody,
  Thread,
  ThreadCreateBody,
  ThreadList,
  ThreadListQuery,
  ThreadMessage,
  ThreadMessageList,
  ThreadParams,
  ThreadUpdateBody,
  ToolRunBody,
  ToolRunParams,
  ToolRunStatusParams,
} from '../schemas/sdk.ts';
import { streamSse } from '../sse.ts';
import type { App } from '../types.ts';

const tags = ['Older API'];

export function sdkRoutes(app: App, deps: Deps): void {
  const { threads, workflows } = deps;

  app.route({
    method: 'POST',
    url: '/api/sdk/threads',
    config: { scopes: ['tasks:write'] },
    schema: {
      summary: 'Create a thread',
      description: 'A message list with metadata, optionally with its first messages.',
      tags,
      body: ThreadCreateBody,
      response: { 200: Thread, ...errorResponses(400, 401, 403, 404, 413) },
    },
    handler: async (request) => threads.create(orgOf(request), request.body),
  });

  app.route({
    method: 'GET',
    url: '/api/sdk/threads',
    config: { scopes: ['tasks:read'] },
    schema: {
      summary: 'List threads',
      description: 'By creation time (order, default desc); after / before take a thread id of the previous page.',
      tags,
      querystring: ThreadListQuery,
      response: { 200: ThreadList, ...errorResponses(400, 401, 403) },
    },
    handler: async (request) => {
      const { limit, order, after, before } = request.query;
      return threads.list(orgOf(request), {
        limit,
        order,
        ...(after === undefined ? {} : { after }),
        ...(before === undefined ? {} : { before }),
      });
    },
  });

  app.route({
    method: 'GET',
    url: '/api/sdk/threads/:thread_id',
    config: { scopes: ['tasks:read'] },
    schema: {
      summary: 'Get a thread',
      tags,
      params: ThreadParams,
      response: { 200: Thread, ...errorResponses(400, 401, 403, 404) },
    },
    handler: async (request) => threads.get(orgOf(request), request.params.thread_id),
  });

  app.route({
    method: 'POST',
    url: '/api/sdk/threads/:thread_id',
    config: { scopes: ['tasks:write'] },
    schema: {
      summary: 'Update a thread',
      description: 'Replaces its metadata.',
      tags,
      params: ThreadParams,
      body: ThreadUpdateBody,
      response: { 200: Thread, ...errorResponses(400, 401, 403, 404, 413) },
    },
    handler: async (request) => threads.update(orgOf(request), request.params.thread_id, request.body.metadata),
  });

  app.route({
    method: 'POST',
    url: '/api/sdk/threads/:thread_id/messages',
    config: { scopes: ['tasks:write'] },
    schema: {
      summary: 'Add a thread message',
      tags,
      params: ThreadParams,
      body: NewThreadMessage,
      response: { 200: ThreadMessage, ...errorResponses(400, 401, 403, 404, 413) },
    },
    handler: async (request) => threads.addMessage(orgOf(request), request.params.thread_id, request.body),
  });

  app.route({
    method: 'GET',
    url: '/api/sdk/threads/:thread_id/messages',
    config: { scopes: ['tasks:read'] },
    schema: {
      summary: 'List thread messages',
      description: 'Oldest first.',
      tags,
      params: ThreadParams,
      response: { 200: ThreadMessageList, ...errorResponses(400, 401, 403, 404) },
    },
    handler: async (request) => ({ list: await threads.messages(orgOf(request), request.params.thread_id) }),
  });

  app.route({
    method: 'POST',
    url: '/api/sdk/p/:project_id/a/:agent_id/r',
    config: { scopes: ['tasks:write', 'tasks:read'] },
    schema: {
      summary: 'Run an agent (tool run)',
      description:
        'Runs the agent as a Workflow Run (GET /v1/workflow-agents/runs/{run_id}). blocking (default true) answers when it ends; blocking false answers at once (poll GET …/r/{run_id}); stream true answers text/event-stream of {type, content} events (ToolRunStreamEvent) ending with data: [DONE]; contentOnly answers {run_id, status, content}. 404 for a project, agent, version or thread not found.',
      tags,
      params: ToolRunParams,
      body: ToolRunBody,
      response: {
        200: Type.Union([SdkRunBody, SdkContentBody], {
          description:
            'The run; with stream true, text/event-stream instead: one ToolRunStreamEvent JSON object per data line, then data: [DONE]',
        }),
        ...errorResponses(400, 401, 402, 403, 404, 409, 413),
      },
    },
    handler: async (request, reply) => {
      const orgId = orgOf(request);
      const { project_id: projectId, agent_id: agentId } = request.params;
      const body = request.body;
      if (body.stream === true) {
        const abort = new AbortController();
        const events = streamToolRun(
          { workflows, hub: deps.live, timeoutMs: deps.config.responsesSyncTimeoutMs },
          { orgId, projectId, agentId, sessionId: newId() },
          body,
          abort.signal,
        );
        // Admission errors (404, 400) are answered before the stream starts.
        const first = await events.next();
        // `data:` lines of JSON and then `data: [DONE]`, with no heartbeat (none on this wire).
        await streamSse(reply, deps, { surface: 'tool_runs', heartbeat: null }, async (stream) => {
          stream.signal.addEventListener('abort', () => abort.abort(), { once: true });
          if (first.done !== true) stream.data(JSON.stringify(first.value));
          await stream.pipe(events, (event) => stream.data(JSON.stringify(event)));
          stream.data('[DONE]');
        });
        return reply;
      }
      const started = await workflows.start(orgId, projectId, agentId, body);
      const run =
        body.blocking === false ? started : await workflows.wait(orgId, started.id, deps.config.responsesSyncTimeoutMs);
      return body.contentOnly === true ? sdkContentBody(run) : sdkRunBody(run);
    },
  });

  app.route({
    method: 'GET',
    url: '/api/sdk/p/:project_id/a/:agent_id/r/:run_id',
    config: { scopes: ['tasks:read'] },
    schema: {
      summary: 'Get the status of a tool run',
      tags,
      params: ToolRunStatusParams,
      response: { 200: SdkRunBody, ...errorResponses(400, 401, 403, 404) },
    },
    handler: async (request) => {
      const { project_id: projectId, agent_id: agentId, run_id: runId } = request.params;
      return sdkRunBody(await workflows.getFor(orgOf(request), projectId, agentId, runId));
    },
  });
}
