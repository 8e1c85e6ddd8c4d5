/**
 * Leases taken at accept (src/domain/turns/local-claims.ts): a message accepted while this process's engine has a
 * free slot takes its session's lease in the accepting transaction, and the engine runs the turn without a claim.
 * What must hold around it: an accept refused after taking the lease frees the slot and leaves the session
 * unleased; a lease whose wake-up never comes is run all the same (its accept committed) or forgotten (it rolled
 * back); no lease is taken while limits of concurrent turns may be in force; a session leased by anyone is left to
 * the claims.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Agent } from '../src/domain/agents/agent-types.ts';
import { acceptMessage } from '../src/domain/turns/accept.ts';
import type { LocalClaims } from '../src/domain/turns/local-claims.ts';
import type { Executor } from '../src/storage/db.ts';
import { flows, waitUntil } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness } from './helpers/harness.ts';

describe.each(dialects())('leases taken at accept (%s)', (dialect) => {
  let h: Harness;
  const flow = flows(() => h);
  let orgId: string;
  let agentId: string;
  beforeAll(async () => {
    // One slot: a slot that leaked would stop every later turn. No poll within a test: only wake-ups (and the
    // engine's own look for a lease whose wake-up did not come) run turns.
    h = await createHarness(dialect, { AGENTRY_WORKER_CONCURRENCY: '1', AGENTRY_POLL_MS: '600000' });
    agentId = await flow.createAgent({});
    const row = await h.deps.storage.db
      .selectFrom('agents')
      .select('org_id')
      .where('id', '=', agentId)
      .executeTakeFirstOrThrow();
    orgId = row.org_id;
  });
  afterAll(async () => {
    await h?.close();
  });

  const db = () => h.deps.storage.db;
  const claims = (): LocalClaims => {
    const current = h.deps.localClaims.current;
    if (current === null) throw new Error('the engine offers no leases');
    return current;
  };
  const sessionRow = (sessionId: string) =>
    db()
      .selectFrom('sessions')
      .select(['lease_owner', 'lease_expires_at', 'lease_token', 'work_pending'])
      .where('id', '=', sessionId)
      .executeTakeFirstOrThrow();
  /**
   * Whether the engine has its one slot free: it offers a lease (given back at once). Whether limits are in force is
   * read first: the engine offers nothing while it does not know.
   */
  const slotFree = async (sessionId: string): Promise<boolean> => {
    await h.deps.limits.turnLimits.inForce();
    const offer = claims().offer(sessionId, Date.now());
    offer?.declined();
    return offer !== null;
  };
  const agentOf = (trx: Executor, id: string): Promise<Agent> => h.deps.agents.get(orgId, id, trx);
  /** Accepts a message as a feature does, in a transaction of its own, but publishes no wake-up after it. */
  const acceptQuietly = async (sessionId: string, text: string, then?: () => void) => {
    await h.deps.limits.turnLimits.inForce();
    return db()
      .transaction()
      .execute(async (trx) => {
        const accepted = await acceptMessage(
          trx,
          { orgId, sessionId, now: Date.now(), claims: h.deps.localClaims },
          { parts: [{ type: 'text', text }], text, source: 'sessions' },
          agentOf,
        );
        then?.();
        return accepted.row;
      });
  };

  it('runs an accepted turn, releases its session and frees its slot', async () => {
    const sessionId = await flow.createSession(agentId);
    const before = await sessionRow(sessionId);
    await h.deps.limits.turnLimits.inForce();
    const message = await flow.submit(sessionId, 'hello');
    expect((await flow.waitForMessage(sessionId, message.id)).status).toBe('completed');
    await waitUntil(async () => (h.engine.active() === 0 ? true : null), { what: 'the worker to let go' });
    const after = await sessionRow(sessionId);
    // One lease for the turn: taken once, given up by the turn's last write.
    expect(Number(after.lease_token)).toBe(Number(before.lease_token) + 1);
    expect(after.lease_owner).toBeNull();
    expect(after.lease_expires_at).toBeNull();
    expect(Number(after.work_pending)).toBe(0);
    expect(await slotFree(sessionId)).toBe(true);
  });

  it('frees the slot and leaves the session unleased when the accept is refused after taking the lease', async () => {
    const priced = await flow.createAgent({ model: 'scripted/priced' });
    const sessionId = await flow.createSession(priced);
    await h.deps.orgs.setCredits(orgId, 0);
    await h.deps.limits.turnLimits.inForce();
    try {
      const refused = await flow.postMessage(sessionId, { parts: [{ type: 'text', text: 'hello' }] });
      expect(refused.status, refused.text).toBe(402);
    } finally {
      await h.deps.orgs.setCredits(orgId, null);
    }
    expect((await sessionRow(sessionId)).lease_owner).toBeNull();
    expect(await slotFree(sessionId)).toBe(true);
    // The one slot serves the next turn at once.
    const other = await flow.createSession(agentId);
    const message = await flow.submit(other, 'next');
    expect((await flow.waitForMessage(other, message.id)).status).toBe('completed');
  });

  it('runs a turn whose accept committed though no wake-up came', async () => {
    const sessionId = await flow.createSession(agentId);
    const row = await acceptQuietly(sessionId, 'nobody woke me');
    const leased = await sessionRow(sessionId);
    expect(leased.lease_owner).not.toBeNull();
    expect(await slotFree(sessionId)).toBe(false);
    const done = await flow.waitForMessage(sessionId, row.id);
    expect(done.status).toBe('completed');
    await waitUntil(async () => (h.engine.active() === 0 ? true : null), { what: 'the worker to let go' });
    expect((await sessionRow(sessionId)).lease_owner).toBeNull();
    expect(await slotFree(sessionId)).toBe(true);
  });

  it('forgets a lease whose accept rolled back', async () => {
    const sessionId = await flow.createSession(agentId);
    const before = await sessionRow(sessionId);
    await expect(
      acceptQuietly(sessionId, 'rolled back', () => {
        throw new Error('the caller failed after the accept');
      }),
    ).rejects.toThrow('the caller failed after the accept');
    // The slot is held until the engine looked (about a second), then free; nothing was written.
    await waitUntil(async () => ((await slotFree(sessionId)) ? true : null), { what: 'the slot to be free again' });
    const after = await sessionRow(sessionId);
    expect(after.lease_owner).toBeNull();
    expect(Number(after.lease_token)).toBe(Number(before.lease_token));
    const messages = await db().selectFrom('messages').select('id').where('session_id', '=', sessionId).execute();
    expect(messages).toEqual([]);
  });

  it('takes no lease while a limit of concurrent turns may be in force', async () => {
    const sessionId = await flow.createSession(agentId);
    await h.deps.limits.setOrganization(orgId, { concurrentTurns: 5 });
    try {
      await h.deps.limits.turnLimits.inForce();
      expect(claims().offer(sessionId, Date.now())).toBeNull();
      // The turn is claimed as before, under the limit.
      const message = await flow.submit(sessionId, 'limited');
      expect((await flow.waitForMessage(sessionId, message.id)).status).toBe('completed');
    } finally {
      await h.deps.limits.setOrganization(orgId, { concurrentTurns: null });
    }
    await h.deps.limits.turnLimits.inForce();
    expect(await slotFree(sessionId)).toBe(true);
  });

  it('leaves a session leased by another process to the claims', async () => {
    const sessionId = await flow.createSession(agentId);
    const expires = Date.now() + 60_000;
    await db()
      .updateTable('sessions')
      .set({ lease_owner: 'elsewhere:1:00000000', lease_expires_at: expires })
      .where('id', '=', sessionId)
      .execute();
    const row = await acceptQuietly(sessionId, 'not mine');
    const after = await sessionRow(sessionId);
    expect(after.lease_owner).toBe('elsewhere:1:00000000');
    expect(Number(after.lease_expires_at)).toBe(expires);
    expect(Number(after.work_pending)).toBe(1);
    expect(await slotFree(sessionId)).toBe(true);
    const message = await db().selectFrom('messages').select('status').where('id', '=', row.id).executeTakeFirst();
    expect(message?.status).toBe('queued');
  });
});
