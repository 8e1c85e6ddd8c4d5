/**
 * Agents as A2A 1.0 servers (docs/a2a.md): each agent's Agent Card, its JSON-RPC binding and its HTTP+JSON binding.
 * Both bindings answer through one request handler per call (domain/a2a/a2a-handler.ts): the SDK's JSON-RPC
 * transport parses and dispatches JSON-RPC; the HTTP+JSON routes are declared here and convert with the SDK's
 * protocol types. The agent is found in the caller's organization first, so another organization's agent is an
 * ordinary 404 before any protocol is spoken.
 */
import type { AgentCard as AgentCardData, StreamResponse } from '@a2a-js/sdk';
import type { A2ARequestHandler, ServerCallContext } from '@a2a-js/sdk/server';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { Deps } from '../../deps.ts';
import { agentCardOf } from '../../domain/a2a/agent-card.ts';
import { isJsonObject } from '../../lib/guards.ts';
import { orgOf } from '../auth.ts';
import {
  A2aBody,
  A2aError,
  A2aObject,
  AgentCard,
  AgentCardList,
  AgentParams,
  GetTaskQuery,
  JsonRpcRequest,
  JsonRpcResponse,
  ListTasksQuery,
  MessageCallParams,
  OursOrA2aError,
  TaskConfigParams,
  TaskParams,
  TaskRefParams,
} from '../schemas/a2a.ts';
import { errorResponses } from '../schemas/common.ts';
import { streamSse } from '../sse.ts';
import type { App } from '../types.ts';

const tags = ['A2A'];

/** An A2A object, or for the streaming methods Server-Sent Events of StreamResponses. */
const ObjectOrStream = Type.Unsafe<Record<string, unknown>>({
  description:
    'An A2A object; message:stream and :subscribe answer Server-Sent Events, one StreamResponse per data line',
  content: {
    'application/json': { schema: { type: 'object', additionalProperties: true } },
    'text/event-stream': { schema: { type: 'string' } },
  },
});

type Protocol = typeof import('../a2a/protocol.ts');
let loading: Promise<Protocol> | null = null;
/** The SDK side, loaded on the first A2A request (a server that serves no A2A never loads the SDK). */
const protocol = (): Promise<Protocol> => {
  loading ??= import('../a2a/protocol.ts');
  return loading;
};

/** A card in the protocol's JSON form (always an object). */
function cardJson(p: Protocol, card: AgentCardData): Record<string, unknown> {
  const json = p.AgentCard.toJSON(card);
  return isJsonObject(json) ? json : {};
}

/** The first value of a forwarded header, when it is one string. */
function forwarded(value: string | string[] | undefined): string | undefined {
  return typeof value === 'string' ? value.split(',', 1)[0]?.trim() : undefined;
}

const HOST = /^[A-Za-z0-9.-]+(:\d{1,5})?$|^\[[0-9A-Fa-f:.]+\](:\d{1,5})?$/;

/**
 * The base URL the caller reached this server by: the card's URLs are built on it. A proxy's X-Forwarded-Proto and
 * X-Forwarded-Host are honoured when well-formed: they only shape the card answered to the same caller.
 */
function baseUrlOf(request: FastifyRequest): string {
  const proto = forwarded(request.headers['x-forwarded-proto']);
  const host = forwarded(request.headers['x-forwarded-host']);
  const scheme = proto === 'http' || proto === 'https' ? proto : request.protocol;
  return `${scheme}://${host !== undefined && HOST.test(host) ? host : request.host}`;
}

/** Aborted when the caller goes away before the answer is sent (a blocking SendMessage stops waiting). */
function requestSignal(reply: FastifyReply): AbortSignal {
  const controller = new AbortController();
  reply.raw.on('close', () => {
    if (!reply.raw.writableFinished) controller.abort();
  });
  return controller.signal;
}

export function a2aRoutes(app: App, deps: Deps): void {
  /** The request handler for the path's agent of the caller's organization (404 for any other). */
  async function handlerFor(request: FastifyRequest, agentId: string): Promise<A2ARequestHandler> {
    const orgId = orgOf(request);
    const agent = await deps.agents.get(orgId, agentId.toLowerCase());
    const report = (error: unknown) => request.log.error({ err: error }, 'A2A call failed');
    return (await protocol()).createA2aHandler(
      deps.a2a,
      { orgId, agentId: agent.id },
      agentCardOf(agent, baseUrlOf(request)),
      report,
      deps.a2aPush,
    );
  }

  /** The call's context; the protocol is loaded by then (handlerFor comes first). */
  async function contextOf(request: FastifyRequest, reply: FastifyReply): Promise<ServerCallContext> {
    const p = await protocol();
    const version = request.headers['a2a-version'];
    return new p.ServerCallContext({
      ...(typeof version === 'string' ? { requestedVersion: version } : {}),
      state: new Map([[p.SIGNAL_KEY, requestSignal(reply)]]),
    });
  }

  /**
   * Streams `events` as SSE, each through `frame`. The first event is awaited before the stream opens, so a
   * request that fails at once gets an ordinary error answer (`fail`); a failure later ends the stream with an
   * error event.
   */
  async function streamEvents<T>(
    reply: FastifyReply,
    events: AsyncGenerator<T, void, undefined>,
    frame: (value: T) => unknown,
    fail: (error: unknown) => Promise<unknown>,
  ): Promise<FastifyReply> {
    const p = await protocol();
    let first: IteratorResult<T, void>;
    try {
      first = await events.next();
    } catch (error) {
      await fail(error);
      return reply;
    }
    await streamSse(reply, deps, { surface: 'a2a', heartbeat: 'heartbeat' }, async (stream) => {
      if (first.done === true) return;
      stream.send({ data: frame(first.value) });
      try {
        await stream.pipe({ [Symbol.asyncIterator]: () => events }, (value) => stream.send({ data: frame(value) }));
      } catch (error) {
        stream.send({ event: 'error', data: p.toRestErrorBody(error, p.restStatusFor(error)) });
      }
    });
    return reply;
  }

  app.route({
    method: 'GET',
    url: '/v1/agents/:id/.well-known/agent-card.json',
    config: { scopes: ['agents:read'] },
    schema: {
      summary: "Get an agent's A2A Agent Card",
      description:
        'The A2A 1.0 Agent Card of the agent: its JSON-RPC and HTTP+JSON endpoints (absolute URLs on the host this request reached), the API-key bearer auth, its skills.',
      tags,
      params: AgentParams,
      response: { 200: AgentCard, ...errorResponses(400, 401, 403, 404) },
    },
    handler: async (request) => {
      const handler = await handlerFor(request, request.params.id);
      return cardJson(await protocol(), await handler.getAgentCard());
    },
  });

  app.route({
    method: 'GET',
    url: '/v1/a2a/agents',
    config: { scopes: ['agents:read'] },
    schema: {
      summary: 'List A2A Agent Cards',
      description: "The Agent Card of each of the organization's agents.",
      tags,
      response: { 200: AgentCardList, ...errorResponses(401, 403) },
    },
    handler: async (request) => {
      const agents = await deps.agents.list(orgOf(request));
      const base = baseUrlOf(request);
      const p = await protocol();
      return { object: 'list' as const, data: agents.map((agent) => cardJson(p, agentCardOf(agent, base))) };
    },
  });

  app.route({
    method: 'POST',
    url: '/v1/agents/:id/a2a',
    config: { scopes: ['sessions:write'] },
    schema: {
      summary: 'A2A JSON-RPC binding',
      description:
        'A2A 1.0 over JSON-RPC 2.0: SendMessage, SendStreamingMessage, GetTask, ListTasks, CancelTask, SubscribeToTask and the TaskPushNotificationConfig methods. Protocol errors are JSON-RPC errors in a 200 answer; streaming methods answer text/event-stream.',
      tags,
      params: AgentParams,
      body: JsonRpcRequest,
      response: { 200: JsonRpcResponse, ...errorResponses(400, 401, 403, 404, 413) },
    },
    handler: async (request, reply) => {
      const handler = await handlerFor(request, request.params.id);
      const p = await protocol();
      const answer = await new p.JsonRpcTransportHandler(handler).handle(request.body, await contextOf(request, reply));
      if (!(Symbol.asyncIterator in answer)) return answer;
      const id = request.body.id ?? null;
      return streamEvents(
        reply,
        answer,
        (value) => value,
        async (error) => reply.send({ jsonrpc: '2.0', id, error: p.toJsonRpcError(error) }),
      );
    },
  });

  registerRest(app, handlerFor, contextOf, streamEvents);
}

type HandlerFor = (request: FastifyRequest, agentId: string) => Promise<A2ARequestHandler>;

/** The HTTP+JSON binding (A2A 1.0 section 11) under /v1/agents/{id}/a2a/rest. */
function registerRest(
  app: App,
  handlerFor: HandlerFor,
  contextOf: (request: FastifyRequest, reply: FastifyReply) => Promise<ServerCallContext>,
  streamEvents: <T>(
    reply: FastifyReply,
    events: AsyncGenerator<T, void, undefined>,
    frame: (value: T) => unknown,
    fail: (error: unknown) => Promise<unknown>,
  ) => Promise<FastifyReply>,
): void {
  const base = '/v1/agents/:id/a2a/rest';
  const report = (request: FastifyRequest) => (error: unknown) => request.log.error({ err: error }, 'A2A call failed');

  /** A protocol error as the binding answers it; our own errors (401, 404 of the agent) went out before. */
  const failWith = (reply: FastifyReply, request: FastifyRequest) => async (error: unknown) => {
    const p = await protocol();
    const failure = error instanceof p.A2AError ? error : p.protocolError(error, report(request));
    const status = p.restStatusFor(failure);
    return reply.code(status).send(p.toRestErrorBody(failure, status));
  };

  async function answer(request: FastifyRequest, reply: FastifyReply, status: number, work: () => Promise<unknown>) {
    try {
      return reply.code(status).send(await work());
    } catch (error) {
      return failWith(reply, request)(error);
    }
  }

  const restErrors = { 400: OursOrA2aError, 404: OursOrA2aError, 409: A2aError, 500: A2aError, 501: A2aError };
  const stream = async (request: FastifyRequest, reply: FastifyReply, events: AsyncGenerator<StreamResponse>) => {
    const p = await protocol();
    return streamEvents(reply, events, (event) => p.StreamResponse.toJSON(event), failWith(reply, request));
  };

  // `message:send` and `message:stream` are one route: a literal colon in a path would not survive the OpenAPI
  // document's path templates.
  app.route({
    method: 'POST',
    url: `${base}/:call`,
    config: { scopes: ['sessions:write'] },
    schema: {
      summary: 'A2A SendMessage and SendStreamingMessage (HTTP+JSON)',
      description:
        'POST message:send sends a message: a new task (in the context given, or a new one), or the answer to an input-required task; it waits until the task ends or needs input unless configuration.returnImmediately is true. POST message:stream answers the same as a stream: the task, then each status and artifact update until it ends or needs input.',
      tags,
      params: MessageCallParams,
      body: A2aBody,
      response: { 200: ObjectOrStream, ...restErrors, ...errorResponses(401, 403, 413) },
    },
    handler: async (request, reply) => {
      const handler = await handlerFor(request, request.params.id);
      const p = await protocol();
      const params = p.SendMessageRequest.fromJSON(request.body);
      if (request.params.call === 'message:stream') {
        return stream(request, reply, handler.sendMessageStream(params, await contextOf(request, reply)));
      }
      return answer(request, reply, 200, async () => {
        const result = await handler.sendMessage(params, await contextOf(request, reply));
        return p.SendMessageResponse.toJSON({
          payload: 'messageId' in result ? { $case: 'message', value: result } : { $case: 'task', value: result },
        });
      });
    },
  });

  app.route({
    method: 'GET',
    url: `${base}/tasks`,
    config: { scopes: ['sessions:read'] },
    schema: {
      summary: 'A2A ListTasks (HTTP+JSON)',
      description: "The agent's tasks started over A2A, newest first.",
      tags,
      params: AgentParams,
      querystring: ListTasksQuery,
      response: { 200: A2aObject, ...restErrors, ...errorResponses(401, 403) },
    },
    handler: async (request, reply) => {
      const handler = await handlerFor(request, request.params.id);
      const p = await protocol();
      const query = request.query;
      return answer(request, reply, 200, async () =>
        p.ListTasksResponse.toJSON(
          await handler.listTasks(
            {
              tenant: '',
              contextId: query.contextId ?? '',
              status: query.status === undefined ? 0 : p.taskStateFromJSON(query.status),
              pageSize: query.pageSize,
              pageToken: query.pageToken ?? '',
              historyLength: query.historyLength,
              statusTimestampAfter: query.statusTimestampAfter,
              includeArtifacts: query.includeArtifacts,
            },
            await contextOf(request, reply),
          ),
        ),
      );
    },
  });

  /** `{id}`, `{id}:cancel` or `{id}:subscribe`: the binding's custom methods share the task's path segment. */
  const splitRef = (ref: string): { taskId: string; verb: string } => {
    const at = ref.indexOf(':');
    return at === -1 ? { taskId: ref, verb: '' } : { taskId: ref.slice(0, at), verb: ref.slice(at + 1) };
  };
  const unknownMethod = (reply: FastifyReply, request: FastifyRequest, verb: string) =>
    protocol().then((p) =>
      failWith(
        reply,
        request,
      )(
        new p.RequestMalformedError(
          `taskRef: '${verb === '' ? '(none)' : `:${verb}`}' is not a method here; use :cancel or :subscribe`,
        ),
      ),
    );

  app.route({
    method: 'GET',
    url: `${base}/tasks/:taskRef`,
    config: { scopes: ['sessions:read'] },
    schema: {
      summary: 'A2A GetTask or SubscribeToTask (HTTP+JSON)',
      description:
        'GET tasks/{id} answers the task; GET tasks/{id}:subscribe streams its updates until it ends or needs input.',
      tags,
      params: TaskRefParams,
      querystring: GetTaskQuery,
      response: { 200: ObjectOrStream, ...restErrors, ...errorResponses(401, 403) },
    },
    handler: async (request, reply) => {
      const handler = await handlerFor(request, request.params.id);
      const { taskId, verb } = splitRef(request.params.taskRef);
      if (verb === 'subscribe') {
        return stream(request, reply, handler.resubscribe({ tenant: '', id: taskId }, await contextOf(request, reply)));
      }
      if (verb !== '') return unknownMethod(reply, request, verb);
      return answer(request, reply, 200, async () => {
        const task = await handler.getTask(
          { tenant: '', id: taskId, historyLength: request.query.historyLength },
          await contextOf(request, reply),
        );
        return (await protocol()).Task.toJSON(task);
      });
    },
  });

  app.route({
    method: 'POST',
    url: `${base}/tasks/:taskRef`,
    config: { scopes: ['sessions:write'] },
    schema: {
      summary: 'A2A CancelTask or SubscribeToTask (HTTP+JSON)',
      description:
        'POST tasks/{id}:cancel cancels the task and answers it; POST tasks/{id}:subscribe streams its updates.',
      tags,
      params: TaskRefParams,
      response: { 200: ObjectOrStream, ...restErrors, ...errorResponses(401, 403) },
    },
    handler: async (request, reply) => {
      const handler = await handlerFor(request, request.params.id);
      const { taskId, verb } = splitRef(request.params.taskRef);
      if (verb === 'subscribe') {
        return stream(request, reply, handler.resubscribe({ tenant: '', id: taskId }, await contextOf(request, reply)));
      }
      if (verb !== 'cancel') return unknownMethod(reply, request, verb);
      return answer(request, reply, 200, async () => {
        const task = await handler.cancelTask(
          { tenant: '', id: taskId, metadata: {} },
          await contextOf(request, reply),
        );
        return (await protocol()).Task.toJSON(task);
      });
    },
  });

  const pushSummary = 'A2A push notification configs (HTTP+JSON)';
  const pushDescription =
    "POST sets a push notification config of the task (its id, url, token, Bearer authentication); GET lists the task's configs or answers one; DELETE removes one. Each later change of the task's state is POSTed to the config's url (docs/a2a.md).";
  app.route({
    method: 'POST',
    url: `${base}/tasks/:taskRef/pushNotificationConfigs`,
    config: { scopes: ['sessions:write'] },
    schema: {
      summary: pushSummary,
      description: pushDescription,
      tags,
      params: TaskParams,
      body: A2aBody,
      response: { 201: A2aObject, ...restErrors, ...errorResponses(401, 403) },
    },
    handler: async (request, reply) => {
      const handler = await handlerFor(request, request.params.id);
      const p = await protocol();
      const config = p.TaskPushNotificationConfig.fromJSON({ ...request.body, taskId: request.params.taskRef });
      return answer(request, reply, 201, async () =>
        p.TaskPushNotificationConfig.toJSON(
          await handler.createTaskPushNotificationConfig(config, await contextOf(request, reply)),
        ),
      );
    },
  });

  for (const method of ['GET', 'DELETE'] as const) {
    app.route({
      method,
      url: `${base}/tasks/:taskRef/pushNotificationConfigs/:configId`,
      config: { scopes: [method === 'GET' ? 'sessions:read' : 'sessions:write'] },
      schema: {
        summary: pushSummary,
        description: pushDescription,
        tags,
        params: TaskConfigParams,
        response: { 200: A2aObject, ...restErrors, ...errorResponses(401, 403) },
      },
      handler: async (request, reply) => {
        const handler = await handlerFor(request, request.params.id);
        const p = await protocol();
        const ids = { tenant: '', taskId: request.params.taskRef, id: request.params.configId };
        return answer(request, reply, 200, async () =>
          method === 'GET'
            ? p.TaskPushNotificationConfig.toJSON(
                await handler.getTaskPushNotificationConfig(ids, await contextOf(request, reply)),
              )
            : handler.deleteTaskPushNotificationConfig(ids, await contextOf(request, reply)).then(() => ({})),
        );
      },
    });
  }

  app.route({
    method: 'GET',
    url: `${base}/tasks/:taskRef/pushNotificationConfigs`,
    config: { scopes: ['sessions:read'] },
    schema: {
      summary: pushSummary,
      description: pushDescription,
      tags,
      params: TaskParams,
      response: { 200: A2aObject, ...restErrors, ...errorResponses(401, 403) },
    },
    handler: async (request, reply) => {
      const handler = await handlerFor(request, request.params.id);
      const p = await protocol();
      const params = { tenant: '', taskId: request.params.taskRef, pageSize: 0, pageToken: '' };
      return answer(request, reply, 200, async () =>
        p.ListTaskPushNotificationConfigsResponse.toJSON(
          await handler.listTaskPushNotificationConfigs(params, await contextOf(request, reply)),
        ),
      );
    },
  });
}
