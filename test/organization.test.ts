/** GET /v1/organization: the key's organization, credit balance and scopes, for any valid key; per dialect. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';

describe.each(dialects())('organization (%s)', (dialect) => {
  let h: Harness;
  beforeAll(async () => {
    h = await createHarness(dialect);
  });
  afterAll(() => h.close());

  it("answers the key's organization and every scope of an admin key", async () => {
    const response = await h.request('GET', '/v1/organization');
    expect(response.status).toBe(200);
    expect(json(response)).toEqual({
      object: 'organization',
      id: expect.any(String),
      name: 'default',
      project_id: expect.any(Number),
      projectId: expect.any(Number),
      credit_balance_usd: null,
      api_key: {
        id: expect.any(String),
        scopes: [
          'tasks:read',
          'tasks:write',
          'webhooks:read',
          'webhooks:write',
          'accounts:write',
          'files:read',
          'files:write',
          'agents:read',
          'agents:write',
          'sessions:read',
          'sessions:write',
          'audit:read',
        ],
      },
      limits: {
        organization: { requests_per_minute: null, concurrent_turns: null },
        api_key: { requests_per_minute: null, concurrent_turns: null },
      },
    });
  });

  it('answers a key of any scope with only its own scopes, and its own organization', async () => {
    const name = `org-${dialect}-${Date.now()}`;
    const { orgId } = await h.createOrg(name);
    await h.deps.orgs.setCredits(orgId, 12.5);
    const key = await h.deps.orgs.createKey(orgId, ['files:read']);
    const response = await h.request('GET', '/v1/organization', { key });
    expect(response.status).toBe(200);
    expect(json(response)).toMatchObject({
      id: orgId,
      name,
      credit_balance_usd: 12.5,
      api_key: { scopes: ['files:read'] },
    });
  });

  it('needs a valid key', async () => {
    expect((await h.request('GET', '/v1/organization', { key: null })).status).toBe(401);
    const invalid = await h.request('GET', '/v1/organization', { key: `agk_${'x'.repeat(40)}` });
    expect(invalid.status).toBe(401);
    expect(json(invalid).error.code).toBe('invalid_api_key');
  });
});
