/**
 * The schedule ticker of a worker process (docs/schedules.md). Every poll it claims the due ticks of every
 * schedule (one conditional UPDATE each; several processes race and one wins), starts the runs that may start,
 * and cancels the turns of runs past their deadline. All of it lives in the database, so any number of workers
 * share the work and a restarted or surviving one continues where a dead one stopped: nothing is held in memory.
 */
import type { Logger } from 'pino';
import type { ScheduleRunner } from '../domain/schedules/schedule-runner.ts';
import { isStorageFull } from '../storage/errors.ts';
import type { WriteState } from '../storage/storage-space.ts';

export interface SchedulerOptions {
  pollMs: number;
  /** A tick later than this was missed (no worker ran); the schedule's catch_up policy decides. */
  misfireGraceMs: number;
  /** Whether writes work: while the disk is full the poll skips its passes (a tick fired later follows catch_up). */
  space: WriteState;
}

export interface Scheduler {
  start(): void;
  /** Stops polling and waits for the pass in flight. */
  stop(): Promise<void>;
  /** Runs one pass now (and returns when it is done); concurrent calls share the pass in flight. */
  poke(): Promise<void>;
}

/** The ticker's state: the pass in flight, and whether another was asked for meanwhile. */
interface Ticker {
  readonly runner: ScheduleRunner;
  readonly log: Logger;
  readonly options: SchedulerOptions;
  timer: NodeJS.Timeout | null;
  stopping: boolean;
  current: Promise<void> | null;
  again: boolean;
}

export function createScheduler(runner: ScheduleRunner, logger: Logger, options: SchedulerOptions): Scheduler {
  const ticker: Ticker = {
    runner,
    log: logger.child({ component: 'scheduler' }),
    options,
    timer: null,
    stopping: false,
    current: null,
    again: false,
  };
  return {
    start() {
      ticker.stopping = false;
      void poke(ticker);
      schedule(ticker);
    },
    async stop() {
      ticker.stopping = true;
      if (ticker.timer !== null) clearTimeout(ticker.timer);
      await ticker.current;
    },
    poke: () => poke(ticker),
  };
}

/** One pass: fires the due ticks, starts the runs that may start, and enforces the runs' deadlines. */
async function pass(ticker: Ticker): Promise<void> {
  const { runner, options, log } = ticker;
  const fired = await runner.fireDue(options.misfireGraceMs);
  const waiting = new Set([...fired, ...(await runner.waiting())]);
  for (const scheduleId of waiting) {
    if (ticker.stopping) return;
    try {
      await runner.dispatch(scheduleId);
    } catch (error) {
      if (!isStorageFull(error)) {
        log.error({ err: error, scheduleId }, 'starting a schedule run failed; it is retried at the next poll');
      }
    }
  }
  await runner.enforceTimeouts();
}

function poke(ticker: Ticker): Promise<void> {
  if (ticker.current !== null) {
    ticker.again = true;
    return ticker.current;
  }
  const current = (async () => {
    try {
      do {
        ticker.again = false;
        await pass(ticker);
      } while (ticker.again && !ticker.stopping);
    } catch (error) {
      if (!isStorageFull(error)) ticker.log.error({ err: error }, 'schedule pass failed');
    }
  })().finally(() => {
    ticker.current = null;
  });
  ticker.current = current;
  return current;
}

function schedule(ticker: Ticker): void {
  if (ticker.stopping) return;
  ticker.timer = setTimeout(() => {
    if (ticker.options.space.writable) void poke(ticker).finally(() => schedule(ticker));
    else schedule(ticker);
  }, ticker.options.pollMs);
  ticker.timer.unref();
}
