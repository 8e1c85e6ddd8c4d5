/// <reference path="./autocannon.d.ts" />
/**
 * Authenticated `GET /v1/agents/{id}` throughput of Agentry relative to a bare node:http server answering the
 * same request with a constant body, on SQLite and on Postgres. Both servers are child processes; autocannon
 * runs in this process with the same settings against each. Agentry runs at its default log level (info: one
 * line per request, to a file), as users run it. The two are measured in paired rounds (A B, B A, …) and the
 * figure is the median of the per-round ratios, so a burst of other work on the machine hits one round, not one
 * side.
 */
import type { Result } from 'autocannon';
import autocannon from 'autocannon';
import { Client, createAgent, type Mode, startAgentry } from './agentry.ts';
import { type ServerProcess, startServer, stopProcess } from './children.ts';
import { pairedRounds, roundRatios } from './load.ts';
import {
  type BenchResult,
  median,
  REPO_ROOT,
  runStandalone,
  scaled,
  scaledInt,
  variants,
  withCleanup,
} from './support.ts';

export type { BenchResult } from './support.ts';

const CONNECTIONS = 50;
const PIPELINING = 1;
const GOALS: Record<'sqlite' | 'postgres', string> = { sqlite: 'ratio >= 0.5', postgres: 'ratio >= 0.3' };

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
  name: string,
  output: () => string,
  url: string,
  headers: Record<string, string>,
  seconds: number,
): Promise<Measured> {
  const result: Result = await autocannon({
    url,
    connections: CONNECTIONS,
    pipelining: PIPELINING,
    duration: seconds,
    headers,
  });
  // A run that got errors or non-2xx answers measured something other than the happy path; its number is
  // meaningless, so stop rather than report it.
  if (result.errors > 0 || result.non2xx > 0 || result.requests.total === 0) {
    throw new Error(
      `${name}: ${result.non2xx} non-2xx, ${result.errors} errors (${result.timeouts} timeouts), ` +
        `${result.requests.total} requests; status codes ${JSON.stringify(result.statusCodeStats)}\n${output()}`,
    );
  }
  return { reqPerSec: result.requests.total / result.duration, p50: result.latency.p50, p99: result.latency.p99 };
}

async function benchVariant(baseline: ServerProcess, mode: Exclude<Mode, 'cluster'>): Promise<BenchResult[]> {
  const rounds = scaledInt('BENCH_HTTP_ROUNDS', 5, 2);
  const seconds = scaled('BENCH_HTTP_ROUND_S', 3);
  const warmup = scaled('BENCH_HTTP_WARMUP_S', 2);
  return withCleanup(async (defer) => {
    const agentry = await startAgentry({ bench: 'http', mode }, defer);
    const server = agentry.processes[0];
    if (server === undefined) throw new Error('no server process');
    const client = new Client(agentry.url, agentry.apiKey, 1);
    defer(() => client.close());
    const path = `/v1/agents/${await createAgent(client)}`;
    // One checked request before the load, so a broken route fails here with its body rather than as a count.
    await client.expect(200, 'GET', path);
    const headers = { authorization: `Bearer ${agentry.apiKey}` };
    // Same path and headers to the baseline, so both servers parse byte-identical requests.
    const bare = () => load(baseline.name, baseline.output, `${baseline.url}${path}`, headers, seconds);
    const ours = () => load(server.name, server.output, `${agentry.url}${path}`, headers, seconds);

    log(
      `${mode}: warm-up ${warmup.toFixed(1)}s each (discarded), then ${rounds} rounds of ${seconds.toFixed(1)}s per server`,
    );
    await load(baseline.name, baseline.output, `${baseline.url}${path}`, headers, warmup);
    await load(server.name, server.output, `${agentry.url}${path}`, headers, warmup);
    const paired = await pairedRounds(rounds, bare, ours, (round, index) =>
      log(
        `${mode} round ${index + 1}: bare ${Math.round(round.a.reqPerSec)} req/s, agentry ${Math.round(round.b.reqPerSec)} ` +
          `req/s, ratio ${(round.b.reqPerSec / round.a.reqPerSec).toFixed(3)}`,
      ),
    );
    const { ratios, median: ratio } = roundRatios(paired, (side) => side.reqPerSec, 'b');
    const name = `http.get_agent.${mode}`;
    const figure = (side: 'a' | 'b', key: keyof Measured) => median(paired.map((round) => round[side][key]));
    return [
      {
        name,
        value: figure('b', 'reqPerSec'),
        unit: 'req/s',
        baseline: figure('a', 'reqPerSec'),
        ratio,
        goal: GOALS[mode],
        rounds: ratios,
      },
      { name: `${name}.p50`, value: figure('b', 'p50'), unit: 'ms', baseline: figure('a', 'p50') },
      { name: `${name}.p99`, value: figure('b', 'p99'), unit: 'ms', baseline: figure('a', 'p99') },
    ];
  });
}

export async function runHttpBench(): Promise<BenchResult[]> {
  return withCleanup(async (defer) => {
    const baseline = await startServer({
      name: 'bare node:http',
      args: ['--input-type=module', '-e', BASELINE_SCRIPT],
      cwd: REPO_ROOT,
      env: process.env,
      timeoutMs: 20_000,
    });
    defer(() => stopProcess(baseline.child));
    log(`${CONNECTIONS} connections, pipelining ${PIPELINING}`);
    const results: BenchResult[] = [];
    for (const variant of variants()) results.push(...(await benchVariant(baseline, variant.kind)));
    return results;
  });
}

if (import.meta.main) await runStandalone(runHttpBench);
