/**
 * Session leases. A worker owns a session while its lease is live; every write it makes is fenced by the
 * session's `lease_token` (taken by the claim, checked by every write), so a worker that lost its lease (paused,
 * partitioned, presumed dead) can no longer change anything. A lease ends when it lapses or, sooner, when the
 * process holding it is no longer alive in the process registry. Claims use FOR UPDATE SKIP LOCKED on Postgres;
 * SQLite serializes writers anyway.
 */

import { type ExpressionBuilder, PostgresAdapter } from 'kysely';
import type { Dialect, Executor } from '../../storage/db.ts';
import { prepare } from '../../storage/prepared.ts';
import type { Database } from '../../storage/schema.ts';

const fenceQuery = prepare((db, p: { id: string; token: number; owner: string; expiresAt: number }) =>
  db
    .updateTable('sessions')
    .set({ lease_expires_at: p.expiresAt })
    .where('id', '=', p.id)
    .where('lease_token', '=', p.token)
    .where('lease_owner', '=', p.owner),
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
}

/**
 * Claims one session with runnable work (the given one when named), or returns null. Claimable: no lease, a
 * lapsed lease, or a lease held by a process the registry no longer knows as alive.
 */
interface ClaimParams {
  now: number;
  owner: string;
  expiresAt: number;
  /** The session to claim; ignored by the queries that claim any session. */
  sessionId: string;
}

/** Sessions whose lease is free: none, expired, or held by a process that is no longer alive. */
const claimable = (eb: ExpressionBuilder<Database, 'sessions'>, p: ClaimParams) =>
  eb.or([
    eb('lease_expires_at', 'is', null),
    eb('lease_expires_at', '<', p.now),
    // Leased by another process that is no longer alive (process-registry.ts): no need to wait for the lease.
    eb.and([
      eb('lease_owner', '<>', p.owner),
      eb.not(
        eb.exists(
          eb
            .selectFrom('engine_processes')
            .select('engine_processes.id')
            .whereRef('engine_processes.id', '=', 'sessions.lease_owner')
            .where('engine_processes.expires_at', '>=', p.now),
        ),
      ),
    ]),
  ]);

const candidates = (db: Executor, p: ClaimParams) =>
  db
    .selectFrom('sessions')
    .select('id')
    .where('work_pending', '=', 1)
    .where((eb) => claimable(eb, p));

// A poll usually finds nothing: a plain read says so without an UPDATE (and, on SQLite, the write lock).
const anyClaimable = prepare((db, p: ClaimParams) => candidates(db, p).limit(1));

const claimQuery = (named: boolean) =>
  prepare((db, p: ClaimParams) => {
    let candidate = candidates(db, p);
    if (named) candidate = candidate.where('id', '=', p.sessionId);
    candidate = candidate.orderBy('updated_at').limit(1);
    if (db.getExecutor().adapter instanceof PostgresAdapter) candidate = candidate.forUpdate().skipLocked();
    return (
      db
        .updateTable('sessions')
        .set((eb) => ({ lease_owner: p.owner, lease_expires_at: p.expiresAt, lease_token: eb('lease_token', '+', 1) }))
        .where('id', '=', candidate)
        // Re-checked here: on SQLite the sub-select and the update are one statement, on Postgres the row is locked.
        .where('work_pending', '=', 1)
        .where((eb) => claimable(eb, p))
        .returning(['id', 'org_id', 'lease_token', 'end_user'])
    );
  });
const claimNamed = claimQuery(true);
const claimAny = claimQuery(false);

export async function claimSession(deps: LeaseDeps, now: number, sessionId?: string): Promise<Lease | null> {
  const params: ClaimParams = { now, owner: deps.owner, expiresAt: now + deps.leaseMs, sessionId: sessionId ?? '' };
  if (sessionId === undefined && (await anyClaimable.first(deps.db, params)) === undefined) return null;
  const row = await (sessionId === undefined ? claimAny : claimNamed).first(deps.db, params);
  if (row === undefined) return null;
  return { sessionId: row.id, orgId: row.org_id, token: row.lease_token, owner: deps.owner, endUser: row.end_user };
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
