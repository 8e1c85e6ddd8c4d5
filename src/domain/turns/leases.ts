/**
 * Session leases. A worker owns a session while its lease is live; every write it makes is fenced by the
 * session's `lease_token` (taken by the claim, checked by every write), so a worker that lost its lease (paused,
 * partitioned, presumed dead) can no longer change anything. A lease ends when it lapses or, sooner, when the
 * process holding it is no longer alive in the process registry. The claim that takes a lease is claims.ts.
 */

import { MESSAGE_COLUMNS, qualified } from '../../storage/columns.ts';
import type { Dialect, Executor } from '../../storage/db.ts';
import { prepare } from '../../storage/prepared.ts';
import type { MessageRow } from '../../storage/schema.ts';
import { loadMessage } from './turn-store.ts';

const fenceQuery = prepare((db, p: { id: string; token: number; owner: string; expiresAt: number }) =>
  db
    .updateTable('sessions')
    .set({ lease_expires_at: p.expiresAt })
    .where('id', '=', p.id)
    .where('lease_token', '=', p.token)
    .where('lease_owner', '=', p.owner),
);

/**
 * Postgres: the fence and one of the session's messages read in one statement. No row: the fence failed; a row
 * whose `id` is null: there is no such message.
 */
const fenceWithMessageQuery = prepare(
  (db, p: { id: string; token: number; owner: string; expiresAt: number; messageId: string }) =>
    db
      .with('fence', (qb) =>
        qb
          .updateTable('sessions')
          .set({ lease_expires_at: p.expiresAt })
          .where('id', '=', p.id)
          .where('lease_token', '=', p.token)
          .where('lease_owner', '=', p.owner)
          .returning('id'),
      )
      .selectFrom('fence')
      .leftJoin('messages', (join) => join.on('messages.id', '=', p.messageId))
      .select(qualified('messages', MESSAGE_COLUMNS)),
);

/**
 * Gives the session up when it has no runnable turn left, in one statement: none of its queued or running messages
 * comes before every message waiting for input (the first unfinished message waits for input, or there is none).
 */
const releaseIdleQuery = prepare((db, p: { id: string; token: number }) =>
  db
    .updateTable('sessions')
    .set({ work_pending: 0, lease_owner: null, lease_expires_at: null })
    .where('id', '=', p.id)
    .where('lease_token', '=', p.token)
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom('messages as runnable')
            .select('runnable.id')
            .where('runnable.session_id', '=', p.id)
            .where('runnable.status', 'in', ['queued', 'running'] as const)
            .where(({ not, exists, selectFrom }) =>
              not(
                exists(
                  selectFrom('messages as waiting')
                    .select('waiting.id')
                    .where('waiting.session_id', '=', p.id)
                    .where('waiting.status', '=', 'requires_action')
                    .whereRef('waiting.seq', '<', 'runnable.seq'),
                ),
              ),
            ),
        ),
      ),
    ),
);

export interface Lease {
  sessionId: string;
  orgId: string;
  token: number;
  owner: string;
  /** The end user the session serves (sessions.end_user), read with the claim: per-user tools use it. */
  endUser: string | null;
  /** Set when a turn's last write also gave the session up (releaseWhenIdle): the worker holds nothing any more. */
  released?: boolean;
}

export class LeaseLostError extends Error {
  constructor(sessionId: string) {
    super(`lease on session ${sessionId} was lost`);
    this.name = new.target.name;
  }
}

export interface LeaseDeps {
  db: Executor;
  dialect: Dialect;
  owner: string;
  leaseMs: number;
  /** Limits of concurrent turns (domain/limits); none when absent. */
  turnLimits?: TurnLimits;
}

/**
 * What a claim needs to know of the limits of concurrent turns (docs/operations.md, "Limits"). A session runs one
 * turn at a time, so an organization's (or key's) running turns are its leased sessions.
 */
export interface TurnLimits {
  /** AGENTRY_DEFAULT_CONCURRENT_TURNS: the limit of an organization or key that has none of its own; null: none. */
  defaultConcurrentTurns: number | null;
  /** Whether any limit of concurrent turns may be in force (a default, or a row of `limits`); cheap, cached. */
  inForce(): Promise<boolean>;
  /** True only when none is in force for certain, from what inForce last read (nothing changed since); no read. */
  knownNone(): boolean;
}

/** Checks and extends the lease; on Postgres this also locks the session row for the rest of the transaction. */
async function fence(trx: Executor, lease: Lease, now: number, leaseMs: number): Promise<void> {
  const updated = await fenceQuery.run(trx, {
    id: lease.sessionId,
    token: lease.token,
    owner: lease.owner,
    expiresAt: now + leaseMs,
  });
  if (updated === 0n) throw new LeaseLostError(lease.sessionId);
}

/** Runs `work` in a transaction that first proves the lease is still ours. */
export async function fenced<T>(
  deps: LeaseDeps,
  lease: Lease,
  now: number,
  work: (trx: Executor) => Promise<T>,
): Promise<T> {
  return deps.db.transaction().execute(async (trx) => {
    await fence(trx, lease, now, deps.leaseMs);
    return work(trx);
  });
}

/**
 * Runs `work` in a transaction that first proves the lease is still ours, given the message `messageId` as that
 * transaction reads it (undefined: there is none). On Postgres the proof and the read are one statement.
 */
export async function fencedWithMessage<T>(
  deps: LeaseDeps,
  lease: Lease,
  options: { now: number; messageId: string },
  work: (trx: Executor, message: MessageRow | undefined) => Promise<T>,
): Promise<T> {
  const { now, messageId } = options;
  if (deps.dialect !== 'postgres') {
    return fenced(deps, lease, now, async (trx) => work(trx, await loadMessage(trx, messageId)));
  }
  return deps.db.transaction().execute(async (trx) => {
    const [row] = await fenceWithMessageQuery.all(trx, {
      id: lease.sessionId,
      token: lease.token,
      owner: lease.owner,
      expiresAt: now + deps.leaseMs,
      messageId,
    });
    if (row === undefined) throw new LeaseLostError(lease.sessionId);
    // A left join's columns are null when no message matched.
    return work(trx, row.id === null ? undefined : (row as MessageRow));
  });
}

export async function heartbeat(deps: LeaseDeps, lease: Lease, now: number): Promise<void> {
  await fence(deps.db, lease, now, deps.leaseMs);
}

/**
 * Gives the session up when it has no runnable turn left (the first unfinished message is waiting for input, or
 * there is none). Returns false when there is more work, in which case the lease is kept.
 */
export async function releaseIfIdle(deps: LeaseDeps, lease: Lease, now: number): Promise<boolean> {
  return fenced(deps, lease, now, (trx) => releaseWhenIdle(trx, lease));
}

/** releaseIfIdle inside a transaction that already proved the lease (a turn's last write). */
export async function releaseWhenIdle(trx: Executor, lease: Lease): Promise<boolean> {
  return (await releaseIdleQuery.run(trx, { id: lease.sessionId, token: lease.token })) > 0n;
}

/**
 * The leases `owner` holds. A claim whose COMMIT reached the database but whose answer was lost (the connection
 * broke) leaves a lease its worker does not know of; the engine finds those here and hands them over.
 */
export async function leasesHeldBy(db: Executor, owner: string): Promise<Lease[]> {
  const rows = await db
    .selectFrom('sessions')
    .select(['id', 'org_id', 'lease_token', 'end_user'])
    .where('lease_owner', '=', owner)
    .execute();
  return rows.map((row) => ({
    sessionId: row.id,
    orgId: row.org_id,
    token: row.lease_token,
    owner,
    endUser: row.end_user,
  }));
}

/** Lets another worker take the session at once (shutdown), keeping its work pending. */
export async function handOver(deps: LeaseDeps, lease: Lease): Promise<void> {
  await deps.db
    .updateTable('sessions')
    .set({ lease_owner: null, lease_expires_at: null })
    .where('id', '=', lease.sessionId)
    .where('lease_token', '=', lease.token)
    .execute();
}
