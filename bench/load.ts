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
 * `rounds` rounds of every side, in the given order on even rounds and in reverse on odd ones (A B C, C B A, …),
 * so that no side is always the one measured right after another. Returns each round's results in side order.
 */
export async function alternatingRounds<T>(
  rounds: number,
  sides: ReadonlyArray<() => Promise<T>>,
  onRound?: (results: readonly T[], index: number) => void,
): Promise<T[][]> {
  const done: T[][] = [];
  for (let index = 0; index < rounds; index++) {
    const order = sides.map((_, i) => i);
    if (index % 2 === 1) order.reverse();
    const results = new Map<number, T>();
    for (const i of order) {
      const side = sides[i];
      if (side !== undefined) results.set(i, await side());
    }
    const inOrder = sides.map((_, i) => results.get(i)).filter((result) => result !== undefined);
    onRound?.(inOrder, index);
    done.push(inOrder);
  }
  return done;
}

/** alternatingRounds of two sides (A B, B A, …), each round as `{ a, b }`. */
export async function pairedRounds<T>(
  rounds: number,
  a: () => Promise<T>,
  b: () => Promise<T>,
  onRound?: (round: PairedRound<T>, index: number) => void,
): Promise<PairedRound<T>[]> {
  const pair = ([first, second]: readonly T[]): PairedRound<T> => {
    if (first === undefined || second === undefined) throw new Error('a round lost a side');
    return { a: first, b: second };
  };
  const done = await alternatingRounds(rounds, [a, b], (results, index) => onRound?.(pair(results), index));
  return done.map(pair);
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
