/**
 * WAL checkpoints of the server's SQLite file on a thread of their own. SQLite otherwise checkpoints inside the
 * COMMIT that pushes the write-ahead log past `wal_autocheckpoint` pages: that COMMIT copies the log into the
 * database file and syncs both, blocking the event loop for milliseconds (a busy server spent more than half of
 * its COMMIT time there). This thread runs a PASSIVE checkpoint, which never waits for readers or writers, every
 * CHECKPOINT_INTERVAL_MS through its own connection, so most of the log is already in the database file when the
 * server's connection reaches its own (raised) `wal_autocheckpoint`: that COMMIT copies only the rest, and the log
 * starts over. (Under steady writes the thread alone never finds the log fully copied at the moment a writer
 * starts, which is when SQLite restarts it: without the in-COMMIT checkpoint the log would grow to that limit
 * whatever it is, and a server's resident memory with it.)
 *
 * Loaded as a worker: `startCheckpointer` is called on the main thread, the code at the bottom runs in the worker.
 */
import { DatabaseSync } from 'node:sqlite';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { SERVER_AUTOCHECKPOINT_PAGES } from '../config/defaults.ts';
import { isJsonObject } from '../lib/guards.ts';

/** How often the worker checkpoints. */
export const CHECKPOINT_INTERVAL_MS = 250;
/** The server connection's default `wal_autocheckpoint` while the thread runs (see config/defaults.ts). */
export { SERVER_AUTOCHECKPOINT_PAGES };

export interface Checkpointer {
  stop(): Promise<void>;
}

interface CheckpointerData {
  path: string;
  busyTimeoutMs: number;
  intervalMs: number;
}

function isCheckpointerData(value: unknown): value is CheckpointerData {
  return (
    isJsonObject(value) &&
    typeof value.path === 'string' &&
    typeof value.busyTimeoutMs === 'number' &&
    typeof value.intervalMs === 'number'
  );
}

/**
 * Starts the checkpoint thread of the database at `path`. A thread that fails (it reports why through
 * `onError`) leaves checkpoints to the server connection's `wal_autocheckpoint`.
 */
export function startCheckpointer(
  path: string,
  options: { busyTimeoutMs: number; intervalMs?: number; onError?: (error: unknown) => void },
): Checkpointer {
  const data: CheckpointerData = {
    path,
    busyTimeoutMs: options.busyTimeoutMs,
    intervalMs: options.intervalMs ?? CHECKPOINT_INTERVAL_MS,
  };
  const worker = new Worker(new URL(import.meta.url), { workerData: data });
  worker.unref();
  worker.on('error', (error) => options.onError?.(error));
  const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
  let stopping = false;
  return {
    stop() {
      if (!stopping) {
        stopping = true;
        // A thread that already ended (it failed) ignores the message; `exited` has resolved then.
        worker.postMessage('stop');
      }
      return exited;
    },
  };
}

function runWorker(data: CheckpointerData): void {
  const database = new DatabaseSync(data.path, { timeout: data.busyTimeoutMs });
  database.exec('PRAGMA synchronous = NORMAL');
  const checkpoint = database.prepare('PRAGMA wal_checkpoint(PASSIVE)');
  const timer = setInterval(() => {
    try {
      checkpoint.get();
    } catch {
      // Busy or locked: the next interval tries again (a PASSIVE checkpoint never waits).
    }
  }, data.intervalMs);
  parentPort?.on('message', (message) => {
    if (message !== 'stop') return;
    clearInterval(timer);
    database.close();
    parentPort?.close();
  });
}

if (!isMainThread && isCheckpointerData(workerData)) runWorker(workerData);
