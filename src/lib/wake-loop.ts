/**
 * A background pass over the database that runs when it is rung and otherwise on a slow poll: ringing runs it
 * at once, or `minGapMs` after the last pass began when that is later, so a flood of rings under load costs at most
 * one pass per gap; rings during a pass run it once more after. The poll is the fallback for news nobody rang
 * about (another process without a shared bus, a ring lost with Redis). Passes never overlap.
 */
import { performance } from 'node:perf_hooks';

export interface WakeLoop {
  /** Runs the first pass at once, then polls. */
  start(): void;
  /** Asks for a pass soon. */
  ring(): void;
  /** No pass starts after this; resolves once the one in flight ended. */
  stop(): Promise<void>;
}

export interface WakeLoopOptions {
  /** The fallback poll: a pass at the latest this long after the last one ended. */
  pollMs: number;
  /** The shortest time between the starts of two passes that rings asked for. */
  minGapMs: number;
}

/** `pass` must not reject: it logs its own failures (the next ring or poll tries again). */
export function createWakeLoop(pass: () => Promise<void>, options: WakeLoopOptions): WakeLoop {
  let timer: { at: number; handle: NodeJS.Timeout } | null = null;
  let running: Promise<void> | null = null;
  let rung = false;
  let stopped = true;
  let lastStart = Number.NEGATIVE_INFINITY;

  /** Sets the next pass at `at`, unless one is already set sooner. */
  function runAt(at: number): void {
    if (stopped) return;
    if (timer !== null) {
      if (timer.at <= at) return;
      clearTimeout(timer.handle);
    }
    const handle = setTimeout(run, Math.max(0, at - performance.now()));
    handle.unref();
    timer = { at, handle };
  }

  function run(): void {
    timer = null;
    if (stopped || running !== null) return;
    rung = false;
    lastStart = performance.now();
    const ended = () => {
      running = null;
      runAt(rung ? lastStart + options.minGapMs : performance.now() + options.pollMs);
    };
    running = pass().then(ended, ended);
  }

  return {
    start() {
      if (!stopped) return;
      stopped = false;
      runAt(performance.now());
    },
    ring() {
      if (stopped) return;
      if (running !== null) rung = true;
      else runAt(lastStart + options.minGapMs);
    },
    async stop() {
      stopped = true;
      if (timer !== null) clearTimeout(timer.handle);
      timer = null;
      await running;
    },
  };
}
