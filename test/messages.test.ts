/**
 * Session messages over HTTP (spec 4.4, 7, 8; DESIGN 5, 6, 9): submission validation and idempotency, plain
 * replies of the `scripted` model, transcript paging, FIFO order per session, credits and acceptance warnings.
 * Everything runs through the real server with the engine started, once per dialect.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ASK_USER_QUESTION_SERVER, flows, type Json, TERMINAL_STATUSES } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, type Response as HarnessResponse, json } from './helpers/harness.ts';

const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe.each(dialects())('messages (%s)', (dialect) => {
  let h: Harness;
  const flow = flows(() => h);
  let agentId: string;
  const INSTRUCTIONS = 'Be brief.';

  beforeAll(async () => {
    h = await createHarness(dialect);
    agentId = await flow.createAgent({ instructions: INSTRUCTIONS });
  });
  afterAll(() => h.close());

  const db = () => h.deps.storage.db;

  const expectError = (response: HarnessResponse, status: number, code: string) => {
    expect(response.status, response.text).toBe(status);
    expect(json(response).error.code).toBe(code);
    return json(response).error as Json;
  };

  describe('submission validation', () => {
    let sessionId: string;
    beforeAll(async () => {
      sessionId = await flow.createSession(agentId);
    });
    const text = (value: string) => ({ parts: [{ type: 'text', text: value }] });

    it('requires an Idempotency-Key of 1-255 visible ASCII characters', async () => {
      const missing = expectError(
        await flow.postMessage(sessionId, text('hi'), { idempotencyKey: null }),
        400,
        'validation_error',
      );
      expect(missing.param).toBe('Idempotency-Key');
      const long = expectError(
        await flow.postMessage(sessionId, text('hi'), { idempotencyKey: 'k'.repeat(256) }),
        400,
        'validation_error',
      );
      expect(long.param).toBe('Idempotency-Key');
      const spaced = expectError(
        await flow.postMessage(sessionId, text('hi'), { idempotencyKey: 'has space' }),
        400,
        'validation_error',
      );
      expect(spaced.param).toBe('Idempotency-Key');
      expect((await flow.postMessage(sessionId, text('hi'), { idempotencyKey: 'k'.repeat(255) })).status).toBe(202);
    });

    it.each([
      ['no parts', { parts: [] }],
      ['33 parts', { parts: Array.from({ length: 33 }, () => ({ type: 'text', text: 'x' })) }],
      ['an empty text', text('')],
      ['a 100001-character text', text('y'.repeat(100_001))],
      ['a part that is not text', { parts: [{ type: 'image', text: 'x' }] }],
      ['a part without text', { parts: [{ type: 'text' }] }],
      ['parts not an array', { parts: 'hello' }],
    ])('rejects %s naming parts', async (_label, body) => {
      const error = expectError(await flow.postMessage(sessionId, body), 400, 'validation_error');
      expect(error.param).toMatch(/^parts/);
    });

    it('rejects a missing body field and unknown fields', async () => {
      expect(expectError(await flow.postMessage(sessionId, {}), 400, 'validation_error').param).toBe('parts');
      const extra = expectError(
        await flow.postMessage(sessionId, { ...text('hi'), extra: 1 }),
        400,
        'validation_error',
      );
      expect(extra.param).toBe('extra');
      const partExtra = { parts: [{ type: 'text', text: 'hi', extra: 1 }] };
      expect(expectError(await flow.postMessage(sessionId, partExtra), 400, 'validation_error').param).toMatch(
        /^parts\[0\]/,
      );
    });

    it('accepts 32 parts and a 100000-character part', async () => {
      const parts = Array.from({ length: 32 }, (_, i) => ({ type: 'text', text: `p${i}` }));
      const many = await flow.postMessage(sessionId, { parts });
      expect(many.status).toBe(202);
      expect(json(many).parts).toEqual([{ type: 'text', text: parts.map((part) => part.text).join('\n') }]);
      const big = await flow.postMessage(sessionId, text('z'.repeat(100_000)));
      expect(big.status).toBe(202);
      const done = await flow.waitForMessage(sessionId, json(big).id);
      expect(done.status).toBe('completed');
      expect(done.response.parts[0].text).toBe('z'.repeat(100_000));
    });

    it('answers 404 for an unknown session and for a session of another organization', async () => {
      expectError(await flow.postMessage(randomUUID(), text('hi')), 404, 'not_found');
      const other = await h.createOrg(`msg-other-${dialect}`);
      const foreign = await flow.createSession(await flow.createAgent({}, other.key), other.key);
      expectError(await flow.postMessage(foreign, text('hi')), 404, 'not_found');
      // ...and the owner can use it.
      expect((await flow.postMessage(foreign, text('hi'), { key: other.key })).status).toBe(202);
    });

    it('replays the same key and parts, rejects the same key with other parts, scopes keys per session', async () => {
      const key = `replay-${randomUUID()}`;
      const first = await flow.postMessage(sessionId, text('replay me'), { idempotencyKey: key });
      expect(first.status).toBe(202);
      expect(first.headers['idempotent-replayed']).toBeUndefined();
      const again = await flow.postMessage(sessionId, text('replay me'), { idempotencyKey: key });
      expect(again.status).toBe(202);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(json(again)).toEqual(json(first));
      const rows = await db().selectFrom('messages').select('id').where('session_id', '=', sessionId).execute();
      expect(rows.filter((row) => row.id === json(first).id)).toHaveLength(1);
      const before = rows.length;

      const conflict = expectError(
        await flow.postMessage(sessionId, text('something else'), { idempotencyKey: key }),
        409,
        'idempotency_conflict',
      );
      expect(conflict.param).toBe('Idempotency-Key');

      const otherSession = await flow.createSession(agentId);
      const elsewhere = await flow.postMessage(otherSession, text('something else'), { idempotencyKey: key });
      expect(elsewhere.status).toBe(202);
      expect(elsewhere.headers['idempotent-replayed']).toBeUndefined();
      expect(json(elsewhere).id).not.toBe(json(first).id);
      expect(json(elsewhere).sessionId).toBe(otherSession);
      const after = await db().selectFrom('messages').select('id').where('session_id', '=', sessionId).execute();
      expect(after).toHaveLength(before);
    });

    it('creates one message for concurrent submissions with the same key', async () => {
      const target = await flow.createSession(agentId);
      const key = `dup-${randomUUID()}`;
      const responses = await Promise.all(
        Array.from({ length: 6 }, () => flow.postMessage(target, text('only once'), { idempotencyKey: key })),
      );
      expect(responses.map((response) => response.status)).toEqual(Array(6).fill(202));
      expect(new Set(responses.map((response) => json(response).id)).size).toBe(1);
      expect(responses.filter((response) => response.headers['idempotent-replayed'] === 'true')).toHaveLength(5);
      const rows = await db().selectFrom('messages').select('id').where('session_id', '=', target).execute();
      expect(rows).toHaveLength(1);
    });

    it('gives concurrent submissions with different keys their own places in the transcript', async () => {
      const target = await flow.createSession(agentId);
      const responses = await Promise.all(
        Array.from({ length: 6 }, (_, i) => flow.postMessage(target, text(`parallel ${i}`))),
      );
      expect(responses.map((response) => response.status)).toEqual(Array(6).fill(202));
      const ids = responses.map((response) => json(response).id);
      expect(new Set(ids).size).toBe(6);
      const done = await Promise.all(ids.map((id) => flow.waitForMessage(target, id)));
      expect(done.map((m) => m.response.parts[0].text).sort()).toEqual(
        Array.from({ length: 6 }, (_, i) => `parallel ${i}`),
      );
      const rows = await db().selectFrom('messages').select('seq').where('session_id', '=', target).execute();
      expect(new Set(rows.map((row) => row.seq)).size).toBe(6);
    });
  });

  describe('plain replies', () => {
    it('echoes a message without directives, with usage, run id and timestamps', async () => {
      const sessionId = await flow.createSession(agentId);
      const prompt = 'What is the weather in Paris today?';
      const accepted = await flow.submit(sessionId, prompt);
      expect(accepted).toMatchObject({
        object: 'message',
        sessionId,
        status: 'queued',
        parts: [{ type: 'text', text: prompt }],
        response: null,
        error: null,
        requiredActions: [],
        warnings: [],
      });
      expect(accepted.id).toMatch(UUID);
      expect(accepted.runId).toMatch(UUID);
      expect(accepted.createdAt).toMatch(ISO);

      const done = await flow.waitForMessage(sessionId, accepted.id);
      expect(done.status).toBe('completed');
      expect(done.response).toEqual({ parts: [{ type: 'text', text: prompt }] });
      expect(done.error).toBeNull();
      expect(done.runId).toBe(accepted.runId);
      const inputTokens = Math.ceil((INSTRUCTIONS.length + prompt.length) / 4);
      const outputTokens = Math.ceil(prompt.length / 4);
      expect(done.usage).toEqual({ inputTokens, outputTokens, totalTokens: inputTokens + outputTokens });
      expect(outputTokens).toBeGreaterThan(0);
      for (const field of ['createdAt', 'startedAt', 'completedAt']) expect(done[field]).toMatch(ISO);
      expect(Date.parse(done.startedAt)).toBeGreaterThanOrEqual(Date.parse(done.createdAt));
      expect(Date.parse(done.completedAt)).toBeGreaterThanOrEqual(Date.parse(done.startedAt));
      expect(json(await h.request('GET', `/v1/sessions/${sessionId}`)).session.status).toBe('idle');
    });

    it('joins multiple parts with newlines into one prompt', async () => {
      const sessionId = await flow.createSession(agentId);
      const accepted = await flow.submit(sessionId, ['first line', 'second line', 'third']);
      const joined = 'first line\nsecond line\nthird';
      expect(accepted.parts).toEqual([{ type: 'text', text: joined }]);
      const done = await flow.waitForMessage(sessionId, accepted.id);
      expect(done.parts).toEqual([{ type: 'text', text: joined }]);
      expect(done.response.parts).toEqual([{ type: 'text', text: joined }]);
    });

    it('lists the transcript in submission order with total, limit and offset', async () => {
      const sessionId = await flow.createSession(agentId);
      const ids: string[] = [];
      for (const text of ['one', 'two', 'three']) ids.push((await flow.submit(sessionId, text)).id);
      await flow.waitForMessage(sessionId, ids[2]!);
      const all = json(await h.request('GET', `/v1/sessions/${sessionId}/messages`));
      expect(all).toMatchObject({ total: 3, limit: 50, offset: 0 });
      expect(all.data.map((m: Json) => m.id)).toEqual(ids);
      expect(all.data.map((m: Json) => m.response.parts[0].text)).toEqual(['one', 'two', 'three']);
      const page = json(await h.request('GET', `/v1/sessions/${sessionId}/messages?limit=2&offset=1`));
      expect(page).toMatchObject({ total: 3, limit: 2, offset: 1 });
      expect(page.data.map((m: Json) => m.id)).toEqual(ids.slice(1, 3));
      const past = json(await h.request('GET', `/v1/sessions/${sessionId}/messages?offset=5`));
      expect(past).toMatchObject({ total: 3, data: [] });
      for (const query of ['limit=0', 'limit=101', 'offset=-1', 'limit=abc']) {
        const response = await h.request('GET', `/v1/sessions/${sessionId}/messages?${query}`);
        expect(expectError(response, 400, 'validation_error').param).toBe(query.split('=')[0]);
      }
      expect((await h.request('GET', `/v1/sessions/${sessionId}/messages?limit=100`)).status).toBe(200);
      expectError(await h.request('GET', `/v1/sessions/${randomUUID()}/messages`), 404, 'not_found');
    });

    it('answers 404 for a message of another session', async () => {
      const one = await flow.createSession(agentId);
      const two = await flow.createSession(agentId);
      const accepted = await flow.submit(one, 'mine');
      expectError(await h.request('GET', `/v1/sessions/${two}/messages/${accepted.id}`), 404, 'not_found');
      expectError(await h.request('GET', `/v1/sessions/${one}/messages/${randomUUID()}`), 404, 'not_found');
    });
  });

  describe('ordering', () => {
    it('runs the turns of one session one at a time, in submission order', async () => {
      const sessionId = await flow.createSession(agentId);
      const texts = ['sleep 300\nfirst', 'second', 'third', 'fourth', 'fifth'];
      const ids: string[] = [];
      for (const text of texts) ids.push((await flow.submit(sessionId, text)).id);
      const done: Json[] = [];
      for (const id of ids) done.push(await flow.waitForMessage(sessionId, id));
      expect(done.map((m) => m.status)).toEqual(Array(5).fill('completed'));
      expect(done.map((m) => m.response.parts[0].text)).toEqual(['first', 'second', 'third', 'fourth', 'fifth']);
      // The first turn slept 300 ms, so the others were queued behind it rather than run beside it.
      expect(Date.parse(done[0]!.completedAt) - Date.parse(done[0]!.startedAt)).toBeGreaterThanOrEqual(290);
      for (let i = 1; i < done.length; i++) {
        expect(Date.parse(done[i]!.startedAt)).toBeGreaterThanOrEqual(Date.parse(done[i - 1]!.completedAt));
      }
    });

    it('runs sessions in parallel, each getting its own reply', async () => {
      const sessions = await Promise.all(Array.from({ length: 8 }, () => flow.createSession(agentId)));
      const accepted = await Promise.all(
        sessions.map((sessionId, i) => flow.submit(sessionId, `hello from session ${i}`)),
      );
      const done = await Promise.all(sessions.map((sessionId, i) => flow.waitForMessage(sessionId, accepted[i]!.id)));
      done.forEach((message, i) => {
        expect(message.status).toBe('completed');
        expect(message.sessionId).toBe(sessions[i]);
        expect(message.response.parts[0].text).toBe(`hello from session ${i}`);
      });
    });
  });

  describe('credits', () => {
    let org: { orgId: string; key: string };
    let pricedAgent: string;
    let freeAgent: string;
    beforeAll(async () => {
      org = await h.createOrg(`credits-${dialect}`);
      pricedAgent = await flow.createAgent({ model: 'scripted/priced' }, org.key);
      freeAgent = await flow.createAgent({ model: 'scripted' }, org.key);
    });
    const balance = async () =>
      (
        await db()
          .selectFrom('orgs')
          .select('credit_balance_micros')
          .where('id', '=', org.orgId)
          .executeTakeFirstOrThrow()
      ).credit_balance_micros;
    const costOf = async (messageId: string) =>
      (await db().selectFrom('messages').select('cost_micros').where('id', '=', messageId).executeTakeFirstOrThrow())
        .cost_micros;
    const body = (text: string) => ({ parts: [{ type: 'text', text }] });

    it('refuses a priced model with a spent balance but runs a free one', async () => {
      await h.deps.orgs.setCredits(org.orgId, 0);
      const priced = await flow.createSession(pricedAgent, org.key);
      const refused = await flow.postMessage(priced, body('hello'), { key: org.key });
      const error = expectError(refused, 402, 'insufficient_credits');
      expect(error.type).toBe('billing_error');
      const rows = await db().selectFrom('messages').select('id').where('session_id', '=', priced).execute();
      expect(rows).toHaveLength(0);

      // A refused submission stores nothing under its key: the same key works once credits are back.
      const key = randomUUID();
      expectError(
        await flow.postMessage(priced, body('retry me'), { idempotencyKey: key, key: org.key }),
        402,
        'insufficient_credits',
      );
      await h.deps.orgs.setCredits(org.orgId, 1);
      const retried = await flow.postMessage(priced, body('retry me'), { idempotencyKey: key, key: org.key });
      expect(retried.status).toBe(202);
      expect(retried.headers['idempotent-replayed']).toBeUndefined();
      await flow.waitForMessage(priced, json(retried).id, TERMINAL_STATUSES, org.key);
      await h.deps.orgs.setCredits(org.orgId, 0);

      const free = await flow.createSession(freeAgent, org.key);
      const accepted = await flow.postMessage(free, body('hello'), { key: org.key });
      expect(accepted.status).toBe(202);
      expect((await flow.waitForMessage(free, json(accepted).id, TERMINAL_STATUSES, org.key)).status).toBe('completed');
      expect(await balance()).toBe(0);
    });

    it('debits exactly the cost of a priced turn', async () => {
      await h.deps.orgs.setCredits(org.orgId, 0.01);
      expect(await balance()).toBe(10_000);
      const sessionId = await flow.createSession(pricedAgent, org.key);
      const prompt = 'Count the tokens of this priced message, please.';
      const accepted = await flow.postMessage(sessionId, body(prompt), { key: org.key });
      expect(accepted.status).toBe(202);
      const done = await flow.waitForMessage(sessionId, json(accepted).id, TERMINAL_STATUSES, org.key);
      expect(done.status).toBe('completed');
      const cost = await costOf(done.id);
      expect(cost).toBeGreaterThan(0);
      // $1 per 1M tokens each way: one micro-dollar per token.
      expect(cost).toBe(done.usage.totalTokens);
      expect(done.usage.inputTokens).toBe(Math.ceil(prompt.length / 4));
      expect(await balance()).toBe(10_000 - cost);
      const run = await db().selectFrom('runs').select('cost_micros').where('id', '=', done.runId).executeTakeFirst();
      expect(run?.cost_micros).toBe(cost);
    });

    it('never debits an unlimited (null) balance', async () => {
      await h.deps.orgs.setCredits(org.orgId, null);
      const sessionId = await flow.createSession(pricedAgent, org.key);
      const accepted = await flow.postMessage(sessionId, body('unlimited credit here'), { key: org.key });
      expect(accepted.status).toBe(202);
      const done = await flow.waitForMessage(sessionId, json(accepted).id, TERMINAL_STATUSES, org.key);
      expect(done.status).toBe('completed');
      expect(await costOf(done.id)).toBeGreaterThan(0);
      expect(await balance()).toBeNull();
    });
  });

  describe('warnings', () => {
    it('warns about a configured tool this deployment cannot run', async () => {
      const agent = await flow.createAgent({ mcpServers: [{ kind: 'internal', name: 'speech_generator' }] });
      const accepted = await flow.submit(await flow.createSession(agent), 'hi');
      expect(accepted.warnings).toHaveLength(1);
      expect(accepted.warnings[0]).toEqual({
        code: 'tool_unavailable',
        message: expect.stringContaining('speech_generator'),
      });
      // The turn still runs without it.
      expect((await flow.waitForMessage(accepted.sessionId, accepted.id)).status).toBe('completed');
    });

    it('has no warnings when every configured tool runs here', async () => {
      const agent = await flow.createAgent({ mcpServers: [ASK_USER_QUESTION_SERVER] });
      expect((await flow.submit(await flow.createSession(agent), 'hi')).warnings).toEqual([]);
    });
  });
});
