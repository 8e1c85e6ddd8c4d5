/**
 * Session events as JSON Schemas: the `SessionEvent` component of the OpenAPI document (one data line of
 * GET /v1/sessions/{id}/stream), which the console's types are generated from and a test validates streamed events
 * against, and the live events as they cross the bus between processes (`LiveSessionEventSchema`). The TypeScript union in session-events.ts stays what producers write; the checks at the end of this file
 * fail the typecheck when the two drift apart (every event the server can write must fit the schema, and the data of
 * a `message.event` is the same type on both sides).
 */
import { type Static, type TProperties, type TSchema, Type } from 'typebox';
import { SESSION_STATUSES } from '../storage/column-values.ts';
import type { DeltaEvent, LiveSessionEvent, MessageEventData, ProgressEvent, SessionEvent } from './session-events.ts';
import { ELICITATION_ACTIONS, ELICITATION_MODES } from './session-values.ts';

const literals = <T extends string>(values: readonly T[]) => Type.Unsafe<T>({ type: 'string', enum: [...values] });

const Nullable = <T extends Parameters<typeof Type.Union>[0][number]>(schema: T) => Type.Union([schema, Type.Null()]);

const SessionStatus = literals(SESSION_STATUSES);
const CallKind = literals(['server', 'client', 'question'] as const);
const SourceType = literals([
  'tool_server',
  'tool_client',
  'tool_question',
  'tool_ask_user_question',
  'tool_approval',
  'mcp_elicitation',
] as const);
const MessageError = Type.Object({ code: Type.String(), message: Type.String() });

const RequiredAction = Type.Union([
  Type.Object({
    type: Type.Literal('ask_user_question'),
    actionId: Type.Integer(),
    question: Type.String(),
    options: Nullable(Type.Array(Type.Unknown())),
  }),
  Type.Object({
    type: Type.Literal('function_call'),
    callId: Type.String(),
    name: Type.String(),
    arguments: Type.String(),
  }),
  Type.Object({
    type: Type.Literal('tool_approval'),
    actionId: Type.Integer(),
    callId: Type.String(),
    tool: Type.String(),
    server: Type.String(),
    serverTool: Type.String(),
    arguments: Type.String(),
    approvalId: Type.String(),
    expiresAt: Nullable(Type.String()),
  }),
  Type.Object({
    type: Type.Literal('mcp_elicitation'),
    actionId: Type.Integer(),
    callId: Type.String(),
    tool: Type.String(),
    server: Type.String(),
    elicitationId: Type.String(),
    mode: literals(ELICITATION_MODES),
    message: Type.String(),
    requestedSchema: Nullable(Type.Record(Type.String(), Type.Unknown())),
    url: Nullable(Type.String()),
  }),
]);

const call = {
  callId: Nullable(Type.String()),
  itemId: Type.String(),
  step: Type.Integer(),
  name: Type.String(),
  arguments: Type.String(),
};

/** A server call's progress report: live only, never persisted. */
const ToolProgressData = Type.Object({
  type: Type.Literal('tool_progress'),
  sourceType: Type.Literal('tool_server'),
  callId: Type.String(),
  name: Type.String(),
  step: Type.Integer(),
  progress: Type.Optional(Type.Number()),
  total: Type.Optional(Type.Number()),
  message: Type.Optional(Type.String()),
});

export const MessageEventDataSchema = Type.Union([
  Type.Object({
    type: Type.Literal('tool_list'),
    sourceType: Type.Literal('tool_server'),
    itemId: Type.String(),
    step: Type.Integer(),
    serverId: Nullable(Type.String()),
    serverLabel: Type.String(),
    tools: Type.Array(Type.String()),
  }),
  Type.Object({
    type: Type.Literal('tool_call'),
    sourceType: SourceType,
    kind: CallKind,
    actionId: Type.Optional(Type.Integer()),
    ...call,
    approvalId: Type.Optional(Type.String()),
    serverId: Type.Optional(Nullable(Type.String())),
    serverLabel: Type.Optional(Type.String()),
    tool: Type.Optional(Type.String()),
  }),
  Type.Object({
    type: Type.Literal('question'),
    sourceType: Type.Literal('tool_ask_user_question'),
    actionId: Type.Integer(),
    ...call,
  }),
  Type.Object({
    type: Type.Literal('tool_approval'),
    sourceType: Type.Literal('tool_approval'),
    kind: CallKind,
    actionId: Type.Integer(),
    ...call,
    tool: Type.String(),
    server: Type.String(),
    serverId: Nullable(Type.String()),
    serverTool: Type.String(),
    approvalId: Type.String(),
    expiresAt: Nullable(Type.Integer()),
  }),
  Type.Object({
    type: Type.Union([Type.Literal('approved'), Type.Literal('denied')]),
    sourceType: Type.Literal('tool_approval'),
    actionId: Type.Integer(),
    callId: Type.String(),
    approvalId: Type.String(),
    approved: Type.Boolean(),
    reason: Nullable(Type.String()),
    decidedBy: Type.String(),
  }),
  Type.Object({
    type: Type.Literal('answered'),
    sourceType: Type.Literal('tool_ask_user_question'),
    actionId: Type.Integer(),
  }),
  Type.Object({
    type: Type.Literal('elicitation'),
    sourceType: Type.Literal('mcp_elicitation'),
    actionId: Type.Integer(),
    callId: Type.String(),
    name: Type.String(),
    server: Type.String(),
    elicitationId: Type.String(),
    mode: literals(ELICITATION_MODES),
    message: Type.String(),
    url: Nullable(Type.String()),
  }),
  Type.Object({
    type: Type.Literal('elicitation_answered'),
    sourceType: Type.Literal('mcp_elicitation'),
    actionId: Type.Integer(),
    callId: Type.String(),
    elicitationId: Type.String(),
    action: literals(ELICITATION_ACTIONS),
  }),
  Type.Object({
    type: Type.Literal('tool_result'),
    sourceType: Type.Literal('tool_server'),
    callId: Type.String(),
    name: Type.String(),
    isError: Type.Boolean(),
  }),
  ToolProgressData,
  Type.Object(
    {
      type: Type.Literal('compaction'),
      sourceType: Type.Literal('context'),
      itemId: Type.String({ description: 'The compaction item written to the log' }),
      reason: Type.Union([Type.Literal('threshold'), Type.Literal('overflow'), Type.Literal('request')], {
        description:
          'threshold: the context passed the compaction threshold; overflow: the provider refused it as too long; request: POST /v1/responses/compact',
      }),
      tokensBefore: Type.Integer({ description: 'Estimated tokens of the conversation before' }),
      tokensAfter: Type.Integer({ description: 'Estimated tokens of the conversation after' }),
    },
    { description: 'The older conversation was summarised into a compaction item (docs/context.md)' },
  ),
  Type.Object({
    type: Type.Literal('warning'),
    sourceType: Type.Literal('tool_server'),
    code: Type.String(),
    message: Type.String(),
    callId: Type.Optional(Type.String()),
    tool: Type.Optional(Type.String()),
  }),
]);

/** What each kind of event says: its `data`. */
const SessionStatusData = Type.Object({ status: SessionStatus, previous: SessionStatus });
const MessageCreatedData = Type.Object({ status: Type.Literal('queued') });
const MessageStatusData = Type.Union([
  Type.Object({
    status: Type.Union([
      Type.Literal('running'),
      Type.Literal('completed'),
      Type.Literal('failed'),
      Type.Literal('cancelled'),
    ]),
  }),
  Type.Object({ status: Type.Literal('requires_action'), requiredActions: Type.Array(RequiredAction) }),
]);
const DeltaData = Type.Object({ text: Type.String(), step: Type.Integer(), itemId: Type.String() });
const CompletedData = Type.Object({
  response: Type.Object({ parts: Type.Array(Type.Object({ type: Type.Literal('text'), text: Type.String() })) }),
});
const EndedData = Type.Object({ error: Nullable(MessageError) });

/** The frame of every event: persisted ones carry `seq` (their frame id); live ones (deltas, progress) do not. */
const envelope = {
  id: Type.String({ description: 'The event id; for a live event, its frame id (`<last seq>.<n>`)' }),
  session_id: Type.String(),
  seq: Type.Optional(Type.Integer({ minimum: 1, description: 'Position in the session channel (persisted events)' })),
  message_id: Type.Optional(Type.String()),
  run_id: Type.Optional(Type.String()),
  created_at: Type.Integer({ description: 'Unix seconds' }),
};

const kind = <E extends TProperties, K extends string, D extends TSchema>(frame: E, name: K, data: D) =>
  Type.Object({ ...frame, kind: Type.Literal(name), data });

/** Every kind of event that is persisted, each in `frame`. */
const persistedKinds = <E extends TProperties>(frame: E) =>
  Type.Union([
    kind(frame, 'session.status', SessionStatusData),
    kind(frame, 'message.created', MessageCreatedData),
    kind(frame, 'message.status', MessageStatusData),
    kind(frame, 'message.event', MessageEventDataSchema),
    kind(frame, 'message.completed', CompletedData),
    kind(frame, 'message.failed', EndedData),
    kind(frame, 'message.cancelled', EndedData),
  ]).anyOf;

export const SessionEventSchema = Type.Union(
  [...persistedKinds(envelope), kind(envelope, 'message.delta', DeltaData)],
  {
    $id: 'SessionEvent',
    description:
      'One event of a session stream (GET /v1/sessions/{id}/stream), one per data line: `kind` says what happened and types `data`; a message.event is typed further by data.type',
  },
);

/** A persisted event as the process holds it (`SessionEvent`), and the envelope of the live-only ones. */
const persisted = {
  id: Type.String(),
  session_id: Type.String(),
  seq: Type.Integer({ minimum: 1 }),
  message_id: Type.Optional(Type.String()),
  run_id: Type.Optional(Type.String()),
  created_at: Type.Integer(),
};
const live = { session_id: Type.String(), message_id: Type.String(), run_id: Type.String() };

/**
 * What live listeners of a session receive (`LiveSessionEvent`), as it crosses between processes: the bus checks
 * every message it receives from another process against it.
 */
export const LiveSessionEventSchema = Type.Union([
  ...persistedKinds(persisted),
  kind(live, 'message.delta', DeltaData),
  kind(live, 'message.event', ToolProgressData),
]);

/** A session event as the stream sends it. */
export type SessionStreamEvent = Static<typeof SessionEventSchema>;

// Drift checks, evaluated by the typecheck: each side must fit the other.
type Fits<A, B> = [A] extends [B] ? true : false;
type Check<T extends true> = T;
/** A live event as the stream frames it: with its frame id and the time it was sent. */
type LiveFrame = (DeltaEvent | ProgressEvent) & { id: string; created_at: number };
type LiveStatic = Static<typeof LiveSessionEventSchema>;
export type SessionEventSchemaChecks = [
  Check<Fits<SessionEvent, SessionStreamEvent>>,
  Check<Fits<LiveFrame, SessionStreamEvent>>,
  Check<Fits<LiveSessionEvent, LiveStatic>>,
  Check<Fits<LiveStatic, LiveSessionEvent>>,
  Check<Fits<MessageEventData, Static<typeof MessageEventDataSchema>>>,
  Check<Fits<Static<typeof MessageEventDataSchema>, MessageEventData>>,
];
