/**
 * `web_browse` on hostile pages, against a real server process: extracting a page of thousands of nested `<div>`s
 * costs Readability minutes of CPU, and on the event loop that would stop every organization's requests. Here it
 * runs in the CPU pool: while the turn runs, `/healthz` (polled every ~25 ms over loopback) keeps answering, the
 * tool result is a clean error naming the limit, the turn completes, and a normal page is read afterwards (the
 * ended worker was replaced). The pages come from the test host on a public-range address in a network namespace
 * (helpers/netns.ts: the agents' tools refuse this host's own addresses), so nothing leaves the machine.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { httpClient, type Json, TERMINAL_STATUSES, waitUntil } from './helpers/fixtures.ts';
import { dialects, testEnvironment, testKey } from './helpers/harness.ts';
import { startTestNetwork } from './helpers/netns.ts';
import { inCi } from './helpers/sandbox.ts';
import { type ServerProcess, startServerProcess } from './helpers/server-process.ts';

const CPU_TIMEOUT_MS = 3000;
/** ~27 KB: Readability needs minutes for it (roughly cubic in the depth). */
const NESTED = '/nested?depth=2500';
/** Deeper than a main-thread stack can recurse through. */
const DEEPER = '/nested?depth=50000';

const network = await startTestNetwork();
if (typeof network === 'string' && !inCi)
  process.stdout.write(`\n[agentry] web extraction tests skipped: ${network}\n\n`);
const describeNetwork = typeof network !== 'string' || inCi ? describe : describe.skip;
const base = typeof network === 'string' ? '' : `http://${network.hostAddress}`;
afterAll(() => {
  if (typeof network !== 'string') network.stop();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** `/healthz` every ~25 ms until `done` settles: each probe's latency, and what went wrong with any. */
async function probeHealth(url: string, done: Promise<unknown>) {
  let finished = false;
  const stop = () => {
    finished = true;
  };
  done.then(stop, stop);
  const latencies: number[] = [];
  const failures: string[] = [];
  while (!finished) {
    const started = performance.now();
    try {
      const response = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(10_000) });
      await response.text();
      if (response.status !== 200) failures.push(`HTTP ${response.status}`);
    } catch (error) {
      // A blocked event loop: stop here rather than wait for the extraction to end.
      failures.push(String(error));
      break;
    }
    latencies.push(performance.now() - started);
    await sleep(25);
  }
  return { latencies: latencies.sort((a, b) => a - b), failures };
}

describeNetwork.each(dialects())('web_browse on hostile pages (%s)', (dialect) => {
  let environment: ReturnType<typeof testEnvironment>;
  let server: ServerProcess;
  let api: ReturnType<typeof httpClient>;
  let agentId = '';

  beforeAll(async () => {
    if (typeof network === 'string') throw new Error(`no test network: ${network}`);
    environment = testEnvironment(dialect);
    const key = testKey();
    server = await startServerProcess({
      ...environment.env,
      AGENTRY_BOOTSTRAP_KEY: key,
      AGENTRY_CPU_WORKERS: '1',
      AGENTRY_CPU_TIMEOUT_MS: String(CPU_TIMEOUT_MS),
      LOG_LEVEL: 'warn',
    });
    api = httpClient(server.url, key);
    const created = await api<Json>('POST', '/v1/agents', {
      name: 'browser',
      mcpServers: [{ kind: 'internal', name: 'web_search_&_browse' }],
      networkPolicy: { allow_network_egress: true, domain_allowlist: 'all_domains' },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    agentId = created.body.agent.id;
  }, 60_000);
  afterAll(async () => {
    await server?.stop('SIGKILL');
    await environment?.cleanup();
  });

  /** Starts a turn of a new session; resolves with the finished message. */
  async function turn(text: string): Promise<Json> {
    const session = await api<Json>('POST', '/v1/sessions', { agentId });
    const sessionId = session.body.session.id;
    const accepted = await api<Json>(
      'POST',
      `/v1/sessions/${sessionId}/messages`,
      { parts: [{ type: 'text', text }] },
      { 'idempotency-key': randomUUID() },
    );
    expect(accepted.status, JSON.stringify(accepted.body)).toBe(202);
    return waitUntil(
      async () => {
        const { body } = await api<Json>('GET', `/v1/sessions/${sessionId}/messages/${accepted.body.id}`);
        return TERMINAL_STATUSES.includes(body.message.status) ? body.message : null;
      },
      { what: 'the browsing turn to end', timeoutMs: 120_000, everyMs: 100 },
    );
  }

  const browse = (path: string) => `call web_browse ${JSON.stringify({ url: `${base}${path}` })}`;
  const reply = (message: Json) => String(message.response?.parts[0]?.text);

  it('keeps answering while a hostile page is extracted, and the tool fails cleanly', async () => {
    const finished = turn(`${browse(NESTED)}\n${browse(DEEPER)}`);
    finished.catch(() => undefined);
    const { latencies, failures } = await probeHealth(server.url, finished);
    expect(failures, 'every /healthz probe answers 200').toEqual([]);
    expect(latencies.length).toBeGreaterThan(10);
    const p95 = latencies[Math.floor(latencies.length * 0.95)] ?? Number.POSITIVE_INFINITY;
    expect(p95, `p95 of ${latencies.length} probes`).toBeLessThan(100);
    expect(latencies.at(-1), 'the slowest probe').toBeLessThan(1000);

    const message = await finished;
    expect(message.status, JSON.stringify(message)).toBe('completed');
    const text = reply(message);
    expect(text).toContain(
      `web_browse: Error: the page at ${base}${NESTED} could not be extracted: it took longer than ${CPU_TIMEOUT_MS / 1000} s`,
    );
    // Whichever limit it meets first: the time, or the worker's stack.
    expect(text).toMatch(/depth=50000 could not be extracted: it (took longer than 3 s|is nested too deeply)/);
  }, 180_000);

  it('reads a normal page afterwards, on a fresh worker', async () => {
    const message = await turn(browse('/article'));
    expect(message.status, JSON.stringify(message)).toBe('completed');
    expect(reply(message)).toContain(`web_browse: Title: Test Article\nURL: ${base}/article\n`);
    expect(reply(message)).toContain('the article text comes back readable');
  }, 120_000);
});
