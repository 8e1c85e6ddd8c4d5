/**
 * Schedules under /v1/schedules: create, read, change (pausing and resuming are changes), delete, run now, and
 * their runs. Timing is checked here (cron, time zone, exactly one of cron or interval_seconds) and next_run_at is
 * recomputed whenever the timing changes or the schedule is resumed. Writes go through schedule-store.ts.
 */

import { type SelectQueryBuilder, type SqlBool, sql } from 'kysely';
import type { Logger } from 'pino';
import { AppError, notFound, validationError } from '../../errors/app-error.ts';
import { type Clock, unixSeconds } from '../../lib/clock.ts';
import { newId } from '../../lib/ids.ts';
import type { Executor } from '../../storage/db.ts';
import type { Database, ScheduleRow, ScheduleRunRow } from '../../storage/schema.ts';
import { requireAgentVersion } from '../agents/agent-repo.ts';
import { type AuditContext, appendAudit, changedFields, SYSTEM_AUDIT } from '../audit/audit-log.ts';
import {
  BUDGET_PERIODS,
  type Budget,
  type BudgetPeriod,
  budgetColumns,
  parseBudget,
  resetSpend,
} from '../billing/budgets.ts';
import type { Idempotency, IdempotentResult } from '../idempotency.ts';
import { messagesWithActions } from '../turns/message-view.ts';
import type { WebhookSubscriptions } from '../webhooks/subscriptions.ts';
import { type CursorPage, decodeCursor, encodeCursor } from './schedule-cursor.ts';
import { admitRun } from './schedule-store.ts';
import {
  type CatchUpPolicy,
  type OverlapPolicy,
  type Schedule,
  type ScheduleRun,
  type ScheduleRunAction,
  scheduleFromRow,
  scheduleRunFromRow,
  UPCOMING_COUNT,
} from './schedule-types.ts';
import { canonicalZone, cronProblem, nextAfter, nextTicks, type Timing } from './timing.ts';

/** A change of the schedule a tick claim made meanwhile is retried this many times. */
const UPDATE_ATTEMPTS = 5;

/** The timing fields of a schedule, for a preview of its fire times. */
export interface TimingInput {
  cron?: string | null;
  interval_seconds?: number | null;
  timezone?: string;
}

export interface TimingPreview {
  object: 'schedule.preview';
  timezone: string;
  next_run_times: number[];
}

export interface ScheduleInput {
  name: string;
  agent_id: string;
  input: string;
  cron?: string | null;
  interval_seconds?: number | null;
  timezone?: string;
  session_id?: string | null;
  agent_version?: number | null;
  overlap?: OverlapPolicy;
  timeout_seconds?: number | null;
  catch_up?: CatchUpPolicy;
  enabled?: boolean;
  /** The spend cap over the schedule's runs; null removes it (docs/budgets.md). */
  budget?: { limit_usd: number; period?: BudgetPeriod } | null;
}

/** A schedule's budget from a request (a 400 naming `budget.limit_usd` or `budget.period`); monthly unless named. */
function scheduleBudget(input: ScheduleInput['budget']): Budget | null | undefined {
  return parseBudget(input === undefined || input === null ? input : { limit: input.limit_usd, period: input.period }, {
    field: 'budget',
    limit: 'limit_usd',
    periods: BUDGET_PERIODS,
    defaultPeriod: 'month',
  });
}

export type ScheduleUpdate = Partial<ScheduleInput>;

export interface ScheduleServiceDeps {
  db: Executor;
  clock: Clock;
  idempotency: Idempotency;
  logger: Logger;
  /** Starts the schedule's waiting runs now (the worker's runner); a failure leaves them to the workers. */
  dispatch(scheduleId: string): Promise<void>;
  subscriptions: WebhookSubscriptions;
}

export interface Deleted {
  id: string;
  object: 'schedule.deleted';
  deleted: true;
}

async function findSchedule(db: Executor, orgId: string, id: string): Promise<ScheduleRow> {
  const row = await db
    .selectFrom('schedules')
    .selectAll()
    .where('id', '=', id.toLowerCase())
    .where('org_id', '=', orgId)
    .executeTakeFirst();
  if (row === undefined) throw notFound('schedule', id);
  return row;
}

/** Checks the agent (and the session, when given) belong to the organization and to each other. */
async function checkTargets(db: Executor, orgId: string, agentId: string, sessionId: string | null): Promise<void> {
  const agent = await db
    .selectFrom('agents')
    .select('id')
    .where('id', '=', agentId)
    .where('org_id', '=', orgId)
    .executeTakeFirst();
  if (agent === undefined) throw validationError('agent_id', `agent ${agentId} not found in this organization`);
  if (sessionId === null) return;
  const session = await db
    .selectFrom('sessions')
    .select(['id', 'agent_id'])
    .where('id', '=', sessionId)
    .where('org_id', '=', orgId)
    .executeTakeFirst();
  if (session === undefined) throw validationError('session_id', `session ${sessionId} not found in this organization`);
  if (session.agent_id !== null && session.agent_id !== agentId) {
    throw validationError('session_id', `session ${sessionId} belongs to another agent than agent_id`);
  }
}

/** The timing fields as they will be stored, validated; the zone canonical. */
export function checkTiming(
  cron: string | null,
  intervalSeconds: number | null,
  timezone: string,
  now: number,
): { cron: string | null; intervalSeconds: number | null; timezone: string } {
  if ((cron === null) === (intervalSeconds === null)) {
    throw validationError('cron', 'exactly one of cron or interval_seconds is required');
  }
  const zone = canonicalZone(timezone);
  if (zone === null) throw validationError('timezone', `timezone ${timezone} is not a known IANA time zone`);
  if (cron !== null) {
    const problem = cronProblem(cron, zone, now);
    if (problem !== null) throw validationError('cron', problem);
  }
  return { cron, intervalSeconds, timezone: zone };
}

export function createScheduleService(deps: ScheduleServiceDeps) {
  const { db, clock } = deps;
  const log = deps.logger.child({ component: 'schedules' });

  async function runView(row: ScheduleRunRow): Promise<ScheduleRun> {
    let actions: ScheduleRunAction[] = [];
    if (row.message_id !== null && row.status === 'running') {
      const message = await db.selectFrom('messages').selectAll().where('id', '=', row.message_id).executeTakeFirst();
      if (message !== undefined) {
        const [view] = await messagesWithActions(db, [message]);
        actions = (view?.requiredActions ?? []).map((action): ScheduleRunAction => {
          switch (action.type) {
            case 'function_call':
              return { type: 'function_call', call_id: action.callId, name: action.name, arguments: action.arguments };
            case 'ask_user_question':
              return { type: 'ask_user_question', action_id: action.actionId, question: action.question };
            case 'tool_approval':
              return {
                type: 'tool_approval',
                action_id: action.actionId,
                tool: action.tool,
                server: action.server,
                arguments: action.arguments,
              };
            case 'mcp_elicitation':
              return {
                type: 'mcp_elicitation',
                action_id: action.actionId,
                tool: action.tool,
                server: action.server,
                message: action.message,
              };
            default:
              return action satisfies never;
          }
        });
      }
    }
    return scheduleRunFromRow(row, actions);
  }

  /**
   * Changes a schedule. New timing (cron, interval, zone) or a resume recomputes next_run_at from now; a pause
   * clears it. Runs already admitted are not affected. Null when the schedule changed meanwhile (retry).
   */
  async function updateOnce(
    orgId: string,
    id: string,
    change: ScheduleUpdate,
    audit: AuditContext,
  ): Promise<Schedule | null> {
    return db.transaction().execute(async (trx) => {
      const current = await findSchedule(trx, orgId, id);
      const now = clock.now();
      const budget = scheduleBudget(change.budget);
      if (change.cron != null && change.interval_seconds != null) {
        throw validationError('cron', 'exactly one of cron or interval_seconds is required');
      }
      let cron = current.cron;
      let interval = current.interval_seconds === null ? null : Number(current.interval_seconds);
      if (change.cron !== undefined) {
        cron = change.cron;
        if (change.cron !== null && change.interval_seconds === undefined) interval = null;
      }
      if (change.interval_seconds !== undefined) {
        interval = change.interval_seconds;
        if (change.interval_seconds !== null && change.cron === undefined) cron = null;
      }
      const timing = checkTiming(cron, interval, change.timezone ?? current.timezone, now);
      const agentId = change.agent_id === undefined ? current.agent_id : change.agent_id.toLowerCase();
      const sessionId =
        change.session_id === undefined
          ? current.session_id
          : change.session_id === null
            ? null
            : change.session_id.toLowerCase();
      await checkTargets(trx, orgId, agentId, sessionId);
      // A pin names a version of one agent: moving the schedule to another agent drops it unless a new one is named.
      const agentVersion =
        change.agent_version !== undefined
          ? change.agent_version
          : agentId === current.agent_id && current.agent_version !== null
            ? Number(current.agent_version)
            : null;
      if (agentVersion !== null) await requireAgentVersion(trx, agentId, agentVersion, 'agent_version');
      const enabled = change.enabled ?? current.enabled === 1;
      const timingChanged =
        timing.cron !== current.cron ||
        timing.intervalSeconds !== (current.interval_seconds === null ? null : Number(current.interval_seconds)) ||
        timing.timezone !== current.timezone;
      const resumed = enabled && current.enabled !== 1;
      let anchorAt = Number(current.anchor_at);
      let nextRunAt = current.next_run_at === null ? null : Number(current.next_run_at);
      if (!enabled) nextRunAt = null;
      else if (timingChanged || resumed || nextRunAt === null) {
        anchorAt = now;
        nextRunAt = nextAfter({ ...timing, anchorAt }, now);
      }
      const fields = {
        name: change.name ?? current.name,
        agent_id: agentId,
        input: change.input ?? current.input,
        cron: timing.cron,
        interval_seconds: timing.intervalSeconds,
        timezone: timing.timezone,
        session_id: sessionId,
        agent_version: agentVersion,
        overlap: change.overlap ?? current.overlap,
        timeout_seconds:
          change.timeout_seconds === undefined
            ? current.timeout_seconds === null
              ? null
              : Number(current.timeout_seconds)
            : change.timeout_seconds,
        catch_up: change.catch_up ?? current.catch_up,
        enabled: enabled ? 1 : 0,
        next_run_at: nextRunAt,
        anchor_at: anchorAt,
        version: current.version + 1,
        updated_at: now,
        ...(budget === undefined ? {} : budgetColumns(budget)),
      };
      // Conditional on the version read: a tick claimed meanwhile (or another change) makes this one retry.
      const written = await trx
        .updateTable('schedules')
        .set(fields)
        .where('id', '=', current.id)
        .where('version', '=', current.version)
        .executeTakeFirst();
      if (written.numUpdatedRows === 0n) return null;
      if (budget != null) await resetSpend(trx, { ...budget, scope: 'schedule', id: current.id, orgId, now });
      const before = auditSummary(current);
      const after = auditSummary({ ...current, ...fields });
      const action =
        current.enabled === 1 && !enabled ? 'schedule.paused' : resumed ? 'schedule.resumed' : 'schedule.updated';
      await appendAudit(
        trx,
        audit,
        {
          orgId,
          action,
          targetType: 'schedule',
          targetId: current.id,
          before,
          after: { ...after, changed_fields: changedFields(before, after) },
        },
        clock,
      );
      return scheduleFromRow({ ...current, ...fields });
    });
  }

  return {
    async create(
      orgId: string,
      input: ScheduleInput,
      idempotencyKey?: string,
      audit: AuditContext = SYSTEM_AUDIT,
    ): Promise<IdempotentResult<Schedule>> {
      const request = { orgId, scope: 'POST /v1/schedules', key: idempotencyKey, request: input };
      return deps.idempotency.run(request, async (trx) => {
        const now = clock.now();
        const agentId = input.agent_id.toLowerCase();
        const sessionId = input.session_id == null ? null : input.session_id.toLowerCase();
        const timing = checkTiming(input.cron ?? null, input.interval_seconds ?? null, input.timezone ?? 'UTC', now);
        await checkTargets(trx, orgId, agentId, sessionId);
        const agentVersion = input.agent_version ?? null;
        if (agentVersion !== null) await requireAgentVersion(trx, agentId, agentVersion, 'agent_version');
        const enabled = input.enabled ?? true;
        const budget = scheduleBudget(input.budget) ?? null;
        const full: Timing = { ...timing, anchorAt: now };
        const row: ScheduleRow = {
          id: newId(),
          org_id: orgId,
          agent_id: agentId,
          name: input.name,
          input: input.input,
          cron: timing.cron,
          interval_seconds: timing.intervalSeconds,
          timezone: timing.timezone,
          session_id: sessionId,
          agent_version: agentVersion,
          ...budgetColumns(budget),
          overlap: input.overlap ?? 'skip',
          timeout_seconds: input.timeout_seconds ?? null,
          catch_up: input.catch_up ?? 'skip',
          enabled: enabled ? 1 : 0,
          next_run_at: enabled ? nextAfter(full, now) : null,
          anchor_at: now,
          version: 1,
          created_at: now,
          updated_at: now,
        };
        await trx.insertInto('schedules').values(row).execute();
        await appendAudit(
          trx,
          audit,
          { orgId, action: 'schedule.created', targetType: 'schedule', targetId: row.id, after: auditSummary(row) },
          clock,
        );
        return { status: 201, body: scheduleFromRow(row) };
      });
    },

    async get(orgId: string, id: string): Promise<Schedule> {
      return scheduleFromRow(await findSchedule(db, orgId, id));
    },

    /**
     * The next fire times of a timing that is not saved yet (a form's preview), validated as create validates it;
     * an interval counts from now, as a new schedule's does.
     */
    preview(input: TimingInput): TimingPreview {
      const now = clock.now();
      const timing = checkTiming(input.cron ?? null, input.interval_seconds ?? null, input.timezone ?? 'UTC', now);
      return {
        object: 'schedule.preview',
        timezone: timing.timezone,
        next_run_times: nextTicks({ ...timing, anchorAt: now }, now, UPCOMING_COUNT).map(unixSeconds),
      };
    },

    async list(orgId: string, page: { limit: number; cursor?: string }): Promise<CursorPage<Schedule>> {
      const rows = await newestFirstRows(db.selectFrom('schedules').selectAll().where('org_id', '=', orgId), page);
      return pageOf(rows, page.limit, scheduleFromRow);
    },

    /** Changes a schedule (see updateOnce), retried when a tick is claimed at the same moment. */
    async update(
      orgId: string,
      id: string,
      change: ScheduleUpdate,
      audit: AuditContext = SYSTEM_AUDIT,
    ): Promise<Schedule> {
      for (let attempt = 0; attempt < UPDATE_ATTEMPTS; attempt++) {
        const updated = await updateOnce(orgId, id, change, audit);
        if (updated !== null) return updated;
      }
      throw new AppError('service_unavailable', 'the schedule is being changed concurrently; retry', {
        retriable: true,
      });
    },

    /** Deletes the schedule and its run history. Turns already submitted finish in their sessions. */
    async delete(orgId: string, id: string, audit: AuditContext = SYSTEM_AUDIT): Promise<Deleted> {
      const row = await db.transaction().execute(async (trx) => {
        const found = await findSchedule(trx, orgId, id);
        const deleted = await trx
          .deleteFrom('schedules')
          .where('id', '=', found.id)
          .where('org_id', '=', orgId)
          .executeTakeFirst();
        if (deleted.numDeletedRows === 0n) throw notFound('schedule', id);
        await appendAudit(
          trx,
          audit,
          {
            orgId,
            action: 'schedule.deleted',
            targetType: 'schedule',
            targetId: found.id,
            before: auditSummary(found),
          },
          clock,
        );
        return found;
      });
      return { id: row.id, object: 'schedule.deleted', deleted: true };
    },

    /** A manual run: admitted now (it waits while another run of the schedule is running), then started. */
    async runNow(orgId: string, id: string, idempotencyKey?: string): Promise<IdempotentResult<ScheduleRun>> {
      const scheduleId = id.toLowerCase();
      const request = { orgId, scope: `POST /v1/schedules/${scheduleId}/run`, key: idempotencyKey, request: {} };
      const result = await deps.idempotency.run(request, async (trx) => {
        const schedule = await findSchedule(trx, orgId, scheduleId);
        const row = await admitRun(trx, deps.subscriptions, schedule, {
          trigger: 'manual',
          scheduledAt: null,
          now: clock.now(),
        });
        // Manual runs have no tick, so nothing can conflict with them.
        if (row === null) throw new Error('a manual run was not admitted');
        return { status: 202, body: scheduleRunFromRow(row) };
      });
      if (result.replayed) return result;
      try {
        await deps.dispatch(scheduleId);
      } catch (error) {
        log.warn({ err: error, scheduleId }, 'a manual run could not start at once; a worker will start it');
      }
      const fresh = await db
        .selectFrom('schedule_runs')
        .selectAll()
        .where('id', '=', result.body.id)
        .executeTakeFirst();
      return fresh === undefined ? result : { ...result, body: await runView(fresh) };
    },

    async listRuns(
      orgId: string,
      scheduleId: string,
      page: { limit: number; cursor?: string },
    ): Promise<CursorPage<ScheduleRun>> {
      const schedule = await findSchedule(db, orgId, scheduleId);
      const rows = await newestFirstRows(
        db.selectFrom('schedule_runs').selectAll().where('schedule_id', '=', schedule.id),
        page,
      );
      return pageOf(rows, page.limit, (row) => scheduleRunFromRow(row));
    },

    async getRun(orgId: string, scheduleId: string, runId: string): Promise<ScheduleRun> {
      const row = await db
        .selectFrom('schedule_runs')
        .selectAll()
        .where('id', '=', runId.toLowerCase())
        .where('schedule_id', '=', scheduleId.toLowerCase())
        .where('org_id', '=', orgId)
        .executeTakeFirst();
      if (row === undefined) throw notFound('schedule run', runId);
      return runView(row);
    },

    /** Every schedule of the organization with its next fire times (the CLI's listing). */
    async all(orgId: string): Promise<Schedule[]> {
      const rows = await db
        .selectFrom('schedules')
        .selectAll()
        .where('org_id', '=', orgId)
        .orderBy('created_at')
        .orderBy('id')
        .execute();
      return rows.map(scheduleFromRow);
    },
  };
}

/** Rows of `select` newest first (created_at, id), after the cursor's position, one more than the page. */
async function newestFirstRows<TB extends 'schedules' | 'schedule_runs', R>(
  select: SelectQueryBuilder<Database, TB, R>,
  page: { limit: number; cursor?: string },
): Promise<R[]> {
  let query = select;
  if (page.cursor !== undefined) {
    const after = decodeCursor(page.cursor);
    query = query.where(
      sql<SqlBool>`(created_at < ${after.created_at} or (created_at = ${after.created_at} and id < ${after.id}))`,
    );
  }
  return query
    .orderBy(sql`created_at`, 'desc')
    .orderBy(sql`id`, 'desc')
    .limit(page.limit + 1)
    .execute();
}

function pageOf<R extends { id: string; created_at: number }, T>(
  rows: R[],
  limit: number,
  view: (row: R) => T,
): CursorPage<T> {
  const kept = rows.slice(0, limit);
  const last = kept.at(-1);
  const hasMore = rows.length > limit;
  return {
    object: 'list',
    data: kept.map(view),
    has_more: hasMore,
    next_cursor:
      hasMore && last !== undefined ? encodeCursor({ created_at: Number(last.created_at), id: last.id }) : null,
  };
}

/** What the audit log keeps of a schedule: its target and timing, not its input. */
function auditSummary(row: ScheduleRow): Record<string, unknown> {
  return {
    name: row.name,
    agent_id: row.agent_id,
    agent_version: row.agent_version === null ? null : Number(row.agent_version),
    session_id: row.session_id,
    cron: row.cron,
    interval_seconds: row.interval_seconds === null ? null : Number(row.interval_seconds),
    timezone: row.timezone,
    overlap: row.overlap,
    catch_up: row.catch_up,
    timeout_seconds: row.timeout_seconds === null ? null : Number(row.timeout_seconds),
    enabled: row.enabled === 1,
  };
}

export type ScheduleService = ReturnType<typeof createScheduleService>;
