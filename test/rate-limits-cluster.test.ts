/**
 * Limits in cluster mode, with real processes on one Postgres schema: two server processes enforce one limit of
 * requests per minute together (counted in Redis; and, in a deployment without Redis, in Postgres), and one limit
 * of concurrent turns across their engines. The limits are set by `agentry limits set` while the servers run, and
 * by the admin API of either process.
 *
 * Needs Postgres, and Redis (127.0.0.1:6379, or AGENTRY_TEST_REDIS_URL) for the Redis case. Skipped with a notice
 * when they are unreachable, except under CI=true, where their absence fails the run.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { httpClient, waitUntil } from './helpers/fixtures.ts';
import { testEnvironment, testKey } from './helpers/harness.ts';
import { runCli, type ServerProcess, startServerProcess, startsTimeout } from './helpers/server-process.ts';

const REDIS_URL = process.env.AGENTRY_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const ADMIN_TOKEN = 'cluster-operator-token';

async function redisReachable(): Promise<boolean> {
  const client = new Redis(REDIS_URL, { lazyConnect: true, connectTimeout: 2000, maxRetriesPerRequest: 0 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return (await client.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    client.disconnect();
  }
}

/** Waits, if needed, until at least 15 s of the current minute are left: a burst then counts in one window. */
async function roomInWindow(): Promise<void> {
  const left = 60_000 - (Date.now() % 60_000);
  if (left < 15_000) await new Promise((resolve) => setTimeout(resolve, left + 200));
}

interface Deployment {
  servers: ServerProcess[];
  env: Record<string, string>;
  key: string;
  /** The key's id, read before any limit applies to it. */
  keyId: string;
  cleanup(): Promise<void>;
}

/** Two server processes (role all: API and engine) on a fresh schema, with Redis or without. */
async function deploy(withRedis: boolean): Promise<Deployment> {
  const environment = testEnvironment('postgres');
  const key = testKey();
  const env = {
    ...environment.env,
    ...(withRedis ? { REDIS_URL } : {}),
    AGENTRY_BOOTSTRAP_KEY: key,
    AGENTRY_ADMIN_TOKEN: ADMIN_TOKEN,
    AGENTRY_POLL_MS: '200',
    AGENTRY_LEASE_MS: '3600000',
    LOG_LEVEL: 'warn',
  };
  // The first process migrates the fresh schema and creates the organization.
  const first = await startServerProcess(env);
  const second = await startServerProcess(env);
  return {
    servers: [first, second],
    env,
    key,
    keyId: await keyId(first.url, key),
    async cleanup() {
      await Promise.all([first, second].map((server) => server.stop('SIGKILL')));
      await environment.cleanup();
    },
  };
}

const admin = (url: string) => httpClient(url, ADMIN_TOKEN);

async function query<T extends pg.QueryResultRow>(deployment: Deployment, text: string, values: unknown[]) {
  const sql = new pg.Client({
    connectionString: deployment.env.DATABASE_URL,
    options: `-c search_path=${deployment.env.AGENTRY_DATABASE_SCHEMA}`,
  });
  await sql.connect();
  try {
    return (await sql.query<T>(text, values)).rows;
  } finally {
    await sql.end();
  }
}

/** The database's request windows of a key. */
async function windowRows(deployment: Deployment, keyId: string): Promise<number> {
  return (await query(deployment, 'select bucket from rate_windows where bucket = $1', [`k:${keyId}`])).length;
}

async function keyId(url: string, key: string): Promise<string> {
  const response = await httpClient(url, key)<{ api_key: { id: string } }>('GET', '/v1/organization');
  expect(response.status).toBe(200);
  return response.body.api_key.id;
}

/** Ten requests alternating between the processes succeed, one count for both; the next (to either) is refused. */
async function expectSharedLimit(deployment: Deployment): Promise<void> {
  const [first, second] = deployment.servers.map((server) => server.url);
  const id = deployment.keyId;
  const quota = 10;
  await roomInWindow();
  const set = await admin(second ?? '')('PUT', `/v1/admin/api_keys/${id}/limits`, { requests_per_minute: quota });
  expect(set.status).toBe(200);
  const send = (url: string | undefined) =>
    fetch(`${url}/v1/agents`, { headers: { authorization: `Bearer ${deployment.key}` } });
  // The other process applies it as soon as it hears of the change (its key cache is emptied); each probe counts.
  let probes = 0;
  await waitUntil(
    async () => {
      probes += 1;
      return (await send(first)).headers.get('ratelimit-policy') === null ? null : true;
    },
    { what: 'the first process to apply the limit', timeoutMs: 5000 },
  );
  const statuses: number[] = [];
  const remaining: number[] = [];
  for (let i = probes; i < quota; i += 1) {
    const response = await send(i % 2 === 0 ? second : first);
    statuses.push(response.status);
    remaining.push(Number(/r=(\d+)/.exec(response.headers.get('ratelimit') ?? '')?.[1]));
  }
  expect(statuses.every((status) => status === 200)).toBe(true);
  // One count for both processes: what is left goes down by one per request, whichever process answers.
  expect(remaining).toEqual(Array.from({ length: quota - probes }, (_, i) => quota - probes - 1 - i));
  for (const url of [first, second]) {
    const refused = await send(url);
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('rate_limit_exceeded');
  }
}

describe('limits across two processes', () => {
  let skip: string | null = null;
  beforeAll(async () => {
    const problems: string[] = [];
    if (inject('postgresUrl') === null) problems.push('Postgres is unreachable or disabled');
    if (!(await redisReachable())) problems.push(`Redis at ${REDIS_URL} is unreachable`);
    if (problems.length === 0) return;
    skip = problems.join('; ');
    if (process.env.CI === 'true') throw new Error(`cluster limit tests need Postgres and Redis: ${skip}`);
    process.stdout.write(`\n[agentry] NOTICE: cluster limit tests SKIPPED: ${skip}\n\n`);
  });

  describe('with Redis', () => {
    let deployment: Deployment | null = null;
    beforeAll(async () => {
      if (skip === null) deployment = await deploy(true);
    }, startsTimeout(2));
    afterAll(async () => deployment?.cleanup());

    it('counts the requests of both processes against one limit per minute', async (context) => {
      if (deployment === null) return context.skip(skip ?? 'no deployment');
      await expectSharedLimit(deployment);
      // Counted in Redis, not in the database.
      const redis = new Redis(REDIS_URL);
      try {
        expect(await redis.keys(`*rate:k:${deployment.keyId}:*`)).toHaveLength(1);
      } finally {
        redis.disconnect();
      }
      expect(await windowRows(deployment, deployment.keyId)).toBe(0);
    }, 150_000);

    it(
      "runs at most the organization's concurrent turns across both engines, set by the CLI while they run",
      async (context) => {
        if (deployment === null) return context.skip(skip ?? 'no deployment');
        const { env, key } = deployment;
        const id = deployment.keyId;
        // The previous test's limit per minute would refuse this one's requests.
        const clear = await admin(deployment.servers[0]?.url ?? '')('PUT', `/v1/admin/api_keys/${id}/limits`, {
          requests_per_minute: null,
        });
        expect(clear.status).toBe(200);
        const set = runCli(['limits', 'set', '--org', 'default', '--turns', '1'], env);
        expect(set.status, set.stderr).toBe(0);
        expect(set.stdout).toContain('1 concurrent turns');
        const show = runCli(['limits', 'show', '--org', 'default'], env);
        expect(show.status, show.stderr).toBe(0);
        expect(show.stdout).toMatch(/organization\s+unlimited\s+1\n/);
        const bad = runCli(['limits', 'set', '--org', 'default', '--rpm', '0'], env);
        expect(bad.status).toBe(2);
        expect(bad.stderr).toContain('--rpm must be a positive integer');

        const [first, second] = deployment.servers.map((server) => httpClient(server.url, key));
        if (first === undefined || second === undefined) throw new Error('two servers expected');
        const agent = await first<{ agent: { id: string } }>('POST', '/v1/agents', { name: 'limited' });
        expect(agent.status).toBe(201);
        const submitted: string[] = [];
        for (let i = 0; i < 4; i += 1) {
          const api = i % 2 === 0 ? first : second;
          const session = await api<{ session: { id: string } }>('POST', '/v1/sessions', {
            agentId: agent.body.agent.id,
          });
          const message = await api<{ id: string }>(
            'POST',
            `/v1/sessions/${session.body.session.id}/messages`,
            { parts: [{ type: 'text', text: 'sleep 300\nDone.' }] },
            { 'Idempotency-Key': randomUUID() },
          );
          expect(message.status).toBe(202);
          submitted.push(message.body.id);
        }
        const sql = new pg.Client({
          connectionString: env.DATABASE_URL,
          options: `-c search_path=${env.AGENTRY_DATABASE_SCHEMA}`,
        });
        await sql.connect();
        try {
          const rows = await waitUntil(
            async () => {
              const result = await sql.query<{ status: string; started_at: string; completed_at: string }>(
                'select status, started_at, completed_at from messages where id = any($1)',
                [submitted],
              );
              return result.rows.every((row) => row.status === 'completed') ? result.rows : null;
            },
            { what: 'the four turns to complete', timeoutMs: 60_000, everyMs: 100 },
          );
          const spans = rows
            .map((row) => [Number(row.started_at), Number(row.completed_at)] as const)
            .sort((a, b) => a[0] - b[0]);
          // One at a time: each starts once the one before has ended.
          for (let i = 1; i < spans.length; i += 1) {
            expect(spans[i]?.[0]).toBeGreaterThanOrEqual(spans[i - 1]?.[1] ?? 0);
          }
        } finally {
          await sql.end();
          runCli(['limits', 'set', '--org', 'default', '--turns', 'default'], env);
        }
      },
      startsTimeout(3),
    );
  });

  describe('without Redis: counted in Postgres', () => {
    let deployment: Deployment | null = null;
    beforeAll(async () => {
      if (skip === null) deployment = await deploy(false);
    }, startsTimeout(2));
    afterAll(async () => deployment?.cleanup());

    it('counts the requests of both processes against one limit per minute', async (context) => {
      if (deployment === null) return context.skip(skip ?? 'no deployment');
      await expectSharedLimit(deployment);
      expect(await windowRows(deployment, deployment.keyId)).toBe(1);
    }, 150_000);
  });
});
