/**
 * How long a command takes to start: `node bin/agentry.js --help` until it exits, and `node bin/agentry.js serve`
 * (role all, SQLite, a fresh data directory each time) until its /readyz first answers 200. Each is started
 * BENCH_STARTUP_RUNS times one after the other and the median is reported, with the median CPU time (user + system,
 * which load from other work changes less than the wall time) beside it.
 *
 * Both run the way users run them: with Node's compile cache (bin/agentry.js), in a directory of this run that one
 * start before the measured ones fills. The same figures without the cache (NODE_DISABLE_COMPILE_CACHE=1: a first
 * start, or a machine where the cache cannot be written) are reported too, without a goal.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { stopProcess } from './children.ts';
import {
  type BenchResult,
  type Defer,
  generateApiKey,
  median,
  REPO_ROOT,
  runStandalone,
  scaledInt,
  serverEnv,
  tempDir,
  withCleanup,
} from './support.ts';

const BIN = join(REPO_ROOT, 'bin', 'agentry.js');
const PROBE_MS = 5;
const READY_TIMEOUT_MS = 60_000;

interface Start {
  wallS: number;
  /** User + system CPU seconds of the process until then; null where /proc cannot say. */
  cpuS: number | null;
}

/** Clock ticks per second of /proc's CPU times: 100 on every Linux that Node runs on. */
const TICKS = 100;

/** User + system CPU seconds from a /proc/<pid>/stat line (fields 14 and 15, or 16 and 17 for waited children). */
function statSeconds(path: string, children: boolean): number | null {
  try {
    // The command name (field 2) may hold spaces; the fields after it start after its closing parenthesis.
    const fields = readFileSync(path, 'utf8').split(') ')[1]?.split(' ') ?? [];
    const [user, system] = children ? [fields[13], fields[14]] : [fields[11], fields[12]];
    if (user === undefined || system === undefined) return null;
    return (Number(user) + Number(system)) / TICKS;
  } catch {
    return null;
  }
}

function exited(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) => resolve(code));
  });
}

/** `agentry --help` once: its wall time, and the CPU time of it (and any process it started) from its end. */
async function helpOnce(env: NodeJS.ProcessEnv): Promise<Start> {
  // Children's CPU times reach /proc/self/stat once they have been waited for: the difference is this child's.
  const before = statSeconds('/proc/self/stat', true);
  const started = performance.now();
  const child = spawn(process.execPath, [BIN, '--help'], { env, stdio: 'ignore' });
  const code = await exited(child);
  const wallS = (performance.now() - started) / 1000;
  if (code !== 0) throw new Error(`agentry --help exited with ${code}`);
  const after = statSeconds('/proc/self/stat', true);
  return { wallS, cpuS: before === null || after === null ? null : after - before };
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (typeof address !== 'object' || address === null) throw new Error('no port');
  return address.port;
}

/** The status of GET /readyz, or null while nothing listens. */
function readyz(port: number): Promise<number | null> {
  return new Promise((resolve) => {
    const probe = request({ host: '127.0.0.1', port, path: '/readyz' }, (response) => {
      response.resume();
      resolve(response.statusCode ?? null);
    });
    probe.on('error', () => resolve(null));
    probe.end();
  });
}

/** `agentry serve` on a fresh data directory, until /readyz says 200: its wall time, and its CPU time then. */
async function serverOnce(env: NodeJS.ProcessEnv, defer: Defer): Promise<Start> {
  const dataDir = await tempDir('startup', defer);
  const port = await freePort();
  const childEnv = { ...serverEnv({ dataDir, apiKey: generateApiKey(), redis: false }), ...env, PORT: String(port) };
  const started = performance.now();
  const child = spawn(process.execPath, [BIN, 'serve'], { env: childEnv, stdio: ['ignore', 'ignore', 'pipe'] });
  let errors = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    errors = `${errors}${chunk.toString('utf8')}`.slice(-4096);
  });
  try {
    for (;;) {
      const status = await readyz(port);
      if (status === 200) break;
      if (child.exitCode !== null) throw new Error(`agentry serve exited with ${child.exitCode}: ${errors}`);
      if (performance.now() - started > READY_TIMEOUT_MS) throw new Error(`agentry serve not ready: ${errors}`);
      await new Promise((resolve) => setTimeout(resolve, PROBE_MS));
    }
    const wallS = (performance.now() - started) / 1000;
    return { wallS, cpuS: statSeconds(`/proc/${child.pid}/stat`, false) };
  } finally {
    await stopProcess(child);
  }
}

function medianOf(starts: readonly Start[], pick: (start: Start) => number | null): number | null {
  const values = starts.map(pick);
  return values.some((value) => value === null) ? null : median(values as number[]);
}

function results(name: string, starts: readonly Start[], goal: number | null): BenchResult[] {
  const wall = starts.map((start) => start.wallS);
  const cpu = medianOf(starts, (start) => start.cpuS);
  return [
    { name, value: median(wall), unit: 's', ...(goal === null ? {} : { goal: `value <= ${goal}` }), rounds: wall },
    ...(cpu === null ? [] : [{ name: `${name}, CPU (user+sys)`, value: cpu, unit: 's' }]),
  ];
}

async function measure(
  label: string,
  runs: number,
  once: () => Promise<Start>,
  warmUp: boolean,
): Promise<readonly Start[]> {
  if (warmUp) await once();
  const starts: Start[] = [];
  for (let run = 0; run < runs; run++) {
    const start = await once();
    process.stderr.write(
      `startup: ${label} run ${run + 1}: ${start.wallS.toFixed(3)} s${start.cpuS === null ? '' : `, CPU ${start.cpuS.toFixed(2)} s`}\n`,
    );
    starts.push(start);
  }
  return starts;
}

export async function runStartupBench(): Promise<BenchResult[]> {
  const runs = scaledInt('BENCH_STARTUP_RUNS', 9);
  return withCleanup(async (defer) => {
    const cacheDir = await tempDir('startup-cache', defer);
    const cached: NodeJS.ProcessEnv = { ...process.env, NODE_COMPILE_CACHE: cacheDir };
    delete cached.NODE_DISABLE_COMPILE_CACHE;
    const uncached: NodeJS.ProcessEnv = { ...process.env, NODE_DISABLE_COMPILE_CACHE: '1' };
    delete uncached.NODE_COMPILE_CACHE;
    return [
      ...results('agentry --help', await measure('--help', runs, () => helpOnce(cached), true), 0.3),
      ...results(
        'server ready (sqlite, fresh)',
        await measure('serve', runs, () => serverOnce(cached, defer), true),
        1,
      ),
      ...results(
        'agentry --help, no compile cache',
        await measure('--help, no cache', runs, () => helpOnce(uncached), false),
        null,
      ),
      ...results(
        'server ready, no compile cache',
        await measure('serve, no cache', runs, () => serverOnce(uncached, defer), false),
        null,
      ),
    ];
  });
}

if (import.meta.main) await runStandalone(runStartupBench);
