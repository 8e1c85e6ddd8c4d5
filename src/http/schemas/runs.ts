import { Type } from 'typebox';
import { RUN_SOURCES, SPAN_KINDS, SPAN_STATUSES } from '../../domain/runs/run-types.ts';
import { MESSAGE_STATUSES } from '../../domain/turns/message-types.ts';
import { StringEnum, Uuid } from './common.ts';

const UUID_PATTERN = '[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}';

const Cursor = Type.String({
  minLength: 1,
  maxLength: 2000,
  description: 'Opaque: the next_cursor of the previous page, passed unchanged',
});

const UnixSeconds = Type.Integer({ description: 'Unix time in seconds' });
const NullableSeconds = Type.Union([UnixSeconds, Type.Null()]);

const Usage = Type.Object({
  input_tokens: Type.Integer(),
  input_tokens_details: Type.Optional(
    Type.Object(
      { cached_tokens: Type.Integer() },
      { description: 'Runs only: of input_tokens, those the provider read from its prompt cache' },
    ),
  ),
  output_tokens: Type.Integer(),
  total_tokens: Type.Integer(),
});

const CostUsd = Type.Number({ description: 'Cost in USD (micro-dollar precision)' });

export const Run = Type.Object(
  {
    id: Uuid,
    object: Type.Literal('run'),
    agent_id: Uuid,
    session_id: Uuid,
    conversation_id: Type.String({ description: 'conv_ + the session id' }),
    message_id: Uuid,
    response_id: Type.String({ description: 'resp_ + the message id' }),
    source: StringEnum(RUN_SOURCES, 'The surface that started the run'),
    status: StringEnum(MESSAGE_STATUSES),
    model: Type.String(),
    agent_version: Type.Union([Type.Integer(), Type.Null()], {
      description: 'The agent version the run executes; null until it starts',
    }),
    input_preview: Type.String({ maxLength: 1000 }),
    output_preview: Type.Union([Type.String({ maxLength: 1000 }), Type.Null()]),
    usage: Usage,
    cost_usd: CostUsd,
    error: Type.Union([Type.Object({ code: Type.String(), message: Type.String() }), Type.Null()]),
    warnings: Type.Array(
      Type.Object({
        code: Type.String(),
        message: Type.String(),
        call_id: Type.Optional(Type.String({ description: 'The tool call the warning is about' })),
        tool: Type.Optional(Type.String({ description: "That call's tool" })),
      }),
      {
        description:
          "Its message's warnings: what the acceptance noted (tool_unavailable, …) and the tool calls its turn gave up (tool_call_abandoned)",
      },
    ),
    created_at: UnixSeconds,
    started_at: NullableSeconds,
    completed_at: NullableSeconds,
  },
  { additionalProperties: false },
);

export const Span = Type.Object(
  {
    id: Uuid,
    run_id: Uuid,
    parent_id: Type.Union([Uuid, Type.Null()]),
    kind: StringEnum(SPAN_KINDS),
    name: Type.String({ description: 'step <n>, the model id, or the tool name' }),
    status: StringEnum(SPAN_STATUSES),
    started_at: UnixSeconds,
    ended_at: NullableSeconds,
    duration_ms: Type.Union([Type.Integer({ minimum: 0 }), Type.Null()], { description: 'null while running' }),
    input_preview: Type.Union([Type.String({ maxLength: 1000 }), Type.Null()]),
    output_preview: Type.Union([Type.String({ maxLength: 1000 }), Type.Null()]),
    usage: Usage,
    cost_usd: CostUsd,
    attributes: Type.Record(Type.String(), Type.Unknown()),
  },
  { additionalProperties: false },
);

const listOf = <T extends Parameters<typeof Type.Array>[0]>(item: T, description: string) =>
  Type.Object(
    {
      object: Type.Literal('list'),
      data: Type.Array(item),
      has_more: Type.Boolean(),
      next_cursor: Type.Union([Type.String(), Type.Null()], { description: 'Pass as cursor for the next page' }),
    },
    { description },
  );

export const RunList = listOf(Run, 'Runs, newest first');
export const SpanList = listOf(Span, 'Spans in pre-order: every parent before its children');

export const RunListQuery = Type.Object(
  {
    agent_id: Type.Optional(Uuid),
    conversation_id: Type.Optional(
      Type.String({ pattern: `^conv_${UUID_PATTERN}$`, description: 'conv_ + a session id' }),
    ),
    limit: Type.Integer({ minimum: 1, maximum: 50, default: 50 }),
    cursor: Type.Optional(Cursor),
  },
  { additionalProperties: false },
);

export const TraceQuery = Type.Object(
  { limit: Type.Integer({ minimum: 1, maximum: 50, default: 30 }), cursor: Type.Optional(Cursor) },
  { additionalProperties: false },
);

export const ResponseIdParams = Type.Object({
  id: Type.String({ pattern: `^resp_${UUID_PATTERN}$`, description: 'resp_ + a message id' }),
});
