/**
 * Postgres connections come and go; the processes stay. Real cluster processes (an API process and a worker, on one
 * Postgres schema and one Redis) reach Postgres through a TCP proxy of the test's own (helpers/fault-proxy.ts), which
 * makes the outages: backends terminated with pg_terminate_backend, a partition (black hole), connections reset,
 * connections refused. Through all of it no process exits, API requests that need the database get 503 with
 * Retry-After within AGENTRY_DATABASE_TIMEOUT_MS-derived bounds (never a hang, never 500), /readyz says so, and once
 * the database is back every accepted turn completes exactly once, schedule ticks keep firing once each and
 * webhooks are delivered. A process started while Postgres refuses connections waits for it, then serves. Redis goes
 * through a proxy too: an outage of it leaves every process up and ready, and turns run on the database poll.
 *
 * Needs Postgres and Redis (127.0.0.1:6379, or AGENTRY_TEST_REDIS_URL); skipped with a notice without them.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import { type FaultMode, type FaultProxy, startFaultProxy } from './helpers/fault-proxy.ts';
import { type Json, TERMINAL_STATUSES, waitUntil } from './helpers/fixtures.ts';
import { testEnvironment, testKey } from './helpers/harness.ts';
import { REDIS_URL, redisReachable } from './helpers/redis.ts';
import {
  CRASH_TEST_ENV,
  launchServerProcess,
  type ServerProcess,
  startServerProcess,
} from './helpers/server-process.ts';
import { type Receiver, startReceiver } from './helpers/webhook-receiver.ts';

/** The servers' database bound: a request needing the database waits for a connection and for one statement. */
const DATABASE_TIMEOUT_MS = 2000;
/**
 * Longer than the bound with room for a loaded machine: a request made as the partition begins that is still
 * unanswered when it ends was hanging, not bounded.
 */
const BLACKHOLE_MS = 12_000;
const RESET_MS = 5000;
const REFUSE_MS = 5000;

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let unavailable: string | null = 'not checked yet';
beforeAll(async () => {
  const problems = [
    ...(inject('postgresUrl') === null ? ['Postgres is unreachable or disabled'] : []),
    ...((await redisReachable()) ? [] : [`Redis at ${REDIS_URL} is unreachable`]),
  ];
  unavailable = problems.length === 0 ? null : problems.join('; ');
  if (unavailable === null) return;
  if (process.env.CI === 'true') throw new Error(`the Postgres outage tests need Postgres and Redis: ${unavailable}`);
  process.stdout.write(`\n[agentry] NOTICE: Postgres outage tests SKIPPED: ${unavailable}\n\n`);
});
function requireServices(context: { skip: (note: string) => never }): void {
  if (unavailable !== null) context.skip(unavailable);
}

/** The host and port a Postgres URL names. */
function targetOf(url: string): { host: string; port: number } {
  const parsed = new URL(url);
  return { host: parsed.hostname, port: Number(parsed.port || 5432) };
}

/** `url` with its host and port replaced by the proxy's. */
function through(url: string, proxy: FaultProxy): string {
  const parsed = new URL(url);
  parsed.host = `127.0.0.1:${proxy.port}`;
  return parsed.toString();
}

interface Answer {
  status: number;
  retryAfter: string | null;
  body: Json | null;
  ms: number;
}

/**
 * One call to a server process; never retried. With `giveUpMs`, an answer that has not come by then is recorded as
 * status 0 (a hang) instead of waited for.
 */
async function call(
  base: string,
  key: string,
  method: string,
  path: string,
  body?: unknown,
  giveUpMs?: number,
): Promise<Answer> {
  const started = Date.now();
  try {
    const response = await fetch(`${base}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${key}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json', 'idempotency-key': randomUUID() }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      ...(giveUpMs === undefined ? {} : { signal: AbortSignal.timeout(giveUpMs) }),
    });
    const text = await response.text();
    return {
      status: response.status,
      retryAfter: response.headers.get('retry-after'),
      body: text === '' ? null : (JSON.parse(text) as Json),
      ms: Date.now() - started,
    };
  } catch (error) {
    if (!(error instanceof DOMException && error.name === 'TimeoutError')) throw error;
    return { status: 0, retryAfter: null, body: null, ms: Date.now() - started };
  }
}

/** A call as a well-behaved client makes it: a 503 is tried again after its Retry-After (a loaded machine's database may be slow). */
async function served(base: string, key: string, method: string, path: string, body?: unknown): Promise<Json> {
  return waitUntil(
    async () => {
      const answer = await call(base, key, method, path, body);
      if (answer.status === 503) {
        await pause(Number(answer.retryAfter ?? '1') * 1000);
        return null;
      }
      expect(answer.status, `${method} ${path}: ${JSON.stringify(answer.body)}`).toBeLessThan(300);
      return answer.body ?? {};
    },
    { what: `${method} ${path}` },
  );
}

/** Every process still running: none exited. */
function expectAlive(processes: ServerProcess[]): void {
  for (const server of processes) {
    expect({ exitCode: server.child.exitCode, signal: server.child.signalCode }, server.output().slice(-3000)).toEqual({
      exitCode: null,
      signal: null,
    });
  }
}

describe('Postgres connections come and go: API and worker processes stay and tell the truth', () => {
  beforeEach(requireServices);
  const key = testKey();
  let environment: ReturnType<typeof testEnvironment> | null = null;
  let proxy: FaultProxy | null = null;
  /** Between the processes and Redis, for the Redis outage. */
  let redisProxy: FaultProxy | null = null;
  let receiver: Receiver | null = null;
  let apiProcess: ServerProcess | null = null;
  let worker: ServerProcess | null = null;
  let sql: pg.Client | null = null;
  let agentId = '';

  const api = () => {
    if (apiProcess === null) throw new Error('no API process');
    return apiProcess.url;
  };
  const processes = () => [apiProcess, worker].filter((server) => server !== null);

  beforeAll(async () => {
    if (unavailable !== null) return;
    environment = testEnvironment('postgres');
    const direct = environment.env.DATABASE_URL ?? '';
    const redis = new URL(REDIS_URL);
    [proxy, redisProxy, receiver] = await Promise.all([
      startFaultProxy(targetOf(direct)),
      startFaultProxy({ host: redis.hostname, port: Number(redis.port || 6379) }),
      startReceiver(),
    ]);
    const env = {
      ...environment.env,
      ...CRASH_TEST_ENV,
      LOG_LEVEL: 'info',
      DATABASE_URL: through(direct, proxy),
      REDIS_URL: through(REDIS_URL, redisProxy),
      AGENTRY_BOOTSTRAP_KEY: key,
      AGENTRY_DATABASE_TIMEOUT_MS: String(DATABASE_TIMEOUT_MS),
      AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true',
      AGENTRY_WEBHOOK_RETRY_BASE_MS: '200',
    };
    apiProcess = await startServerProcess({ ...env, AGENTRY_ROLE: 'api' });
    worker = await startServerProcess({ ...env, AGENTRY_ROLE: 'worker' });
    sql = new pg.Client({
      connectionString: direct,
      options: `-c search_path=${environment.env.AGENTRY_DATABASE_SCHEMA}`,
    });
    await sql.connect();
    agentId = (await served(api(), key, 'POST', '/v1/agents', { name: 'outages' })).agent.id;
    await served(api(), key, 'POST', '/v1/webhook_endpoints', {
      name: 'turns',
      url: `${receiver.url}/turns`,
      event_types: ['agent.session.turn.completed'],
    });
  });

  afterAll(async () => {
    await sql?.end();
    await Promise.all(processes().map((server) => server.stop('SIGKILL')));
    await Promise.all([proxy?.close(), redisProxy?.close(), receiver?.close()]);
    await environment?.cleanup();
  });

  async function accept(count: number, script: (n: number) => string) {
    const accepted: { sessionId: string; messageId: string; reply: string }[] = [];
    for (let n = 0; n < count; n++) {
      const sessionId = (await served(api(), key, 'POST', '/v1/sessions', { agentId })).session.id;
      const reply = `reply ${randomUUID().slice(0, 8)}`;
      const message = await served(api(), key, 'POST', `/v1/sessions/${sessionId}/messages`, {
        parts: [{ type: 'text', text: `${script(n)}\n${reply}` }],
      });
      accepted.push({ sessionId, messageId: message.id, reply });
    }
    return accepted;
  }

  /** Every accepted turn completed with its reply, and each ran once: one reply in the log, one webhook at least. */
  async function expectCompletedOnce(accepted: { sessionId: string; messageId: string; reply: string }[]) {
    for (const turn of accepted) {
      const message = await waitUntil(
        async () => {
          const found = (await served(api(), key, 'GET', `/v1/sessions/${turn.sessionId}/messages/${turn.messageId}`))
            .message;
          return TERMINAL_STATUSES.includes(found.status) ? found : null;
        },
        { what: `message ${turn.messageId} to end` },
      );
      expect(message.status, JSON.stringify(message.error)).toBe('completed');
      expect(message.response?.parts[0]?.text).toBe(turn.reply);
    }
    const { rows } = (await sql?.query<{ message_id: string; n: number }>(
      "select message_id, count(*)::int as n from items where type = 'assistant_message' and message_id = any($1) group by message_id",
      [accepted.map((turn) => turn.messageId)],
    )) ?? { rows: [] };
    expect(rows).toHaveLength(accepted.length);
    for (const row of rows) expect(row.n, `replies of ${row.message_id}`).toBe(1);
    const ids = new Set(accepted.map((turn) => turn.messageId));
    await receiver?.waitFor((received) => {
      const delivered = new Set(received.map((request) => (JSON.parse(request.body) as Json).data?.id));
      return [...ids].every((id) => delivered.has(id));
    }, 'a turn.completed webhook for every turn');
  }

  it('(a) survives pg_terminate_backend of all its connections, again and again, while turns run', async () => {
    if (proxy === null || sql === null) throw new Error('not started');
    // Turns that end one after another during the kills: their writes meet connections as they are terminated.
    const accepted = await accept(8, (n) => `sleep ${200 + n * 250}`);
    const started = Date.now();
    let terminated = 0;
    while (Date.now() - started < 5000) {
      expectAlive(processes());
      // Only the backends of the proxy's connections: other tests share this Postgres.
      const ends = proxy.upstreamEnds();
      const { rows } = await sql.query<{ n: number }>(
        `select count(pg_terminate_backend(a.pid))::int as n from pg_stat_activity a
           join unnest($1::text[], $2::int[]) as proxied(address, port)
             on host(a.client_addr) = proxied.address and a.client_port = proxied.port`,
        [ends.map((end) => end.address), ends.map((end) => end.port)],
      );
      terminated += rows[0]?.n ?? 0;
      await pause(100);
    }
    expect(terminated).toBeGreaterThan(0);
    expectAlive(processes());
    await expectCompletedOnce(accepted);
    expectAlive(processes());
    process.stdout.write(
      `[postgres-outage] (a) ${terminated} backends terminated in 5 s: 0 exits, ${accepted.length} turns completed once\n`,
    );
  });

  it('(b) answers 503 with Retry-After within the bound through a partition, resets and refusals; then every turn completes once', async () => {
    if (proxy === null || sql === null || worker === null) throw new Error('not started');
    const outageProxy = proxy;
    const schedule = await served(api(), key, 'POST', '/v1/schedules', {
      name: 'ticks',
      agent_id: agentId,
      input: 'sleep 300\ntick',
      interval_seconds: 2,
    });
    // Turns that run across the outage: asleep on the worker when it begins, and persisting during it.
    const accepted = await accept(4, (n) => `sleep ${1000 + n * 1500}`);
    const { messageId, sessionId } = accepted[0] ?? { messageId: '', sessionId: '' };
    await pause(500);

    const probes: { mode: FaultMode; what: string; answer: Answer }[] = [];
    const probe = async (mode: FaultMode, what: string, run: () => Promise<Answer>) => {
      probes.push({ mode, what, answer: await run() });
    };
    const outageStarted = Date.now();
    for (const [mode, lasts] of [
      ['blackhole', BLACKHOLE_MS],
      ['reset', RESET_MS],
      ['refuse', REFUSE_MS],
    ] as const) {
      await outageProxy.set(mode);
      const phaseEnds = Date.now() + lasts;
      // Made as the phase begins, all at once: each must be answered before the phase ends (status 0 if not).
      const post = { parts: [{ type: 'text', text: 'x' }] };
      await Promise.all([
        probe(mode, 'read a message', () =>
          call(api(), key, 'GET', `/v1/sessions/${sessionId}/messages/${messageId}`, undefined, lasts),
        ),
        probe(mode, 'post a message', () =>
          call(api(), key, 'POST', `/v1/sessions/${sessionId}/messages`, post, lasts),
        ),
        probe(mode, 'list agents', () => call(api(), key, 'GET', '/v1/agents', undefined, lasts)),
        probe(mode, 'API readyz', () => call(api(), key, 'GET', '/readyz', undefined, lasts)),
        probe(mode, 'worker readyz', () => call(worker?.url ?? '', key, 'GET', '/readyz', undefined, lasts)),
      ]);
      for (const server of processes()) expect((await call(server.url, key, 'GET', '/healthz')).status).toBe(200);
      await pause(Math.max(0, phaseEnds - Date.now()));
    }
    await outageProxy.set('pass');
    const outageMs = Date.now() - outageStarted;
    expectAlive(processes());

    for (const { mode, what, answer } of probes) {
      const label = `${what} during ${mode}: ${JSON.stringify(answer.body)} after ${answer.ms} ms`;
      expect(answer.status, label).toBe(503);
      expect(answer.body?.error?.code, label).toBe('service_unavailable');
      expect(Number(answer.retryAfter), label).toBeGreaterThan(0);
    }
    // Ready again once the database answers, without a restart.
    for (const server of processes()) {
      await waitUntil(async () => ((await call(server.url, key, 'GET', '/readyz')).status === 200 ? true : null), {
        what: `${server.url}/readyz 200 after the outage`,
        everyMs: 200,
      });
    }
    const after = await accept(2, () => 'sleep 100');
    await expectCompletedOnce([...accepted, ...after]);

    // The schedule kept ticking after the outage, and no tick ran twice.
    const runsAfter = await waitUntil(
      async () => {
        const { data } = await served(api(), key, 'GET', `/v1/schedules/${schedule.id}/runs?limit=100`);
        const later = (data as Json[]).filter((run) => run.created_at * 1000 > outageStarted + outageMs);
        return later.some((run) => run.status === 'completed') ? (data as Json[]) : null;
      },
      { what: 'a schedule run after the outage' },
    );
    const ticks = runsAfter.filter((run) => run.trigger === 'scheduled').map((run) => run.scheduled_at);
    expect(new Set(ticks).size).toBe(ticks.length);
    expect(runsAfter.filter((run) => run.status === 'failed')).toEqual([]);
    await served(api(), key, 'POST', `/v1/schedules/${schedule.id}`, { enabled: false });
    // What an operator reads meanwhile: each kind of failure once, then at most every 10 s; not a line per poll.
    const outageLines = processes().map(
      (server) =>
        server
          .output()
          .split('\n')
          .filter((line) => line.startsWith('{'))
          .map((line) => JSON.parse(line) as Json)
          .filter((line) => line.level >= 40 && line.time >= outageStarted && line.time <= outageStarted + outageMs)
          .length,
    );
    for (const count of outageLines) expect(count).toBeLessThan(100);
    expectAlive(processes());
    const counts = Object.fromEntries(
      (['blackhole', 'reset', 'refuse'] as const).map((mode) => [
        mode,
        probes.filter((entry) => entry.mode === mode).map((entry) => entry.answer.ms),
      ]),
    );
    process.stdout.write(
      `[postgres-outage] (b) ${Math.round(outageMs / 1000)} s outage: 0 exits; warnings and errors logged (API, worker) ${outageLines.join(', ')}; 503 answers in ms ${JSON.stringify(counts)}; ${accepted.length + after.length} turns completed once; ${ticks.length} schedule ticks, none twice\n`,
    );
  });

  it('(c) a process started while Postgres refuses connections waits for it, says so, then serves', async () => {
    const fresh = testEnvironment('postgres');
    const refusing = await startFaultProxy(targetOf(fresh.env.DATABASE_URL ?? ''));
    await refusing.set('refuse');
    const freshKey = testKey();
    const server = launchServerProcess({
      ...fresh.env,
      ...CRASH_TEST_ENV,
      LOG_LEVEL: 'info',
      DATABASE_URL: through(fresh.env.DATABASE_URL ?? '', refusing),
      REDIS_URL,
      AGENTRY_BOOTSTRAP_KEY: freshKey,
      AGENTRY_DATABASE_TIMEOUT_MS: String(DATABASE_TIMEOUT_MS),
    });
    try {
      // It listens, and logs every failed attempt with the reason and where it listens.
      const waiting = await waitUntil(
        async () => {
          if (server.child.exitCode !== null) throw new Error(`the server exited: ${server.output().slice(-3000)}`);
          const lines = server
            .output()
            .split('\n')
            .filter((line) => line.includes('cannot reach the database'));
          return lines.length >= 2 ? lines.map((line) => JSON.parse(line) as Json) : null;
        },
        { what: 'two logged attempts to reach the database' },
      );
      expect(waiting[0]?.msg).toContain('ECONNREFUSED');
      const url = String(waiting[0]?.url);
      for (const path of ['/healthz', '/readyz', '/v1/agents']) {
        const answer = await call(url, freshKey, 'GET', path);
        expect(answer.status, path).toBe(503);
        expect(answer.retryAfter, path).not.toBeNull();
        expect(answer.body?.error?.message, path).toContain('waiting for the database');
      }
      expect(server.child.exitCode).toBeNull();

      await refusing.set('pass');
      expect(await server.listening).toBe(url);
      const agent = (await served(url, freshKey, 'POST', '/v1/agents', { name: 'late' })).agent.id;
      const session = (await served(url, freshKey, 'POST', '/v1/sessions', { agentId: agent })).session.id;
      const message = await served(url, freshKey, 'POST', `/v1/sessions/${session}/messages`, {
        parts: [{ type: 'text', text: 'hello after the wait' }],
      });
      const done = await waitUntil(
        async () => {
          const found = (await served(url, freshKey, 'GET', `/v1/sessions/${session}/messages/${message.id}`)).message;
          return TERMINAL_STATUSES.includes(found.status) ? found : null;
        },
        { what: 'the first turn after the wait' },
      );
      expect(done.status).toBe('completed');
      process.stdout.write(
        `[postgres-outage] (c) started while Postgres refused: ${waiting.length}+ logged attempts, then served\n`,
      );
    } finally {
      await server.stop('SIGKILL');
      await refusing.close();
      await fresh.cleanup();
    }
  });

  it('(d) stays up and ready through a Redis outage: turns are found by polling and complete once', async () => {
    if (redisProxy === null) throw new Error('not started');
    const before = await accept(3, (n) => `sleep ${500 + n * 1000}`);
    const during: typeof before = [];
    for (const [mode, lasts] of [
      ['blackhole', 4000],
      ['reset', 3000],
      ['refuse', 3000],
    ] as const) {
      await redisProxy.set(mode);
      const phaseEnds = Date.now() + lasts;
      // Redis carries signals only: the API still accepts, and the worker finds the turn at its next poll.
      during.push(...(await accept(1, () => 'sleep 100')));
      for (const server of processes()) {
        expect((await call(server.url, key, 'GET', '/readyz', undefined, lasts)).status).toBe(200);
      }
      await pause(Math.max(0, phaseEnds - Date.now()));
    }
    await redisProxy.set('pass');
    expectAlive(processes());
    await expectCompletedOnce([...before, ...during]);
    expectAlive(processes());
  });

  it('(e) after a claim fails on the way back, hands over a lease it took without knowing and runs its turn', async () => {
    if (proxy === null || sql === null) throw new Error('not started');
    // What a claim leaves when its COMMIT reached Postgres and the answer did not: the worker's own live lease on a
    // session it does not run, which no process may claim until the lease lapses (an hour here).
    const sessionId = (await served(api(), key, 'POST', '/v1/sessions', { agentId })).session.id;
    const { rows } = await sql.query<{ id: string }>("select id from engine_processes where role = 'worker'");
    expect(rows).toHaveLength(1);
    await sql.query(
      'update sessions set lease_owner = $1, lease_expires_at = $2, lease_token = lease_token + 1 where id = $3',
      [rows[0]?.id, Date.now() + 3600_000, sessionId],
    );
    const message = await served(api(), key, 'POST', `/v1/sessions/${sessionId}/messages`, {
      parts: [{ type: 'text', text: 'orphaned' }],
    });
    await pause(1000);
    const waiting = await served(api(), key, 'GET', `/v1/sessions/${sessionId}/messages/${message.id}`);
    expect(waiting.message.status).toBe('queued');
    // A moment of resets: the worker's polls fail, and it cannot know whether a claim went through.
    await proxy.set('reset');
    await pause(1000);
    await proxy.set('pass');
    await expectCompletedOnce([{ sessionId, messageId: message.id, reply: 'orphaned' }]);
    expectAlive(processes());
  });
});
