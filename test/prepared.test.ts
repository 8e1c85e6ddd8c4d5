/** Queries compiled once (src/storage/prepared.ts) give each call its own values, on both dialects. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { prepare, prepareInsert, prepareUpdate } from '../src/storage/prepared.ts';
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

const insertEvents = prepareInsert('session_events');
const updateSession = prepareUpdate('sessions');

const event = (sessionId: string, seq: number, kind = 'test.event') => ({
  id: `${sessionId}-${seq}`,
  session_id: sessionId,
  seq,
  kind,
  message_id: null,
  run_id: null,
  data: JSON.stringify({ seq }),
  created_at: 1000 + seq,
});

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

  it('inserts batches of any size, each shape compiled once, with every row’s own values', async () => {
    const session = await flow.createSession(await flow.createAgent());
    const db = h.deps.storage.db;
    await insertEvents.run(db, [event(session, 1)]);
    await db.transaction().execute((trx) => insertEvents.run(trx, [event(session, 2), event(session, 3, 'other')]));
    // Past the prepared limit the builder takes over; the rows are the same.
    await insertEvents.run(
      db,
      Array.from({ length: 20 }, (_, index) => event(session, 4 + index)),
    );
    await insertEvents.run(db, []);
    const rows = await db
      .selectFrom('session_events')
      .select(['seq', 'kind', 'data', 'created_at'])
      .where('session_id', '=', session)
      .orderBy('seq')
      .execute();
    expect(rows.map((row) => row.seq)).toEqual(Array.from({ length: 23 }, (_, index) => index + 1));
    expect(rows[2]).toEqual({ seq: 3, kind: 'other', data: JSON.stringify({ seq: 3 }), created_at: 1003 });
    expect(rows.every((row) => row.data === JSON.stringify({ seq: row.seq }))).toBe(true);
  });

  it('updates one row by id with the columns given (undefined ones left alone)', async () => {
    const agent = await flow.createAgent();
    const [one, two] = [await flow.createSession(agent), await flow.createSession(agent)];
    const db = h.deps.storage.db;
    expect(await updateSession.run(db, one, { title: 'first', updated_at: 5 })).toBe(1n);
    expect(await updateSession.run(db, one, { title: undefined, updated_at: 6 })).toBe(1n);
    expect(await updateSession.run(db, 'missing', { updated_at: 7 })).toBe(0n);
    const rows = await db
      .selectFrom('sessions')
      .select(['id', 'title', 'updated_at'])
      .where('id', 'in', [one, two])
      .execute();
    const byId = new Map(rows.map((row) => [row.id, row]));
    expect(byId.get(one)).toMatchObject({ title: 'first', updated_at: 6 });
    expect(byId.get(two)?.title).toBeNull();
  });
});

describe('prepared writes', () => {
  it('refuse the tables whose writes move the change signal', () => {
    expect(() => prepareInsert('agents')).toThrow(/cannot be prepared/);
    expect(() => prepareUpdate('api_keys')).toThrow(/cannot be prepared/);
  });
});
