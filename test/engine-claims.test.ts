/**
 * The engine's claims under a stream of wake-ups: the sessions of a process that died get no wake-up, only the
 * engine's poll scans for them, and that scan must not wait for the wake-ups to stop (under load they never do).
 * Real server with the engine running, once per dialect (on SQLite every claim completes without yielding to
 * timers, so the flood only interleaves with the claims on Postgres, where the scan used to starve).
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flows } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness } from './helpers/harness.ts';

/** How long the dead process still looks alive in the registry: the wake-up of the message cannot claim it. */
const ALIVE_FOR_MS = 1500;

describe.each(dialects())('engine claims (%s)', (dialect) => {
  let h: Harness;
  const flow = flows(() => h, { agentName: 'claims' });
  let agentId: string;

  beforeAll(async () => {
    // Polls every 200 ms (the harness's); leases of an hour: only the process registry can free the session.
    h = await createHarness(dialect, { AGENTRY_LEASE_MS: '3600000' });
    agentId = await flow.createAgent();
  });
  afterAll(() => h.close());

  it("claims a dead process's session at its next poll while wake-ups for other sessions keep coming", async () => {
    const db = h.deps.storage.db;
    const sessionId = await flow.createSession(agentId);
    const now = Date.now();
    const dead = `dead-host:1:${randomUUID()}`;
    await db
      .insertInto('engine_processes')
      .values({ id: dead, role: 'worker', started_at: now, heartbeat_at: now, expires_at: now + ALIVE_FOR_MS })
      .execute();
    // The session is leased by that process (as if it had claimed it just before it died).
    await db
      .updateTable('sessions')
      .set({ lease_owner: dead, lease_expires_at: now + 3600_000 })
      .where('id', '=', sessionId)
      .execute();
    const accepted = await flow.submit(sessionId, 'hello');
    const started = Date.now();
    // Its wake-up found the session leased by a live process. Then wake-ups for other sessions, far more than the
    // engine can claim: the set of sessions named by wake-ups never empties.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect((await flow.getMessage(sessionId, accepted.id)).status).toBe('queued');
    const flood = setInterval(() => {
      for (let i = 0; i < 200; i++) h.deps.bus.publish('wake', { sessionId: randomUUID() });
    }, 5);
    try {
      const message = await flow.waitForMessage(sessionId, accepted.id);
      expect(message.status).toBe('completed');
      // The registry row lapses ALIVE_FOR_MS after `now`; the next poll (200 ms) then claims it. Without the scan
      // taking turns with the named claims it would wait for the flood to end (never, within the wait).
      expect(Date.now() - started).toBeLessThan(ALIVE_FOR_MS + 2000);
    } finally {
      clearInterval(flood);
    }
  });
});
