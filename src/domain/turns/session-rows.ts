/**
 * The writes of the `sessions` row that are not a turn's state change (those are in transitions.ts, the lease
 * columns in claims.ts and leases.ts): creating it, locking it, marking its work pending, its Conversation
 * metadata. Every feature that makes or changes a session calls these; none writes the table itself.
 */
import type { Insertable } from 'kysely';
import { currentApiKeyId } from '../../lib/request-key.ts';
import type { Executor } from '../../storage/db.ts';
import { prepare, prepareInsert } from '../../storage/prepared.ts';
import type { SessionsTable } from '../../storage/schema.ts';

const insertSession = prepareInsert('sessions');

/** Inserts a new session row (idle, no work pending); the caller writes its creation events. */
export async function createSession(db: Executor, row: Insertable<SessionsTable>): Promise<void> {
  await insertSession.run(db, [row]);
}

/**
 * Inserts the session behind a feature's turn that no session listing shows (a legacy Task, a workflow run, a
 * Chat Completions call): idle, hidden, titled as the feature says.
 */
export async function createHiddenSession(
  db: Executor,
  session: { id: string; orgId: string; agentId: string; title: string | null; now: number; endUser?: string | null },
): Promise<void> {
  await createSession(db, {
    id: session.id,
    org_id: session.orgId,
    agent_id: session.agentId,
    title: session.title,
    status: 'idle',
    created_at: session.now,
    updated_at: session.now,
    hidden: 1,
    end_user: session.endUser ?? null,
  });
}

const touchSession = prepare((db, p: { sessionId: string; now: number }) =>
  db.updateTable('sessions').set({ updated_at: p.now }).where('id', '=', p.sessionId),
);
const touchSessionOfOrg = prepare((db, p: { sessionId: string; orgId: string; now: number }) =>
  db.updateTable('sessions').set({ updated_at: p.now }).where('id', '=', p.sessionId).where('org_id', '=', p.orgId),
);

/**
 * Locks the session row for this transaction (an update: a row lock on Postgres, SQLite serializes writers), so
 * the writes of the API and the engine's fenced writes to the session are ordered. With `orgId`, only a session of
 * that organization. False when there is no such session.
 */
export async function lockSession(
  trx: Executor,
  target: { sessionId: string; now: number; orgId?: string },
): Promise<boolean> {
  const { sessionId, now, orgId } = target;
  const changed =
    orgId === undefined
      ? await touchSession.run(trx, { sessionId, now })
      : await touchSessionOfOrg.run(trx, { sessionId, orgId, now });
  return changed > 0n;
}

/** A submit's mark of pending work (markWorkPending with `orgId` and `now`). */
type PendingOfOrg = { sessionId: string; orgId: string; now: number; keyId: string | null };
const PENDING_COLUMNS = ['agent_id', 'agent_version', 'end_user', 'hidden'] as const;

/**
 * A submit's UPDATE of its session: work pending, `work_version` bumped, `updated_at` and the request's key. With a
 * lease, it also takes the session's lease for `owner` when the session has none (local-claims.ts): every
 * right-hand side reads the row as it was, so the three lease columns change together or not at all.
 */
const pendingOfOrgUpdate = (db: Executor, p: PendingOfOrg, lease: { owner: string; expiresAt: number } | null) =>
  db
    .updateTable('sessions')
    .set((eb) => {
      const pending = {
        work_pending: 1,
        work_version: eb('work_version', '+', 1),
        updated_at: p.now,
        turn_key_id: p.keyId,
      };
      if (lease === null) return pending;
      const free = eb('lease_expires_at', 'is', null);
      return {
        ...pending,
        lease_owner: eb.case().when(free).then(lease.owner).else(eb.ref('lease_owner')).end(),
        lease_expires_at: eb.case().when(free).then(lease.expiresAt).else(eb.ref('lease_expires_at')).end(),
        lease_token: eb('lease_token', '+', eb.case().when(free).then(1).else(0).end()),
      };
    })
    .where('id', '=', p.sessionId)
    .where('org_id', '=', p.orgId);

const pendingOfOrg = prepare((db, p: PendingOfOrg) => pendingOfOrgUpdate(db, p, null).returning(PENDING_COLUMNS));
/** pendingOfOrg taking the lease; the row returned says whether it did (the new lease, or the lease as it was). */
const pendingOfOrgTaking = prepare((db, p: PendingOfOrg & { owner: string; expiresAt: number }) =>
  pendingOfOrgUpdate(db, p, p).returning([...PENDING_COLUMNS, 'lease_owner', 'lease_expires_at', 'lease_token']),
);
const pending = prepare((db, p: { sessionId: string }) =>
  db
    .updateTable('sessions')
    .set((eb) => ({ work_pending: 1, work_version: eb('work_version', '+', 1) }))
    .where('id', '=', p.sessionId)
    .returning(['agent_id', 'agent_version', 'end_user', 'hidden']),
);

/**
 * Marks the session's work pending, so a worker claims it (after commit, a wake-up), and bumps `work_version`, so
 * a worker releasing the session at this moment sees the new work. The update locks the row: submit calls it
 * first, with `orgId` and `now` (the session must be the organization's; its `updated_at` moves, and it records
 * the API key of the request, for the key's limit of concurrent turns: lib/request-key.ts). Returns the
 * session's agent, the version it is pinned to, its end user and whether it is hidden, undefined when there is no
 * such session.
 */
export async function markWorkPending(
  trx: Executor,
  target: { sessionId: string } | { sessionId: string; orgId: string; now: number },
): Promise<PendingSession | undefined> {
  return 'orgId' in target
    ? pendingOfOrg.first(trx, { ...target, keyId: currentApiKeyId() })
    : pending.first(trx, { sessionId: target.sessionId });
}

/** The session as markWorkPending returns it. */
export interface PendingSession {
  agent_id: string | null;
  agent_version: number | null;
  end_user: string | null;
  hidden: number;
}

/**
 * markWorkPending of a submit (`orgId` and `now`) that also takes the session's lease for `lease.owner` when the
 * session has none (local-claims.ts). `token` is the lease's token when it was taken, null when the session was
 * leased already; undefined when there is no such session.
 */
export async function markWorkPendingTakingLease(
  trx: Executor,
  target: { sessionId: string; orgId: string; now: number },
  lease: { owner: string; expiresAt: number },
): Promise<(PendingSession & { token: number | null }) | undefined> {
  const row = await pendingOfOrgTaking.first(trx, { ...target, ...lease, keyId: currentApiKeyId() });
  if (row === undefined) return undefined;
  const { lease_owner, lease_expires_at, lease_token, ...session } = row;
  const taken =
    lease_owner === lease.owner && lease_expires_at !== null && Number(lease_expires_at) === lease.expiresAt;
  return { ...session, token: taken ? Number(lease_token) : null };
}

/** Fixes the agent of a Conversation created without one (its first Response's). */
export async function bindSessionAgent(trx: Executor, sessionId: string, agentId: string): Promise<void> {
  await trx.updateTable('sessions').set({ agent_id: agentId }).where('id', '=', sessionId).execute();
}

/** Replaces a Conversation's metadata (`{}` is stored as null). */
export async function setSessionMetadata(
  db: Executor,
  target: { orgId: string; sessionId: string; now: number },
  metadata: Record<string, string>,
): Promise<void> {
  await db
    .updateTable('sessions')
    .set({ metadata: Object.keys(metadata).length === 0 ? null : JSON.stringify(metadata), updated_at: target.now })
    .where('id', '=', target.sessionId)
    .where('org_id', '=', target.orgId)
    .execute();
}

/** Deletes the session row; what references it goes with it (the caller cancels its open turns first). */
export async function deleteSessionRow(trx: Executor, orgId: string, sessionId: string): Promise<void> {
  await trx.deleteFrom('sessions').where('id', '=', sessionId).where('org_id', '=', orgId).execute();
}

/** Changes columns of a visible session of the organization, in the caller's transaction; false when there is none. */
async function updateVisibleSession(
  trx: Executor,
  target: { sessionId: string; orgId: string; now: number },
  set: { title: string | null } | { budget_limit_micros: number | null },
): Promise<boolean> {
  const result = await trx
    .updateTable('sessions')
    .set({ ...set, updated_at: target.now })
    .where('id', '=', target.sessionId)
    .where('org_id', '=', target.orgId)
    .where('hidden', '=', 0)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

/** Sets a session's title (null removes it); false when the organization has no such visible session. */
export function setSessionTitle(
  trx: Executor,
  target: { sessionId: string; orgId: string; title: string | null; now: number },
): Promise<boolean> {
  return updateVisibleSession(trx, target, { title: target.title });
}

/**
 * Sets a session's budget (null removes it), in the caller's transaction; false when the organization has no such
 * visible session.
 */
export function setSessionBudget(
  trx: Executor,
  target: { sessionId: string; orgId: string; limitMicros: number | null; now: number },
): Promise<boolean> {
  return updateVisibleSession(trx, target, { budget_limit_micros: target.limitMicros });
}
