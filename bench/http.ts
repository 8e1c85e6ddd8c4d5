/// <reference path="./autocannon.d.ts" />
/**
 * Authenticated `GET /v1/agents/{id}` throughput of Agentry relative to a bare node:http server answering the
 * same request with a constant body, on SQLite and on Postgres. Both servers are child processes; autocannon
 * runs in this process with the same settings against each. Agentry runs as users run it, at its default log
 * level (info: one line per request, to a file); that figure comes first and carries the goal. Beside it, a second
 * Agentry server at LOG_LEVEL=warn (a tuned setting: no request lines) is measured in the same rounds, named so.
 * The servers are measured in alternating rounds (bare, default, warn; then warn, default, bare; …) and each
 * figure is the median of its per-round ratios to the bare server, so a burst of other work on the machine hits one
 * round, not one side.
 */
import type { Result } from 'autocannon';
import autocannon from 'autocannon';
import { Client, createAgent, type Mode, startAgentry } from './agentry.ts';
import { type ServerProcess, startServer, stopProcess } from './children.ts';
import { alternatingRounds } from './load.ts';
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

/**
 * The settings Agentry is measured at: its defaults first (the figure with the goal), then each tuned setting
 * beside them, named in the result and in a note under the table.
 */
const SETTINGS = [
  { label: 'default', suffix: '', logLevel: 'default', tuned: false },
  { label: 'LOG_LEVEL=warn', suffix: '.log_warn', logLevel: 'warn', tuned: true },
] as const;

async function benchVariant(baseline: ServerProcess, mode: Exclude<Mode, 'cluster'>): Promise<BenchResult[]> {
  const rounds = scaledInt('BENCH_HTTP_ROUNDS', 5, 2);
  const seconds = scaled('BENCH_HTTP_ROUND_S', 3);
  const warmup = scaled('BENCH_HTTP_WARMUP_S', 2);
  return withCleanup(async (defer) => {
    const headers = (apiKey: string) => ({ authorization: `Bearer ${apiKey}` });
    const sides: Array<{
      label: string;
      suffix: string;
      tuned: boolean;
      run: (s: number) => Promise<Measured>;
      path: string;
      apiKey: string;
    }> = [];
    for (const setting of SETTINGS) {
      const agentry = await startAgentry({ bench: 'http', mode, logLevel: setting.logLevel }, defer);
      const server = agentry.processes[0];
      if (server === undefined) throw new Error('no server process');
      const client = new Client(agentry.url, agentry.apiKey, 1);
      defer(() => client.close());
      const path = `/v1/agents/${await createAgent(client)}`;
      // One checked request before the load, so a broken route fails here with its body rather than as a count.
      await client.expect(200, 'GET', path);
      const url = `${agentry.url}${path}`;
      sides.push({
        label: setting.label,
        suffix: setting.suffix,
        tuned: setting.tuned,
        path,
        apiKey: agentry.apiKey,
        run: (s) => load(`${server.name} (${setting.label})`, server.output, url, headers(agentry.apiKey), s),
      });
    }
    const first = sides[0];
    if (first === undefined) throw new Error('no Agentry side');
    // Same path and headers to the baseline as to the first Agentry, so both parse byte-identical requests.
    const bare = (s: number) =>
      load(baseline.name, baseline.output, `${baseline.url}${first.path}`, headers(first.apiKey), s);

    log(
      `${mode}: warm-up ${warmup.toFixed(1)}s each (discarded), then ${rounds} rounds of ${seconds.toFixed(1)}s per ` +
        `server (bare, then Agentry at ${sides.map((side) => side.label).join(', ')}; order reversed every other round)`,
    );
    await bare(warmup);
    for (const side of sides) await side.run(warmup);
    const done = await alternatingRounds(
      rounds,
      [() => bare(seconds), ...sides.map((side) => () => side.run(seconds))],
      (round, index) => {
        const [base, ...ours] = round;
        if (base === undefined) return;
        const parts = ours.map(
          (result, i) =>
            `agentry (${sides[i]?.label}) ${Math.round(result.reqPerSec)} req/s, ratio ${(result.reqPerSec / base.reqPerSec).toFixed(3)}`,
        );
        log(`${mode} round ${index + 1}: bare ${Math.round(base.reqPerSec)} req/s; ${parts.join('; ')}`);
      },
    );
    const at = (round: readonly Measured[], i: number): Measured => {
      const result = round[i];
      if (result === undefined) throw new Error(`round without side ${i}`);
      return result;
    };
    const results: BenchResult[] = [];
    sides.forEach((side, i) => {
      const name = `http.get_agent.${mode}${side.suffix}`;
      const ratios = done.map((round) => at(round, i + 1).reqPerSec / at(round, 0).reqPerSec);
      const figure = (index: number, key: keyof Measured) => median(done.map((round) => at(round, index)[key]));
      const note = side.tuned
        ? { note: `Agentry at ${side.label} (a tuned setting; the default logs every request at info)` }
        : {};
      results.push(
        {
          name,
          value: figure(i + 1, 'reqPerSec'),
          unit: 'req/s',
          baseline: figure(0, 'reqPerSec'),
          ratio: median(ratios),
          ...(side.tuned ? {} : { goal: GOALS[mode] }),
          rounds: ratios,
          ...note,
        },
        { name: `${name}.p50`, value: figure(i + 1, 'p50'), unit: 'ms', baseline: figure(0, 'p50') },
        { name: `${name}.p99`, value: figure(i + 1, 'p99'), unit: 'ms', baseline: figure(0, 'p99') },
      );
    });
    return results;
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
