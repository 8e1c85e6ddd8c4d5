/**
 * Whether this process can write, and what it does while it cannot for lack of space (docs/operations.md, "When
 * the disk is full"). The first write that fails because the disk is full (storage/errors.ts: SQLite's
 * SQLITE_FULL, Postgres's 53100, a file system's ENOSPC) makes the process read-only: reads go on, the API refuses
 * writes with 507 insufficient_storage, /readyz answers 503, the engine, the webhook dispatcher and the schedules
 * stop claiming work. A probe every `probeMs` ends it once the data directory's file system has MIN_FREE_BYTES
 * free and a real write of the probe row commits. Each episode is logged when it starts, once a minute while it
 * lasts (with the number of writes that failed) and when it ends, instead of once per failed write.
 */
import { AsyncResource } from 'node:async_hooks';
import { statfs } from 'node:fs/promises';
import type { DatabaseConnection } from 'kysely';
import type { Logger } from 'pino';
import { DEFAULT_STORAGE_PROBE_MS } from '../config/defaults.ts';
import { storageFullError } from './errors.ts';

export { DEFAULT_STORAGE_PROBE_MS };
/**
 * Free space the data directory's file system needs before the process leaves read-only. A margin, so that a few
 * freed kilobytes that the next writes use up at once do not make it flip between read-only and writable.
 */
export const MIN_FREE_BYTES = 1024 * 1024;
/** How often a lasting episode is logged again. */
const REMINDER_MS = 60_000;

/** What the parts that write in the background (engine, webhooks, schedules) need to know. */
export interface WriteState {
  /** False while the process is read-only for lack of space. */
  readonly writable: boolean;
  /** Resolves once the process is writable (at once when it is), or once `signal` aborts. */
  whenWritable(signal?: AbortSignal): Promise<void>;
  /** Notes a failed operation; true when it failed for lack of space (the process is read-only from then on). */
  observe(error: unknown): boolean;
}

export interface StorageSpace extends WriteState {
  /** Why writes fail, in the storage's own words (e.g. "database or disk is full"); null while writable. */
  readonly cause: string | null;
  /** Seconds a refused client is asked to wait (Retry-After): the probe interval. */
  readonly retryAfterS: number;
  /** Counts a write refused up front while read-only, for the episode's log lines. */
  refused(): void;
  /** Probes now (startup): read-only when there is too little room or the probe write fails for lack of space. */
  check(): Promise<boolean>;
  close(): void;
}

export interface StorageSpaceOptions {
  /** The data directory: its file system's free space is checked before each probe write. */
  directory: string;
  /** Where the data lives, for the log (the SQLite file, or the Postgres URL without credentials). */
  location: string;
  /** Commits one small real write to the database; rejects when it cannot. */
  probeWrite(): Promise<void>;
  probeMs?: number;
  logger?: Logger;
  now?: () => number;
}

interface Episode {
  since: number;
  cause: string;
  /** Writes that failed for lack of space, or were refused up front, since the episode began. */
  failures: number;
  /** `failures` when the episode was last logged. */
  logged: number;
  loggedAt: number;
}

const mib = (bytes: number) => `${(bytes / (1024 * 1024)).toFixed(1)} MiB`;
const writes = (count: number) => `${count} write${count === 1 ? '' : 's'}`;

export function createStorageSpace(options: StorageSpaceOptions): StorageSpace {
  const probeMs = options.probeMs ?? DEFAULT_STORAGE_PROBE_MS;
  const now = options.now ?? Date.now;
  const log = options.logger?.child({ component: 'storage-space' });
  // One failure can be seen twice (by the connection and by the request it failed): counted once.
  const seen = new WeakSet<Error>();
  const waiters = new Set<() => void>();
  let episode: Episode | null = null;
  let timer: NodeJS.Timeout | null = null;
  let probing: Promise<boolean> | null = null;
  let closed = false;

  // Bound to where the monitor was made (startup), not to the request or turn whose write failed first: the
  // episode's lines and probes belong to the process, and must not carry that turn's runId.
  const enter = AsyncResource.bind((cause: string, error: Error | null): void => {
    const at = now();
    episode = { since: at, cause, failures: error === null ? 0 : 1, logged: 0, loggedAt: at };
    log?.error(
      { err: error ?? undefined, cause, location: options.location, directory: options.directory },
      `writes fail for lack of space (${cause}) at ${options.location}: this process is read-only until space returns. Reads are served; writes answer 507 insufficient_storage and /readyz answers 503; turns, webhook deliveries and schedules wait. It probes every ${probeMs / 1000} s and needs ${mib(MIN_FREE_BYTES)} free in ${options.directory}`,
    );
    schedule();
  });

  function leave(free: number | null): void {
    const ended = episode;
    episode = null;
    if (ended !== null) {
      log?.info(
        { downMs: now() - ended.since, failedWrites: ended.failures, freeBytes: free },
        `writes work again after ${Math.round((now() - ended.since) / 1000)} s read-only (${writes(ended.failures)} failed or refused for lack of space)`,
      );
    }
    for (const resolve of [...waiters]) resolve();
  }

  function remind(free: number | null): void {
    if (episode === null || now() - episode.loggedAt < REMINDER_MS) return;
    const failed = episode.failures - episode.logged;
    episode.logged = episode.failures;
    episode.loggedAt = now();
    log?.warn(
      { cause: episode.cause, failedWrites: failed, freeBytes: free, directory: options.directory },
      `still read-only for lack of space (${episode.cause}) since ${new Date(episode.since).toISOString()}: ${writes(failed)} failed or refused in the last minute; ${free === null ? 'free space unknown' : `${mib(free)} free`} in ${options.directory}`,
    );
  }

  function schedule(): void {
    if (closed || timer !== null || episode === null) return;
    timer = setTimeout(() => {
      timer = null;
      void probe().finally(schedule);
    }, probeMs);
    timer.unref();
  }

  async function freeBytes(): Promise<number | null> {
    try {
      const stats = await statfs(options.directory);
      return stats.bavail * stats.bsize;
    } catch {
      // No such directory (Postgres without local files yet): only the write decides.
      return null;
    }
  }

  function observe(error: unknown): boolean {
    const full = storageFullError(error);
    if (full === null) return false;
    if (seen.has(full)) return true;
    seen.add(full);
    if (episode === null) enter(full.message, full);
    else episode.failures += 1;
    return true;
  }

  /** True when writable after it. Errors other than a lack of space (a database that is down) change nothing. */
  function probe(): Promise<boolean> {
    probing ??= (async () => {
      const free = await freeBytes();
      if (free !== null && free < MIN_FREE_BYTES) {
        if (episode === null) enter(`only ${mib(free)} free in ${options.directory}`, null);
        remind(free);
        return false;
      }
      try {
        await options.probeWrite();
      } catch (error) {
        observe(error);
        remind(free);
        return episode === null;
      }
      leave(free);
      return true;
    })().finally(() => {
      probing = null;
    });
    return probing;
  }

  return {
    get writable() {
      return episode === null;
    },
    get cause() {
      return episode?.cause ?? null;
    },
    retryAfterS: Math.max(1, Math.ceil(probeMs / 1000)),
    refused() {
      if (episode !== null) episode.failures += 1;
    },
    observe,
    check: probe,
    whenWritable(signal) {
      if (episode === null || closed || signal?.aborted === true) return Promise.resolve();
      return new Promise<void>((resolve) => {
        const done = () => {
          waiters.delete(done);
          signal?.removeEventListener('abort', done);
          resolve();
        };
        waiters.add(done);
        signal?.addEventListener('abort', done, { once: true });
      });
    },
    close() {
      closed = true;
      if (timer !== null) clearTimeout(timer);
      timer = null;
      for (const resolve of [...waiters]) resolve();
    },
  };
}

/**
 * Passes every failure of a statement on `connection` (COMMITs included) to `report`, then rethrows it: installed
 * once per connection (Kysely's `onCreateConnection`), so a write that fails for lack of space is noticed wherever it
 * was made, by a request, a turn or a background job.
 */
export function reportFailures(connection: DatabaseConnection, report: (error: unknown) => void): void {
  const execute = connection.executeQuery.bind(connection);
  connection.executeQuery = async (query, options) => {
    try {
      return await execute(query, options);
    } catch (error) {
      report(error);
      throw error;
    }
  };
}
