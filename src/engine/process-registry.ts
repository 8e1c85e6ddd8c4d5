/**
 * The registry of live engine processes. Each process that runs turns keeps a row in `engine_processes` alive
 * with a heartbeat (every third of `ttlMs`). A session whose lease names a process without a live row can be
 * claimed at once (lease.ts), so a restarted or surviving process resumes a dead one's turns within `ttlMs` plus
 * one poll, instead of waiting out the whole session lease. A process that is merely slow and misses its
 * heartbeats loses its sessions the same way a process whose lease lapsed does: the fencing token stops its writes.
 */
import type { Logger } from 'pino';
import { heartbeatProcess, pruneProcesses, registerProcess, removeProcess } from '../domain/turns/engine-processes.ts';
import type { Clock } from '../lib/clock.ts';
import type { Executor } from '../storage/db.ts';
import { isStorageFull } from '../storage/errors.ts';

/** How long a registry row of a process that stopped heartbeating is kept (for operators reading the table). */
const PRUNE_AFTER_MS = 60 * 60_000;
/** Rows that old are looked for on start and every this many heartbeats. */
const PRUNE_EVERY_BEATS = 100;

export interface ProcessRegistry {
  /**
   * Registers this process; resolves once its row is written, so its claims are never mistaken for a dead one's.
   * On a full disk it resolves without the row: the heartbeat writes it once writes work, and `registered` says so.
   */
  start(): Promise<void>;
  /** Whether this process's row is written (claims wait for it). */
  readonly registered: boolean;
  /** Deletes this process's row (after its sessions were handed over). */
  stop(): Promise<void>;
}

export interface ProcessRegistryDeps {
  db: Executor;
  clock: Clock;
  logger: Logger;
  /** The owner string this process writes into leases. */
  owner: string;
  role: string;
  /** How many turns the process runs at once (its engine's concurrency). */
  slots: number;
  ttlMs: number;
}

export function createProcessRegistry(deps: ProcessRegistryDeps): ProcessRegistry {
  const { db, clock, logger, owner, ttlMs } = deps;
  let timer: NodeJS.Timeout | null = null;
  let beating: Promise<void> = Promise.resolve();
  let beats = 0;
  let registered = false;

  async function prune(now: number): Promise<void> {
    await pruneProcesses(db, now - PRUNE_AFTER_MS);
  }

  async function register(): Promise<void> {
    await registerProcess(db, { id: owner, role: deps.role, slots: deps.slots }, clock.now(), ttlMs);
    registered = true;
  }

  async function beat(): Promise<void> {
    const now = clock.now();
    // Not written yet (a full disk at start), or pruned while this process was frozen: come back (the leases it
    // lost meanwhile stay lost).
    if (!registered || !(await heartbeatProcess(db, owner, now, ttlMs))) await register();
    if (++beats % PRUNE_EVERY_BEATS === 0) await prune(now);
  }

  return {
    get registered() {
      return registered;
    },
    async start() {
      try {
        await register();
        await prune(clock.now());
      } catch (error) {
        // A process that starts on a full disk starts read-only (storage-space.ts logged why): the beat registers it.
        if (!isStorageFull(error)) throw error;
      }
      timer = setInterval(
        () => {
          beating = beat().catch((error: unknown) => {
            if (!isStorageFull(error)) logger.warn({ err: error }, 'engine process heartbeat failed');
          });
        },
        Math.max(50, Math.floor(ttlMs / 3)),
      );
      timer.unref();
    },
    async stop() {
      if (timer !== null) clearInterval(timer);
      timer = null;
      await beating;
      await removeProcess(db, owner);
    },
  };
}
