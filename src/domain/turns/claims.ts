/**
 * The claim of a session with runnable work, fair between organizations and within their limits of concurrent
 * turns (claim-limits.ts). Claimable: no lease, a lapsed lease, or a lease held by a process the registry no longer
 * knows as alive. Claims use FOR UPDATE SKIP LOCKED on Postgres; SQLite serializes writers anyway.
 */

import { type ExpressionBuilder, PostgresAdapter, sql } from 'kysely';
import type { Executor } from '../../storage/db.ts';
import { prepare } from '../../storage/prepared.ts';
import type { Database } from '../../storage/schema.ts';
import {
  type ClaimParams,
  limitsMayBind,
  runningTurns,
  runningUnlessSettled,
  turnLimitOf,
  verifyLastSlot,
  withinLimits,
} from './claim-limits.ts';
import type { Lease, LeaseDeps } from './leases.ts';

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

/**
 * The fair order's key: the turns running in the candidate's organization, counted only while sessions of more
 * than one organization have work: a deployment with one busy organization pays no count per candidate. Whether
 * they do is one uncorrelated look per claim, over the pending sessions alone (index `sessions_work`): one pending
 * session's organization, then any pending session of another. (`min(org_id) <> max(org_id)` reads the same, but
 * both dialects answer it from the organization index, walking every session of the first organization.)
 */
const fairOrder = (p: ClaimParams) =>
  sql<number>`case when exists (select 1 from sessions as pending
    where pending.work_pending = 1 and pending.org_id <> (select first_pending.org_id from sessions as first_pending
      where first_pending.work_pending = 1 limit 1))
    then ${runningTurns(p, false)} else 0 end`;

// A poll usually finds nothing: a plain read says so without an UPDATE (and, on SQLite, the write lock).
const anyClaimable = prepare((db, p: ClaimParams) => candidates(db, p).limit(1));

/**
 * The claim. Fair between organizations: the session of the organization with the fewest running turns first,
 * then the named one (a wake-up's), then the longest waiting; so one organization's backlog (and the wake-ups of
 * its sessions, queued before another's) does not hold another organization's turns back. A named session that
 * gives way stays pending for a later claim. Under limits of concurrent turns (`limits`): `first` claims the session
 * first in that order only if it is within its limits (its two counts read once), `all` the first of the sessions
 * within their limits (the counts read for every candidate, as the order needs them all).
 */
const claimQuery = (named: boolean, limits: 'none' | 'first' | 'all') =>
  prepare((db, p: ClaimParams) => {
    const limited = limits !== 'none';
    let candidate = candidates(db, p);
    if (limits === 'all') candidate = candidate.where(withinLimits(p));
    candidate = candidate.orderBy(fairOrder(p));
    if (named) candidate = candidate.orderBy(sql`case when sessions.id = ${p.sessionId} then 0 else 1 end`);
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
        // The claimed session's own limits (`sessions` is the row updated, as it was before).
        .where(limits === 'first' ? withinLimits(p) : sql<boolean>`true`)
        .returning(['id', 'org_id', 'lease_token', 'end_user'])
        // Under limits, what the claim saw of the claimed session's limits (verifyLastSlot).
        .returning(
          limited
            ? [
                turnLimitOf('organization', sql.ref('sessions.org_id')).as('org_limit'),
                runningUnlessSettled(p, false).as('org_running'),
                turnLimitOf('api_key', sql.ref('sessions.turn_key_id')).as('key_limit'),
                runningUnlessSettled(p, true).as('key_running'),
              ]
            : [
                sql<null>`null`.as('org_limit'),
                sql<number>`0`.as('org_running'),
                sql<null>`null`.as('key_limit'),
                sql<number>`0`.as('key_running'),
              ],
        )
    );
  });
const claimNamed = claimQuery(true, 'none');
const claimAny = claimQuery(false, 'none');
const claimNamedFirst = claimQuery(true, 'first');
const claimAnyFirst = claimQuery(false, 'first');
const claimNamedLimited = claimQuery(true, 'all');
const claimAnyLimited = claimQuery(false, 'all');

/**
 * Claims one session with runnable work (preferring the given one, when named: see claimQuery), or returns null.
 * Claimable: no lease, a lapsed lease, or a lease held by a process the registry no longer knows as alive.
 */
export async function claimSession(deps: LeaseDeps, now: number, sessionId?: string): Promise<Lease | null> {
  const params: ClaimParams = {
    now,
    owner: deps.owner,
    expiresAt: now + deps.leaseMs,
    sessionId: sessionId ?? '',
    defaultLimit: deps.turnLimits?.defaultConcurrentTurns ?? null,
  };
  if (sessionId === undefined && (await anyClaimable.first(deps.db, params)) === undefined) return null;
  const limited = await limitsMayBind(deps, params);
  const row = limited
    ? // Usually the first session in the fair order is within its limits: its counts alone are read. When it is not
      // (or another process took it), the claim that counts every candidate's finds the first that is.
      ((await (sessionId === undefined ? claimAnyFirst : claimNamedFirst).first(deps.db, params)) ??
      (await (sessionId === undefined ? claimAnyLimited : claimNamedLimited).first(deps.db, params)))
    : await (sessionId === undefined ? claimAny : claimNamed).first(deps.db, params);
  if (row === undefined) return null;
  const lease = {
    sessionId: row.id,
    orgId: row.org_id,
    token: row.lease_token,
    owner: deps.owner,
    endUser: row.end_user,
  };
  // SQLite runs one claim at a time, each seeing every committed lease: nothing to check.
  if (limited && deps.dialect === 'postgres' && !(await verifyLastSlot(deps, lease, now, params.defaultLimit, row))) {
    return null;
  }
  return lease;
}
