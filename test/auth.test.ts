import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';

describe.each(dialects())('authentication and scopes (%s)', (dialect) => {
  let h: Harness;
  beforeAll(async () => {
    h = await createHarness(dialect);
  });
  afterAll(() => h.close());

  const errorOf = async (promise: ReturnType<Harness['request']>) => {
    const response = await promise;
    return { status: response.status, code: json(response).error?.code };
  };

  it('accepts Bearer, API_KEY and X-API-Key forms', async () => {
    expect((await h.request('GET', '/v1/agents')).status).toBe(200);
    expect((await h.request('GET', '/v1/agents', { key: null, headers: { api_key: h.key } })).status).toBe(200);
    expect((await h.request('GET', '/v1/agents', { key: null, headers: { 'x-api-key': h.key } })).status).toBe(200);
  });

  it('answers 401 missing_api_key without a key, before reading the body', async () => {
    expect(await errorOf(h.request('GET', '/v1/agents', { key: null }))).toEqual({
      status: 401,
      code: 'missing_api_key',
    });
    expect(
      await errorOf(
        h.request('POST', '/v1/agents', {
          key: null,
          rawBody: '{bad json',
          headers: { 'content-type': 'application/json' },
        }),
      ),
    ).toEqual({
      status: 401,
      code: 'missing_api_key',
    });
  });

  it('answers 401 invalid_api_key for unknown, malformed, revoked and expired keys', async () => {
    expect(await errorOf(h.request('GET', '/v1/agents', { key: `agk_${'x'.repeat(40)}` }))).toEqual({
      status: 401,
      code: 'invalid_api_key',
    });
    expect(await errorOf(h.request('GET', '/v1/agents', { key: 'not-a-key' }))).toEqual({
      status: 401,
      code: 'invalid_api_key',
    });

    const org = await h.deps.orgs.requireByName('default');
    const revoked = await h.deps.orgs.createKey(org.id);
    expect((await h.request('GET', '/v1/agents', { key: revoked })).status).toBe(200);
    await h.deps.storage.db
      .updateTable('api_keys')
      .set({ revoked_at: Date.now() })
      .where('prefix', '=', revoked.slice(0, 12))
      .execute();
    // A write through this process's database handle empties the cache, whoever makes it.
    expect(await errorOf(h.request('GET', '/v1/agents', { key: revoked }))).toEqual({
      status: 401,
      code: 'invalid_api_key',
    });

    const expired = await h.deps.orgs.createKey(org.id);
    await h.deps.storage.db
      .updateTable('api_keys')
      .set({ expires_at: Date.now() - 1 })
      .where('prefix', '=', expired.slice(0, 12))
      .execute();
    expect(await errorOf(h.request('GET', '/v1/agents', { key: expired }))).toEqual({
      status: 401,
      code: 'invalid_api_key',
    });
  });

  it('answers 403 insufficient_scopes for a key without the route scope', async () => {
    const org = await h.deps.orgs.requireByName('default');
    const readOnly = await h.deps.orgs.createKey(org.id, ['tasks:read']);
    expect((await h.request('GET', '/v1/agents', { key: readOnly })).status).toBe(200);
    const denied = await h.request('POST', '/v1/agents', { key: readOnly, body: { name: 'x' } });
    expect(denied.status).toBe(403);
    expect(json(denied).error).toMatchObject({ code: 'insufficient_scopes', type: 'permission_error' });
    expect(json(denied).error.message).toContain('tasks:write');
    const webhooksOnly = await h.deps.orgs.createKey(org.id, ['webhooks:read']);
    expect(await errorOf(h.request('GET', '/v1/sessions', { key: webhooksOnly }))).toEqual({
      status: 403,
      code: 'insufficient_scopes',
    });
  });

  it('splits agents from sessions: each narrower scope allows its routes only, tasks:* allows both', async () => {
    const org = await h.deps.orgs.requireByName('default');
    const agentId = json(await h.request('POST', '/v1/agents', { body: { name: `scoped-${dialect}` } })).agent.id;
    const builder = await h.deps.orgs.createKey(org.id, ['agents:read', 'agents:write']);
    const chatter = await h.deps.orgs.createKey(org.id, ['sessions:read', 'sessions:write']);
    const reader = await h.deps.orgs.createKey(org.id, ['agents:read', 'sessions:read']);
    const patch = (key: string) =>
      h.request('PATCH', `/v1/agents/${agentId}`, { key, body: { instructions: 'Be brief.' } });
    const session = (key: string) => h.request('POST', '/v1/sessions', { key, body: { agentId } });

    expect((await patch(builder)).status).toBe(200);
    expect((await h.request('GET', `/v1/agents/${agentId}`, { key: builder })).status).toBe(200);
    const noSession = await session(builder);
    expect(noSession.status).toBe(403);
    expect(json(noSession).error.message).toBe('This API key lacks the scope sessions:write (or tasks:write)');
    expect((await h.request('GET', '/v1/sessions', { key: builder })).status).toBe(403);

    expect((await session(chatter)).status).toBe(201);
    expect((await h.request('GET', '/v1/runs', { key: chatter })).status).toBe(200);
    const noEdit = await patch(chatter);
    expect(noEdit.status).toBe(403);
    expect(json(noEdit).error.message).toBe('This API key lacks the scope agents:write (or tasks:write)');
    expect((await h.request('GET', '/v1/agents', { key: chatter })).status).toBe(403);

    // Read-only: lists and reads, no writes of either kind.
    expect((await h.request('GET', '/v1/agents', { key: reader })).status).toBe(200);
    expect((await h.request('GET', '/v1/sessions', { key: reader })).status).toBe(200);
    expect((await patch(reader)).status).toBe(403);
    expect((await session(reader)).status).toBe(403);

    // The spec's scopes keep their meaning: tasks:write writes both, tasks:read reads both.
    const tasks = await h.deps.orgs.createKey(org.id, ['tasks:read', 'tasks:write']);
    expect((await patch(tasks)).status).toBe(200);
    expect((await session(tasks)).status).toBe(201);
    const organization = json(await h.request('GET', '/v1/organization', { key: tasks }));
    expect(organization.api_key.scopes).toEqual([
      'tasks:read',
      'tasks:write',
      'agents:read',
      'agents:write',
      'sessions:read',
      'sessions:write',
    ]);
  });

  it('stores keys only as hashes', async () => {
    const rows = await h.deps.storage.db.selectFrom('api_keys').select(['key_hash', 'prefix']).execute();
    expect(rows.length).toBeGreaterThan(0);
    for (const row of rows) {
      expect(row.key_hash).toMatch(/^[0-9a-f]{64}$/);
      expect(row.key_hash).not.toContain(h.key.slice(4));
    }
  });

  it('needs no key for health, readiness and the OpenAPI documents', async () => {
    for (const url of ['/healthz', '/readyz', '/v1/openapi.json', '/v1/openapi.md']) {
      expect((await h.request('GET', url, { key: null })).status, url).toBe(200);
    }
    expect(json(await h.request('GET', '/healthz', { key: null }))).toEqual({ status: 'ok' });
  });

  it('puts a request id on every response, echoing a well-formed one', async () => {
    const plain = await h.request('GET', '/healthz', { key: null });
    expect(String(plain.headers['x-request-id'])).toMatch(/^[0-9a-f-]{36}$/);
    const echoed = await h.request('GET', '/v1/agents', { headers: { 'x-request-id': 'trace-123' } });
    expect(echoed.headers['x-request-id']).toBe('trace-123');
    const refused = await h.request('GET', '/nope', { headers: { 'x-request-id': 'bad id\twith tab' } });
    expect(refused.headers['x-request-id']).not.toContain('bad id');
  });
});
