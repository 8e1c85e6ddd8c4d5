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

export function createScheduler(runner: ScheduleRunner, logger: Logger, options: SchedulerOptions): Scheduler {
  const log = logger.child({ component: 'scheduler' });
  let timer: NodeJS.Timeout | null = null;
  let stopping = false;
  let current: Promise<void> | null = null;
  let again = false;

  async function pass(): Promise<void> {
    const fired = await runner.fireDue(options.misfireGraceMs);
    const waiting = new Set([...fired, ...(await runner.waiting())]);
    for (const scheduleId of waiting) {
      if (stopping) return;
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

  function poke(): Promise<void> {
    if (current !== null) {
      again = true;
      return current;
    }
    current = (async () => {
      try {
        do {
          again = false;
          await pass();
        } while (again && !stopping);
      } catch (error) {
        if (!isStorageFull(error)) log.error({ err: error }, 'schedule pass failed');
      }
    })().finally(() => {
      current = null;
    });
    return current;
  }

  function schedule(): void {
    if (stopping) return;
    timer = setTimeout(() => {
      if (options.space.writable) void poke().finally(schedule);
      else schedule();
    }, options.pollMs);
    timer.unref();
  }

  return {
    start() {
      stopping = false;
      void poke();
      schedule();
    },
    async stop() {
      stopping = true;
      if (timer !== null) clearTimeout(timer);
      await current;
    },
    poke,
  };
}
