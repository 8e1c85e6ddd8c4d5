/**
 * Ready means ready, checked the way an orchestrator or an impatient client meets a fresh server: a real server
 * process with AGENTRY_BOOTSTRAP_KEY, called in a tight loop from the moment its port accepts connections, on a
 * fresh database each time. Every authenticated call is answered 200 (never a 401 for the key about to be
 * created), and /healthz never says 200 before that key works. Its sandbox, detected after it is ready, is
 * there for the first turn that asks for it.
 */
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { START_TIMEOUT_MS } from './helpers/deadlines.ts';
import { dialects, testEnvironment, testKey } from './helpers/harness.ts';
import { describeSandbox } from './helpers/sandbox.ts';
import { launchServerProcess } from './helpers/server-process.ts';

/** Fresh starts per dialect; the report that found this saw it on Postgres. */
const STARTS = { sqlite: 5, postgres: 10 } as const;
/** Generous: the machine may be busy. */
const STARTUP_TIMEOUT_MS = START_TIMEOUT_MS;

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

/** The status of one call, or null (after a pause of a few milliseconds) while the port refuses connections. */
async function statusOf(url: string, key?: string): Promise<number | null> {
  try {
    const response = await fetch(url, key === undefined ? {} : { headers: { authorization: `Bearer ${key}` } });
    await response.arrayBuffer();
    return response.status;
  } catch {
    // Not a busy loop: the server starting beside this test needs the CPU.
    await new Promise((resolve) => setTimeout(resolve, 5));
    return null;
  }
}

interface Observed {
  /** Statuses of authenticated calls, in the order they were answered. */
  api: number[];
  /** Statuses of /healthz, in order. */
  health: number[];
  /** The status of an authenticated call made as soon as /healthz first answered 200. */
  afterHealthy: number | null;
}

/** Calls both routes as fast as possible until each has answered 200, or `deadline`. */
async function hammer(base: string, key: string, deadline: number): Promise<Observed> {
  const observed: Observed = { api: [], health: [], afterHealthy: null };
  let keyWorked = false;
  let healthy = false;
  const loop = async (call: () => Promise<void>, done: () => boolean) => {
    while (!done() && Date.now() < deadline) await call();
  };
  const api = async () => {
    const status = await statusOf(`${base}/v1/agents`, key);
    if (status === null) return;
    observed.api.push(status);
    if (status === 200) keyWorked = true;
  };
  const health = async () => {
    const status = await statusOf(`${base}/healthz`);
    if (status === null) return;
    observed.health.push(status);
    if (status === 200 && !healthy) {
      healthy = true;
      observed.afterHealthy = await statusOf(`${base}/v1/agents`, key);
    }
  };
  // Two authenticated callers and one prober, so some call lands in every moment of the startup.
  await Promise.all([
    loop(api, () => keyWorked && healthy),
    loop(api, () => keyWorked && healthy),
    loop(health, () => healthy && keyWorked),
  ]);
  return observed;
}

describe.each(dialects())('a fresh server called at once (%s)', (dialect) => {
  it(
    `never answers 401 for its bootstrap key, and is not healthy before the key works (${STARTS[dialect]} fresh starts)`,
    async () => {
      for (let start = 0; start < STARTS[dialect]; start++) {
        const environment = testEnvironment(dialect);
        const key = testKey();
        const port = await freePort();
        const server = launchServerProcess({
          ...environment.env,
          AGENTRY_BOOTSTRAP_KEY: key,
          PORT: String(port),
          LOG_LEVEL: 'warn',
        });
        try {
          const observed = await hammer(`http://127.0.0.1:${port}`, key, Date.now() + STARTUP_TIMEOUT_MS);
          const context = `start ${start + 1}: ${JSON.stringify(observed)}\n${server.output()}`;
          expect(observed.api.length, context).toBeGreaterThan(0);
          expect(
            observed.api.every((status) => status === 200),
            context,
          ).toBe(true);
          expect(observed.health.at(-1), context).toBe(200);
          expect(
            observed.health.every((status) => status === 200 || status === 503),
            context,
          ).toBe(true);
          expect(observed.afterHealthy, context).toBe(200);
          await server.listening;
        } finally {
          await server.stop('SIGKILL');
          await environment.cleanup();
        }
      }
    },
    STARTS[dialect] * STARTUP_TIMEOUT_MS,
  );
});

/** One authenticated JSON call. */
async function api(base: string, key: string, method: string, path: string, body?: unknown): Promise<any> {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${key}`,
      'idempotency-key': randomUUID(),
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${text}`);
  return JSON.parse(text);
}

describeSandbox('a fresh server with a sandbox (sqlite)', () => {
  // A server is ready before its sandbox is detected (tools/sandbox/deferred-runtime.ts): what needs it waits.
  it(
    'offers the sandbox tools to an agent created as soon as it is ready, and runs its first command',
    async () => {
      const environment = testEnvironment('sqlite');
      const key = testKey();
      const server = launchServerProcess({ ...environment.env, AGENTRY_BOOTSTRAP_KEY: key, LOG_LEVEL: 'warn' });
      try {
        const base = await server.listening;
        const created = await api(base, key, 'POST', '/v1/agents', {
          name: 'first',
          model: 'scripted',
          mcpServers: [{ kind: 'internal', name: 'sandbox' }],
        });
        expect(created.warnings ?? []).toEqual([]);
        const { session } = await api(base, key, 'POST', '/v1/sessions', { agentId: created.agent.id });
        const accepted = await api(base, key, 'POST', `/v1/sessions/${session.id}/messages`, {
          parts: [{ type: 'text', text: `call sandbox_run ${JSON.stringify({ command: 'echo first-command' })}` }],
        });
        expect(accepted.warnings ?? []).toEqual([]);
        const done = await api(base, key, 'GET', `/v1/sessions/${session.id}/messages/${accepted.id}?wait=30`);
        expect(done.message.status, JSON.stringify(done)).toBe('completed');
        expect(done.message.response.parts[0].text).toContain('first-command');
      } finally {
        await server.stop('SIGKILL');
        await environment.cleanup();
      }
    },
    START_TIMEOUT_MS + 60_000,
  );
});
