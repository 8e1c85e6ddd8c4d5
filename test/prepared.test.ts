/** Queries compiled once (src/storage/prepared.ts) give each call its own values, on both dialects. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { prepare } from '../src/storage/prepared.ts';
import { flows } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness } from './helpers/harness.ts';

const sessionsOfAgent = prepare((db, p: { agentId: string; limit: number }) =>
  db
    .selectFrom('sessions')
    .select(['id', 'status'])
    .where('agent_id', '=', p.agentId)
    .where('status', '=', 'idle')
    .orderBy('id')
    .limit(p.limit),
);

const touch = prepare((db, p: { agentId: string; now: number }) =>
  db.updateTable('sessions').set({ updated_at: p.now }).where('agent_id', '=', p.agentId),
);

describe.each(dialects())('prepared queries (%s)', (dialect) => {
  let h: Harness;
  const flow = flows(() => h);
  beforeAll(async () => {
    h = await createHarness(dialect);
  });
  afterAll(async () => {
    await h?.close();
  });

  it('binds each call’s values in place of the markers, in and outside transactions', async () => {
    const a = await flow.createAgent();
    const b = await flow.createAgent();
    const ofA = [await flow.createSession(a), await flow.createSession(a), await flow.createSession(a)].sort();
    const ofB = await flow.createSession(b);
    const db = h.deps.storage.db;
    expect((await sessionsOfAgent.all(db, { agentId: a, limit: 10 })).map((row) => row.id)).toEqual(ofA);
    expect((await sessionsOfAgent.all(db, { agentId: a, limit: 2 })).map((row) => row.id)).toEqual(ofA.slice(0, 2));
    expect(await sessionsOfAgent.first(db, { agentId: b, limit: 10 })).toEqual({ id: ofB, status: 'idle' });
    expect(await sessionsOfAgent.first(db, { agentId: 'none', limit: 10 })).toBeUndefined();
    const changed = await db.transaction().execute((trx) => touch.run(trx, { agentId: a, now: 1234 }));
    expect(changed).toBe(3n);
    const rows = await db.selectFrom('sessions').select('updated_at').where('agent_id', '=', a).execute();
    expect(rows.map((row) => row.updated_at)).toEqual([1234, 1234, 1234]);
  });
});
