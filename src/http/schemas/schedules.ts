import { Type } from 'typebox';
import {
  CATCH_UP_POLICIES,
  OVERLAP_POLICIES,
  RUN_TRIGGERS,
  SCHEDULE_RUN_STATUSES,
} from '../../domain/schedules/schedule-types.ts';
import { ScheduleBudget, ScheduleBudgetInput } from './budgets.ts';
import { NON_BLANK, StringEnum, Uuid } from './common.ts';

const UnixSeconds = Type.Integer({ description: 'Unix time in seconds' });
const NullableSeconds = Type.Union([UnixSeconds, Type.Null()]);

/** One year: longer intervals are better written as cron. */
const MAX_INTERVAL_SECONDS = 366 * 24 * 3600;
/** One week. */
const MAX_TIMEOUT_SECONDS = 7 * 24 * 3600;

const Name = Type.String({ minLength: 1, maxLength: 100, pattern: NON_BLANK, description: 'A name, 1-100 chars' });
const Input = Type.String({
  minLength: 1,
  maxLength: 100_000,
  pattern: NON_BLANK,
  description: 'The text each run sends to the agent as a session message (1-100000 chars)',
});
const Cron = Type.String({
  minLength: 1,
  maxLength: 200,
  description:
    'A 5-field cron expression (minute hour day-of-month month day-of-week), evaluated in `timezone`; e.g. "0 9 * * 1-5"',
});
const IntervalSeconds = Type.Integer({
  minimum: 1,
  maximum: MAX_INTERVAL_SECONDS,
  description: 'Fire every this many seconds, counted from creation (or from the last timing change or resume)',
});
const Timezone = Type.String({
  minLength: 1,
  maxLength: 100,
  description: 'An IANA time zone for the cron expression, e.g. Europe/Berlin (default UTC)',
});
const Overlap = StringEnum(
  OVERLAP_POLICIES,
  'A tick while the previous run is unfinished: skip it (default) or queue it (up to 10 waiting runs)',
);
const CatchUp = StringEnum(
  CATCH_UP_POLICIES,
  'Ticks missed while no worker ran: skip them (default) or run once for them',
);
const TimeoutSeconds = Type.Integer({
  minimum: 1,
  maximum: MAX_TIMEOUT_SECONDS,
  description:
    'A run still unfinished this long after it started (including waiting for a client result) is cancelled and fails; no limit when null',
});

const fields = {
  name: Name,
  agent_id: Uuid,
  input: Input,
  cron: Type.Union([Cron, Type.Null()]),
  interval_seconds: Type.Union([IntervalSeconds, Type.Null()]),
  timezone: Timezone,
  session_id: Type.Union([Uuid, Type.Null()], {
    description: 'Run every time in this session of the agent; null (default) creates a new session per run',
  }),
  agent_version: Type.Union([Type.Integer({ minimum: 1, maximum: 2147483647 }), Type.Null()], {
    description: "Run this version of the agent (pinned); null (default) runs the agent's latest version",
  }),
  overlap: Overlap,
  timeout_seconds: Type.Union([TimeoutSeconds, Type.Null()]),
  catch_up: CatchUp,
  enabled: Type.Boolean({ description: 'false pauses the schedule; true resumes it' }),
};

export const ScheduleCreateBody = Type.Object(
  {
    name: fields.name,
    agent_id: fields.agent_id,
    input: fields.input,
    cron: Type.Optional(fields.cron),
    interval_seconds: Type.Optional(fields.interval_seconds),
    timezone: Type.Optional(fields.timezone),
    session_id: Type.Optional(fields.session_id),
    agent_version: Type.Optional(fields.agent_version),
    overlap: Type.Optional(fields.overlap),
    timeout_seconds: Type.Optional(fields.timeout_seconds),
    catch_up: Type.Optional(fields.catch_up),
    enabled: Type.Optional(fields.enabled),
    budget: Type.Optional(ScheduleBudgetInput),
  },
  { additionalProperties: false, description: 'Exactly one of cron or interval_seconds' },
);

export const ScheduleUpdateBody = Type.Object(
  {
    name: Type.Optional(fields.name),
    agent_id: Type.Optional(fields.agent_id),
    input: Type.Optional(fields.input),
    cron: Type.Optional(fields.cron),
    interval_seconds: Type.Optional(fields.interval_seconds),
    timezone: Type.Optional(fields.timezone),
    session_id: Type.Optional(fields.session_id),
    agent_version: Type.Optional(fields.agent_version),
    overlap: Type.Optional(fields.overlap),
    timeout_seconds: Type.Optional(fields.timeout_seconds),
    catch_up: Type.Optional(fields.catch_up),
    enabled: Type.Optional(fields.enabled),
    budget: Type.Optional(ScheduleBudgetInput),
  },
  {
    additionalProperties: false,
    description: 'The fields to change. Setting cron clears interval_seconds and the other way round.',
  },
);

export const Schedule = Type.Object(
  {
    id: Uuid,
    object: Type.Literal('schedule'),
    name: Type.String(),
    agent_id: Uuid,
    input: Type.String(),
    cron: Type.Union([Type.String(), Type.Null()]),
    interval_seconds: Type.Union([Type.Integer(), Type.Null()]),
    timezone: Type.String(),
    session_id: Type.Union([Uuid, Type.Null()]),
    agent_version: Type.Union([Type.Integer(), Type.Null()], {
      description: 'The pinned agent version; null: the latest',
    }),
    overlap: StringEnum(OVERLAP_POLICIES),
    timeout_seconds: Type.Union([Type.Integer(), Type.Null()]),
    catch_up: StringEnum(CATCH_UP_POLICIES),
    enabled: Type.Boolean(),
    budget: ScheduleBudget,
    next_run_at: Type.Union([UnixSeconds, Type.Null()], { description: 'The next tick; null while paused' }),
    next_run_times: Type.Array(UnixSeconds, { description: 'The next five ticks; empty while paused' }),
    created_at: UnixSeconds,
    updated_at: UnixSeconds,
  },
  { additionalProperties: false },
);

const RunAction = Type.Union([
  Type.Object(
    {
      type: Type.Literal('function_call'),
      call_id: Type.String(),
      name: Type.String(),
      arguments: Type.String(),
    },
    { additionalProperties: false },
  ),
  Type.Object(
    { type: Type.Literal('ask_user_question'), action_id: Type.Integer(), question: Type.String() },
    { additionalProperties: false },
  ),
  Type.Object(
    {
      type: Type.Literal('tool_approval'),
      action_id: Type.Integer(),
      tool: Type.String(),
      server: Type.String(),
      arguments: Type.String(),
    },
    { additionalProperties: false },
  ),
  Type.Object(
    {
      type: Type.Literal('mcp_elicitation'),
      action_id: Type.Integer(),
      tool: Type.String(),
      server: Type.String(),
      message: Type.String(),
    },
    { additionalProperties: false },
  ),
]);

export const ScheduleRun = Type.Object(
  {
    id: Uuid,
    object: Type.Literal('schedule.run'),
    schedule_id: Uuid,
    trigger: StringEnum(RUN_TRIGGERS),
    status: StringEnum(SCHEDULE_RUN_STATUSES),
    scheduled_at: Type.Union([UnixSeconds, Type.Null()], { description: 'The tick it fires; null for manual runs' }),
    session_id: Type.Union([Uuid, Type.Null()]),
    conversation_id: Type.Union([Type.String(), Type.Null()]),
    turn_id: Type.Union([Uuid, Type.Null()], { description: 'The session message this run submitted' }),
    run_id: Type.Union([Uuid, Type.Null()], { description: 'The engine run: GET /v1/runs/{id} and its trace' }),
    error: Type.Union([Type.Object({ code: Type.String(), message: Type.String() }), Type.Null()]),
    result: Type.Union([Type.String({ maxLength: 1000 }), Type.Null()], { description: 'A preview of the reply' }),
    usage: Type.Object({
      input_tokens: Type.Integer(),
      output_tokens: Type.Integer(),
      total_tokens: Type.Integer(),
    }),
    required_actions: Type.Array(RunAction, {
      description: 'Pending client function calls and questions of its turn (answer them on the session)',
    }),
    deadline_at: NullableSeconds,
    created_at: UnixSeconds,
    started_at: NullableSeconds,
    completed_at: NullableSeconds,
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

export const ScheduleList = listOf(Schedule, 'Schedules, newest first');
export const ScheduleRunList = listOf(ScheduleRun, 'Runs of a schedule, newest first');

export const ScheduleListQuery = Type.Object({
  limit: Type.Integer({ minimum: 1, maximum: 100, default: 50 }),
  cursor: Type.Optional(
    Type.String({ minLength: 1, maxLength: 2000, description: 'The next_cursor of the previous page, unchanged' }),
  ),
});

export const SchedulePreviewQuery = Type.Object(
  {
    cron: Type.Optional(Cron),
    interval_seconds: Type.Optional(IntervalSeconds),
    timezone: Type.Optional(Timezone),
  },
  { additionalProperties: false, description: 'Exactly one of cron or interval_seconds' },
);

export const SchedulePreview = Type.Object(
  {
    object: Type.Literal('schedule.preview'),
    timezone: Type.String({ description: 'The time zone in its canonical spelling' }),
    next_run_times: Type.Array(UnixSeconds, {
      description: 'The next five fire times after now (an interval counts from now)',
    }),
  },
  { additionalProperties: false },
);

export const ScheduleParams = Type.Object({ id: Uuid });
export const ScheduleRunsParams = Type.Object({ schedule_id: Uuid });
export const ScheduleRunParams = Type.Object({ schedule_id: Uuid, id: Uuid });

export const ScheduleDeleted = Type.Object(
  { id: Uuid, object: Type.Literal('schedule.deleted'), deleted: Type.Literal(true) },
  { additionalProperties: false },
);

export const EmptyRunBody = Type.Object({}, { additionalProperties: false });
