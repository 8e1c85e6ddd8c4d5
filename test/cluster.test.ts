/**
 * Cluster mode with real processes: one API process (no engine) and two workers on one Postgres schema and one
 * Redis. Turns posted to the API run on the workers; live events, wake-ups and interrupts cross processes over
 * Redis; a worker killed with kill -9 has its turns taken over by the other once it drops out of the process
 * registry. Also the Redis bus on its own: two instances on one Redis, each handler once per message.
 *
 * Needs Postgres and Redis (127.0.0.1:6379, or AGENTRY_TEST_REDIS_URL). Skipped with a notice when either is
 * unreachable, except under CI=true, where their absence fails the run.
 */

import { randomBytes, randomUUID } from 'node:crypto';
import { connect, createServer, type Socket } from 'node:net';
import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import OpenAI from 'openai';
import type { FunctionTool, ResponseStreamEvent } from 'openai/resources/responses/responses';
import pg from 'pg';
import pino from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import type { Bus } from '../src/bus/bus.ts';
import { channelOf, createRedisBus, deploymentChannelPrefix } from '../src/bus/redis-bus.ts';
import type { DeltaEvent } from '../src/events/session-events.ts';
import { WAIT_MS } from './helpers/deadlines.ts';
import { httpClient, TERMINAL_STATUSES, textParts, waitUntil } from './helpers/fixtures.ts';
import { testEnvironment, testKey } from './helpers/harness.ts';
import { startMcpServerProcess } from './helpers/mcp-server-process.ts';
import { type ServerProcess, startServerProcess, startsTimeout } from './helpers/server-process.ts';
import {
  agentWithSlowTools,
  expectEachSlowCallOnce,
  expectTurnsCompleted,
  type SlowTurn,
  slowCallsScript,
  startSlowTurn,
  waitForSlowCalls,
} from './helpers/slow-calls.ts';

const REDIS_URL = process.env.AGENTRY_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
// Default poll and process-registry settings: takeover after a crash must be quick without tuning. A lease of an
// hour: a dead worker's turns can then be taken over only through the process registry (its row lapses after
// AGENTRY_PROCESS_TTL_MS, 2.5 s), never by waiting out a lease, however slow the machine.
// Loopback destinations allowed: the agents of the rolling restart test call an MCP server process on this host.
const CLUSTER_ENV = {
  REDIS_URL,
  LOG_LEVEL: 'info',
  AGENTRY_LEASE_MS: '3600000',
  AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true',
};

let unavailable: string | null = 'not checked yet';

async function redisProblem(): Promise<string | null> {
  const client = new Redis(REDIS_URL, {
    lazyConnect: true,
    connectTimeout: 2000,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  let cause: unknown = null;
  client.on('error', (error: unknown) => {
    cause = error;
  });
  try {
    await client.connect();
    return (await client.ping()) === 'PONG' ? null : 'PING did not answer PONG';
  } catch (error) {
    const reason = cause ?? error;
    return reason instanceof Error ? reason.message : String(reason);
  } finally {
    client.disconnect();
  }
}

beforeAll(async () => {
  const problems: string[] = [];
  if (inject('postgresUrl') === null) problems.push('Postgres is unreachable or disabled');
  const redis = await redisProblem();
  if (redis !== null) problems.push(`Redis at ${REDIS_URL} is unreachable (${redis})`);
  unavailable = problems.length === 0 ? null : problems.join('; ');
  if (unavailable === null) return;
  if (process.env.CI === 'true') throw new Error(`cluster tests need Postgres and Redis under CI: ${unavailable}`);
  process.stdout.write(`\n[agentry] NOTICE: cluster tests SKIPPED: ${unavailable}\n\n`);
});

/** Skips a test needing Postgres and Redis when they are missing (outside CI, where beforeAll already threw). */
function requireServices(context: { skip: (note: string) => never }): void {
  if (unavailable !== null) context.skip(unavailable);
}

interface MessageView {
  id: string;
  status: string;
  response: { parts: { type: string; text: string }[] } | null;
}

function collectingLogger() {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(...chunk.toString().split('\n').filter(Boolean));
      done();
    },
  });
  return { logger: pino({ level: 'info' }, destination), lines };
}

/**
 * A TCP proxy to Redis that can simulate an outage: down() drops every connection and refuses new ones. With
 * `delayMs`, what the client sends reaches Redis that much later (a slow link).
 */
async function tcpProxy(target: URL, delayMs = 0) {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    const upstream = connect(Number(target.port || 6379), target.hostname);
    for (const end of [socket, upstream]) {
      sockets.add(end);
      end.on('close', () => sockets.delete(end));
      end.on('error', () => undefined);
    }
    if (delayMs === 0) socket.pipe(upstream);
    else socket.on('data', (chunk) => setTimeout(() => upstream.write(chunk), delayMs));
    upstream.pipe(socket);
  });
  const listen = (port: number) =>
    new Promise<number>((resolve) => {
      server.listen(port, '127.0.0.1', () => {
        const address = server.address();
        resolve(typeof address === 'object' && address !== null ? address.port : port);
      });
    });
  const port = await listen(0);
  const stop = () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      for (const socket of sockets) socket.destroy();
    });
  return { port, down: stop, up: () => listen(port), close: stop };
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Opens a session stream and reads its frames as they come: `{id, data}` per frame (comments left out) until
 * `controller` aborts it.
 */
async function sessionStream(baseUrl: string, key: string, sessionId: string) {
  const controller = new AbortController();
  const response = await fetch(`${baseUrl}/v1/sessions/${sessionId}/stream`, {
    headers: { authorization: `Bearer ${key}`, accept: 'text/event-stream' },
    signal: controller.signal,
  });
  expect(response.status).toBe(200);
  const frames: { id: string; data: Record<string, any> }[] = [];
  const reading = (async () => {
    const reader = response.body?.getReader();
    if (reader === undefined) return;
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        buffer += decoder.decode(value, { stream: true });
        let end = buffer.indexOf('\n\n');
        while (end >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const data = block.split('\n').find((line) => line.startsWith('data: '));
          if (data !== undefined) {
            frames.push({ id: /^id: (.*)$/m.exec(block)?.[1] ?? '', data: JSON.parse(data.slice(6)) });
          }
          end = buffer.indexOf('\n\n');
        }
      }
    } catch {
      // aborted
    }
  })();
  return { controller, frames, reading };
}

describe('Redis bus', () => {
  beforeEach(requireServices);
  const buses: Bus[] = [];
  afterAll(async () => {
    await Promise.all(buses.map((bus) => bus.close()));
  });

  /** Waits until Redis counts `count` subscribers on a channel (SUBSCRIBE is asynchronous). */
  async function subscribers(channel: string, count: number): Promise<void> {
    const raw = new Redis(REDIS_URL);
    try {
      await waitUntil(
        async () => {
          const reply = await raw.pubsub('NUMSUB', channel);
          return Number(reply[1]) === count ? true : null;
        },
        { what: `${count} subscribers on ${channel}`, everyMs: 20 },
      );
    } finally {
      raw.disconnect();
    }
  }

  async function bus(prefix: string, url = REDIS_URL) {
    const { logger, lines } = collectingLogger();
    const created = await createRedisBus(url, logger, { channelPrefix: prefix });
    buses.push(created);
    return { bus: created, lines };
  }

  it('runs every handler exactly once per message, in the publishing instance and the other', async () => {
    const prefix = `agentry-test:${randomBytes(4).toString('hex')}:`;
    const { bus: a } = await bus(prefix);
    const { bus: b } = await bus(prefix);
    const { bus: stranger } = await bus(`agentry-test:${randomBytes(4).toString('hex')}:`);
    const seen = { a1: [] as string[], a2: [] as string[], b: [] as string[], stranger: [] as string[] };
    a.subscribe('wake', ({ sessionId }) => seen.a1.push(sessionId));
    a.subscribe('wake', ({ sessionId }) => seen.a2.push(sessionId));
    b.subscribe('wake', ({ sessionId }) => seen.b.push(sessionId));
    stranger.subscribe('wake', ({ sessionId }) => seen.stranger.push(sessionId));
    await subscribers(channelOf(prefix, 'wake'), 2); // one connection per instance, whatever its handlers

    for (const id of ['s1', 's2', 's3']) a.publish('wake', { sessionId: id });
    // Local handlers run at once, before Redis is involved.
    expect(seen.a1).toEqual(['s1', 's2', 's3']);
    await waitUntil(async () => (seen.b.length === 3 ? true : null), {
      what: 'delivery to the other instance',
    });
    b.publish('wake', { sessionId: 'from-b' });
    await waitUntil(async () => (seen.a1.length === 4 ? true : null), {
      what: 'delivery back to the first',
    });
    await pause(300); // time for any echo of a's own messages to come back
    expect(seen.a1).toEqual(['s1', 's2', 's3', 'from-b']);
    expect(seen.a2).toEqual(['s1', 's2', 's3', 'from-b']);
    expect(seen.b).toEqual(['s1', 's2', 's3', 'from-b']);
    expect(seen.stranger).toEqual([]);

    await Promise.all([a.close(), b.close()]);
    await subscribers(channelOf(prefix, 'wake'), 0);
  });

  it('says when a subscription is live: a message published right after it resolves arrives', async () => {
    const prefix = `agentry-test:${randomBytes(4).toString('hex')}:`;
    // The listener's commands reach Redis 100 ms late: a SUBSCRIBE still on its way misses what is published.
    const slow = await tcpProxy(new URL(REDIS_URL), 100);
    const { bus: listener } = await bus(prefix, `redis://127.0.0.1:${slow.port}`);
    const { bus: publisher } = await bus(prefix);
    // Nothing subscribed here yet: nothing to wait for.
    await listener.subscribed('wake');
    for (let round = 0; round < 5; round++) {
      const seen: string[] = [];
      const off = listener.subscribe('wake', ({ sessionId }) => seen.push(sessionId));
      await listener.subscribed('wake');
      // Published by another instance at once: without the wait, SUBSCRIBE may still be on its way.
      publisher.publish('wake', { sessionId: `round-${round}` });
      await waitUntil(async () => (seen.length === 1 ? true : null), {
        what: `delivery right after the subscription (round ${round})`,
      });
      expect(seen).toEqual([`round-${round}`]);
      off();
      await subscribers(channelOf(prefix, 'wake'), 0);
    }
    await listener.close();
    await slow.close();
  });

  it('carries live events as JSON, stops after unsubscribe, ignores malformed messages, and closes', async () => {
    const prefix = `agentry-test:${randomBytes(4).toString('hex')}:`;
    const { bus: a } = await bus(prefix);
    const { bus: b, lines } = await bus(prefix);
    const received: unknown[] = [];
    const off = b.subscribe('live', (message) => received.push(message));
    await subscribers(channelOf(prefix, 'live'), 1);
    const event: DeltaEvent = {
      kind: 'message.delta',
      session_id: 's',
      message_id: 'm',
      run_id: 'r',
      data: { text: 'héllo "quoted"', step: 1, itemId: 'i' },
    };
    a.publish('live', { sessionId: 's', event });
    await waitUntil(async () => (received.length === 1 ? true : null), { what: 'a live event' });
    expect(received[0]).toEqual({ sessionId: 's', event });

    const raw = new Redis(REDIS_URL);
    try {
      await raw.publish(channelOf(prefix, 'live'), 'not json');
      await raw.publish(channelOf(prefix, 'live'), JSON.stringify({ o: 'x', m: { sessionId: 's' } }));
      // A known kind whose data is not that kind's: checked against the event's schema, not just its envelope.
      await raw.publish(
        channelOf(prefix, 'live'),
        JSON.stringify({ o: 'x', m: { sessionId: 's', event: { ...event, data: { ...event.data, text: 5 } } } }),
      );
    } finally {
      raw.disconnect();
    }
    a.publish('live', { sessionId: 's2', event });
    await waitUntil(async () => (received.length === 2 ? true : null), {
      what: 'the next good event',
    });
    expect(lines.filter((line) => line.includes('malformed bus message'))).toHaveLength(3);
    expect(received).toEqual([
      { sessionId: 's', event },
      { sessionId: 's2', event },
    ]);

    off();
    await subscribers(channelOf(prefix, 'live'), 0);
    a.publish('live', { sessionId: 's3', event });
    await pause(300);
    expect(received).toHaveLength(2);

    await b.close();
    await b.close(); // idempotent
    expect(() => b.publish('wake', { sessionId: 'after-close' })).not.toThrow();
  });

  it('reconnects and resubscribes after a Redis outage; publishing during it only logs', async () => {
    const proxy = await tcpProxy(new URL(REDIS_URL));
    const prefix = `agentry-test:${randomBytes(4).toString('hex')}:`;
    const { bus: behindProxy, lines } = await bus(prefix, `redis://127.0.0.1:${proxy.port}`);
    const { bus: direct } = await bus(prefix);
    const seen: string[] = [];
    const delivering: boolean[] = [];
    behindProxy.watch((state) => delivering.push(state));
    behindProxy.subscribe('wake', ({ sessionId }) => seen.push(sessionId));
    await subscribers(channelOf(prefix, 'wake'), 1);
    direct.publish('wake', { sessionId: 'before' });
    await waitUntil(async () => (seen.includes('before') ? true : null), {
      what: 'delivery before the outage',
    });

    await proxy.down();
    await pause(300);
    expect(delivering).toEqual([false]);
    const local: string[] = [];
    behindProxy.subscribe('interrupt', ({ sessionId }) => local.push(sessionId));
    expect(() => behindProxy.publish('interrupt', { sessionId: 'during' })).not.toThrow();
    expect(local).toEqual(['during']); // local handlers still run
    await pause(200);

    await proxy.up();
    const outageOver = Date.now();
    // Told once the subscription is confirmed again: a message published then arrives.
    await waitUntil(async () => (delivering.length === 2 ? true : null), { what: 'delivery to be confirmed again' });
    expect(delivering).toEqual([false, true]);
    direct.publish('wake', { sessionId: 'confirmed' });
    await waitUntil(async () => (seen.includes('confirmed') ? true : null), { what: 'delivery once confirmed' });
    let n = 0;
    await waitUntil(
      async () => {
        direct.publish('wake', { sessionId: `after-${n++}` });
        return seen.some((id) => id.startsWith('after-')) ? true : null;
      },
      { what: 'delivery after Redis came back', everyMs: 100 },
    );
    const messages = lines.map((line) => (JSON.parse(line) as { msg: string }).msg);
    expect(messages.some((msg) => msg.includes('connection failed; reconnecting'))).toBe(true);
    expect(messages.some((msg) => msg.includes('redis publish failed'))).toBe(true);
    expect(messages.some((msg) => msg.includes('connection restored'))).toBe(true);
    process.stdout.write(`[cluster] redis bus resubscribed ${Date.now() - outageOver} ms after an outage ended\n`);
    await proxy.close();
  });

  it('starts, publishes locally and closes while Redis is unreachable, logging instead of throwing', async () => {
    const { logger, lines } = collectingLogger();
    const started = Date.now();
    const down = await createRedisBus('redis://127.0.0.1:1', logger, { connectWaitMs: 300 });
    // It waited its 0.3 s for Redis, then started: never until Redis came (the bound is room for a busy machine).
    expect(Date.now() - started).toBeLessThan(20_000);
    const seen: string[] = [];
    down.subscribe('interrupt', ({ sessionId }) => seen.push(sessionId));
    down.publish('interrupt', { sessionId: 'x' });
    expect(seen).toEqual(['x']);
    await pause(100);
    await down.close();
    const warnings = lines.map((line) => JSON.parse(line) as { level: number; msg: string });
    expect(warnings.some((line) => line.msg.includes('redis is not reachable yet'))).toBe(true);
    expect(warnings.some((line) => line.msg.includes('connection failed'))).toBe(true);
  });
});

describe('cluster: an API process and two workers on one Postgres and one Redis', () => {
  const key = testKey();
  let environment: ReturnType<typeof testEnvironment> | null = null;
  let env: Record<string, string> = {};
  let apiProcess: ServerProcess | null = null;
  let workers: ServerProcess[] = [];
  let sql: pg.Client | null = null;
  let api: ReturnType<typeof httpClient>;
  let agentId = '';
  let liveChannel = '';
  beforeEach(requireServices);

  beforeAll(async () => {
    if (unavailable !== null) return;
    environment = testEnvironment('postgres');
    env = { ...environment.env, ...CLUSTER_ENV, AGENTRY_BOOTSTRAP_KEY: key };
    // The first process migrates the fresh schema and creates the org; the workers then start side by side.
    apiProcess = await startServerProcess({ ...env, AGENTRY_ROLE: 'api' });
    workers = await Promise.all([
      startServerProcess({ ...env, AGENTRY_ROLE: 'worker' }),
      startServerProcess({ ...env, AGENTRY_ROLE: 'worker' }),
    ]);
    api = httpClient(apiProcess.url, key);
    const agent = await api<{ agent: { id: string } }>('POST', '/v1/agents', { name: 'cluster' });
    expect(agent.status).toBe(201);
    agentId = agent.body.agent.id;
    sql = new pg.Client({
      connectionString: environment.env.DATABASE_URL,
      options: `-c search_path=${environment.env.AGENTRY_DATABASE_SCHEMA}`,
    });
    await sql.connect();
    const database = new URL(environment.env.DATABASE_URL ?? '').pathname.slice(1);
    liveChannel = channelOf(
      deploymentChannelPrefix('agentry:', database, environment.env.AGENTRY_DATABASE_SCHEMA ?? ''),
      'live',
    );
  });

  afterAll(async () => {
    await sql?.end();
    await Promise.all([apiProcess, ...workers].map((server) => server?.stop('SIGKILL')));
    await environment?.cleanup();
  });

  const pids = () => new Set(workers.map((worker) => String(worker.child.pid)));
  const ownerPid = (owner: string) => owner.split(':')[1] ?? '';

  async function newSession(): Promise<string> {
    const response = await api<{ session: { id: string } }>('POST', '/v1/sessions', { agentId });
    expect(response.status).toBe(201);
    return response.body.session.id;
  }

  async function post(sessionId: string, text: string): Promise<string> {
    const response = await api<{ id: string }>(
      'POST',
      `/v1/sessions/${sessionId}/messages`,
      { parts: [{ type: 'text', text }] },
      { 'Idempotency-Key': randomUUID() },
    );
    expect(response.status).toBe(202);
    return response.body.id;
  }

  async function message(sessionId: string, messageId: string): Promise<MessageView> {
    const response = await api<{ message: MessageView }>('GET', `/v1/sessions/${sessionId}/messages/${messageId}`);
    expect(response.status).toBe(200);
    return response.body.message;
  }

  async function finished(sessionId: string, messageId: string): Promise<MessageView> {
    return waitUntil(
      async () => {
        const state = await message(sessionId, messageId);
        return TERMINAL_STATUSES.includes(state.status) ? state : null;
      },
      { what: `message ${messageId}` },
    );
  }

  /** Owners holding a lease on the given sessions right now. */
  async function owners(sessionIds: string[]): Promise<Map<string, string>> {
    if (sql === null) throw new Error('no database client');
    const { rows } = await sql.query<{ id: string; lease_owner: string | null }>(
      'select id, lease_owner from sessions where id = any($1) and lease_owner is not null',
      [sessionIds],
    );
    return new Map(rows.flatMap((row) => (row.lease_owner === null ? [] : [[row.id, row.lease_owner]])));
  }

  it('serves only probes on workers, and says which role each process has', async () => {
    const [worker] = workers;
    if (worker === undefined || apiProcess === null) throw new Error('processes not started');
    expect((await fetch(`${worker.url}/healthz`)).status).toBe(200);
    const ready = await fetch(`${worker.url}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: 'ready' });
    for (const path of ['/v1/agents', '/v1/openapi.json', `/v1/sessions/x/stream`]) {
      const response = await fetch(`${worker.url}${path}`, { headers: { authorization: `Bearer ${key}` } });
      expect(response.status, path).toBe(404);
      expect(((await response.json()) as { error: { code: string } }).error.code).toBe('route_not_found');
    }
    expect((await fetch(`${apiProcess.url}/readyz`)).status).toBe(200);
    const startLine = (server: ServerProcess) =>
      server
        .output()
        .split('\n')
        .filter((line) => line.includes('starting with role'))
        .map((line) => JSON.parse(line) as Record<string, unknown>)[0];
    expect(startLine(apiProcess)).toMatchObject({ role: 'api', engine: false, bus: 'redis' });
    expect(startLine(worker)).toMatchObject({ role: 'worker', engine: true, routes: 'probes', bus: 'redis' });
  });

  it('(a) runs 30 messages over 6 sessions posted to the API process on the workers', async () => {
    const started = Date.now();
    const sessions = await Promise.all(Array.from({ length: 6 }, () => newSession()));
    const accepted: { sessionId: string; messageId: string; text: string }[] = [];
    // Watch who holds the leases while the turns run: only worker processes, never the API process.
    const seenOwners = new Set<string>();
    let watching = true;
    const watcher = (async () => {
      while (watching) {
        for (const owner of (await owners(sessions)).values()) seenOwners.add(owner);
        await pause(25);
      }
    })();
    try {
      for (let m = 0; m < 5; m++) {
        for (const [s, sessionId] of sessions.entries()) {
          const text = `sleep 100\nreply ${s}-${m}`;
          accepted.push({ sessionId, messageId: await post(sessionId, text), text: `reply ${s}-${m}` });
        }
      }
      for (const entry of accepted) {
        const final = await finished(entry.sessionId, entry.messageId);
        expect(final.status).toBe('completed');
        expect(final.response?.parts[0]?.text).toBe(entry.text);
      }
    } finally {
      watching = false;
      await watcher;
    }
    const elapsed = Date.now() - started;
    const workerPids = pids();
    const ownerPids = [...seenOwners].map(ownerPid);
    expect(ownerPids.length).toBeGreaterThan(0);
    for (const pid of ownerPids) expect(workerPids.has(pid), `owner ${pid} is a worker`).toBe(true);
    expect(ownerPids).not.toContain(String(apiProcess?.child.pid));
    // Each message ran exactly once.
    const { rows } = (await sql?.query<{ n: number }>(
      "select count(*)::int as n from items where type = 'assistant_message' and session_id = any($1)",
      [sessions],
    )) ?? { rows: [] };
    expect(rows[0]?.n).toBe(accepted.length);
    process.stdout.write(
      `[cluster] (a) ${accepted.length} messages completed in ${elapsed} ms; lease owners seen: ${new Set(ownerPids).size} worker(s)\n`,
    );
  });

  it('(b) delivers live events from the worker running a turn to the API process and to Redis subscribers', async () => {
    if (apiProcess === null) throw new Error('processes not started');
    const sessionId = await newSession();
    const subscriber = new Redis(REDIS_URL);
    const deltas: string[] = [];
    let messageId = '';
    subscriber.on('message', (_channel: string, raw: string) => {
      const parsed = JSON.parse(raw) as { m: { sessionId: string; event: { kind: string; data: { text?: string } } } };
      if (parsed.m.sessionId === sessionId && parsed.m.event.kind === 'message.delta') {
        deltas.push(parsed.m.event.data.text ?? '');
      }
    });
    await subscriber.subscribe(liveChannel);

    // The session stream of the API process: the turn runs on a worker, the frames come through Redis.
    const sse = await sessionStream(apiProcess.url, key, sessionId);
    const frames = sse.frames;
    await pause(200);

    const reply = 'Live from a worker process, streamed in several deltas through Redis to the API.';
    const started = Date.now();
    messageId = await post(sessionId, `sleep 200\n${reply}`);
    const final = await finished(sessionId, messageId);
    expect(final.response?.parts[0]?.text).toBe(reply);
    await waitUntil(async () => (deltas.join('') === reply ? true : null), {
      what: 'every delta on the live channel',
    });
    expect(deltas.length).toBeGreaterThan(1);
    const streamed = await waitUntil(
      async () => {
        const found = frames.filter(
          (frame) => frame.data.kind === 'message.delta' && frame.data.message_id === messageId,
        );
        const completed = frames.some(
          (frame) => frame.data.kind === 'message.completed' && frame.data.message_id === messageId,
        );
        return completed && found.length > 0 ? found : null;
      },
      { what: 'message.delta frames on the API process stream' },
    );
    const text = streamed.map((frame) => {
      const data = frame.data.data as { text?: unknown };
      return typeof data.text === 'string' ? data.text : '';
    });
    expect(text.join('')).toBe(reply);
    process.stdout.write(
      `[cluster] (b) ${deltas.length} deltas on Redis, ${streamed.length} delta frames on the API stream; turn done in ${Date.now() - started} ms\n`,
    );
    sse.controller.abort();
    await sse.reading;
    subscriber.disconnect();
  });

  it('(b3) a Responses stream broken mid-turn resumes on the API process from the last sequence number seen', async () => {
    if (apiProcess === null) throw new Error('processes not started');
    const client = new OpenAI({ apiKey: key, baseURL: `${apiProcess.url}/v1`, maxRetries: 0 });
    const input = 'The first words of an answer from a worker\nsleep 800\nand the words after the pause, also streamed';
    const broken: ResponseStreamEvent[] = [];
    for await (const event of await client.responses.create({ model: agentId, input, stream: true })) {
      broken.push(event);
      if (event.type === 'response.output_text.delta') break;
    }
    const first = broken[0];
    const id = first?.type === 'response.created' ? first.response.id : '';
    const lastSeen = broken.at(-1)?.sequence_number ?? -1;
    const rest: ResponseStreamEvent[] = [];
    for await (const event of await client.responses.retrieve(id, { stream: true, starting_after: lastSeen })) {
      rest.push(event);
    }
    const whole: ResponseStreamEvent[] = [];
    for await (const event of await client.responses.retrieve(id, { stream: true })) whole.push(event);
    expect(whole.at(-1)?.type).toBe('response.completed');
    expect([...broken, ...rest]).toEqual(whole);
    const text = whole.map((event) => (event.type === 'response.output_text.delta' ? event.delta : '')).join('');
    expect(text).toBe('The first words of an answer from a worker\nand the words after the pause, also streamed');
  });

  it('(b2) a long-poll on the API process answers when the turn on a worker settles, woken through Redis', async () => {
    // The API re-reads a waiting message every AGENTRY_POLL_MS (1 s) besides: an answer well within that of the
    // turn's end came from the live event.
    const lags: number[] = [];
    for (let round = 0; round < 3; round++) {
      const sessionId = await newSession();
      const messageId = await post(sessionId, `sleep 1100\nwoken ${round}`);
      const response = await api<{ message: MessageView & { completedAt: string } }>(
        'GET',
        `/v1/sessions/${sessionId}/messages/${messageId}?wait=20`,
      );
      const answered = Date.now();
      expect(response.status).toBe(200);
      expect(response.body.message.status).toBe('completed');
      expect(response.body.message.response?.parts[0]?.text).toBe(`woken ${round}`);
      lags.push(answered - Date.parse(response.body.message.completedAt));
    }
    const sorted = [...lags].sort((a, b) => a - b);
    process.stdout.write(`[cluster] (b2) long-poll answers after the turn's end: ${lags.join(', ')} ms\n`);
    expect(sorted[1]).toBeLessThan(500);
    // Still running when the wait ends: the message as it is.
    const sessionId = await newSession();
    const messageId = await post(sessionId, 'sleep 5000\nlate');
    const early = await api<{ message: MessageView }>(
      'GET',
      `/v1/sessions/${sessionId}/messages/${messageId}?wait=0.3`,
    );
    expect(['queued', 'running']).toContain(early.body.message.status);
    expect((await api('POST', `/v1/sessions/${sessionId}/interrupt`)).status).toBe(200);
  });

  it('(c) an interrupt posted to the API process cancels the turn running on a worker promptly', async () => {
    const latencies: number[] = [];
    for (let round = 0; round < 3; round++) {
      const sessionId = await newSession();
      const messageId = await post(sessionId, 'sleep 20000\nnever said');
      await waitUntil(async () => ((await message(sessionId, messageId)).status === 'running' ? true : null), {
        what: 'the turn to start',
        everyMs: 20,
      });
      await pause(100);
      const started = Date.now();
      const interrupted = await api('POST', `/v1/sessions/${sessionId}/interrupt`);
      expect(interrupted.status).toBeLessThan(300);
      const final = await waitUntil(
        async () => {
          const state = await message(sessionId, messageId);
          return TERMINAL_STATUSES.includes(state.status) ? state : null;
        },
        { what: 'the cancellation', everyMs: 10 },
      );
      latencies.push(Date.now() - started);
      expect(final.status).toBe('cancelled');
    }
    // Normally well under a second; 10 s leaves room for a loaded machine and is half the turn's sleep.
    for (const latency of latencies) expect(latency).toBeLessThan(10_000);
    process.stdout.write(`[cluster] (c) interrupt → cancelled across processes: ${latencies.join(', ')} ms\n`);
  });

  it('(d) after kill -9 of a worker, the other worker takes its turns over and completes them', async () => {
    const sessions = await Promise.all(Array.from({ length: 6 }, () => newSession()));
    const accepted: { sessionId: string; messageId: string; text: string }[] = [];
    for (const [s, sessionId] of sessions.entries()) {
      accepted.push({ sessionId, messageId: await post(sessionId, `sleep 3000\ndone ${s}`), text: `done ${s}` });
      accepted.push({ sessionId, messageId: await post(sessionId, `then ${s}`), text: `then ${s}` });
    }
    // Every session's first turn is asleep on some worker.
    const held = await waitUntil(
      async () => {
        const current = await owners(sessions);
        return current.size === sessions.length ? current : null;
      },
      { what: 'every session to be claimed' },
    );
    const byPid = new Map<string, string[]>();
    for (const [sessionId, owner] of held)
      byPid.set(ownerPid(owner), [...(byPid.get(ownerPid(owner)) ?? []), sessionId]);
    // Kill the worker holding the most sessions.
    const victim = [...workers].sort(
      (x, y) => (byPid.get(String(y.child.pid))?.length ?? 0) - (byPid.get(String(x.child.pid))?.length ?? 0),
    )[0];
    const survivor = workers.find((worker) => worker !== victim);
    if (victim === undefined || survivor === undefined) throw new Error('two workers expected');
    const orphaned = byPid.get(String(victim.child.pid)) ?? [];
    expect(orphaned.length).toBeGreaterThan(0);
    const killedAt = Date.now();
    await victim.stop('SIGKILL');

    // The survivor claims each orphaned session once the dead worker is gone from the process registry.
    const survivorPid = String(survivor.child.pid);
    const takenOver = new Map<string, number>();
    await waitUntil(
      async () => {
        for (const [sessionId, owner] of await owners(orphaned)) {
          if (ownerPid(owner) === survivorPid && !takenOver.has(sessionId)) takenOver.set(sessionId, Date.now());
        }
        return takenOver.size === orphaned.length ? true : null;
      },
      { what: 'the surviving worker to take the orphaned sessions over', everyMs: 25 },
    );
    for (const entry of accepted) {
      const final = await finished(entry.sessionId, entry.messageId);
      expect(final.status).toBe('completed');
      expect(final.response?.parts[0]?.text).toBe(entry.text);
    }
    const allDone = Date.now() - killedAt;
    const { rows } = (await sql?.query<{ message_id: string; n: number }>(
      "select message_id, count(*)::int as n from items where type = 'assistant_message' and session_id = any($1) group by message_id",
      [sessions],
    )) ?? { rows: [] };
    expect(rows).toHaveLength(accepted.length);
    for (const row of rows) expect(row.n).toBe(1);
    // Taken over within the wait's deadline, not after the hour-long lease: through the process registry. How soon
    // (normally the 2.5 s TTL plus one 1 s poll) is printed, not checked.
    const takeover = [...takenOver.values()].map((at) => at - killedAt);
    process.stdout.write(
      `[cluster] (d) killed a worker holding ${orphaned.length}/${sessions.length} sessions; taken over after ${Math.min(...takeover)}-${Math.max(...takeover)} ms; all ${accepted.length} messages done ${allDone} ms after the kill\n`,
    );
  });

  it('(e) a rolling restart of every worker under load runs each tool call exactly once', async () => {
    const counter = await startMcpServerProcess(['--kind', 'modern', '--name', 'counter']);
    try {
      const slowAgent = await agentWithSlowTools(api, counter);
      const calls = 8;
      const turns: SlowTurn[] = [];
      // Two workers to replace (the one killed by (d) is gone).
      workers = workers.filter((worker) => worker.child.exitCode === null && worker.child.signalCode === null);
      while (workers.length < 2) workers.push(await startServerProcess({ ...env, AGENTRY_ROLE: 'worker' }));
      const originals = [...workers];
      // Every worker of the test, stopped ones included, for the output a failure prints.
      const seen = [...workers];
      for (let round = 0; round < originals.length; round++) {
        // A new worker first, as in a rolling restart; then SIGTERM one of the workers it replaces. The new ones
        // poll only every 10 minutes: once the last original worker stops, only the wake-up that comes with the
        // hand-over can make them take its sessions over within the test.
        // At debug, a worker logs each session it works on and hands over (for the output a failure prints).
        const fresh = await startServerProcess({
          ...env,
          AGENTRY_ROLE: 'worker',
          AGENTRY_POLL_MS: '600000',
          LOG_LEVEL: 'debug',
        });
        seen.push(fresh);
        workers = [...workers, fresh];
        // New turns for the workers of now, each of 8 calls of 1-2 s: longer than the 8 s of the default grace
        // period a stopping worker gives its turns, so the one stopped is in the middle of its turns' tool calls.
        const batch = await Promise.all(
          Array.from({ length: 6 }, (_, n) => {
            const text = `round ${round} turn ${n}`;
            return startSlowTurn(api, slowAgent, slowCallsScript(calls, text, round + n), text);
          }),
        );
        turns.push(...batch);
        await waitForSlowCalls(counter, batch);
        const held = await owners(turns.map((turn) => turn.sessionId));
        const heldBy = (worker: ServerProcess) =>
          [...held.values()].filter((owner) => ownerPid(owner) === String(worker.child.pid)).length;
        // Of the workers not replaced yet, the busiest.
        const old = originals.filter((worker) => workers.includes(worker)).sort((x, y) => heldBy(y) - heldBy(x))[0];
        if (old === undefined) throw new Error('a worker to replace expected');
        workers = workers.filter((worker) => worker !== old);
        const oldPid = String(old.child.pid);
        const handed = turns.filter((turn) => ownerPid(held.get(turn.sessionId) ?? '') === oldPid);
        const signalledAt = Date.now();
        expect(await old.stop('SIGTERM')).toBe(0);
        const exitedAt = Date.now();
        // Its sessions went to the workers left (with a lease of an hour, waiting it out would time out).
        const live = pids();
        const takenAt = await waitUntil(
          async () => {
            const now = await owners(handed.map((turn) => turn.sessionId));
            for (const turn of handed) {
              if (live.has(ownerPid(now.get(turn.sessionId) ?? ''))) continue;
              if (!TERMINAL_STATUSES.includes((await message(turn.sessionId, turn.messageId)).status)) return null;
            }
            return Date.now();
          },
          { what: 'the sessions of the stopped worker to be taken over', everyMs: 25 },
        );
        process.stdout.write(
          `[cluster] (e) worker ${oldPid} held ${handed.length} sessions; drained in ${exitedAt - signalledAt} ms; all taken over ${takenAt - signalledAt} ms after SIGTERM\n`,
        );
      }
      await expectTurnsCompleted(api, turns);
      expectEachSlowCallOnce(await counter.state(), turns, turns.length * calls, 'cluster (e)', () =>
        [...seen, ...(apiProcess === null ? [] : [apiProcess])].map((process) => ({
          name: `pid ${process.child.pid}`,
          output: process.output(),
        })),
      );
    } finally {
      await counter.stop();
    }
  });
});

describe('cluster: open streams across a Redis outage', () => {
  const key = testKey();
  let environment: ReturnType<typeof testEnvironment> | null = null;
  /** Each process reaches Redis through its own proxy: cutting both is an outage of the whole deployment. */
  let proxies: Awaited<ReturnType<typeof tcpProxy>>[] = [];
  let processes: ServerProcess[] = [];
  const redisDown = async () => {
    await Promise.all(proxies.map((proxy) => proxy.down()));
  };
  const redisUp = async () => {
    await Promise.all(proxies.map((proxy) => proxy.up()));
  };
  let sql: pg.Client | null = null;
  beforeEach(requireServices);

  beforeAll(async () => {
    if (unavailable !== null) return;
    environment = testEnvironment('postgres');
    proxies = [await tcpProxy(new URL(REDIS_URL)), await tcpProxy(new URL(REDIS_URL))];
    const env = { ...environment.env, ...CLUSTER_ENV, AGENTRY_POLL_MS: '200', AGENTRY_BOOTSTRAP_KEY: key };
    const redis = (proxy: { port: number } | undefined) => `redis://127.0.0.1:${proxy?.port}`;
    const api = await startServerProcess({ ...env, REDIS_URL: redis(proxies[0]), AGENTRY_ROLE: 'api' });
    processes = [api, await startServerProcess({ ...env, REDIS_URL: redis(proxies[1]), AGENTRY_ROLE: 'worker' })];
    sql = new pg.Client({
      connectionString: environment.env.DATABASE_URL,
      options: `-c search_path=${environment.env.AGENTRY_DATABASE_SCHEMA}`,
    });
    await sql.connect();
  }, startsTimeout(2));

  afterAll(async () => {
    await sql?.end();
    await Promise.all(processes.map((server) => server.stop('SIGKILL')));
    await Promise.all(proxies.map((proxy) => proxy.close()));
    await environment?.cleanup();
  });

  it('a session stream and a Responses stream left open get every event once, in order, without reconnecting', async () => {
    const [apiProcess, worker] = processes;
    if (apiProcess === undefined || worker === undefined || sql === null) {
      throw new Error('processes not started');
    }
    const api = httpClient(apiProcess.url, key);
    const agent = await api<{ agent: { id: string } }>('POST', '/v1/agents', { name: 'outage' });
    expect(agent.status).toBe(201);
    const agentId = agent.body.agent.id;
    const session = await api<{ session: { id: string } }>('POST', '/v1/sessions', { agentId });
    const sessionId = session.body.session.id;
    const post = async (text: string) => {
      const response = await api<{ id: string }>('POST', `/v1/sessions/${sessionId}/messages`, textParts(text), {
        'Idempotency-Key': randomUUID(),
      });
      expect(response.status).toBe(202);
      return response.body.id;
    };
    const stream = await sessionStream(apiProcess.url, key, sessionId);
    const completedIn = (messageId: string) =>
      stream.frames.filter((frame) => frame.data.kind === 'message.completed' && frame.data.message_id === messageId);
    const streamed = (messageIds: string[], what: string) =>
      waitUntil(async () => (messageIds.every((id) => completedIn(id).length > 0) ? true : null), { what });

    const before = await post('reply before the outage');
    await streamed([before], 'the turn before the outage on the stream');

    // Responses streams whose turns run on the worker while Redis is away: a text answer, and a step that says
    // something and calls a client tool.
    const client = new OpenAI({ apiKey: key, baseURL: `${apiProcess.url}/v1`, maxRetries: 0 });
    const openResponse = async (input: string, tools: FunctionTool[] = []) => {
      const events: ResponseStreamEvent[] = [];
      const raw = await client.responses.create({ model: agentId, input, tools, stream: true });
      const done = (async () => {
        for await (const event of raw) events.push(event);
      })();
      done.catch(() => undefined); // awaited below; a failure before that must not go unhandled
      await waitUntil(async () => (events.some((event) => event.type === 'response.in_progress') ? true : null), {
        what: 'a Responses stream to start',
      });
      return { events, done };
    };
    const answer = 'Answered on a worker while Redis was away, streamed to a client that never reconnected.';
    const plain = await openResponse(`sleep 2000\n${answer}`);
    const lookup: FunctionTool = { type: 'function', name: 'lookup', parameters: { type: 'object' }, strict: false };
    const withCall = await openResponse('sleep 2000\nLet me look that up.\ncall lookup {"q":"redis"}', [lookup]);

    await redisDown();
    const downAt = Date.now();
    const during: string[] = [];
    for (let n = 0; n < 4; n++) during.push(await post(`sleep 100\nreply ${n} during the outage`));
    // The worker finds them by polling Postgres; the streams catch up from Postgres while Redis is still down.
    await streamed(during, 'the turns run during the outage on the session stream');
    await Promise.all([plain.done, withCall.done]);
    const caughtUpAfter = Date.now() - downAt;
    expect(Date.now() - downAt).toBeLessThan(20_000); // still down: not waiting for Redis
    await pause(20_000 - (Date.now() - downAt));
    await redisUp();
    const upAt = Date.now();
    // Text deltas are live only: once every process has reconnected and resubscribed, a turn's deltas come
    // through Redis again (turns posted before that may still be caught up from Postgres).
    const reply = 'Streamed live again after the outage, in several deltas through Redis.';
    const deltasOf = (messageId: string) =>
      stream.frames
        .filter((frame) => frame.data.kind === 'message.delta' && frame.data.message_id === messageId)
        .map((frame) => frame.data.data.text)
        .join('');
    const after: string[] = [];
    await waitUntil(
      async () => {
        const messageId = await post(reply);
        after.push(messageId);
        await streamed([messageId], 'a turn after the outage on the session stream');
        return deltasOf(messageId) === reply ? true : null;
      },
      { what: 'text deltas through Redis after the outage' },
    );
    const liveAgain = Date.now() - upAt;
    await pause(500); // room for a duplicate to show
    stream.controller.abort();
    await stream.reading;

    // Every persisted event once, in order, with no gap: exactly what Postgres holds for the session.
    const persisted = stream.frames.filter((frame) => !frame.id.includes('.'));
    const { rows } = await sql.query<{ seq: number; kind: string }>(
      'select seq, kind from session_events where session_id = $1 order by seq',
      [sessionId],
    );
    expect(persisted.map((frame) => [Number(frame.id), frame.data.seq, frame.data.kind])).toEqual(
      rows.map((row) => [row.seq, row.seq, row.kind]),
    );
    expect(rows.map((row) => row.seq)).toEqual(rows.map((_, index) => index + 1));
    for (const id of [before, ...during, ...after]) expect(completedIn(id)).toHaveLength(1);
    expect(during.map((id) => completedIn(id)[0]?.data.data.response.parts[0].text)).toEqual(
      during.map((_, n) => `reply ${n} during the outage`),
    );

    // The Responses streams: numbered without a gap, each output item once, whole, in the Response's order, and
    // one final event.
    for (const { events } of [plain, withCall]) {
      expect(events.map((event) => event.sequence_number)).toEqual(events.map((_, index) => index));
      const last = events.at(-1);
      if (last?.type !== 'response.completed') throw new Error(`a Responses stream ended with ${last?.type}`);
      expect(events.filter((event) => event.type === 'response.completed')).toHaveLength(1);
      const added = events.flatMap((event) => (event.type === 'response.output_item.added' ? [event.item.id] : []));
      expect(added).toEqual(last.response.output.map((item) => item.id));
      for (const item of last.response.output) {
        if (item.type !== 'message') continue;
        const deltas = events.flatMap((event) =>
          event.type === 'response.output_text.delta' && event.item_id === item.id ? [event.delta] : [],
        );
        expect(deltas.join('')).toBe(
          item.content.map((part) => (part.type === 'output_text' ? part.text : '')).join(''),
        );
      }
    }
    const plainLast = plain.events.at(-1);
    expect(plainLast?.type === 'response.completed' ? plainLast.response.output_text : null).toBe(answer);
    const callLast = withCall.events.at(-1);
    expect(callLast?.type === 'response.completed' ? callLast.response.output.map((item) => item.type) : []).toEqual([
      'message',
      'function_call',
    ]);

    // Nobody died: both processes still serve.
    for (const server of processes) expect(server.child.exitCode).toBeNull();
    expect((await fetch(`${worker.url}/healthz`)).status).toBe(200);
    process.stdout.write(
      `[cluster] redis outage: streams caught up ${caughtUpAfter} ms into it; deltas live again ${liveAgain} ms after it (${after.length} turn(s))\n`,
    );
  });

  it('answers Responses requested during an outage, when nothing listened before, without waiting for Redis', async () => {
    const [apiProcess] = processes;
    if (apiProcess === undefined || environment === null) throw new Error('processes not started');
    const api = httpClient(apiProcess.url, key);
    const agent = await api<{ agent: { id: string } }>('POST', '/v1/agents', { name: 'outage-late' });
    const database = new URL(environment.env.DATABASE_URL ?? '').pathname.slice(1);
    const live = channelOf(
      deploymentChannelPrefix('agentry:', database, environment.env.AGENTRY_DATABASE_SCHEMA ?? ''),
      'live',
    );
    // No stream is open: the API process holds no subscription to live events, and cannot make one while Redis
    // is away.
    const raw = new Redis(REDIS_URL);
    try {
      await waitUntil(async () => (Number((await raw.pubsub('NUMSUB', live))[1]) === 0 ? true : null), {
        what: 'the API process to hold no live subscription',
      });
    } finally {
      raw.disconnect();
    }
    await redisDown();
    try {
      const client = new OpenAI({ apiKey: key, baseURL: `${apiProcess.url}/v1`, maxRetries: 0, timeout: WAIT_MS });
      const model = agent.body.agent.id;
      const events: ResponseStreamEvent[] = [];
      const [answered] = await Promise.all([
        client.responses.create({ model, input: 'sleep 100\nAnswered while Redis was away.' }),
        (async () => {
          const stream = await client.responses.create({
            model,
            input: 'Streamed while Redis was away.',
            stream: true,
          });
          for await (const event of stream) events.push(event);
        })(),
      ]);
      expect(answered.output_text).toBe('Answered while Redis was away.');
      const last = events.at(-1);
      expect(last?.type === 'response.completed' ? last.response.output_text : null).toBe(
        'Streamed while Redis was away.',
      );
    } finally {
      await redisUp();
    }
  });

  it('a stream gets the events of a worker that alone lost Redis, from the database, while its own bus delivers', async () => {
    const [apiProcess, workerProxy] = [processes[0], proxies[1]];
    if (apiProcess === undefined || workerProxy === undefined) throw new Error('processes not started');
    const api = httpClient(apiProcess.url, key);
    const agent = await api<{ agent: { id: string } }>('POST', '/v1/agents', { name: 'partition' });
    const session = await api<{ session: { id: string } }>('POST', '/v1/sessions', { agentId: agent.body.agent.id });
    const sessionId = session.body.session.id;
    const stream = await sessionStream(apiProcess.url, key, sessionId);
    // Only the worker's link to Redis is cut: the API process is still subscribed, its bus sees nothing wrong,
    // and nothing the worker publishes arrives.
    await workerProxy.down();
    try {
      const texts = ['first while the worker is cut off', 'second while the worker is cut off'];
      for (const text of texts) {
        const posted = await api<{ id: string }>('POST', `/v1/sessions/${sessionId}/messages`, textParts(text), {
          'Idempotency-Key': randomUUID(),
        });
        expect(posted.status).toBe(202);
      }
      const completed = () => stream.frames.filter((frame) => frame.data.kind === 'message.completed');
      await waitUntil(async () => (completed().length === texts.length ? true : null), {
        what: "the cut-off worker's turns on the stream",
      });
      expect(completed().map((frame) => frame.data.data.response.parts[0].text)).toEqual(texts);
      const ids = stream.frames.filter((frame) => !frame.id.includes('.')).map((frame) => Number(frame.id));
      expect(ids).toEqual(ids.map((_, index) => index + 1));
    } finally {
      stream.controller.abort();
      await stream.reading;
      await workerProxy.up();
    }
  });
});

describe('cluster configuration', () => {
  it('refuses to start with REDIS_URL but no DATABASE_URL', async () => {
    const environment = testEnvironment('sqlite');
    try {
      await expect(startServerProcess({ ...environment.env, REDIS_URL })).rejects.toThrow(
        /exited with 1[\s\S]*REDIS_URL is set but DATABASE_URL is not/,
      );
    } finally {
      await environment.cleanup();
    }
  });
});
