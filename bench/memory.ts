/**
 * Resident memory growth from 2,000 to 20,000 turns (BENCH_MEMORY_TURNS; the first sample is taken after a
 * tenth of them), on SQLite, measured two ways:
 *
 * - in-process, with BENCH_MEMORY_IN_PROCESS=1 (each half takes two minutes or more on a shared 2-core machine):
 *   a child started with --expose-gc runs the engine without HTTP (bench/turns-memory.ts) and samples its own
 *   memory after a full GC;
 * - over HTTP, unless BENCH_MEMORY_HTTP=0: an Agentry server child (`node --expose-gc --import bench/gc-on-signal.ts bin/agentry.js serve`,
 *   default log level) is driven by 64 closed loops that post a message and poll it to completion, as the
 *   turns-http bench does; the server is sampled after a full GC (SIGUSR2, see gc-on-signal.ts).
 *
 * In both, each loop moves to a fresh session every 50 turns so every turn costs about the same (a turn may
 * re-read its session's history) and state kept per session shows. Goal: less than 30 MB of growth.
 */
import { spawn } from 'node:child_process';
import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { type Agentry, Client, createAgent, createSession, playTurn, startAgentry } from './agentry.ts';
import { countedLoops, sleep } from './load.ts';
import {
  type BenchResult,
  nonNegativeNumber,
  REPO_ROOT,
  runStandalone,
  scaledInt,
  tempDir,
  withCleanup,
} from './support.ts';

export type { BenchResult } from './support.ts';

const GOAL = 'value < 30';
const LOOPS = 64;
const SESSION_TURNS = 50;
const MB = 1024 * 1024;
const CHILD_TIMEOUT_MS = 10 * 60_000;
const REPORT_TIMEOUT_MS = 15_000;

function log(message: string): void {
  process.stderr.write(`[bench:memory] ${message}\n`);
}

export interface MemorySample {
  rssMb: number;
  heapUsedMb: number;
  /** What V8 has reserved for its heap, used or not: it grows when V8 enlarges its young generation. */
  heapTotalMb: number;
}

/** What bench/turns-memory.ts prints: samples after `firstTurns` and after `totalTurns` turns. */
export interface MemoryReport {
  firstTurns: number;
  totalTurns: number;
  first: MemorySample;
  last: MemorySample;
}

function isMemorySample(value: unknown): value is MemorySample {
  if (typeof value !== 'object' || value === null) return false;
  return ['rssMb', 'heapUsedMb', 'heapTotalMb'].every((key) => typeof Reflect.get(value, key) === 'number');
}

function isMemoryReport(value: unknown): value is MemoryReport {
  if (typeof value !== 'object' || value === null) return false;
  return (
    typeof Reflect.get(value, 'firstTurns') === 'number' &&
    typeof Reflect.get(value, 'totalTurns') === 'number' &&
    isMemorySample(Reflect.get(value, 'first')) &&
    isMemorySample(Reflect.get(value, 'last'))
  );
}

/**
 * The in-process measurement runs in a fresh child started with --expose-gc: the samples are taken after a full
 * GC, and neither this process's earlier benches nor their heap share its memory.
 */
function runInProcessChild(totalTurns: number): Promise<MemoryReport> {
  const child = spawn(process.execPath, ['--expose-gc', join(REPO_ROOT, 'bench', 'turns-memory.ts')], {
    cwd: REPO_ROOT,
    env: { ...process.env, BENCH_MEMORY_TURNS: String(totalTurns) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let stdout = '';
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString('utf8');
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`bench/turns-memory.ts did not finish within ${CHILD_TIMEOUT_MS} ms`));
    }, CHILD_TIMEOUT_MS);
    child.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      const last = stdout.trim().split('\n').at(-1) ?? '';
      let parsed: unknown;
      try {
        parsed = JSON.parse(last);
      } catch {
        parsed = undefined;
      }
      if (code === 0 && isMemoryReport(parsed)) resolve(parsed);
      else reject(new Error(`bench/turns-memory.ts exited (code ${code}, signal ${signal}): ${stdout.slice(-2000)}`));
    });
  });
}

/** One full-GC sample of the server child: SIGUSR2, then the report gc-on-signal.ts writes. */
async function serverSample(agentry: Agentry, reportPath: string): Promise<MemorySample> {
  const server = agentry.processes[0];
  if (server === undefined) throw new Error('no server process');
  const once = async (): Promise<unknown> => {
    await rm(reportPath, { force: true });
    server.child.kill('SIGUSR2');
    const deadline = performance.now() + REPORT_TIMEOUT_MS;
    while (performance.now() < deadline) {
      await sleep(20);
      try {
        return JSON.parse(await readFile(reportPath, 'utf8'));
      } catch {
        // Not written yet (or half written): try again.
      }
    }
    throw new Error(`the server wrote no memory report within ${REPORT_TIMEOUT_MS} ms:\n${server.output()}`);
  };
  // Two collections with a pause between them, so finalizers and weak callbacks of the first have run.
  await once();
  await sleep(50);
  const usage = await once();
  const number = (key: string): number => {
    const value: unknown = typeof usage === 'object' && usage !== null ? Reflect.get(usage, key) : undefined;
    if (typeof value !== 'number') throw new Error(`memory report without ${key}: ${JSON.stringify(usage)}`);
    return value / MB;
  };
  return { rssMb: number('rss'), heapUsedMb: number('heapUsed'), heapTotalMb: number('heapTotal') };
}

async function overHttp(totalTurns: number): Promise<MemoryReport> {
  const firstTurns = Math.max(1, Math.floor(totalTurns / 10));
  const pollMs = nonNegativeNumber('BENCH_POLL_MS', 10);
  return withCleanup(async (defer) => {
    const reportPath = join(await tempDir('memory-report', defer), 'memory.json');
    const agentry = await startAgentry(
      {
        bench: 'memory',
        mode: 'sqlite',
        nodeArgs: ['--expose-gc', '--import', join(REPO_ROOT, 'bench', 'gc-on-signal.ts')],
        env: { BENCH_MEMORY_REPORT: reportPath },
      },
      defer,
    );
    const client = new Client(agentry.url, agentry.apiKey, LOOPS);
    defer(() => client.close());
    const agentId = await createAgent(client);
    const loops = Array.from({ length: LOOPS }, () => ({ sessionId: '', played: SESSION_TURNS }));
    let keys = 0;
    const turn = async (loop: number): Promise<void> => {
      const state = loops[loop];
      if (state === undefined) throw new Error(`no loop ${loop}`);
      if (state.played === SESSION_TURNS) {
        state.sessionId = await createSession(client, agentId);
        state.played = 0;
      }
      state.played += 1;
      keys += 1;
      await playTurn(client, state.sessionId, `m-${keys}`, pollMs);
    };
    log(
      `http: ${firstTurns} turns by ${LOOPS} loops (a new session every ${SESSION_TURNS} turns), then to ${totalTurns}`,
    );
    await countedLoops(LOOPS, firstTurns, turn);
    const first = await serverSample(agentry, reportPath);
    log(`http: after ${firstTurns} turns: ${describe(first)}`);
    const elapsed = await countedLoops(LOOPS, totalTurns - firstTurns, turn);
    const last = await serverSample(agentry, reportPath);
    log(
      `http: after ${totalTurns} turns: ${describe(last)} (${Math.round(((totalTurns - firstTurns) / elapsed) * 1000)} turns/s)`,
    );
    return { firstTurns, totalTurns, first, last };
  });
}

function describe(sample: MemorySample): string {
  return `rss ${sample.rssMb.toFixed(1)} MB, heap used ${sample.heapUsedMb.toFixed(1)} of ${sample.heapTotalMb.toFixed(1)} MB`;
}

function results(kind: 'in_process' | 'http', report: MemoryReport): BenchResult[] {
  const { firstTurns, totalTurns, first, last } = report;
  const name = `memory.${kind}`;
  const span = `${firstTurns}_to_${totalTurns}`;
  return [
    {
      name: `${name}.rss_growth_${span}`,
      value: last.rssMb - first.rssMb,
      unit: 'MB',
      baseline: first.rssMb,
      goal: GOAL,
    },
    {
      name: `${name}.heap_used_growth_${span}`,
      value: last.heapUsedMb - first.heapUsedMb,
      unit: 'MB',
      baseline: first.heapUsedMb,
    },
    // Part of the resident growth can be V8 enlarging its young generation (a one-off sizing, capped by
    // --max-semi-space-size) rather than anything retained; this figure tells that part apart.
    {
      name: `${name}.heap_reserved_growth_${span}`,
      value: last.heapTotalMb - first.heapTotalMb,
      unit: 'MB',
      baseline: first.heapTotalMb,
    },
  ];
}

export async function runMemoryBench(): Promise<BenchResult[]> {
  const totalTurns = scaledInt('BENCH_MEMORY_TURNS', 20_000, 100);
  const out: BenchResult[] = [];
  if (process.env.BENCH_MEMORY_IN_PROCESS === '1') {
    out.push(...results('in_process', await runInProcessChild(totalTurns)));
  }
  if (process.env.BENCH_MEMORY_HTTP !== '0') out.push(...results('http', await overHttp(totalTurns)));
  return out;
}

if (import.meta.main) await runStandalone(runMemoryBench);
