/**
 * The deletes of the retention sweeper (docs/retention.md) that touch the turn tables: sessions past their
 * retention (with their messages, items, events and approvals, which go with the row) and ended runs past theirs
 * (with their spans). Each call deletes one batch, in one short statement or transaction, and never a session with
 * a turn in progress, waiting for input or queued: such a session is kept until its work is over.
 */
import type { Executor } from '../../storage/db.ts';
import { OPEN_STATUSES, TERMINAL_STATUSES } from './message-types.ts';

export interface ExpiryBatch {
  orgId: string;
  /** Epoch milliseconds: rows older than this are past their retention. */
  before: number;
  /** Now, for the session leases. */
  now: number;
  /** Rows deleted at most. */
  limit: number;
}

/**
 * Deletes up to `limit` sessions of the organization that nothing changed since `before` and that no turn uses:
 * no work pending, no live lease, no open message. Resolves to the number deleted.
 *
 * One statement: the candidates are picked by the subquery, and the delete checks `work_pending` and the lease on
 * the row it deletes again, so a message submitted meanwhile (which marks the work pending, locking the row, in its
 * own transaction) either keeps the session or finds it gone (404), never a half-deleted one.
 */
export async function deleteExpiredSessions(db: Executor, batch: ExpiryBatch): Promise<number> {
  const { orgId, before, now, limit } = batch;
  const candidates = db
    .selectFrom('sessions')
    .select('sessions.id')
    .where('sessions.org_id', '=', orgId)
    .where('sessions.updated_at', '<', before)
    .where('sessions.work_pending', '=', 0)
    .where((eb) => eb.or([eb('sessions.lease_owner', 'is', null), eb('sessions.lease_expires_at', '<', now)]))
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom('messages')
            .select('messages.id')
            .whereRef('messages.session_id', '=', 'sessions.id')
            .where('messages.status', 'in', [...OPEN_STATUSES]),
        ),
      ),
    )
    .orderBy('sessions.updated_at')
    .limit(limit);
  const result = await db
    .deleteFrom('sessions')
    .where('sessions.id', 'in', candidates)
    .where('sessions.org_id', '=', orgId)
    .where('sessions.updated_at', '<', before)
    .where('sessions.work_pending', '=', 0)
    .where((eb) => eb.or([eb('sessions.lease_owner', 'is', null), eb('sessions.lease_expires_at', '<', now)]))
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}

/**
 * Deletes up to `limit` ended runs of the organization created before `before`, with their spans, in one
 * transaction. A run still going (queued, running, waiting for input) is kept. Resolves to the number deleted.
 */
export async function deleteExpiredRuns(db: Executor, batch: Omit<ExpiryBatch, 'now'>): Promise<number> {
  const { orgId, before, limit } = batch;
  return db.transaction().execute(async (trx) => {
    const rows = await trx
      .selectFrom('runs')
      .select('id')
      .where('org_id', '=', orgId)
      .where('created_at', '<', before)
      .where('status', 'in', [...TERMINAL_STATUSES])
      .orderBy('created_at')
      .limit(limit)
      .execute();
    if (rows.length === 0) return 0;
    const ids = rows.map((row) => row.id);
    await trx.deleteFrom('spans').where('run_id', 'in', ids).execute();
    const result = await trx.deleteFrom('runs').where('id', 'in', ids).where('org_id', '=', orgId).executeTakeFirst();
    return Number(result.numDeletedRows);
  });
}

/**
 * Deletes up to `limit` session events of the organization written before `before`, in one statement. The newest
 * event of each session stays, whatever its age: the next event's `seq` follows it, so a client resuming a stream
 * from a seq it saw never misses one.
 */
export async function deleteExpiredSessionEvents(db: Executor, batch: Omit<ExpiryBatch, 'now'>): Promise<number> {
  const { orgId, before, limit } = batch;
  const candidates = db
    .selectFrom('session_events as event')
    .innerJoin('sessions', 'sessions.id', 'event.session_id')
    .select('event.id')
    .where('sessions.org_id', '=', orgId)
    .where('event.created_at', '<', before)
    .where(({ exists, selectFrom }) =>
      exists(
        selectFrom('session_events as newer')
          .select('newer.id')
          .whereRef('newer.session_id', '=', 'event.session_id')
          .whereRef('newer.seq', '>', 'event.seq'),
      ),
    )
    .orderBy('event.created_at')
    .limit(limit);
  const result = await db
    .deleteFrom('session_events')
    .where('id', 'in', candidates)
    .where('created_at', '<', before)
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}
