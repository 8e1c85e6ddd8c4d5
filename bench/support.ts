/**
 * Pieces every bench shares: the result shape, settings from the environment, the databases to run on and
 * their throwaway storage, starting and stopping server child processes, and the summary table. Servers run as
 * children so the load generator never shares their event loop. (An in-process Agentry core is in world.ts, so
 * that importing this file does not load the application.)
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes, randomInt } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import pg from 'pg';

/**
 * One measured figure. `goal` reads `<ratio|value> <op> <number>` (e.g. `ratio >= 0.5`) so the summary can
 * say whether it was met without each bench re-implementing the check.
 */
export interface BenchResult {
  name: string;
  value: number;
  unit: string;
  baseline?: number;
  ratio?: number;
  goal?: string;
}

export const REPO_ROOT = resolve(import.meta.dirname, '..');

/** A positive number (or integer) from the environment variable `name`; `fallback` when it is unset or empty. */
export function positiveNumber(name: string, fallback: number, kind: 'number' | 'integer' = 'number'): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  const valid = kind === 'integer' ? Number.isInteger(value) : Number.isFinite(value);
  if (!valid || value <= 0) throw new Error(`${name} must be a positive ${kind}, got ${raw}`);
  return value;
}

export function positiveInt(name: string, fallback: number): number {
  return positiveNumber(name, fallback, 'integer');
}

/** Nearest-rank percentile of ascending `sorted`: the smallest sample with at least p% of them at or below it. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1] ?? Number.NaN;
}

/** A database to run a bench on. */
export type Variant = { kind: 'sqlite' } | { kind: 'postgres'; databaseUrl: string };

const DEFAULT_POSTGRES_URL = 'postgres://postgres@127.0.0.1:5432/test';

/** SQLite always; Postgres too with BENCH_POSTGRES=1 (at DATABASE_URL, or a local default) or DATABASE_URL. */
export function variants(): Variant[] {
  const list: Variant[] = [{ kind: 'sqlite' }];
  const databaseUrl = process.env.DATABASE_URL;
  if (process.env.BENCH_POSTGRES === '1' || (databaseUrl !== undefined && databaseUrl !== '')) {
    list.push({ kind: 'postgres', databaseUrl: databaseUrl || DEFAULT_POSTGRES_URL });
  }
  return list;
}

/** A fresh `agentry-bench-<bench>-*` directory under the OS temp dir, removed by the deferred cleanup. */
export async function tempDir(bench: string, defer: Defer): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), `agentry-bench-${bench}-`));
  defer(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/**
 * The name of a throwaway Postgres schema, `bench_<bench>_<random>`, which keeps the bench's rows out of
 * whatever else lives in that database. Its drop is deferred now, so call this before starting anything that
 * uses the schema: the drop then runs after that has been stopped.
 */
export function throwawaySchema(databaseUrl: string, bench: string, defer: Defer): string {
  const schema = `bench_${bench}_${randomBytes(6).toString('hex')}`;
  defer(() => dropSchema(databaseUrl, schema));
  return schema;
}

async function dropSchema(databaseUrl: string, schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    // The name is generated above from [a-z0-9_], so quoting it is enough.
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await client.end();
  }
}

export interface ServerEnvOptions {
  dataDir: string;
  apiKey: string;
  /** Whether a REDIS_URL of this process passes on to the server. */
  redis: boolean;
  /** More variables for the server. */
  extra?: Record<string, string>;
}

/**
 * The environment of an Agentry server child: this process's, listening on an ephemeral port of 127.0.0.1,
 * logging warnings only, with its own data directory and bootstrap key, and on SQLite: DATABASE_URL and
 * AGENTRY_DATABASE_SCHEMA are removed (set them on the result for a Postgres run).
 */
export function serverEnv(options: ServerEnvOptions): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    AGENTRY_DATA_DIR: options.dataDir,
    AGENTRY_BOOTSTRAP_KEY: options.apiKey,
    ...options.extra,
  };
  delete env.DATABASE_URL;
  delete env.AGENTRY_DATABASE_SCHEMA;
  if (!options.redis) delete env.REDIS_URL;
  return env;
}

const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

export function randomAlnum(length: number): string {
  let out = '';
  // randomInt per character avoids the modulo bias of mapping random bytes onto 62 symbols.
  for (let i = 0; i < length; i++) out += ALNUM[randomInt(ALNUM.length)];
  return out;
}

/** Same shape the server's config insists on for AGENTRY_BOOTSTRAP_KEY. */
export function generateApiKey(): string {
  return `agk_${randomAlnum(40)}`;
}

export interface ServerProcess {
  name: string;
  child: ChildProcess;
  /** Base URL as the server announced it, without a trailing slash. */
  url: string;
  /** Last few KB of the child's stdout+stderr, for error messages. */
  output(): string;
}

// The server may log JSON, so the URL can be followed by a quote or escaped characters.
const LISTENING = /listening on (https?:\/\/[^\s"'\\]+)/;
const OUTPUT_TAIL_CHARS = 8192;

// Children still alive when the bench process exits (an uncaught error, process.exit) would keep ports and
// CPU busy for the next run, so they are killed synchronously on the way out.
const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

export interface StartOptions {
  name: string;
  args: readonly string[];
  cwd: string;
  env: NodeJS.ProcessEnv;
  timeoutMs: number;
}

/** Spawns `node <args>` and resolves once it prints `listening on <url>` on either stream. */
export function startServer(options: StartOptions): Promise<ServerProcess> {
  const child = spawn(process.execPath, options.args, {
    cwd: options.cwd,
    env: options.env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  live.add(child);
  child.once('exit', () => live.delete(child));

  let tail = '';
  const output = (): string => tail;
  return new Promise<ServerProcess>((resolvePromise, reject) => {
    let settled = false;
    // Per-stream buffers until the line is found: a chunk boundary can split the URL, and interleaving the
    // two streams could splice unrelated text into it.
    const pending = { stdout: '', stderr: '' };
    const finish = (error: Error | null, url?: string): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      child.off('exit', onExit);
      child.off('error', onError);
      if (error !== null || url === undefined) {
        void stopProcess(child);
        reject(error ?? new Error(`${options.name}: no URL`));
        return;
      }
      resolvePromise({ name: options.name, child, url: url.replace(/\/+$/, ''), output });
    };
    const onData = (stream: 'stdout' | 'stderr') => (chunk: Buffer) => {
      const text = chunk.toString('utf8');
      // Keep reading after startup too: an undrained pipe would eventually block the server's writes.
      tail = (tail + text).slice(-OUTPUT_TAIL_CHARS);
      if (settled) return;
      pending[stream] = (pending[stream] + text).slice(-OUTPUT_TAIL_CHARS);
      const match = LISTENING.exec(pending[stream]);
      if (match?.[1] !== undefined) finish(null, match[1]);
    };
    const onExit = (code: number | null, signal: NodeJS.Signals | null): void => {
      finish(new Error(`${options.name} exited (code ${code}, signal ${signal}) before listening:\n${tail}`));
    };
    const onError = (error: Error): void => finish(new Error(`${options.name} failed to start: ${error.message}`));
    const timer = setTimeout(() => {
      finish(new Error(`${options.name} did not print "listening on" within ${options.timeoutMs} ms:\n${tail}`));
    }, options.timeoutMs);
    child.stdout?.on('data', onData('stdout'));
    child.stderr?.on('data', onData('stderr'));
    child.once('exit', onExit);
    child.once('error', onError);
  });
}

function exited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

function waitForExit(child: ChildProcess, ms: number): Promise<boolean> {
  if (exited(child)) return Promise.resolve(true);
  return new Promise((resolvePromise) => {
    const timer = setTimeout(() => {
      child.off('exit', onExit);
      resolvePromise(false);
    }, ms);
    const onExit = (): void => {
      clearTimeout(timer);
      resolvePromise(true);
    };
    child.once('exit', onExit);
  });
}

/** SIGTERM so the server can shut down cleanly, SIGKILL if it has not gone after 5 s. */
export async function stopProcess(child: ChildProcess): Promise<void> {
  if (exited(child)) return;
  child.kill('SIGTERM');
  if (await waitForExit(child, 5000)) return;
  child.kill('SIGKILL');
  await waitForExit(child, 5000);
}

/** A cleanup step registered while a bench sets things up; run in reverse order, like Go's defer. */
export type Defer = (step: () => Promise<unknown>) => void;

async function runSteps(steps: ReadonlyArray<() => Promise<unknown>>): Promise<unknown> {
  let first: unknown;
  for (const step of [...steps].reverse()) {
    try {
      await step();
    } catch (error) {
      // Keep going: one failed cleanup must not leave later children running or temp dirs behind.
      process.stderr.write(`bench cleanup failed: ${error instanceof Error ? error.message : String(error)}\n`);
      first ??= error;
    }
  }
  return first;
}

/**
 * Runs `body`, then every step it deferred, whether or not it threw. A cleanup failure surfaces only when
 * the body succeeded, so it never hides the error that actually broke the bench.
 */
export async function withCleanup<T>(body: (defer: Defer) => Promise<T>): Promise<T> {
  const steps: Array<() => Promise<unknown>> = [];
  let result: T;
  try {
    result = await body((step) => steps.push(step));
  } catch (error) {
    await runSteps(steps);
    throw error;
  }
  const cleanupError = await runSteps(steps);
  if (cleanupError !== undefined) throw cleanupError;
  return result;
}

/** Whether `result` meets its goal; undefined when it has none or the goal is not in the known form. */
export function goalMet(result: BenchResult): boolean | undefined {
  if (result.goal === undefined) return undefined;
  const match = /^(ratio|value)\s*(>=|<=|>|<)\s*(-?\d+(?:\.\d+)?)$/.exec(result.goal.trim());
  if (match === null) return undefined;
  const [, subject, op, limitText] = match;
  const actual = subject === 'ratio' ? result.ratio : result.value;
  if (actual === undefined) return false;
  const limit = Number(limitText);
  if (op === '>=') return actual >= limit;
  if (op === '<=') return actual <= limit;
  if (op === '>') return actual > limit;
  return actual < limit;
}

function formatNumber(value: number | undefined, digits: number, fixed = false): string {
  if (value === undefined) return '';
  return value.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: fixed ? digits : 0 });
}

export function formatResults(results: readonly BenchResult[]): string {
  const header = ['name', 'value', 'unit', 'baseline', 'ratio', 'goal', 'status'];
  const rows = results.map((r) => {
    const digits = r.unit === 'req/s' ? 0 : 2;
    const met = goalMet(r);
    return [
      r.name,
      formatNumber(r.value, digits),
      r.unit,
      formatNumber(r.baseline, digits),
      formatNumber(r.ratio, 3, true),
      r.goal ?? '',
      met === undefined ? '' : met ? 'ok' : 'goal missed',
    ];
  });
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => (row[i] ?? '').length)));
  // Numbers right-aligned so magnitudes line up; text columns left-aligned.
  const numeric = new Set([1, 3, 4]);
  const line = (cells: readonly string[]): string =>
    cells
      .map((cell, i) => (numeric.has(i) ? cell.padStart(widths[i] ?? 0) : cell.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

/** For `node bench/<name>.ts`: runs one bench and prints the machine and its results table. */
export async function runStandalone(run: () => Promise<BenchResult[]>): Promise<void> {
  try {
    console.log(machineDescription());
    console.log(formatResults(await run()));
  } catch (error) {
    console.error(error);
    process.exitCode = 1;
  }
}

export function machineDescription(): string {
  const cpuList = cpus();
  const model = cpuList[0]?.model.trim() ?? 'unknown CPU';
  const memGiB = (totalmem() / 1024 ** 3).toFixed(1);
  return `${model}, ${cpuList.length} CPUs, ${memGiB} GiB RAM, Node ${process.version} on ${process.platform}/${process.arch}`;
}
