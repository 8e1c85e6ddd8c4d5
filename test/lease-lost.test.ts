/**
 * A worker whose session another process took over (it missed its registry heartbeats and was taken for dead, or
 * let its lease lapse) stops at its next write: the write is fenced off, and the turn is not begun again in this
 * process, whose model call would then be made again for nothing (and again, until the other process ended the
 * turn). Its slot is freed and the other process's lease is left alone. And what makes a live process look dead
 * less likely: on Postgres its registry heartbeats do not wait for the turns' connections.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerProcess } from '../src/domain/turns/engine-processes.ts';
import { type Stub, startStub, textReply } from './helpers/chat-completions-stub.ts';
import { flows, waitUntil } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness } from './helpers/harness.ts';

describe.each(dialects())('a worker that lost its lease (%s)', (dialect) => {
  let h: Harness;
  let stub: Stub;
  /** Opens the gate the model's answers wait for. */
  let open: () => void = () => undefined;
  const gate = new Promise<void>((resolve) => {
    open = resolve;
  });
  const flow = flows(() => h);

  beforeAll(async () => {
    stub = await startStub(() => async (response) => {
      await gate;
      await textReply(['done'])(response);
    });
    h = await createHarness(dialect, {
      AGENTRY_PROVIDERS: JSON.stringify({ stub: { baseURL: stub.url, apiKey: 'k' } }),
      // Its own heartbeat would notice the loss only after a third of this: the write after the model call must.
      AGENTRY_LEASE_MS: '600000',
    });
  });
  afterAll(async () => {
    open();
    await h?.close();
    await stub?.close();
  });

  it('stops at its next write without calling the model again, and frees its slot', async () => {
    const agentId = await flow.createAgent({ model: 'stub/m' });
    const sessionId = await flow.createSession(agentId);
    const message = await flow.submit(sessionId, 'hello');
    await waitUntil(async () => (stub.bodies.length === 1 ? true : null), { what: 'the model call' });
    // Another process, alive in the registry, takes the session over while the model call is in flight.
    const db = h.deps.storage.db;
    await registerProcess(db, { id: 'another-process', role: 'worker', slots: 1 }, Date.now(), 600_000);
    await db
      .updateTable('sessions')
      .set((eb) => ({
        lease_owner: 'another-process',
        lease_token: eb('lease_token', '+', 1),
        lease_expires_at: Date.now() + 600_000,
      }))
      .where('id', '=', sessionId)
      .execute();
    const taken = await db
      .selectFrom('sessions')
      .select(['lease_owner', 'lease_token'])
      .where('id', '=', sessionId)
      .executeTakeFirstOrThrow();
    open();
    await waitUntil(async () => (h.engine.active() === 0 ? true : null), { what: 'the worker to stop' });
    // Time for a turn begun again to reach the model (the stub now answers at once).
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(stub.bodies).toHaveLength(1);
    expect(h.engine.active()).toBe(0);
    // Nothing of the step was written, and the other process's lease is as it took it.
    const after = await flow.getMessage(sessionId, message.id);
    // (Its start is written lazily, with the first step or on its own: either may have been fenced off too.)
    expect(['queued', 'running']).toContain(after.status);
    expect(after.response).toBeNull();
    expect(
      await db
        .selectFrom('sessions')
        .select(['lease_owner', 'lease_token'])
        .where('id', '=', sessionId)
        .executeTakeFirstOrThrow(),
    ).toEqual(taken);
  });
});

describe.runIf(dialects().includes('postgres'))('the registry heartbeat of a busy process (postgres)', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await createHarness('postgres', { AGENTRY_PROCESS_TTL_MS: '2000' });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('keeps the row alive while every connection of the turns is taken', async () => {
    const { db, workerDb } = h.deps.storage;
    const row = () =>
      db.selectFrom('engine_processes').select(['id', 'expires_at']).where('role', '=', 'all').executeTakeFirst();
    await waitUntil(async () => ((await row()) === undefined ? null : true), { what: 'the engine to register' });
    // Every connection of the turns' pool (10) held in an open transaction, as a burst of turns would.
    let release: () => void = () => undefined;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    const held = Array.from({ length: 10 }, () =>
      workerDb.transaction().execute(async (trx) => {
        await trx.selectFrom('engine_processes').select('id').execute();
        await released;
      }),
    );
    try {
      // More than twice the row's lifetime: heartbeats queued behind the turns would let it lapse.
      const until = Date.now() + 4500;
      while (Date.now() < until) {
        const now = Date.now();
        const current = await row();
        expect(current, 'the registry row').toBeDefined();
        expect(Number(current?.expires_at)).toBeGreaterThanOrEqual(now);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    } finally {
      release();
      await Promise.all(held);
    }
  });
});
