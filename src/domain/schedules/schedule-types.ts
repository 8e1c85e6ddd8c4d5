/** The Schedule and Schedule Run resources (docs/schedules.md): snake_case, times in Unix seconds. */
import { unixSeconds } from '../../lib/clock.ts';
import type { CatchUpPolicy, OverlapPolicy, RunTrigger, ScheduleRunStatus } from '../../storage/column-values.ts';
import type { ScheduleRow, ScheduleRunRow } from '../../storage/schema.ts';
import { budgetOf } from '../billing/budgets.ts';
import { nextTicks, type Timing } from './timing.ts';

export {
  CATCH_UP_POLICIES,
  type CatchUpPolicy,
  OVERLAP_POLICIES,
  type OverlapPolicy,
  RUN_TRIGGERS,
  type RunTrigger,
  SCHEDULE_RUN_STATUSES,
  type ScheduleRunStatus,
} from '../../storage/column-values.ts';
/** A run holds its schedule's slot while in one of these (overlap applies to them). */
export const ACTIVE_RUN_STATUSES: readonly ScheduleRunStatus[] = ['preparing', 'running'];

export const isTerminalRun = (status: ScheduleRunStatus): boolean => !ACTIVE_RUN_STATUSES.includes(status);

/** How many upcoming fire times a Schedule shows. */
export const UPCOMING_COUNT = 5;
/** Queued runs (overlap `queue`) one schedule may hold; a tick beyond that is skipped. */
export const MAX_QUEUED_RUNS = 10;

export interface Schedule {
  id: string;
  object: 'schedule';
  name: string;
  agent_id: string;
  input: string;
  cron: string | null;
  interval_seconds: number | null;
  timezone: string;
  session_id: string | null;
  /** The agent version the runs use; null: the latest. */
  agent_version: number | null;
  overlap: OverlapPolicy;
  timeout_seconds: number | null;
  catch_up: CatchUpPolicy;
  enabled: boolean;
  /** The spend cap over the schedule's runs (docs/budgets.md); null: none. */
  budget: ScheduleBudget | null;
  next_run_at: number | null;
  /** The next fire times (Unix seconds), empty while paused. */
  next_run_times: number[];
  created_at: number;
  updated_at: number;
}

export interface ScheduleBudget {
  limit_usd: number;
  period: 'month' | 'lifetime';
}

export type ScheduleRunAction =
  | { type: 'function_call'; call_id: string; name: string; arguments: string }
  | { type: 'ask_user_question'; action_id: number; question: string }
  | { type: 'tool_approval'; action_id: number; tool: string; server: string; arguments: string }
  | { type: 'mcp_elicitation'; action_id: number; tool: string; server: string; message: string };

export interface ScheduleRun {
  id: string;
  object: 'schedule.run';
  schedule_id: string;
  trigger: RunTrigger;
  status: ScheduleRunStatus;
  scheduled_at: number | null;
  session_id: string | null;
  conversation_id: string | null;
  /** The turn (session message) this run submitted. */
  turn_id: string | null;
  /** The engine run (GET /v1/runs/{id}, its trace at /v1/runs/{id}/trace). */
  run_id: string | null;
  error: { code: string; message: string } | null;
  /** A preview of the turn's reply (at most 1,000 characters). */
  result: string | null;
  usage: { input_tokens: number; output_tokens: number; total_tokens: number };
  required_actions: ScheduleRunAction[];
  deadline_at: number | null;
  created_at: number;
  started_at: number | null;
  completed_at: number | null;
}

export const timingOf = (row: ScheduleRow): Timing => ({
  cron: row.cron,
  intervalSeconds: row.interval_seconds === null ? null : Number(row.interval_seconds),
  timezone: row.timezone,
  anchorAt: Number(row.anchor_at),
});

function scheduleBudget(row: ScheduleRow): ScheduleBudget | null {
  const budget = budgetOf(row.budget_limit_micros, row.budget_period);
  return budget === null ? null : { limit_usd: budget.limitMicros / 1_000_000, period: budget.period };
}

export function scheduleFromRow(row: ScheduleRow): Schedule {
  const next = row.next_run_at === null ? null : Number(row.next_run_at);
  const upcoming = next === null ? [] : [next, ...nextTicks(timingOf(row), next, UPCOMING_COUNT - 1)];
  return {
    id: row.id,
    object: 'schedule',
    name: row.name,
    agent_id: row.agent_id,
    input: row.input,
    cron: row.cron,
    interval_seconds: row.interval_seconds === null ? null : Number(row.interval_seconds),
    timezone: row.timezone,
    session_id: row.session_id,
    agent_version: row.agent_version === null ? null : Number(row.agent_version),
    overlap: row.overlap,
    timeout_seconds: row.timeout_seconds === null ? null : Number(row.timeout_seconds),
    catch_up: row.catch_up,
    enabled: row.enabled === 1,
    budget: scheduleBudget(row),
    next_run_at: next === null ? null : unixSeconds(next),
    next_run_times: upcoming.map(unixSeconds),
    created_at: unixSeconds(Number(row.created_at)),
    updated_at: unixSeconds(Number(row.updated_at)),
  };
}

function errorOf(text: string | null): { code: string; message: string } | null {
  if (text === null) return null;
  try {
    const value: unknown = JSON.parse(text);
    if (typeof value === 'object' && value !== null && 'code' in value && 'message' in value) {
      return { code: String(value.code), message: String(value.message) };
    }
  } catch {
    // An unreadable stored error still says that the run failed.
  }
  return { code: 'unknown_error', message: text };
}

const seconds = (value: number | null): number | null => (value === null ? null : unixSeconds(Number(value)));

export function scheduleRunFromRow(row: ScheduleRunRow, actions: ScheduleRunAction[] = []): ScheduleRun {
  const input = Number(row.input_tokens);
  const output = Number(row.output_tokens);
  return {
    id: row.id,
    object: 'schedule.run',
    schedule_id: row.schedule_id,
    trigger: row.trigger,
    status: row.status,
    scheduled_at: seconds(row.scheduled_at),
    session_id: row.session_id,
    conversation_id: row.session_id === null ? null : `conv_${row.session_id}`,
    turn_id: row.message_id,
    run_id: row.run_id,
    error: errorOf(row.error),
    result: row.result,
    usage: { input_tokens: input, output_tokens: output, total_tokens: input + output },
    required_actions: actions,
    deadline_at: seconds(row.deadline_at),
    created_at: unixSeconds(Number(row.created_at)),
    started_at: seconds(row.started_at),
    completed_at: seconds(row.completed_at),
  };
}
