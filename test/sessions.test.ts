import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';

describe.each(dialects())('sessions (%s)', (dialect) => {
  let h: Harness;
  let agentId: string;
  let otherAgentId: string;
  beforeAll(async () => {
    h = await createHarness(dialect);
    agentId = json(await h.request('POST', '/v1/agents', { body: { name: 'one' } })).agent.id;
    otherAgentId = json(await h.request('POST', '/v1/agents', { body: { name: 'two' } })).agent.id;
  });
  afterAll(() => h.close());

  const create = (body: unknown, headers: Record<string, string> = {}) =>
    h.request('POST', '/v1/sessions', { body, headers });

  it('creates an idle session with the documented shape', async () => {
    const response = await create({ agentId, title: 'Support chat' });
    expect(response.status).toBe(201);
    const { session } = json(response);
    expect(session).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      object: 'session',
      agentId,
      agentVersion: null,
      title: 'Support chat',
      status: 'idle',
      endUser: null,
      budget: null,
      conversationId: `conv_${session.id}`,
      createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT.*Z$/),
      updatedAt: session.createdAt,
    });
    expect(json(await h.request('GET', `/v1/sessions/${session.id}`))).toEqual({ session });
  });

  it('records the end user named at creation', async () => {
    const { session } = json(await create({ agentId, endUser: 'user-42' }));
    expect(session.endUser).toBe('user-42');
    expect(json(await h.request('GET', `/v1/sessions/${session.id}`)).session.endUser).toBe('user-42');
  });

  it('records the end user a Response names (safety_identifier, else user) on the session it creates', async () => {
    const named: [string, string][] = [
      ['safety_identifier', 'safe-1'],
      ['user', 'legacy-user'],
    ];
    for (const [field, value] of named) {
      const response = await h.request('POST', '/v1/responses', {
        body: { model: `agent:one`, input: 'hello', [field]: value },
      });
      expect(response.status, response.text).toBe(200);
      const sessionId = json(response).id.replace(/^resp_/, '');
      const row = await h.deps.storage.db
        .selectFrom('messages')
        .innerJoin('sessions', 'sessions.id', 'messages.session_id')
        .select('sessions.end_user')
        .where('messages.id', '=', sessionId)
        .executeTakeFirstOrThrow();
      expect(row.end_user).toBe(value);
    }
  });

  it('defaults title to null', async () => {
    expect(json(await create({ agentId })).session.title).toBeNull();
  });

  // Bodies are built lazily: the agent id exists only once beforeAll has run.
  it.each([
    [{}, 'agentId'],
    [{ agentId: 'nope' }, 'agentId'],
    [{ title: '' }, 'title'],
    [{ title: '   ' }, 'title'],
    [{ title: 'x'.repeat(201) }, 'title'],
    [{ title: 5 }, 'title'],
    [{ endUser: '' }, 'endUser'],
    [{ endUser: 'a\u0000b' }, 'endUser'],
    [{ endUser: 'x'.repeat(513) }, 'endUser'],
    [{ endUser: 7 }, 'endUser'],
    [{ extra: true }, 'extra'],
  ])('rejects %j naming %s', async (fields, param) => {
    const body = 'agentId' in fields || Object.keys(fields).length === 0 ? fields : { agentId, ...fields };
    const response = await create(body);
    expect(response.status).toBe(400);
    expect(json(response).error).toMatchObject({ code: 'validation_error', param });
    expect(json(response).error.message).toContain(param);
  });

  it('accepts a 200-character title', async () => {
    expect((await create({ agentId, title: 't'.repeat(200) })).status).toBe(201);
  });

  it('renames a session with PATCH title, removes the title with null, and keeps its budget', async () => {
    const created = json(await create({ agentId, budget: { limitUsd: 3 } })).session;
    const path = `/v1/sessions/${created.id}`;
    const renamed = await h.request('PATCH', path, { body: { title: '  Pet food  ' } });
    expect(renamed.status).toBe(200);
    expect(json(renamed).session).toMatchObject({ title: 'Pet food', budget: { limitUsd: 3 } });
    expect(json(renamed).session.updatedAt >= created.updatedAt).toBe(true);
    expect(json(await h.request('GET', path)).session.title).toBe('Pet food');
    const cleared = await h.request('PATCH', path, { body: { title: null } });
    expect(json(cleared).session).toMatchObject({ title: null, budget: { limitUsd: 3 } });
    for (const [body, param] of [
      [{ title: '' }, 'title'],
      [{ title: ' ' }, 'title'],
      [{ title: 'x'.repeat(201) }, 'title'],
      [{}, null],
    ] as const) {
      const refused = await h.request('PATCH', path, { body });
      expect(refused.status, JSON.stringify(body)).toBe(400);
      if (param !== null) expect(json(refused).error.param).toBe(param);
    }
    const other = await h.createOrg(`rename-${dialect}`);
    expect((await h.request('PATCH', path, { key: other.key, body: { title: 'theirs' } })).status).toBe(404);
    expect((await h.request('PATCH', `/v1/sessions/${randomUUID()}`, { body: { title: 'x' } })).status).toBe(404);
  });

  it('answers 404 for an agent that does not exist or belongs to another organization', async () => {
    const missing = await create({ agentId: randomUUID() });
    expect(missing.status).toBe(404);
    expect(json(missing).error.code).toBe('not_found');
    const other = await h.createOrg(`iso-${dialect}`);
    const foreign = await h.request('POST', '/v1/sessions', { key: other.key, body: { agentId } });
    expect(foreign.status).toBe(404);
  });

  it('lists newest first with total, limit and offset, filtered by agentId', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push(json(await create({ agentId: otherAgentId, title: `s${i}` })).session.id);
    const page = json(await h.request('GET', `/v1/sessions?agentId=${otherAgentId}&limit=2`));
    expect(page.total).toBe(3);
    expect(page.limit).toBe(2);
    expect(page.offset).toBe(0);
    expect(page.data.map((s: { id: string }) => s.id)).toEqual([ids[2], ids[1]]);
    const next = json(await h.request('GET', `/v1/sessions?agentId=${otherAgentId}&limit=2&offset=2`));
    expect(next.data.map((s: { id: string }) => s.id)).toEqual([ids[0]]);
    const all = json(await h.request('GET', '/v1/sessions'));
    expect(all.limit).toBe(50);
    expect(all.total).toBeGreaterThanOrEqual(5);
    expect(all.data.every((s: { agentId: string }) => [agentId, otherAgentId].includes(s.agentId))).toBe(true);
  });

  it.each([
    ['limit=0', 'limit'],
    ['limit=101', 'limit'],
    ['limit=abc', 'limit'],
    ['offset=-1', 'offset'],
    ['agentId=xyz', 'agentId'],
  ])('rejects list query %s', async (query, param) => {
    const response = await h.request('GET', `/v1/sessions?${query}`);
    expect(response.status).toBe(400);
    expect(json(response).error.param).toBe(param);
  });

  it('accepts the limit bounds 1 and 100', async () => {
    expect(json(await h.request('GET', '/v1/sessions?limit=1')).data).toHaveLength(1);
    expect((await h.request('GET', '/v1/sessions?limit=100')).status).toBe(200);
  });

  it('deletes with 204, then 404', async () => {
    const { session } = json(await create({ agentId }));
    const deleted = await h.request('DELETE', `/v1/sessions/${session.id}`);
    expect(deleted.status).toBe(204);
    expect(deleted.text).toBe('');
    expect((await h.request('GET', `/v1/sessions/${session.id}`)).status).toBe(404);
    expect((await h.request('DELETE', `/v1/sessions/${session.id}`)).status).toBe(404);
  });

  describe('Idempotency-Key', () => {
    it('replays the same session for the same key and body', async () => {
      const headers = { 'Idempotency-Key': `k-${randomUUID()}` };
      const first = await create({ agentId, title: 'same' }, headers);
      const second = await create({ agentId, title: 'same' }, headers);
      expect(first.status).toBe(201);
      expect(second.status).toBe(201);
      expect(second.body).toEqual(first.body);
      expect(second.headers['idempotent-replayed']).toBe('true');
      expect(first.headers['idempotent-replayed']).toBeUndefined();
    });

    it('answers 409 idempotency_conflict for the same key with another body', async () => {
      const headers = { 'Idempotency-Key': `k-${randomUUID()}` };
      expect((await create({ agentId, title: 'a' }, headers)).status).toBe(201);
      const conflict = await create({ agentId, title: 'b' }, headers);
      expect(conflict.status).toBe(409);
      expect(json(conflict).error.code).toBe('idempotency_conflict');
    });

    it('creates one session for 20 concurrent identical requests', async () => {
      const title = `burst-${randomUUID()}`;
      const headers = { 'Idempotency-Key': `burst-${randomUUID()}` };
      const responses = await Promise.all(Array.from({ length: 20 }, () => create({ agentId, title }, headers)));
      expect(responses.map((r) => r.status)).toEqual(Array(20).fill(201));
      expect(new Set(responses.map((r) => r.text)).size).toBe(1);
      const listed = json(await h.request('GET', `/v1/sessions?agentId=${agentId}&limit=100`));
      expect(listed.data.filter((s: { title: string }) => s.title === title)).toHaveLength(1);
    });

    it('does not store a failed attempt: the same key succeeds once the agent exists', async () => {
      const headers = { 'Idempotency-Key': `k-${randomUUID()}` };
      const ghost = randomUUID();
      expect((await create({ agentId: ghost }, headers)).status).toBe(404);
      expect((await create({ agentId }, headers)).status).toBe(201);
    });

    it.each([
      ['', 'empty'],
      ['x'.repeat(256), 'too long'],
      ['has space', 'space'],
      ['tab\tkey', 'control character'],
    ])('rejects key %j (%s)', async (key) => {
      const response = await h.app.inject({
        method: 'POST',
        url: '/v1/sessions',
        headers: { authorization: `Bearer ${h.key}`, 'content-type': 'application/json', 'idempotency-key': key },
        payload: JSON.stringify({ agentId }),
      });
      expect(response.statusCode).toBe(400);
      expect(response.json().error.param).toBe('Idempotency-Key');
    });
  });
});
