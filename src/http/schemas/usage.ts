import { Type } from 'typebox';
import { RUN_SOURCES } from '../../domain/runs/run-types.ts';
import { USAGE_GROUPS } from '../../domain/usage/usage-service.ts';
import { CursorList, NON_BLANK, StringEnum, Uuid } from './common.ts';
import { EndUser } from './memories.ts';

const UnixSeconds = (description: string) =>
  Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, description });

export const UsageQuery = Type.Object(
  {
    group_by: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 200,
        description: `Comma-separated, each at most once, keys in this order: ${USAGE_GROUPS.join(', ')} (e.g. day,agent). Absent: one row, the sums of the whole range.`,
      }),
    ),
    start_time: Type.Optional(UnixSeconds('Runs accepted at or after this time (Unix seconds)')),
    end_time: Type.Optional(UnixSeconds('Runs accepted before this time (Unix seconds, exclusive)')),
    agent_id: Type.Optional(Uuid),
    api_key_id: Type.Optional(Uuid),
    model: Type.Optional(Type.String({ minLength: 1, maxLength: 200, pattern: NON_BLANK })),
    source: Type.Optional(StringEnum(RUN_SOURCES, 'The surface that started the runs')),
    end_user: Type.Optional(EndUser),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 100 })),
    after: Type.Optional(
      Type.String({ minLength: 1, maxLength: 4000, description: 'The last_id of the previous page (JSON only)' }),
    ),
    format: Type.Optional(
      StringEnum(['json', 'csv'] as const, 'csv: the whole report as text/csv (as Accept: text/csv asks)'),
    ),
  },
  { additionalProperties: false },
);

export const UsageGroup = Type.Object(
  {
    id: Type.String({ description: "The group's key, opaque: pass as after to page past it" }),
    object: Type.Literal('usage.group'),
    day: Type.Optional(Type.String({ description: 'UTC day, YYYY-MM-DD (group_by day)' })),
    agent_id: Type.Optional(Uuid),
    api_key_id: Type.Optional(
      Type.Union([Uuid, Type.Null()], {
        description: 'The key whose requests submitted the turns; null: none did (scheduled turns)',
      }),
    ),
    api_key_prefix: Type.Optional(
      Type.Union([Type.String(), Type.Null()], { description: "The key's displayed prefix (group_by api_key)" }),
    ),
    model: Type.Optional(Type.String()),
    source: Type.Optional(StringEnum(RUN_SOURCES)),
    end_user: Type.Optional(
      Type.Union([Type.String(), Type.Null()], { description: "The sessions' end user; null: none named" }),
    ),
    turns: Type.Integer({ minimum: 0, description: 'Runs (turns) accepted' }),
    input_tokens: Type.Integer({ minimum: 0 }),
    cached_input_tokens: Type.Integer({ minimum: 0, description: 'Of input_tokens, read from the prompt cache' }),
    output_tokens: Type.Integer({ minimum: 0 }),
    total_tokens: Type.Integer({ minimum: 0 }),
    cost_usd: Type.Number({ minimum: 0, description: 'Cost in USD (micro-dollar precision)' }),
  },
  { additionalProperties: false },
);

export const UsageList = CursorList(UsageGroup, 'Usage groups: newest day first, then the other keys ascending');
