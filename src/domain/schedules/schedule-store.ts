/**
 * The one writer of `schedules` and `schedule_runs`. Every change of a run writes its `schedule.run.*` webhook
 * through the outbox in the same transaction. Ticks are claimed here: a conditional UPDATE of the schedule's
 * `next_run_at` (and `version`) and the insert of the tick's run commit together, so across any number of
 * processes a tick fires once, and a process that dies mid-claim leaves the tick unclaimed for the next.
 */
import { newId } from '../../lib/ids.ts';
import { storableText } from '../../lib/storable-text.ts';
import type { Executor } from '../../storage/db.ts';
import type { MessageRow, ScheduleRow, ScheduleRunRow } from '../../storage/schema.ts';
import { type WebhookEventType, writeEvents } from '../outbox.ts';
import type { MessageError } from '../turns/message-types.ts';
import type { TurnHook } from '../turns/turn-hooks.ts';
import type { WebhookSubscriptions } from '../webhooks/subscriptions.ts';
import {
  ACTIVE_RUN_STATUSES,
  type CatchUpPolicy,
  MAX_QUEUED_RUNS,
  type RunTrigger,
  type ScheduleRunStatus,
  timingOf,
} from './schedule-types.ts';
import { dueTicks } from './timing.ts';

/** Most ticks one claim fires for a schedule (the newest of those due; older ones count as missed). */
const MAX_TICKS_PER_CLAIM = 10;

const runEvent: Record<ScheduleRunStatus, Extract<WebhookEventType, `schedule.run.${string}`>> = {
  preparing: 'schedule.run.created',
  running: 'schedule.run.running',
  completed: 'schedule.run.completed',
  failed: 'schedule.run.failed',
  cancelled: 'schedule.run.cancelled',
  skipped: 'schedule.run.skipped',
};

async function emitRun(
  trx: Executor,
  subscriptions: WebhookSubscriptions,
  run: ScheduleRunRow,
  status: ScheduleRunStatus,
  now: number,
): Promise<void> {
  await writeEvents(trx, { orgId: run.org_id, sessionId: run.session_id ?? '', now }, [], {
    subscriptions,
    events: [
      {
        type: runEvent[status],
        data: {
          id: run.id,
          schedule_id: run.schedule_id,
          ...(run.session_id === null ? {} : { session_id: run.session_id }),
          ...(run.message_id === null ? {} : { turn_id: run.message_id }),
          trigger: run.trigger,
          status,
        },
      },
    ],
  });
}

/** Schedules runs of `schedule` still holds a slot with (preparing or running). */
async function activeRuns(trx: Executor, scheduleId: string): Promise<number> {
  const row = await trx
    .selectFrom('schedule_runs')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('schedule_id', '=', scheduleId)
    .where('status', 'in', [...ACTIVE_RUN_STATUSES])
    .executeTakeFirst();
  return Number(row?.n ?? 0);
}

/**
 * Inserts a run: `preparing` (webhook created) when it may run or queue, `skipped` (webhook skipped) when the
 * overlap policy refuses it.
 */
export async function admitRun(
  trx: Executor,
  subscriptions: WebhookSubscriptions,
  schedule: ScheduleRow,
  run: { trigger: RunTrigger; scheduledAt: number | null; now: number; claimedBy?: string },
): Promise<ScheduleRunRow | null> {
  const active = await activeRuns(trx, schedule.id);
  let skip: MessageError | null = null;
  if (run.trigger === 'scheduled' && active > 0 && schedule.overlap === 'skip') {
    skip = { code: 'overlap_skipped', message: 'the previous run of this schedule was still unfinished' };
  } else if (run.trigger === 'scheduled' && active >= MAX_QUEUED_RUNS) {
    skip = { code: 'queue_full', message: `${MAX_QUEUED_RUNS} runs of this schedule are already waiting` };
  }
  const row: ScheduleRunRow = {
    id: newId(),
    org_id: schedule.org_id,
    schedule_id: schedule.id,
    trigger: run.trigger,
    status: skip === null ? 'preparing' : 'skipped',
    scheduled_at: run.scheduledAt,
    session_id: null,
    message_id: null,
    run_id: null,
    error: skip === null ? null : JSON.stringify(skip),
    result: null,
    input_tokens: 0,
    output_tokens: 0,
    deadline_at: null,
    timed_out_at: null,
    claimed_by: run.claimedBy ?? null,
    created_at: run.now,
    started_at: null,
    completed_at: skip === null ? null : run.now,
    updated_at: run.now,
  };
  // A tick that already has its run (a claim raced with a change that put next_run_at back) is not fired again.
  const inserted = await trx
    .insertInto('schedule_runs')
    .values(row)
    .onConflict((conflict) => conflict.columns(['schedule_id', 'scheduled_at']).doNothing())
    .returning('id')
    .executeTakeFirst();
  if (inserted === undefined) return null;
  await emitRun(trx, subscriptions, row, row.status === 'skipped' ? 'skipped' : 'preparing', run.now);
  return row;
}

export interface Claimed {
  runs: ScheduleRunRow[];
  missed: number | null;
}

/**
 * Claims the due ticks of one schedule as read in `seen`: advances next_run_at past `now` only if nobody changed
 * the schedule or claimed the tick since (0 rows: another process won, nothing is written), then admits the runs.
 */
export async function claimTicks(
  trx: Executor,
  subscriptions: WebhookSubscriptions,
  seen: ScheduleRow,
  now: number,
  graceMs: number,
  claimedBy: string,
): Promise<Claimed | null> {
  if (seen.next_run_at === null) return null;
  const due = dueTicks(timingOf(seen), Number(seen.next_run_at), now, graceMs, MAX_TICKS_PER_CLAIM);
  const claimed = await trx
    .updateTable('schedules')
    .set({ next_run_at: due.next, version: seen.version + 1, updated_at: now })
    .where('id', '=', seen.id)
    .where('next_run_at', '=', Number(seen.next_run_at))
    .where('version', '=', seen.version)
    .where('enabled', '=', 1)
    .executeTakeFirst();
  if (claimed.numUpdatedRows === 0n) return null;
  const catchUp: CatchUpPolicy = seen.catch_up === 'run_once' ? 'run_once' : 'skip';
  const ticks = [...(due.lastMissed !== null && catchUp === 'run_once' ? [due.lastMissed] : []), ...due.onTime];
  const runs: ScheduleRunRow[] = [];
  for (const tick of ticks) {
    const run = await admitRun(trx, subscriptions, seen, { trigger: 'scheduled', scheduledAt: tick, now, claimedBy });
    if (run !== null) runs.push(run);
  }
  return { runs, missed: due.lastMissed };
}

/** The next preparing run of a schedule that may start now (none while another of its runs is running). */
export async function nextStartable(trx: Executor, scheduleId: string): Promise<ScheduleRunRow | undefined> {
  const running = await trx
    .selectFrom('schedule_runs')
    .select('id')
    .where('schedule_id', '=', scheduleId)
    .where('status', '=', 'running')
    .limit(1)
    .executeTakeFirst();
  if (running !== undefined) return undefined;
  return trx
    .selectFrom('schedule_runs')
    .selectAll()
    .where('schedule_id', '=', scheduleId)
    .where('status', '=', 'preparing')
    .orderBy('created_at')
    .orderBy('id')
    .limit(1)
    .executeTakeFirst();
}

/** The run's turn was accepted: running, with its session, turn and engine run, and its deadline fixed now. */
export async function markDispatched(
  trx: Executor,
  subscriptions: WebhookSubscriptions,
  run: ScheduleRunRow,
  turn: { sessionId: string; messageId: string; runId: string; deadlineAt: number | null },
  now: number,
): Promise<boolean> {
  const result = await trx
    .updateTable('schedule_runs')
    .set({
      status: 'running',
      session_id: turn.sessionId,
      message_id: turn.messageId,
      run_id: turn.runId,
      deadline_at: turn.deadlineAt,
      started_at: now,
      updated_at: now,
    })
    .where('id', '=', run.id)
    .where('status', '=', 'preparing')
    .executeTakeFirst();
  if (result.numUpdatedRows === 0n) return false;
  await emitRun(
    trx,
    subscriptions,
    { ...run, session_id: turn.sessionId, message_id: turn.messageId, run_id: turn.runId },
    'running',
    now,
  );
  return true;
}

/** A run that could not start (its agent or session is gone, credits are spent, …) fails with that reason. */
export async function failUnstarted(
  trx: Executor,
  subscriptions: WebhookSubscriptions,
  run: ScheduleRunRow,
  error: MessageError,
  now: number,
  sessionId: string | null,
): Promise<void> {
  const result = await trx
    .updateTable('schedule_runs')
    .set({
      status: 'failed',
      error: JSON.stringify({ code: error.code, message: storableText(error.message) }),
      session_id: sessionId,
      completed_at: now,
      updated_at: now,
    })
    .where('id', '=', run.id)
    .where('status', '=', 'preparing')
    .executeTakeFirst();
  if (result.numUpdatedRows > 0n) await emitRun(trx, subscriptions, { ...run, session_id: sessionId }, 'failed', now);
}

/** Records that a run's deadline passed; its turn is then cancelled and the run ends `failed` (timeout). */
export async function markTimedOut(trx: Executor, runId: string, now: number): Promise<void> {
  await trx
    .updateTable('schedule_runs')
    .set({ timed_out_at: now, updated_at: now })
    .where('id', '=', runId)
    .where('status', '=', 'running')
    .where('timed_out_at', 'is', null)
    .execute();
}

export const TIMEOUT_ERROR_CODE = 'schedule_run_timeout';

/**
 * Called by the turn's state changes (domain/turns/transitions.ts) in their transaction: a scheduled turn that
 * ends settles its run, which takes the turn's result, usage and error.
 */
export async function settleRunOfTurn(
  trx: Executor,
  subscriptions: WebhookSubscriptions,
  message: MessageRow,
  ended: 'completed' | 'failed' | 'cancelled',
  now: number,
): Promise<void> {
  if (message.source !== 'schedule') return;
  const run = await trx
    .selectFrom('schedule_runs')
    .selectAll()
    .where('message_id', '=', message.id)
    .where('status', '=', 'running')
    .executeTakeFirst();
  if (run === undefined) return;
  const turn = await trx
    .selectFrom('runs')
    .select(['output_preview', 'input_tokens', 'output_tokens', 'error'])
    .where('id', '=', message.run_id)
    .executeTakeFirst();
  let status: ScheduleRunStatus = ended;
  let error = turn?.error ?? null;
  if (run.timed_out_at !== null && ended !== 'completed') {
    status = 'failed';
    const limit = run.deadline_at === null || run.started_at === null ? null : run.deadline_at - run.started_at;
    error = JSON.stringify({
      code: TIMEOUT_ERROR_CODE,
      message: `the run exceeded its schedule's timeout${limit === null ? '' : ` of ${Math.round(limit / 1000)} s`}`,
    });
  }
  await trx
    .updateTable('schedule_runs')
    .set({
      status,
      error: status === 'completed' ? null : error,
      result: turn?.output_preview ?? null,
      input_tokens: Number(turn?.input_tokens ?? 0),
      output_tokens: Number(turn?.output_tokens ?? 0),
      completed_at: now,
      updated_at: now,
    })
    .where('id', '=', run.id)
    .execute();
  await emitRun(trx, subscriptions, run, status, now);
}

/** The schedule behind a scheduled turn, for its action_required notification. */
export async function scheduleOfTurn(
  trx: Executor,
  message: MessageRow,
): Promise<{ schedule_id: string; schedule_run_id: string } | null> {
  if (message.source !== 'schedule') return null;
  const run = await trx
    .selectFrom('schedule_runs')
    .select(['id', 'schedule_id'])
    .where('message_id', '=', message.id)
    .executeTakeFirst();
  return run === undefined ? null : { schedule_id: run.schedule_id, schedule_run_id: run.id };
}

/**
 * What scheduled turns add to their state changes (registered in src/deps.ts): the run of a turn that ends is
 * settled with it, and its `agent.session.action_required` names the schedule (spec 6: scheduled executions use
 * the same notification).
 */
export const scheduleTurnHook: TurnHook = {
  async changed(change, transition) {
    const { status } = transition;
    if (status === 'completed' || status === 'failed' || status === 'cancelled') {
      await settleRunOfTurn(change.trx, change.subscriptions, change.message, status, change.now);
    }
    return [];
  },
  actionRequired: (change) => scheduleOfTurn(change.trx, change.message),
};
