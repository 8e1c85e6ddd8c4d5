/**
 * Pieces every bench shares: the result shape, settings from the environment, the databases to run on and
 * their throwaway storage, the environment of server children, cleanup, and the summary table. (Server child
 * processes are started by children.ts; an in-process Agentry core is in world.ts, so that importing this file
 * does not load the application.)
 */
import { randomBytes, randomInt } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
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
  /**
   * The figure the goal is on (the ratio when there is one, else the value), round by round, for results measured
   * in paired rounds; the reported ratio or value is their median.
   */
  rounds?: readonly number[];
  /** Said under the table: what the figure is not (a peer that could not run, a tuned setting). */
  note?: string;
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

/** Like positiveNumber, but 0 is allowed too (e.g. a poll interval of 0: poll again at once). */
export function nonNegativeNumber(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < 0) throw new Error(`${name} must be a number >= 0, got ${raw}`);
  return value;
}

/**
 * BENCH_SCALE (default 1) multiplies the default durations and turn counts of the benches that use scaled() and
 * scaledInt(): 0.2 for a quick check that everything runs, 3 for steadier figures. An explicitly set variable wins.
 */
export function benchScale(): number {
  return positiveNumber('BENCH_SCALE', 1);
}

/** Seconds (or any real quantity) from `name`, else `fallback` times BENCH_SCALE. */
export function scaled(name: string, fallback: number): number {
  return positiveNumber(name, fallback * benchScale());
}

/** A count from `name`, else `fallback` times BENCH_SCALE, rounded, and at least `min`. */
export function scaledInt(name: string, fallback: number, min = 1): number {
  return positiveInt(name, Math.max(min, Math.round(fallback * benchScale())));
}

/** The median of `values` (the mean of the middle two for an even count); NaN when empty. */
export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  const upper = sorted[middle] ?? Number.NaN;
  return sorted.length % 2 === 1 ? upper : ((sorted[middle - 1] ?? Number.NaN) + upper) / 2;
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
const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';

/** The Postgres server of the Postgres variants: DATABASE_URL, or the local one the test suite uses too. */
export function postgresUrl(): string {
  return process.env.DATABASE_URL || DEFAULT_POSTGRES_URL;
}

/** The Redis server of the cluster-mode runs: REDIS_URL, or the local one the test suite uses too. */
export function redisUrl(): string {
  return process.env.REDIS_URL || DEFAULT_REDIS_URL;
}

/** SQLite unless BENCH_SQLITE=0, and Postgres (at DATABASE_URL, or a local default) unless BENCH_POSTGRES=0. */
export function variants(): Variant[] {
  const list: Variant[] = process.env.BENCH_SQLITE === '0' ? [] : [{ kind: 'sqlite' }];
  if (process.env.BENCH_POSTGRES !== '0') list.push({ kind: 'postgres', databaseUrl: postgresUrl() });
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
  /** `warn` (the default here) keeps the server quiet; `default` leaves it at its own default (info), as users run it. */
  logLevel?: 'warn' | 'default';
  /** More variables for the server. */
  extra?: Record<string, string>;
}

/**
 * The environment of an Agentry server child: this process's, listening on an ephemeral port of 127.0.0.1,
 * logging warnings only (unless told otherwise), with its own data directory and bootstrap key, and on SQLite:
 * DATABASE_URL and AGENTRY_DATABASE_SCHEMA are removed (set them on the result for a Postgres run).
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
  if (options.logLevel === 'default') {
    delete env.LOG_LEVEL;
    delete env.AGENTRY_LOG_FORMAT;
  }
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
  const header = ['name', 'value', 'unit', 'baseline', 'ratio', 'goal', 'status', 'per round'];
  const rows = results.map((r) => {
    const digits = r.unit === 'req/s' || r.unit === 'turns/s' ? 0 : 2;
    const met = goalMet(r);
    const roundDigits = r.ratio === undefined ? digits : 3;
    return [
      r.name,
      formatNumber(r.value, digits),
      r.unit,
      formatNumber(r.baseline, digits),
      formatNumber(r.ratio, 3, true),
      r.goal ?? '',
      met === undefined ? '' : met ? 'goal met' : 'goal missed',
      (r.rounds ?? []).map((value) => formatNumber(value, roundDigits, true)).join(' '),
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
  const notes = results.filter((r) => r.note !== undefined).map((r) => `${r.name}: ${r.note}`);
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line), ...notes].join('\n');
}

/** For `node bench/<name>.ts`: runs one bench and prints the machine and its results table. */
export async function runStandalone(run: () => Promise<BenchResult[]>): Promise<void> {
  try {
    console.log(`${machineDescription()}; ${loadAverage()}`);
    const results = await run();
    console.log(`${loadAverage()}\n${formatResults(results)}`);
  } catch (error) {
    console.error(error);
    process.exitCode = 1;
  }
}

/** The 1, 5 and 15-minute load averages: how busy the machine was while a figure was measured. */
export function loadAverage(): string {
  return `load average ${loadavg()
    .map((value) => value.toFixed(2))
    .join(', ')}`;
}

export function machineDescription(): string {
  const cpuList = cpus();
  const model = cpuList[0]?.model.trim() ?? 'unknown CPU';
  const memGiB = (totalmem() / 1024 ** 3).toFixed(1);
  return `${model}, ${cpuList.length} CPUs, ${memGiB} GiB RAM, Node ${process.version} on ${process.platform}/${process.arch}`;
}
