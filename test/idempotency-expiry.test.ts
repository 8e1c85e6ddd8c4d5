import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';
import { type TestClock, testClock } from './helpers/test-clock.ts';

describe.each(dialects())('Idempotency-Key retention (%s)', (dialect) => {
  let h: Harness;
  let clock: TestClock;
  beforeAll(async () => {
    clock = testClock();
    // A minute, passed by moving the clock: the requests before it can take as long as a busy machine needs.
    h = await createHarness(dialect, { AGENTRY_IDEMPOTENCY_TTL_MS: '60000' }, { clock });
  });
  afterAll(() => h.close());

  it('forgets a key after its retention: the same key then creates a new resource, even with another body', async () => {
    const headers = { 'idempotency-key': `ttl-${randomUUID()}` };
    const first = json(await h.request('POST', '/v1/agents', { body: { name: 'first' }, headers })).agent;
    const replay = await h.request('POST', '/v1/agents', { body: { name: 'first' }, headers });
    expect(json(replay).agent.id).toBe(first.id);
    expect((await h.request('POST', '/v1/agents', { body: { name: 'other' }, headers })).status).toBe(409);
    clock.advance(61_000);
    const fresh = await h.request('POST', '/v1/agents', { body: { name: 'other' }, headers });
    expect(fresh.status).toBe(201);
    expect(fresh.headers['idempotent-replayed']).toBeUndefined();
    expect(json(fresh).agent.id).not.toBe(first.id);
    const again = await h.request('POST', '/v1/agents', { body: { name: 'other' }, headers });
    expect(json(again).agent.id).toBe(json(fresh).agent.id);
  });
});
