/**
 * What a worker does with schedules, each step a transaction that is safe to repeat or to lose half-way:
 * - fire: claims due ticks (schedule-store.ts claimTicks) and admits their runs;
 * - dispatch: starts a schedule's oldest preparing run when none of its runs is running, by creating its session
 *   (unless the schedule names one) and submitting its input as a turn through the same accept path as
 *   POST /v1/sessions/{id}/messages (`source: schedule`); the schedule row is locked first, so two processes
 *   never start two runs of one schedule;
 * - timeouts: cancels the turns of runs past their deadline (the run then ends failed).
 * A process that dies between fire and dispatch leaves preparing runs that any worker dispatches next.
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import type { Bus } from '../../bus/bus.ts';
import { AppError } from '../../errors/app-error.ts';
import type { Clock } from '../../lib/clock.ts';
import type { Dialect, Executor } from '../../storage/db.ts';
import type { ScheduleRow, ScheduleRunRow } from '../../storage/schema.ts';
import type { AgentService } from '../agents/agent-service.ts';
import type { SessionEvent } from '../outbox.ts';
import { afterCommit } from '../outbox.ts';
import type { SessionService } from '../sessions/session-service.ts';
import { acceptMessage } from '../turns/accept.ts';
import type { MessageService } from '../turns/message-service.ts';
import type { WebhookSubscriptions } from '../webhooks/subscriptions.ts';
import { claimTicks, failUnstarted, markDispatched, markTimedOut, nextStartable } from './schedule-store.ts';

export interface ScheduleRunnerDeps {
  db: Executor;
  dialect: Dialect;
  clock: Clock;
  bus: Bus;
  logger: Logger;
  agents: Pick<AgentService, 'get'>;
  sessions: Pick<SessionService, 'create'>;
  messages: Pick<MessageService, 'cancelMessage'>;
  subscriptions: WebhookSubscriptions;
}

const BATCH = 100;

export function createScheduleRunner(deps: ScheduleRunnerDeps) {
  const { db, clock, bus } = deps;
  const log = deps.logger.child({ component: 'schedules' });
  const owner = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;

  function lockSchedule(trx: Executor, scheduleId: string): Promise<ScheduleRow | undefined> {
    const query = trx.selectFrom('schedules').selectAll().where('id', '=', scheduleId);
    return (deps.dialect === 'postgres' ? query.forUpdate() : query).executeTakeFirst();
  }

  /** Starts one run of the schedule if one may start. Returns whether there may be more to start. */
  async function startOne(scheduleId: string): Promise<boolean> {
    // Filled inside the transaction's callback (a holder, so the compiler does not narrow them to their start).
    const state: { events: SessionEvent[]; sessionId: string | null; pending: ScheduleRunRow | null } = {
      events: [],
      sessionId: null,
      pending: null,
    };
    try {
      await db.transaction().execute(async (trx) => {
        const schedule = await lockSchedule(trx, scheduleId);
        if (schedule === undefined) return;
        const run = await nextStartable(trx, scheduleId);
        if (run === undefined) return;
        state.pending = run;
        const now = clock.now();
        const orgId = schedule.org_id;
        const sessionId =
          schedule.session_id ??
          (
            await deps.sessions.create(
              orgId,
              {
                agentId: schedule.agent_id,
                title: schedule.name,
                ...(schedule.agent_version === null ? {} : { agentVersion: Number(schedule.agent_version) }),
              },
              trx,
            )
          ).id;
        const accepted = await acceptMessage(
          trx,
          { orgId, sessionId, now },
          {
            parts: [{ type: 'text', text: schedule.input }],
            text: schedule.input,
            source: 'schedule',
            // Billed to no key, also when a request's "run now" fires it (docs/usage.md).
            apiKeyId: null,
            ...(schedule.agent_version === null ? {} : { agentVersion: Number(schedule.agent_version) }),
            // A Conversation created without an agent takes the schedule's at its first turn.
            bindAgent: schedule.agent_id,
            // A spent budget of the schedule fails the run before its turn (budget_exceeded).
            scheduleId: schedule.id,
          },
          (inner, agentId) => deps.agents.get(orgId, agentId, inner),
        );
        const timeout = schedule.timeout_seconds === null ? null : Number(schedule.timeout_seconds) * 1000;
        const ok = await markDispatched(
          trx,
          deps.subscriptions,
          run,
          {
            sessionId,
            messageId: accepted.row.id,
            runId: accepted.row.run_id,
            deadlineAt: timeout === null ? null : now + timeout,
          },
          now,
        );
        if (!ok) throw new Error('schedule run was dispatched concurrently');
        state.events = accepted.events;
        state.sessionId = sessionId;
      });
    } catch (error) {
      const run = state.pending;
      if (!(error instanceof AppError) || run === null) throw error;
      // The turn cannot be accepted (agent or session gone, credits spent, a client call waiting): the run fails.
      await db.transaction().execute(async (trx) => {
        await failUnstarted(
          trx,
          deps.subscriptions,
          run,
          { code: error.code, message: error.message },
          clock.now(),
          (await lockSchedule(trx, scheduleId))?.session_id ?? null,
        );
      });
      return true;
    }
    const { sessionId } = state;
    if (sessionId === null) return false;
    afterCommit(bus, sessionId, state.events, true);
    return true;
  }

  return {
    /** Starts the runs of one schedule that may start now (one unless a run ends at once). */
    async dispatch(scheduleId: string): Promise<void> {
      for (let i = 0; i < BATCH; i++) {
        if (!(await startOne(scheduleId))) return;
      }
    },

    /** Claims every due tick; returns the schedules that got runs. */
    async fireDue(graceMs: number): Promise<string[]> {
      const now = clock.now();
      const due = await db
        .selectFrom('schedules')
        .selectAll()
        .where('enabled', '=', 1)
        .where('next_run_at', '<=', now)
        .orderBy('next_run_at')
        .limit(BATCH)
        .execute();
      const fired: string[] = [];
      for (const seen of due) {
        const claimed = await db
          .transaction()
          .execute((trx) => claimTicks(trx, deps.subscriptions, seen, now, graceMs, owner));
        if (claimed === null) continue;
        if (claimed.missed !== null) {
          log.info(
            { scheduleId: seen.id, lastMissed: new Date(claimed.missed).toISOString(), catchUp: seen.catch_up },
            'schedule missed ticks while no worker ran',
          );
        }
        if (claimed.runs.length > 0) fired.push(seen.id);
      }
      return fired;
    },

    /** Schedules with runs waiting to start (queued, or left by a process that died before starting them). */
    async waiting(): Promise<string[]> {
      const rows = await db
        .selectFrom('schedule_runs')
        .select('schedule_id')
        .distinct()
        .where('status', '=', 'preparing')
        .limit(BATCH)
        .execute();
      return rows.map((row) => row.schedule_id);
    },

    /** Cancels the turns of runs past their deadline; each run then ends failed with schedule_run_timeout. */
    async enforceTimeouts(): Promise<number> {
      const now = clock.now();
      const late = await db
        .selectFrom('schedule_runs')
        .select(['id', 'org_id', 'message_id'])
        .where('status', '=', 'running')
        .where('deadline_at', '<=', now)
        .limit(BATCH)
        .execute();
      for (const run of late) {
        await db.transaction().execute((trx) => markTimedOut(trx, run.id, now));
        if (run.message_id === null) continue;
        try {
          await deps.messages.cancelMessage(run.org_id, run.message_id);
        } catch (error) {
          log.warn({ err: error, scheduleRunId: run.id }, 'could not cancel the turn of a timed-out schedule run');
        }
      }
      return late.length;
    },
  };
}

export type ScheduleRunner = ReturnType<typeof createScheduleRunner>;
