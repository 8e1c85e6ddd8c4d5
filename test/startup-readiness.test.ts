/**
 * Ready means ready, checked the way an orchestrator or an impatient client meets a fresh server: a real server
 * process with AGENTRY_BOOTSTRAP_KEY, called in a tight loop from the moment its port accepts connections, on a
 * fresh database each time. Every authenticated call is answered 200 (never a 401 for the key about to be
 * created), and /healthz never says 200 before that key works.
 */
import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { START_TIMEOUT_MS } from './helpers/deadlines.ts';
import { dialects, testEnvironment, testKey } from './helpers/harness.ts';
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
