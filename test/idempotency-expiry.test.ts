import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';

describe.each(dialects())('Idempotency-Key retention (%s)', (dialect) => {
  let h: Harness;
  beforeAll(async () => {
    h = await createHarness(dialect, { AGENTRY_IDEMPOTENCY_TTL_MS: '1000' });
  });
  afterAll(() => h.close());

  it('forgets a key after its retention: the same key then creates a new resource, even with another body', async () => {
    const headers = { 'idempotency-key': `ttl-${randomUUID()}` };
    const first = json(await h.request('POST', '/v1/agents', { body: { name: 'first' }, headers })).agent;
    const replay = await h.request('POST', '/v1/agents', { body: { name: 'first' }, headers });
    expect(json(replay).agent.id).toBe(first.id);
    expect((await h.request('POST', '/v1/agents', { body: { name: 'other' }, headers })).status).toBe(409);
    await new Promise((resolve) => setTimeout(resolve, 1100));
    const fresh = await h.request('POST', '/v1/agents', { body: { name: 'other' }, headers });
    expect(fresh.status).toBe(201);
    expect(fresh.headers['idempotent-replayed']).toBeUndefined();
    expect(json(fresh).agent.id).not.toBe(first.id);
    const again = await h.request('POST', '/v1/agents', { body: { name: 'other' }, headers });
    expect(json(again).agent.id).toBe(json(fresh).agent.id);
  });
});
