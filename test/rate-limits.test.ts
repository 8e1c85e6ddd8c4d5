/**
 * Rate and concurrency limits (docs/operations.md, "Limits"), per dialect: the operator's admin API (its token,
 * 404 without one, 400 naming the field), requests per minute per key and per organization (429, Retry-After, the
 * RateLimit and RateLimit-Policy headers), the limits GET /v1/organization shows, concurrent turns per
 * organization and per key (queued, never refused), and the fair claim: one organization's backlog does not hold
 * back another's turn. Two processes sharing one limit: test/rate-limits-cluster.test.ts.
 */
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { claimSession } from '../src/domain/turns/claims.ts';
import { handOver } from '../src/domain/turns/leases.ts';
import { flows, waitUntil } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json, type Response, testEnvironment } from './helpers/harness.ts';
import { runCli, startsTimeout } from './helpers/server-process.ts';
import { type TestClock, testClock } from './helpers/test-clock.ts';

const ADMIN_TOKEN = 'operator-secret-token-for-tests';
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };

/** Moves the clock to the start of a later minute: a fresh window for every counter. */
function freshWindow(clock: TestClock): void {
  clock.set((Math.floor(clock.now() / 60_000) + 1) * 60_000 + 1000);
}

const header = (response: Response, name: string) => response.headers[name] as string | undefined;

/** The id of a key, as GET /v1/organization names it. */
async function keyIdOf(h: Harness, key: string): Promise<string> {
  const response = await h.request('GET', '/v1/organization', { key });
  expect(response.status, response.text).toBe(200);
  return json(response).api_key.id;
}

/** The largest number of the given messages running at one instant, from their start and end times. */
async function mostAtOnce(h: Harness, messageIds: string[]): Promise<number> {
  const rows = await h.deps.storage.db
    .selectFrom('messages')
    .select(['started_at', 'completed_at'])
    .where('id', 'in', messageIds)
    .execute();
  const edges = rows.flatMap((row) => [
    { at: Number(row.started_at), step: 1 },
    { at: Number(row.completed_at), step: -1 },
  ]);
  // An end and a start at the same millisecond: the end first.
  edges.sort((a, b) => a.at - b.at || a.step - b.step);
  let current = 0;
  let most = 0;
  for (const edge of edges) {
    current += edge.step;
    most = Math.max(most, current);
  }
  return most;
}

describe.each(dialects())('rate and concurrency limits (%s)', (dialect) => {
  let h: Harness;
  const clock = testClock();
  const f = flows(() => h);
  beforeAll(async () => {
    h = await createHarness(dialect, { AGENTRY_ADMIN_TOKEN: ADMIN_TOKEN, AGENTRY_WORKER_CONCURRENCY: '4' }, { clock });
  });
  afterAll(() => h.close());

  describe('the admin API', () => {
    it('needs the admin token: 401 without it, with another token or with an API key', async () => {
      const { orgId, key } = await h.createOrg(`admin-auth-${dialect}`);
      const url = `/v1/admin/organizations/${orgId}/limits`;
      for (const headers of [{}, { authorization: 'Bearer not-the-token' }, { authorization: `Bearer ${key}` }]) {
        const response = await h.request('GET', url, { key: null, headers });
        expect(response.status, response.text).toBe(401);
        expect(json(response).error.code).toBe('invalid_admin_token');
      }
      // A tenant cannot lift its own limits, even with every scope.
      const lift = await h.request('PUT', url, { key, body: { requests_per_minute: null } });
      expect(lift.status).toBe(401);
      expect(json(lift).error.code).toBe('invalid_admin_token');
    });

    it('sets, shows and clears the limits of an organization and of a key', async () => {
      const { orgId, key } = await h.createOrg(`admin-set-${dialect}`);
      const keyId = await keyIdOf(h, key);
      const empty = await h.request('GET', `/v1/admin/organizations/${orgId}/limits`, { key: null, headers: admin });
      expect(empty.status, empty.text).toBe(200);
      expect(json(empty)).toEqual({
        object: 'limits',
        subject: 'organization',
        id: orgId,
        organization_id: orgId,
        requests_per_minute: null,
        concurrent_turns: null,
        effective: { requests_per_minute: null, concurrent_turns: null },
      });
      const set = await h.request('PUT', `/v1/admin/organizations/${orgId}/limits`, {
        key: null,
        headers: admin,
        body: { requests_per_minute: 600, concurrent_turns: 5 },
      });
      expect(set.status, set.text).toBe(200);
      expect(json(set)).toMatchObject({ requests_per_minute: 600, concurrent_turns: 5 });
      // An absent field is kept, null clears one.
      const partial = await h.request('PUT', `/v1/admin/organizations/${orgId}/limits`, {
        key: null,
        headers: admin,
        body: { concurrent_turns: null },
      });
      expect(json(partial)).toMatchObject({ requests_per_minute: 600, concurrent_turns: null });
      const keyed = await h.request('PUT', `/v1/admin/api_keys/${keyId}/limits`, {
        key: null,
        headers: admin,
        body: { requests_per_minute: 60, concurrent_turns: 2 },
      });
      expect(keyed.status, keyed.text).toBe(200);
      expect(json(keyed)).toMatchObject({ subject: 'api_key', id: keyId, organization_id: orgId });
      const read = await h.request('GET', `/v1/admin/api_keys/${keyId}/limits`, { key: null, headers: admin });
      expect(json(read)).toMatchObject({ requests_per_minute: 60, concurrent_turns: 2 });
      // The key sees what applies to it, read only.
      const organization = await h.request('GET', '/v1/organization', { key });
      expect(json(organization).limits).toEqual({
        organization: { requests_per_minute: 600, concurrent_turns: null },
        api_key: { requests_per_minute: 60, concurrent_turns: 2 },
      });
      await h.request('PUT', `/v1/admin/api_keys/${keyId}/limits`, {
        key: null,
        headers: admin,
        body: { requests_per_minute: null, concurrent_turns: null },
      });
      const cleared = await h.request('GET', '/v1/organization', { key });
      expect(json(cleared).limits.api_key).toEqual({ requests_per_minute: null, concurrent_turns: null });
    });

    it('answers bad input with 400 naming the field, and unknown ids with 404', async () => {
      const { orgId, key } = await h.createOrg(`admin-input-${dialect}`);
      const keyId = await keyIdOf(h, key);
      const cases: [string, unknown, string][] = [
        [`/v1/admin/organizations/${orgId}/limits`, { requests_per_minute: 0 }, 'requests_per_minute'],
        [`/v1/admin/organizations/${orgId}/limits`, { requests_per_minute: 'many' }, 'requests_per_minute'],
        [`/v1/admin/organizations/${orgId}/limits`, { concurrent_turns: 1.5 }, 'concurrent_turns'],
        [`/v1/admin/api_keys/${keyId}/limits`, { concurrent_turns: -1 }, 'concurrent_turns'],
        [`/v1/admin/api_keys/${keyId}/limits`, { rpm: 5 }, 'rpm'],
        ['/v1/admin/organizations/not-a-uuid/limits', { requests_per_minute: 5 }, 'org_id'],
        ['/v1/admin/api_keys/not-a-uuid/limits', { requests_per_minute: 5 }, 'key_id'],
      ];
      for (const [url, body, param] of cases) {
        const response = await h.request('PUT', url, { key: null, headers: admin, body });
        expect(response.status, `${url} ${JSON.stringify(body)}: ${response.text}`).toBe(400);
        expect(json(response).error.param, JSON.stringify(body)).toBe(param);
      }
      const bare = await h.request('PUT', `/v1/admin/organizations/${orgId}/limits`, {
        key: null,
        rawBody: '[1]',
        headers: { ...admin, 'content-type': 'application/json' },
      });
      expect(bare.status).toBe(400);
      for (const url of [
        `/v1/admin/organizations/${randomUUID()}/limits`,
        `/v1/admin/api_keys/${randomUUID()}/limits`,
      ]) {
        const response = await h.request('PUT', url, { key: null, headers: admin, body: { requests_per_minute: 5 } });
        expect(response.status, response.text).toBe(404);
        expect(json(response).error.code).toBe('not_found');
      }
    });
  });

  describe('requests per minute', () => {
    it('limits a key: 429 with Retry-After and the RateLimit headers, other keys unaffected', async () => {
      const { orgId, key } = await h.createOrg(`rpm-key-${dialect}`);
      const other = await h.deps.orgs.createKey(orgId);
      const keyId = await keyIdOf(h, key);
      const set = await h.request('PUT', `/v1/admin/api_keys/${keyId}/limits`, {
        key: null,
        headers: admin,
        body: { requests_per_minute: 3 },
      });
      expect(set.status).toBe(200);
      freshWindow(clock);
      for (const remaining of [2, 1, 0]) {
        const response = await h.request('GET', '/v1/agents', { key });
        expect(response.status, response.text).toBe(200);
        expect(header(response, 'ratelimit-policy')).toBe('"api_key";q=3;w=60');
        expect(header(response, 'ratelimit')).toMatch(new RegExp(`^"api_key";r=${remaining};t=(\\d+)$`));
      }
      const refused = await h.request('GET', '/v1/agents', { key });
      expect(refused.status, refused.text).toBe(429);
      expect(json(refused).error).toMatchObject({ code: 'rate_limit_exceeded', type: 'rate_limit_error' });
      const retryAfter = Number(header(refused, 'retry-after'));
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(60);
      expect(header(refused, 'ratelimit')).toBe(`"api_key";r=0;t=${retryAfter}`);
      // Every authenticated route counts, a write as much as a read.
      expect((await h.request('POST', '/v1/agents', { key, body: { name: 'x' } })).status).toBe(429);
      // Another key of the organization has no limit: no headers, no refusal.
      const free = await h.request('GET', '/v1/agents', { key: other });
      expect(free.status).toBe(200);
      expect(header(free, 'ratelimit')).toBeUndefined();
      // The next minute is a new window.
      freshWindow(clock);
      expect((await h.request('GET', '/v1/agents', { key })).status).toBe(200);
    });

    it('counts requests arriving together exactly: each its own place, no more than the limit accepted', async () => {
      const { key } = await h.createOrg(`rpm-burst-${dialect}`);
      const keyId = await keyIdOf(h, key);
      await h.request('PUT', `/v1/admin/api_keys/${keyId}/limits`, {
        key: null,
        headers: admin,
        body: { requests_per_minute: 10 },
      });
      freshWindow(clock);
      const answers = await Promise.all(Array.from({ length: 30 }, () => h.request('GET', '/v1/agents', { key })));
      const accepted = answers.filter((answer) => answer.status === 200);
      expect(accepted).toHaveLength(10);
      expect(answers.filter((answer) => answer.status === 429)).toHaveLength(20);
      // Counted together, yet each accepted request was told its own remainder: 9, 8, …, 0 once each.
      const remainders = accepted.map((answer) => Number(/r=(\d+)/.exec(header(answer, 'ratelimit') ?? '')?.[1]));
      expect(remainders.sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    });

    it("limits an organization: all of its keys together, and the tighter limit's policy refuses", async () => {
      const { orgId, key } = await h.createOrg(`rpm-org-${dialect}`);
      const second = await h.deps.orgs.createKey(orgId);
      const secondId = await keyIdOf(h, second);
      await h.request('PUT', `/v1/admin/organizations/${orgId}/limits`, {
        key: null,
        headers: admin,
        body: { requests_per_minute: 4 },
      });
      await h.request('PUT', `/v1/admin/api_keys/${secondId}/limits`, {
        key: null,
        headers: admin,
        body: { requests_per_minute: 100 },
      });
      freshWindow(clock);
      for (const used of [key, second, key, second]) {
        const response = await h.request('GET', '/v1/agents', { key: used });
        expect(response.status, response.text).toBe(200);
      }
      const refused = await h.request('GET', '/v1/agents', { key: second });
      expect(refused.status).toBe(429);
      expect(refused.text).toContain('organization');
      expect(header(refused, 'ratelimit-policy')).toBe('"organization";q=4;w=60, "api_key";q=100;w=60');
      expect(header(refused, 'ratelimit')).toMatch(/^"organization";r=0;t=\d+, "api_key";r=97;t=\d+$/);
      // Another organization is not affected.
      expect((await h.request('GET', '/v1/agents')).status).toBe(200);
    });

    it('does not count requests that fail authentication', async () => {
      const { orgId, key } = await h.createOrg(`rpm-auth-${dialect}`);
      await h.request('PUT', `/v1/admin/organizations/${orgId}/limits`, {
        key: null,
        headers: admin,
        body: { requests_per_minute: 1 },
      });
      freshWindow(clock);
      expect((await h.request('GET', '/v1/agents', { key: `agk_${'y'.repeat(40)}` })).status).toBe(401);
      expect((await h.request('GET', '/v1/agents', { key })).status).toBe(200);
      expect((await h.request('GET', '/v1/agents', { key })).status).toBe(429);
    });

    it("counts in the database on the counters' handle: on Postgres, commits that do not wait for the disk", async () => {
      const { orgId, key } = await h.createOrg(`rpm-handle-${dialect}`);
      await h.request('PUT', `/v1/admin/organizations/${orgId}/limits`, {
        key: null,
        headers: admin,
        body: { requests_per_minute: 10 },
      });
      freshWindow(clock);
      expect((await h.request('GET', '/v1/agents', { key })).status).toBe(200);
      const counted = await h.deps.storage.db
        .selectFrom('rate_windows')
        .select('hits')
        .where('bucket', '=', `o:${orgId}`)
        .execute();
      expect(counted.map((row) => Number(row.hits))).toEqual([1]);
      const { counterDb } = h.deps.storage;
      if (dialect === 'sqlite') {
        expect(counterDb).toBe(h.deps.storage.db);
        return;
      }
      const shown = await sql<{ synchronous_commit: string }>`show synchronous_commit`.execute(counterDb);
      expect(shown.rows[0]?.synchronous_commit).toBe('off');
      const requests = await sql<{ synchronous_commit: string }>`show synchronous_commit`.execute(h.deps.storage.db);
      expect(requests.rows[0]?.synchronous_commit).toBe('on');
    });
  });

  describe('concurrent turns', () => {
    it("queues an organization's turns beyond its limit, never refuses them", async () => {
      const { orgId, key } = await h.createOrg(`turns-org-${dialect}`);
      await h.request('PUT', `/v1/admin/organizations/${orgId}/limits`, {
        key: null,
        headers: admin,
        body: { concurrent_turns: 1 },
      });
      const agentId = await f.createAgent({}, key);
      const submitted: { sessionId: string; id: string }[] = [];
      for (let i = 0; i < 3; i += 1) {
        const sessionId = await f.createSession(agentId, key);
        const accepted = await f.submit(sessionId, 'sleep 150\nDone.', { key });
        submitted.push({ sessionId, id: accepted.id });
      }
      for (const { sessionId, id } of submitted) {
        expect((await f.waitForMessage(sessionId, id, undefined, key)).status).toBe('completed');
      }
      expect(
        await mostAtOnce(
          h,
          submitted.map((message) => message.id),
        ),
      ).toBe(1);
    });

    it("limits a key's turns, while another key of the organization runs beside them", async () => {
      const { orgId, key } = await h.createOrg(`turns-key-${dialect}`);
      const other = await h.deps.orgs.createKey(orgId);
      await h.request('PUT', `/v1/admin/api_keys/${await keyIdOf(h, key)}/limits`, {
        key: null,
        headers: admin,
        body: { concurrent_turns: 1 },
      });
      const agentId = await f.createAgent({}, key);
      // Sessions first, then the turns in quick succession: the other key's turn second, while the first runs.
      const sessions = [];
      for (let i = 0; i < 3; i += 1) sessions.push(await f.createSession(agentId, key));
      const freeSession = await f.createSession(agentId, other);
      const text = 'sleep 300\nDone.';
      const limited = [{ sessionId: sessions[0] ?? '', id: (await f.submit(sessions[0] ?? '', text, { key })).id }];
      const free = { sessionId: freeSession, id: (await f.submit(freeSession, text, { key: other })).id };
      for (const sessionId of sessions.slice(1)) {
        limited.push({ sessionId, id: (await f.submit(sessionId, text, { key })).id });
      }
      for (const { sessionId, id } of [...limited, free]) {
        expect((await f.waitForMessage(sessionId, id, undefined, key)).status).toBe('completed');
      }
      expect(
        await mostAtOnce(
          h,
          limited.map((message) => message.id),
        ),
      ).toBe(1);
      // The other key's turn ran beside one of the limited key's.
      expect(
        await mostAtOnce(
          h,
          [...limited, free].map((message) => message.id),
        ),
      ).toBe(2);
    });

    it("counts another process's turns: a limit above this engine's slots but not the registry's is enforced", async () => {
      // This engine runs 4 turns at once; another live process (slots 10) holds 4 of the organization's sessions.
      // A limit of 5 is above this engine's slots but not above the registry's 14, so the claim counts the running
      // turns (4) and lets one more start at a time. Settling it by this engine's slots alone would run all three.
      const { orgId, key } = await h.createOrg(`turns-registry-${dialect}`);
      await h.request('PUT', `/v1/admin/organizations/${orgId}/limits`, {
        key: null,
        headers: admin,
        body: { concurrent_turns: 5 },
      });
      const agentId = await f.createAgent({}, key);
      const { db } = h.deps.storage;
      const other = `other-host:1:${randomUUID()}`;
      const now = Date.now();
      await db
        .insertInto('engine_processes')
        .values({
          id: other,
          role: 'worker',
          slots: 10,
          started_at: now,
          heartbeat_at: now,
          expires_at: now + 3600_000,
        })
        .execute();
      const held: string[] = [];
      for (let i = 0; i < 4; i += 1) held.push(await f.createSession(agentId, key));
      await db
        .updateTable('sessions')
        .set({ lease_owner: other, lease_expires_at: now + 3600_000 })
        .where('id', 'in', held)
        .execute();
      try {
        const submitted: { sessionId: string; id: string }[] = [];
        for (let i = 0; i < 3; i += 1) {
          const sessionId = await f.createSession(agentId, key);
          submitted.push({ sessionId, id: (await f.submit(sessionId, 'sleep 150\nDone.', { key })).id });
        }
        for (const { sessionId, id } of submitted) {
          expect((await f.waitForMessage(sessionId, id, undefined, key)).status).toBe('completed');
        }
        expect(
          await mostAtOnce(
            h,
            submitted.map((message) => message.id),
          ),
        ).toBe(1);
      } finally {
        await db
          .updateTable('sessions')
          .set({ lease_owner: null, lease_expires_at: null })
          .where('id', 'in', held)
          .execute();
        await db.deleteFrom('engine_processes').where('id', '=', other).execute();
      }
    });
  });

  it("starts another organization's turn within its share while one organization floods", async () => {
    // Four worker slots; organization A queues 200 turns of 100 ms in 200 sessions (5 s of work), then B one turn.
    const flood = await h.createOrg(`flood-a-${dialect}`);
    const quiet = await h.createOrg(`flood-b-${dialect}`);
    const agentA = await f.createAgent({}, flood.key);
    const agentB = await f.createAgent({}, quiet.key);
    const floodIds: string[] = [];
    for (let batch = 0; batch < 10; batch += 1) {
      const ids = await Promise.all(
        Array.from({ length: 20 }, async () => {
          const sessionId = await f.createSession(agentA, flood.key);
          return (await f.submit(sessionId, 'sleep 100\nDone.', { key: flood.key })).id as string;
        }),
      );
      floodIds.push(...ids);
    }
    const { db } = h.deps.storage;
    const notStarted = async (at?: number) => {
      let query = db
        .selectFrom('messages')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('id', 'in', floodIds);
      query =
        at === undefined
          ? query.where('status', '=', 'queued')
          : query.where((eb) => eb.or([eb('started_at', 'is', null), eb('started_at', '>', at)]));
      return Number((await query.executeTakeFirst())?.n);
    };
    const sessionB = await f.createSession(agentB, quiet.key);
    const backlog = await notStarted();
    const turnB = (await f.submit(sessionB, 'Hello.', { key: quiet.key })).id;
    const messageB = await f.waitForMessage(sessionB, turnB, undefined, quiet.key);
    expect(messageB.status).toBe('completed');
    const row = await db.selectFrom('messages').select('started_at').where('id', '=', turnB).executeTakeFirst();
    const left = await notStarted(Number(row?.started_at));
    // A real backlog when B asked, and most of it still waiting when B's turn started: B waited for a slot (a few
    // of A's turns), not for A's backlog.
    expect(backlog, "A's turns not started when B submitted").toBeGreaterThanOrEqual(100);
    expect(backlog - left, `A's turns started before B's (backlog ${backlog})`).toBeLessThan(backlog / 4);
    await waitUntil(async () => ((await notStarted()) === 0 ? true : null), {
      what: "organization A's backlog to start",
      timeoutMs: 120_000,
      everyMs: 200,
    });
    for (const id of floodIds.slice(-4)) {
      const message = await db.selectFrom('messages').select('session_id').where('id', '=', id).executeTakeFirst();
      await f.waitForMessage(String(message?.session_id), id, undefined, flood.key);
    }
  }, 180_000);
});

describe.each(dialects())('limits by default and without an admin token (%s)', (dialect) => {
  let h: Harness;
  beforeAll(async () => {
    h = await createHarness(dialect, { AGENTRY_DEFAULT_RPM: '1000', AGENTRY_DEFAULT_CONCURRENT_TURNS: '7' });
  });
  afterAll(() => h.close());

  it('answers 404 on the admin routes, with or without a token', async () => {
    const { orgId } = await h.createOrg(`no-admin-${dialect}`);
    for (const headers of [{}, admin]) {
      const response = await h.request('GET', `/v1/admin/organizations/${orgId}/limits`, { key: null, headers });
      expect(response.status, response.text).toBe(404);
      expect(json(response).error.code).toBe('route_not_found');
    }
  });

  it('applies the defaults to every organization and key, with the headers', async () => {
    const response = await h.request('GET', '/v1/organization');
    expect(json(response).limits).toEqual({
      organization: { requests_per_minute: 1000, concurrent_turns: 7 },
      api_key: { requests_per_minute: 1000, concurrent_turns: 7 },
    });
    expect(header(response, 'ratelimit-policy')).toBe('"organization";q=1000;w=60, "api_key";q=1000;w=60');
  });
});

describe.each(dialects())('agentry limits (%s)', (dialect) => {
  it(
    "sets and shows an organization's and a key's limits",
    async () => {
      const environment = testEnvironment(dialect);
      const env = { ...environment.env, AGENTRY_DEFAULT_RPM: '500' };
      try {
        expect(runCli(['orgs', 'create', 'acme'], env).status).toBe(0);
        const created = runCli(['keys', 'create', '--org', 'acme'], env);
        expect(created.status, created.stderr).toBe(0);
        const prefix = created.stdout.trim().slice(0, 12);
        const org = runCli(['limits', 'set', '--org', 'acme', '--turns', '3'], env);
        expect(org.status, org.stderr).toBe(0);
        expect(org.stdout).toBe('limits of organization acme: 500 (default) requests/min, 3 concurrent turns\n');
        const key = runCli(['limits', 'set', '--org', 'acme', '--key', prefix, '--rpm', '30'], env);
        expect(key.status, key.stderr).toBe(0);
        expect(key.stdout).toBe(`limits of key ${prefix}: 30 requests/min, unlimited concurrent turns\n`);
        const show = runCli(['limits', 'show', '--org', 'acme'], env);
        expect(show.status, show.stderr).toBe(0);
        expect(show.stdout).toMatch(/^SUBJECT\s+REQUESTS\/MIN\s+CONCURRENT TURNS\n/);
        expect(show.stdout).toMatch(/\norganization\s+500 \(default\)\s+3\n/);
        expect(show.stdout).toMatch(new RegExp(`\\nkey ${prefix}\\s+30\\s+unlimited\\n`));
        const usage = runCli(['limits', 'set', '--org', 'acme', '--turns', 'lots'], env);
        expect(usage.status).toBe(2);
        expect(usage.stderr).toContain('--turns must be a positive integer or "default"');
        const missing = runCli(['limits', 'set', '--org', 'acme', '--key', 'agk_nothere', '--rpm', '5'], env);
        expect(missing.status).toBe(1);
        expect(missing.stderr).toContain('no active key of acme matches agk_nothere');
      } finally {
        await environment.cleanup();
      }
    },
    startsTimeout(7),
  );
});

describe.each(dialects().filter((dialect) => dialect === 'postgres'))(
  'claims of a last slot at the same instant (%s)',
  (dialect) => {
    let h: Harness;
    beforeAll(async () => {
      h = await createHarness(dialect);
      // The claims are made here, by three workers at once; the harness's own engine stays out of the way.
      await h.engine.stop(5000);
    });
    afterAll(() => h.close());

    it('lets only one of them keep it', async () => {
      const f = flows(() => h);
      const { orgId, key } = await h.createOrg(`race-${dialect}`);
      await h.deps.limits.setOrganization(orgId, { concurrentTurns: 1 });
      const agentId = await f.createAgent({}, key);
      for (let i = 0; i < 6; i += 1) await f.submit(await f.createSession(agentId, key), 'Hello.', { key });
      const { db } = h.deps.storage;
      const workers = ['a', 'b', 'c'].map((name) => ({
        db,
        dialect: 'postgres' as const,
        owner: `race-${name}`,
        leaseMs: 60_000,
        turnLimits: h.deps.limits.turnLimits,
      }));
      // Live in the process registry, as an engine is: a lease of theirs is not taken over.
      const started = Date.now();
      await db
        .insertInto('engine_processes')
        .values(
          workers.map((worker) => ({
            id: worker.owner,
            role: 'worker',
            started_at: started,
            heartbeat_at: started,
            expires_at: started + 3600_000,
          })),
        )
        .execute();
      let kept = 0;
      for (let round = 0; round < 10; round += 1) {
        const now = Date.now();
        const leases = (await Promise.all(workers.map((worker) => claimSession(worker, now)))).filter(
          (lease) => lease !== null,
        );
        expect(leases.length, `round ${round}`).toBeLessThanOrEqual(1);
        const leased = await db
          .selectFrom('sessions')
          .select('id')
          .where('org_id', '=', orgId)
          .where('lease_owner', 'is not', null)
          .execute();
        expect(leased.length, `round ${round}`).toBe(leases.length);
        kept += leases.length;
        for (const lease of leases) {
          const worker = workers.find((candidate) => candidate.owner === lease.owner);
          if (worker !== undefined) await handOver(worker, lease);
        }
      }
      // The slot was taken, not refused every time.
      expect(kept).toBeGreaterThan(0);
    });
  },
);
