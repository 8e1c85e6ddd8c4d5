/**
 * Schemas of the A2A routes (docs/a2a.md). The protocol's own objects (Agent Card, JSON-RPC envelopes, Task,
 * SendMessageRequest) are defined by A2A 1.0 and checked by the SDK's converters; here they are open objects with
 * the fields a reader needs named, so the OpenAPI document points at the protocol without restating it.
 */
import { Type } from 'typebox';
import { Uuid } from './common.ts';

/** An object of the protocol: typed as any JSON object here, its named fields documented. */
const open = (description: string, properties: Record<string, ReturnType<typeof Type.String>> = {}) =>
  Type.Unsafe<Record<string, unknown>>(Type.Object(properties, { additionalProperties: true, description }));

export const AgentCard = open('An A2A 1.0 Agent Card (https://a2a-protocol.org/v1.0.0/specification/#441-agentcard)', {
  name: Type.String(),
  description: Type.String(),
  version: Type.String(),
});

export const AgentCardList = Type.Object({
  object: Type.Literal('list'),
  data: Type.Array(AgentCard, { description: "The Agent Card of each of the organization's agents" }),
});

export const JsonRpcRequest = Type.Object(
  {
    jsonrpc: Type.Literal('2.0'),
    method: Type.String({ description: 'SendMessage, SendStreamingMessage, GetTask, ListTasks, CancelTask, …' }),
    id: Type.Optional(Type.Union([Type.String(), Type.Number(), Type.Null()])),
    params: Type.Optional(Type.Object({}, { additionalProperties: true })),
  },
  { additionalProperties: true, description: 'An A2A 1.0 JSON-RPC 2.0 request' },
);

export const JsonRpcResponse = open(
  'A JSON-RPC 2.0 response: `result` or `error` (A2A error codes). Streaming methods answer text/event-stream, one response per event.',
);

export const A2aBody = open('An A2A 1.0 request object');
export const A2aObject = open('An A2A 1.0 object: a SendMessageResponse, Task or ListTasksResponse');

export const A2aError = Type.Object(
  {
    error: Type.Object(
      {
        code: Type.Integer(),
        status: Type.String(),
        message: Type.String(),
        details: Type.Array(Type.Object({}, { additionalProperties: true })),
      },
      { additionalProperties: true },
    ),
  },
  { description: 'An A2A error (google.rpc.Status JSON)' },
);

export const AgentParams = Type.Object({ id: Uuid });
export const MessageCallParams = Type.Object({
  id: Uuid,
  call: Type.Union([Type.Literal('message:send'), Type.Literal('message:stream')], {
    description: 'message:send or message:stream',
  }),
});
export const TaskRefParams = Type.Object({
  id: Uuid,
  taskRef: Type.String({
    minLength: 1,
    maxLength: 100,
    description: 'A task id, or a task id followed by :cancel or :subscribe',
  }),
});
export const TaskParams = Type.Object({ id: Uuid, taskRef: Type.String({ minLength: 1, maxLength: 100 }) });
export const TaskConfigParams = Type.Object({
  id: Uuid,
  taskRef: Type.String({ minLength: 1, maxLength: 100 }),
  configId: Type.String({ minLength: 1, maxLength: 100 }),
});

export const ListTasksQuery = Type.Object(
  {
    contextId: Type.Optional(Type.String({ maxLength: 100 })),
    status: Type.Optional(Type.String({ maxLength: 40, description: 'A TaskState name, e.g. TASK_STATE_COMPLETED' })),
    pageSize: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })),
    pageToken: Type.Optional(Type.String({ maxLength: 100 })),
    historyLength: Type.Optional(Type.Integer({ minimum: 0 })),
    statusTimestampAfter: Type.Optional(Type.String({ maxLength: 40 })),
    includeArtifacts: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);

export const GetTaskQuery = Type.Object({ historyLength: Type.Optional(Type.Integer({ minimum: 0 })) });

/**
 * A 400 or 404 of an HTTP+JSON route: ours (the catalog's Error) when the request or the agent is refused before
 * the protocol is spoken, the protocol's (A2aError) after.
 */
export const OursOrA2aError = Type.Union([Type.Unsafe<Record<string, unknown>>({ $ref: 'Error#' }), A2aError], {
  description: "The catalog's Error (bad request, unknown agent) or an A2A error",
});
