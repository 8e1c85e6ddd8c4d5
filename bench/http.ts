/// <reference path="./autocannon.d.ts" />
/**
 * Authenticated `GET /v1/agents/{id}` throughput of Agentry relative to a bare node:http hello-world,
 * both measured in the same run with the same autocannon settings. The ratio, not the absolute req/s, is
 * the figure to compare across machines.
 */
import type { Result } from 'autocannon';
import autocannon from 'autocannon';
import {
  type BenchResult,
  type Defer,
  generateApiKey,
  positiveNumber,
  REPO_ROOT,
  runStandalone,
  type ServerProcess,
  serverEnv,
  startServer,
  stopProcess,
  tempDir,
  throwawaySchema,
  type Variant,
  variants,
  withCleanup,
} from './support.ts';

export type { BenchResult } from './support.ts';

const CONNECTIONS = 50;
const PIPELINING = 1;
const WARMUP_S = 1;
// Alternating baseline/agentry rounds; the best of each smooths out noisy neighbours on a 2-core box.
const ROUNDS = 2;
const START_TIMEOUT_MS = 20_000;
const SQLITE_GOAL = 'ratio >= 0.5';

// Prints the same "listening on" line as Agentry so one start-up helper serves both.
const BASELINE_SCRIPT = `
import http from 'node:http';
const server = http.createServer((req, res) => {
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end('{"hello":"world"}');
});
server.listen(0, '127.0.0.1', () => console.log('listening on http://127.0.0.1:' + server.address().port));
`;

interface Measured {
  reqPerSec: number;
  p50: number;
  p99: number;
}

function log(message: string): void {
  // stderr, so stdout carries only the result table when piped.
  process.stderr.write(`[bench:http] ${message}\n`);
}

async function load(
  server: ServerProcess,
  url: string,
  headers: Record<string, string>,
  duration: number,
): Promise<Result> {
  const result = await autocannon({ url, connections: CONNECTIONS, pipelining: PIPELINING, duration, headers });
  // A run that got errors or non-2xx answers measured something other than the happy path; its number is
  // meaningless, so stop rather than report it.
  if (result.errors > 0 || result.non2xx > 0 || result.requests.total === 0) {
    throw new Error(
      `${server.name}: ${result.non2xx} non-2xx, ${result.errors} errors (${result.timeouts} timeouts), ` +
        `${result.requests.total} requests; status codes ${JSON.stringify(result.statusCodeStats)}\n${server.output()}`,
    );
  }
  return result;
}

function measured(result: Result): Measured {
  return { reqPerSec: result.requests.average, p50: result.latency.p50, p99: result.latency.p99 };
}

function best(a: Measured | undefined, b: Measured): Measured {
  return a === undefined || b.reqPerSec > a.reqPerSec ? b : a;
}

async function startAgentry(variant: Variant, apiKey: string, defer: Defer): Promise<ServerProcess> {
  const env = serverEnv({ dataDir: await tempDir('http', defer), apiKey, redis: true });
  if (variant.kind === 'postgres') {
    env.DATABASE_URL = variant.databaseUrl;
    // Before the server starts, so that the drop runs after the server has been stopped.
    env.AGENTRY_DATABASE_SCHEMA = throwawaySchema(variant.databaseUrl, 'http', defer);
  }
  const server = await startServer({
    name: `agentry (${variant.kind})`,
    args: ['src/main.ts'],
    cwd: REPO_ROOT,
    env,
    timeoutMs: START_TIMEOUT_MS,
  });
  defer(() => stopProcess(server.child));
  return server;
}

async function createAgent(server: ServerProcess, headers: Record<string, string>): Promise<string> {
  const created = await fetch(`${server.url}/v1/agents`, {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'bench agent', instructions: 'You are a benchmark.' }),
  });
  const text = await created.text();
  if (created.status !== 201) throw new Error(`POST /v1/agents answered ${created.status}: ${text}`);
  const body: unknown = JSON.parse(text);
  const agent: unknown = typeof body === 'object' && body !== null ? Reflect.get(body, 'agent') : undefined;
  const id: unknown = typeof agent === 'object' && agent !== null ? Reflect.get(agent, 'id') : undefined;
  if (typeof id !== 'string' || id === '') throw new Error(`POST /v1/agents returned no agent.id: ${text}`);

  // One checked request before the load, so a broken route fails here with its body rather than as a
  // bare non-2xx count.
  const fetched = await fetch(`${server.url}/v1/agents/${encodeURIComponent(id)}`, { headers });
  const fetchedText = await fetched.text();
  if (fetched.status !== 200) throw new Error(`GET /v1/agents/${id} answered ${fetched.status}: ${fetchedText}`);
  return id;
}

async function benchVariant(baseline: ServerProcess, variant: Variant, duration: number): Promise<BenchResult[]> {
  return withCleanup(async (defer) => {
    const apiKey = generateApiKey();
    const agentry = await startAgentry(variant, apiKey, defer);
    const headers = { authorization: `Bearer ${apiKey}` };
    const path = `/v1/agents/${encodeURIComponent(await createAgent(agentry, headers))}`;
    // Same path and headers to the baseline, so both servers parse byte-identical requests.
    const targets = [
      { server: baseline, url: `${baseline.url}${path}` },
      { server: agentry, url: `${agentry.url}${path}` },
    ] as const;

    log(`${variant.kind}: warm-up ${WARMUP_S}s each (discarded)`);
    for (const t of targets) await load(t.server, t.url, headers, WARMUP_S);

    let bestBaseline: Measured | undefined;
    let bestAgentry: Measured | undefined;
    for (let round = 1; round <= ROUNDS; round++) {
      const b = measured(await load(baseline, targets[0].url, headers, duration));
      log(`${variant.kind} round ${round}: baseline ${Math.round(b.reqPerSec)} req/s`);
      const a = measured(await load(agentry, targets[1].url, headers, duration));
      log(`${variant.kind} round ${round}: agentry  ${Math.round(a.reqPerSec)} req/s`);
      bestBaseline = best(bestBaseline, b);
      bestAgentry = best(bestAgentry, a);
    }
    if (bestBaseline === undefined || bestAgentry === undefined) throw new Error('no rounds ran');

    const name = `http.get_agent.${variant.kind}`;
    const throughput: BenchResult = {
      name,
      value: bestAgentry.reqPerSec,
      unit: 'req/s',
      baseline: bestBaseline.reqPerSec,
      ratio: bestAgentry.reqPerSec / bestBaseline.reqPerSec,
    };
    // The stated goal is for SQLite, the default deployment; Postgres is reported for information.
    if (variant.kind === 'sqlite') throughput.goal = SQLITE_GOAL;
    return [
      throughput,
      { name: `${name}.p50`, value: bestAgentry.p50, unit: 'ms', baseline: bestBaseline.p50 },
      { name: `${name}.p99`, value: bestAgentry.p99, unit: 'ms', baseline: bestBaseline.p99 },
    ];
  });
}

export async function runHttpBench(): Promise<BenchResult[]> {
  const duration = positiveNumber('BENCH_DURATION_S', 5);
  return withCleanup(async (defer) => {
    const baseline = await startServer({
      name: 'baseline node:http',
      args: ['--input-type=module', '-e', BASELINE_SCRIPT],
      cwd: REPO_ROOT,
      env: process.env,
      timeoutMs: START_TIMEOUT_MS,
    });
    defer(() => stopProcess(baseline.child));
    log(`${CONNECTIONS} connections, pipelining ${PIPELINING}, ${duration}s x ${ROUNDS} rounds per server`);
    const results: BenchResult[] = [];
    for (const variant of variants()) results.push(...(await benchVariant(baseline, variant, duration)));
    return results;
  });
}

if (import.meta.main) await runStandalone(runHttpBench);
