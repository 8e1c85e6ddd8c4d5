/**
 * The in-process half of bench/memory.ts, run as its own process with --expose-gc: on SQLite, BENCH_MEMORY_TURNS
 * turns (20,000 by default) by 64 closed loops in parallel; resident size and heap are sampled after a full GC
 * once a tenth of them have run and again at the end. Prints one JSON line on stdout; progress goes to stderr.
 *
 * Each loop moves to a fresh session every SESSION_TURNS turns. A turn re-reads its session's whole history, so
 * 64 sessions of 300+ turns each would make the later turns several times slower than the first ones and the
 * phase would measure history length as much as retained memory; fresh sessions keep every turn alike, and the
 * hundreds of sessions created, claimed and released would also show state kept per session.
 *
 * `node --expose-gc bench/turns-memory.ts`
 */
import { readFileSync } from 'node:fs';
import type { MemoryReport, MemorySample } from './memory.ts';
import { positiveInt, withCleanup } from './support.ts';
import { log, openWorld, parallelTurns } from './turns.ts';

const LOOPS = 64;
const SESSION_TURNS = 50;
const MB = 1024 * 1024;

interface Sample extends MemorySample {
  externalMb: number;
  /** RssAnon/RssFile/RssShmem of /proc/self/status, to tell the heap and malloc from mapped files. */
  breakdown: string;
}

function rssBreakdown(): string {
  try {
    const status = readFileSync('/proc/self/status', 'utf8');
    return ['RssAnon', 'RssFile', 'RssShmem']
      .map((field) => {
        const kb = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1];
        return `${field} ${kb === undefined ? '?' : (Number(kb) / 1024).toFixed(1)} MB`;
      })
      .join(', ');
  } catch {
    return 'no /proc/self/status';
  }
}

async function settledMemory(): Promise<Sample> {
  const gc = globalThis.gc;
  if (gc === undefined) throw new Error('run with node --expose-gc: the samples must be taken after a full GC');
  // Two collections with a macrotask between them, so finalizers and weak callbacks of the first have run.
  gc();
  await new Promise((resolve) => setTimeout(resolve, 50));
  gc();
  const usage = process.memoryUsage();
  return {
    rssMb: usage.rss / MB,
    heapUsedMb: usage.heapUsed / MB,
    heapTotalMb: usage.heapTotal / MB,
    externalMb: usage.external / MB,
    breakdown: rssBreakdown(),
  };
}

function describe(turns: number, sample: Sample): string {
  return (
    `after ${turns} turns: rss ${sample.rssMb.toFixed(1)} MB (${sample.breakdown}), ` +
    `heap used ${sample.heapUsedMb.toFixed(1)} of ${sample.heapTotalMb.toFixed(1)} MB, external ${sample.externalMb.toFixed(1)} MB`
  );
}

async function main(): Promise<void> {
  const total = positiveInt('BENCH_MEMORY_TURNS', 20_000);
  const first = Math.max(1, Math.floor(total / 10));
  const report = await withCleanup(async (defer): Promise<MemoryReport> => {
    const world = await openWorld({ kind: 'sqlite' }, defer);
    const sessions: string[] = [];
    for (let i = 0; i < LOOPS; i++) sessions.push(await world.newSession());
    log(`memory: ${first} turns by ${LOOPS} loops (a new session every ${SESSION_TURNS} turns), then to ${total}`);
    await parallelTurns(world, sessions, first, SESSION_TURNS);
    const before = await settledMemory();
    log(`memory: ${describe(first, before)}`);
    const elapsed = await parallelTurns(world, sessions, total - first, SESSION_TURNS);
    const after = await settledMemory();
    log(`memory: ${describe(total, after)} (${Math.round(((total - first) / elapsed) * 1000)} turns/s)`);
    const numbers = (sample: Sample): MemorySample => ({
      rssMb: sample.rssMb,
      heapUsedMb: sample.heapUsedMb,
      heapTotalMb: sample.heapTotalMb,
    });
    return { firstTurns: first, totalTurns: total, first: numbers(before), last: numbers(after) };
  });
  process.stdout.write(`${JSON.stringify(report)}\n`);
}

try {
  await main();
} catch (error) {
  console.error(error);
  process.exitCode = 1;
}
