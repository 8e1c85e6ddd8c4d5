/**
 * Load shapes shared by the benches: closed loops for a fixed time (each loop sends its next call when the
 * previous one answered, as clients do) or for a fixed number of calls, and paired rounds that alternate two
 * sides so that both see the same machine. On a shared 2-core machine the load of other work changes from one
 * second to the next; measuring A then B then B then A and taking the ratio of each round cancels most of it,
 * where "best of A" against "best of B" would compare two different moments.
 */
import { median, percentile } from './support.ts';

export interface LoopStats {
  /** Calls that ended inside the measured window. */
  completed: number;
  /** Seconds of the measured window. */
  seconds: number;
  /** Latency (ms) of each call that both started and ended inside the window, ascending. */
  latencies: number[];
}

export function perSecond(stats: LoopStats): number {
  return stats.completed / stats.seconds;
}

export function p50(stats: LoopStats): number {
  return percentile(stats.latencies, 50);
}

export interface TimedLoopsOptions {
  concurrency: number;
  /** Seconds during which the loops run but nothing is counted (connections open, the server's JIT warms up). */
  rampSeconds: number;
  /** Seconds measured after the ramp. */
  seconds: number;
  /** One call of loop `loop` (0-based); a thrown error stops every loop and fails the run. */
  call: (loop: number) => Promise<void>;
}

/**
 * `concurrency` closed loops for `rampSeconds + seconds`. When the time is up no loop starts another call, and
 * this resolves once the calls in flight have ended, so the next measurement starts on an idle server.
 */
export async function timedLoops(options: TimedLoopsOptions): Promise<LoopStats> {
  const started = performance.now();
  const windowStart = started + options.rampSeconds * 1000;
  const windowEnd = windowStart + options.seconds * 1000;
  let completed = 0;
  let failed = false;
  const latencies: number[] = [];
  await Promise.all(
    Array.from({ length: options.concurrency }, async (_, loop) => {
      while (!failed && performance.now() < windowEnd) {
        const callStart = performance.now();
        try {
          await options.call(loop);
        } catch (error) {
          failed = true;
          throw error;
        }
        const callEnd = performance.now();
        if (callEnd >= windowStart && callEnd <= windowEnd) {
          completed += 1;
          if (callStart >= windowStart) latencies.push(callEnd - callStart);
        }
      }
    }),
  );
  return { completed, seconds: options.seconds, latencies: latencies.sort((a, b) => a - b) };
}

/**
 * `total` calls by `concurrency` closed loops (a shared counter: a loop takes the next call while any are left).
 * Resolves with the elapsed milliseconds.
 */
export async function countedLoops(
  concurrency: number,
  total: number,
  call: (loop: number) => Promise<void>,
): Promise<number> {
  let issued = 0;
  let failed = false;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async (_, loop) => {
      while (!failed && issued < total) {
        issued += 1;
        try {
          await call(loop);
        } catch (error) {
          failed = true;
          throw error;
        }
      }
    }),
  );
  return performance.now() - started;
}

export interface PairedRound<T> {
  a: T;
  b: T;
}

/**
 * `rounds` rounds of `a` and `b`, alternating which goes first (A B, B A, A B, …) so that neither side is always
 * the one measured right after the other. `onRound` sees each finished round (for progress lines).
 */
export async function pairedRounds<T>(
  rounds: number,
  a: () => Promise<T>,
  b: () => Promise<T>,
  onRound?: (round: PairedRound<T>, index: number) => void,
): Promise<PairedRound<T>[]> {
  const done: PairedRound<T>[] = [];
  for (let index = 0; index < rounds; index++) {
    let first: T;
    let second: T;
    if (index % 2 === 0) {
      first = await a();
      second = await b();
    } else {
      second = await b();
      first = await a();
    }
    const round = { a: first, b: second };
    onRound?.(round, index);
    done.push(round);
  }
  return done;
}

/** Per-round ratios `subject(round) / baseline(round)` and their median. */
export function roundRatios<T>(
  rounds: readonly PairedRound<T>[],
  figure: (side: T) => number,
  subject: 'a' | 'b',
): { ratios: number[]; median: number } {
  const ratios = rounds.map((round) =>
    subject === 'a' ? figure(round.a) / figure(round.b) : figure(round.b) / figure(round.a),
  );
  return { ratios, median: median(ratios) };
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
