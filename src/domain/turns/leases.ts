/**
 * Session leases. A worker owns a session while its lease is live; every write it makes is fenced by the
 * session's `lease_token` (taken by the claim, checked by every write), so a worker that lost its lease (paused,
 * partitioned, presumed dead) can no longer change anything. A lease ends when it lapses or, sooner, when the
 * process holding it is no longer alive in the process registry. Claims use FOR UPDATE SKIP LOCKED on Postgres;
 * SQLite serializes writers anyway.
 */

import { type ExpressionBuilder, PostgresAdapter, sql } from 'kysely';
import type { Dialect, Executor } from '../../storage/db.ts';
import { prepare } from '../../storage/prepared.ts';
import type { Database, MessageRow } from '../../storage/schema.ts';
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
      .selectAll('messages'),
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
}

/**
 * Claims one session with runnable work (preferring the given one, when named: see claimQuery), or returns null.
 * Claimable: no lease, a lapsed lease, or a lease held by a process the registry no longer knows as alive.
 */
interface ClaimParams {
  now: number;
  owner: string;
  expiresAt: number;
  /** The session to claim; ignored by the queries that claim any session. */
  sessionId: string;
  /** TurnLimits.defaultConcurrentTurns; read by the claims that respect limits. */
  defaultLimit: number | null;
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

/**
 * The turns running for the candidate session's organization (with `byKey`, for its key): the leased sessions
 * (partial index `sessions_leased`), the candidate itself left out (a lapsed lease of its own is no running turn).
 */
const runningOf = (now: number, byKey: boolean) =>
  sql<number>`(select count(*) from sessions as running
    where running.org_id = sessions.org_id and running.lease_owner is not null
    and running.lease_expires_at >= ${now} and running.id <> sessions.id
    ${byKey ? sql`and running.turn_key_id = sessions.turn_key_id` : sql``})`;
const runningTurns = (p: ClaimParams, byKey: boolean) => runningOf(p.now, byKey);

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

/** The concurrent-turn limit set for an organization or key (null: none set). */
const turnLimitOf = (kind: 'organization' | 'api_key', subject: ReturnType<typeof sql.ref>) =>
  sql<number | null>`(select limits.concurrent_turns from limits
    where limits.kind = ${kind} and limits.subject_id = ${subject})`;

/** The concurrent-turn limit of the candidate's organization or key: its own, else the default (null: none). */
const turnLimit = (p: ClaimParams, kind: 'organization' | 'api_key') =>
  sql<
    number | null
  >`coalesce(${turnLimitOf(kind, sql.ref(kind === 'organization' ? 'sessions.org_id' : 'sessions.turn_key_id'))},
    ${p.defaultLimit})`;

/**
 * The most turns the deployment can be running at once: the slots of every engine process in the registry
 * (uncorrelated: read once per statement, from a table of a few rows). Each process holds at most its slots in
 * leases, and a dead process's row is kept long after its leases lapse (process-registry.ts), so no organization
 * or key runs more: a limit above it settles the check without counting. A row that does not say (written by an
 * older version) makes it the largest integer, which settles nothing. Counting the leased sessions instead reads
 * the sessions table (or the leased-sessions index, with the entries every lease change leaves behind until
 * vacuum) on every claim.
 */
const CAPACITY = sql<number>`(select case when count(*) = count(slots) then coalesce(sum(slots), 0)
    else 9007199254740991 end from engine_processes)`;

/**
 * Whether no limit of concurrent turns can hold any claim back: the deployment's capacity is below the smallest
 * limit set (index `limits_concurrent_turns`) and below the default. Then the claim is the plain one.
 */
const noLimitBinds = (p: ClaimParams) =>
  sql<boolean>`(${CAPACITY} < coalesce((select min(limits.concurrent_turns) from limits), 9007199254740991)
    and coalesce(${CAPACITY} < cast(${p.defaultLimit} as bigint), true))`;

/** Whether the limit is none, or above the deployment's capacity. */
const settled = (limit: ReturnType<typeof turnLimit>) => sql<boolean>`coalesce(${CAPACITY} < ${limit}, true)`;

/**
 * Claimable sessions whose organization and key are below their limits of concurrent turns; a session whose
 * lease lapsed (a takeover) continues a turn already counted and is always claimable. A candidate's running turns
 * are counted only when its own limit could bind (CASE evaluates in order). Used only when some limit may bind
 * (limitsMayBind).
 */
const withinLimits = (p: ClaimParams) =>
  sql<boolean>`(sessions.lease_owner is not null or (
    (case when ${settled(turnLimit(p, 'organization'))} then 1
      when ${runningTurns(p, false)} < ${turnLimit(p, 'organization')} then 1 else 0 end) = 1
    and (case when sessions.turn_key_id is null then 1
      when ${settled(turnLimit(p, 'api_key'))} then 1
      when ${runningTurns(p, true)} < ${turnLimit(p, 'api_key')} then 1 else 0 end) = 1))`;

/**
 * What the claim returns of the turns running besides the claimed one, for verifyLastSlot: counted only when its
 * limit could bind (otherwise 0: no claim can take the last slot of a limit above the capacity).
 */
const runningUnlessSettled = (p: ClaimParams, byKey: boolean) =>
  sql<number>`case when ${settled(turnLimit(p, byKey ? 'api_key' : 'organization'))} then 0
    else ${runningOf(p.now, byKey)} end`;

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
 * Postgres: the claimed session's limits and the turns running besides it (as of the statement's snapshot), as
 * the claim under limits returns them, and as verifyLastSlot reads them again under its lock.
 */
interface ClaimedLimits {
  org_limit: number | null;
  org_running: number;
  key_limit: number | null;
  key_running: number;
}

const claimedLimits = (sessionId: string, now: number) =>
  sql<ClaimedLimits>`
    select
      ${turnLimitOf('organization', sql.ref('sessions.org_id'))} as org_limit,
      ${runningOf(now, false)} as org_running,
      ${turnLimitOf('api_key', sql.ref('sessions.turn_key_id'))} as key_limit,
      ${runningOf(now, true)} as key_running
    from sessions where sessions.id = ${sessionId}`;

/** Serializes the checks of verifyLastSlot between processes. */
const CLAIM_LOCK = 0x61676c6d;

/**
 * Postgres: two workers claiming at once each see the other's claim only once committed, so both may take an
 * organization's (or key's) last slot. A claim that took a last slot checks, under a lock all such checks share,
 * whether its organization and key are now over their limits, and if so gives the session back (it stays pending).
 * Of two claims of one last slot, the first check sees both and gives its session back, the second sees one. A claim
 * below the last slot needs no check: no other claim can have pushed it over.
 */
async function verifyLastSlot(
  deps: LeaseDeps,
  lease: Lease,
  now: number,
  defaultLimit: number | null,
  seen: ClaimedLimits,
): Promise<boolean> {
  const orgLimit = seen.org_limit ?? defaultLimit;
  const keyLimit = seen.key_limit ?? defaultLimit;
  const lastOrgSlot = orgLimit !== null && Number(seen.org_running) + 1 >= Number(orgLimit);
  const lastKeySlot = keyLimit !== null && Number(seen.key_running) + 1 >= Number(keyLimit);
  if (!lastOrgSlot && !lastKeySlot) return true;
  return deps.db.transaction().execute(async (trx) => {
    await sql`select pg_advisory_xact_lock(${CLAIM_LOCK})`.execute(trx);
    const [now2] = (await claimedLimits(lease.sessionId, now).execute(trx)).rows;
    if (now2 === undefined) return true;
    const overOrg = orgLimit !== null && Number(now2.org_running) + 1 > Number(orgLimit);
    const overKey = keyLimit !== null && Number(now2.key_running) + 1 > Number(keyLimit);
    if (!overOrg && !overKey) return true;
    await trx
      .updateTable('sessions')
      .set({ lease_owner: null, lease_expires_at: null })
      .where('id', '=', lease.sessionId)
      .where('lease_token', '=', lease.token)
      .execute();
    return false;
  });
}

/**
 * Whether the claim must respect limits of concurrent turns: some are in force (cached) and one of them may bind
 * (one small statement). The claim under limits is a large statement whose planning alone costs Postgres about
 * twice the plain claim's, so it is used only when a limit could hold a claim back. Safe against a process that
 * joins meanwhile: it holds no lease yet, so the turns running stay below the capacity that was read.
 */
async function limitsMayBind(deps: LeaseDeps, params: ClaimParams): Promise<boolean> {
  if (deps.turnLimits === undefined || !(await deps.turnLimits.inForce())) return false;
  return (await noneBinds.first(deps.db, params))?.settled !== 1;
}
const noneBinds = prepare((db, p: ClaimParams) =>
  db.selectNoFrom(sql<number>`case when ${noLimitBinds(p)} then 1 else 0 end`.as('settled')),
);

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
