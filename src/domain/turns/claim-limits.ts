/**
 * The limits of concurrent turns, as the claim (claims.ts) reads them: a session runs one turn at a time, so an
 * organization's (or key's) running turns are its leased sessions. The counts, the limits in force, the check
 * that skips them when none can bind, and the Postgres re-check of a claim that took a last slot.
 */

import { sql } from 'kysely';
import { prepare } from '../../storage/prepared.ts';
import type { Lease, LeaseDeps } from './leases.ts';

/** What the claim's statements are given. */
export interface ClaimParams {
  now: number;
  owner: string;
  expiresAt: number;
  /** The session to claim; ignored by the queries that claim any session. */
  sessionId: string;
  /** TurnLimits.defaultConcurrentTurns; read by the claims that respect limits. */
  defaultLimit: number | null;
}

/**
 * The turns running for the candidate session's organization (with `byKey`, for its key): the leased sessions
 * (partial index `sessions_leased`), the candidate itself left out (a lapsed lease of its own is no running turn).
 */
const runningOf = (now: number, byKey: boolean) =>
  sql<number>`(select count(*) from sessions as running
    where running.org_id = sessions.org_id and running.lease_owner is not null
    and running.lease_expires_at >= ${now} and running.id <> sessions.id
    ${byKey ? sql`and running.turn_key_id = sessions.turn_key_id` : sql``})`;
export const runningTurns = (p: ClaimParams, byKey: boolean) => runningOf(p.now, byKey);

/** The concurrent-turn limit set for an organization or key (null: none set). */
export const turnLimitOf = (kind: 'organization' | 'api_key', subject: ReturnType<typeof sql.ref>) =>
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
export const withinLimits = (p: ClaimParams) =>
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
export const runningUnlessSettled = (p: ClaimParams, byKey: boolean) =>
  sql<number>`case when ${settled(turnLimit(p, byKey ? 'api_key' : 'organization'))} then 0
    else ${runningOf(p.now, byKey)} end`;

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
export async function verifyLastSlot(
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
export async function limitsMayBind(deps: LeaseDeps, params: ClaimParams): Promise<boolean> {
  if (deps.turnLimits === undefined || !(await deps.turnLimits.inForce())) return false;
  return (await noneBinds.first(deps.db, params))?.settled !== 1;
}
const noneBinds = prepare((db, p: ClaimParams) =>
  db.selectNoFrom(sql<number>`case when ${noLimitBinds(p)} then 1 else 0 end`.as('settled')),
);
