/**
 * WAL checkpoints of the server's SQLite file on a thread of their own, so that the event loop neither copies the
 * log into the database file nor waits for its syncs.
 *
 * SQLite otherwise checkpoints inside the COMMIT that pushes the write-ahead log past `wal_autocheckpoint` pages:
 * that COMMIT copies the log's pages into the database file and syncs both files, blocking the event loop for
 * 10-45 ms on a virtual disk, several times a second under steady turns. Here:
 *
 * - the thread runs a PASSIVE checkpoint, which never waits for readers or writers, every CHECKPOINT_INTERVAL_MS
 *   through its own connection: most of the log reaches the database file while the server goes on writing;
 * - the log starts over only when a write transaction begins with every frame already copied, which under steady
 *   writes the thread never finds on its own. So once the log holds `restartPages` frames the thread copies what
 *   came meanwhile once or twice more, then asks the server to pause through a flag in shared memory: the server
 *   reads it whenever its connection is asked for (no message to wait for on a busy event loop), lets the
 *   transaction in progress end, and hands the connection to nobody meanwhile (the event loop goes on with whatever
 *   does not need the database). The thread copies the short rest, syncs, and sets the flag again; the server
 *   resumes within a millisecond, and its next write transaction starts the log over;
 * - the server connection's own `wal_autocheckpoint` stays as a bound (FALLBACK_FACTOR times `restartPages`), for
 *   a log the thread could not restart (another process holding a read transaction open on an old snapshot).
 *
 * Loaded as a worker: `startCheckpointer` is called on the main thread, the code at the bottom runs in the worker.
 */
import { DatabaseSync } from 'node:sqlite';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { SERVER_AUTOCHECKPOINT_PAGES } from '../config/defaults.ts';
import { isJsonObject } from '../lib/guards.ts';

/** How often the worker checkpoints. */
export const CHECKPOINT_INTERVAL_MS = 250;
/** The log size (frames) at which the server is asked to pause so that the log can start over (config/defaults.ts). */
export { SERVER_AUTOCHECKPOINT_PAGES };
/** The server connection's `wal_autocheckpoint` while the thread runs, as a multiple of the restart size. */
export const FALLBACK_FACTOR = 4;
/** A pause the thread has not ended after this long ends anyway (a stuck sync must not stop the server's writes). */
export const MAX_PAUSE_MS = 1000;
/** How often a paused server looks whether the thread is done. */
export const PAUSE_POLL_MS = 1;
/** How long the thread waits for the server to pause; a server that asks for no connection meanwhile is idle. */
const DRAIN_WAIT_MS = 100;
/** Checkpoints run before asking for a pause, each copying what the server wrote during the one before. */
const PRE_PAUSE_ROUNDS = 2;
/** A tail this short (frames written during the last checkpoint) is left to the pause. */
const SHORT_TAIL_FRAMES = 256;
/** After a restart that could not copy the whole log (another process's reader), intervals without trying again. */
const BACKOFF_INTERVALS = 8;

/** States of the flag the two sides share (one Int32 of a SharedArrayBuffer). Each side makes its own moves. */
const RUNNING = 0; // writes go on
const REQUESTED = 1; // the thread asks for a pause (thread: RUNNING → REQUESTED, and back if nobody answers)
const PAUSED = 2; // the server's connection is free and stays so (server: REQUESTED → PAUSED)
const DONE = 3; // the rest of the log is copied (thread: PAUSED → DONE; server: DONE → RUNNING, or gives up)

/** A new flag for `startCheckpointer` and the server's `PauseRequests`. */
export function newPauseFlag(): Int32Array {
  return new Int32Array(new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT));
}

/** The server's side of a pause, over the flag it shares with the thread. */
export class PauseRequests {
  readonly #flag: Int32Array;

  constructor(flag: Int32Array) {
    this.#flag = flag;
  }

  /** Read whenever the connection is asked for: one atomic load. */
  requested(): boolean {
    return Atomics.load(this.#flag, 0) === REQUESTED;
  }

  /** The connection is free: tells the thread. False if the thread withdrew its request meanwhile. */
  paused(): boolean {
    if (Atomics.compareExchange(this.#flag, 0, REQUESTED, PAUSED) !== REQUESTED) return false;
    Atomics.notify(this.#flag, 0);
    return true;
  }

  /** Whether the thread has copied the rest; the flag is then back to running. */
  done(): boolean {
    return Atomics.compareExchange(this.#flag, 0, DONE, RUNNING) === DONE;
  }

  /** Ends a pause from the server's side (the thread took too long, or is gone). */
  abandon(): void {
    Atomics.store(this.#flag, 0, RUNNING);
  }
}

export interface Checkpointer {
  stop(): Promise<void>;
}

export interface CheckpointerOptions {
  busyTimeoutMs: number;
  intervalMs?: number;
  /** Frames of log at which the server is asked to pause (default SERVER_AUTOCHECKPOINT_PAGES). */
  restartPages?: number;
  /** The flag the server's connection queue reads; without it the thread only copies, and never asks. */
  pauseFlag?: Int32Array;
  onError?: (error: unknown) => void;
}

interface CheckpointerData {
  path: string;
  busyTimeoutMs: number;
  intervalMs: number;
  restartPages: number;
  pauseFlag: Int32Array | null;
}

function isCheckpointerData(value: unknown): value is CheckpointerData {
  return (
    isJsonObject(value) &&
    typeof value.path === 'string' &&
    typeof value.busyTimeoutMs === 'number' &&
    typeof value.intervalMs === 'number' &&
    typeof value.restartPages === 'number' &&
    (value.pauseFlag === null || value.pauseFlag instanceof Int32Array)
  );
}

/**
 * Starts the checkpoint thread of the database at `path`. A thread that fails (it reports why through
 * `onError`) leaves checkpoints to the server connection's `wal_autocheckpoint`.
 */
export function startCheckpointer(path: string, options: CheckpointerOptions): Checkpointer {
  const data: CheckpointerData = {
    path,
    busyTimeoutMs: options.busyTimeoutMs,
    intervalMs: options.intervalMs ?? CHECKPOINT_INTERVAL_MS,
    restartPages: options.restartPages ?? SERVER_AUTOCHECKPOINT_PAGES,
    pauseFlag: options.pauseFlag ?? null,
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

interface WalState {
  log: number;
  checkpointed: number;
}

/** Asks the server to pause and waits for it; false if it did not answer in time (the request is withdrawn). */
function pauseServer(flag: Int32Array): boolean {
  Atomics.store(flag, 0, REQUESTED);
  Atomics.wait(flag, 0, REQUESTED, DRAIN_WAIT_MS);
  if (Atomics.compareExchange(flag, 0, REQUESTED, RUNNING) === REQUESTED) return false;
  return Atomics.load(flag, 0) === PAUSED;
}

function runWorker(data: CheckpointerData): void {
  const port = parentPort;
  if (port === null) return;
  const database = new DatabaseSync(data.path, { timeout: data.busyTimeoutMs });
  database.exec('PRAGMA synchronous = NORMAL');
  const statement = database.prepare('PRAGMA wal_checkpoint(PASSIVE)');
  const checkpoint = (): WalState | null => {
    try {
      const row = statement.get();
      return { log: Number(row?.log ?? 0), checkpointed: Number(row?.checkpointed ?? 0) };
    } catch {
      // Busy or locked: the next interval tries again (a PASSIVE checkpoint never waits).
      return null;
    }
  };
  let backoff = 0;
  // The log's size after a checkpoint that copied all of it with the server paused (or idle): until a write
  // starts the log over, asking again gains nothing.
  let copiedWhole = -1;
  /** The log has grown past the restart size: copy the tail down, then copy the rest with the server paused. */
  const restart = (flag: Int32Array, first: WalState): void => {
    let state: WalState | null = first;
    for (let round = 0; round < PRE_PAUSE_ROUNDS && state !== null; round++) {
      const previous: number = state.log;
      state = checkpoint();
      if (state === null || state.log < previous || state.log - previous <= SHORT_TAIL_FRAMES) break;
    }
    if (state === null || state.log < data.restartPages) return;
    const paused = pauseServer(flag);
    const last = checkpoint();
    if (paused) Atomics.compareExchange(flag, 0, PAUSED, DONE);
    if (last !== null && last.checkpointed === last.log) copiedWhole = last.log;
    else backoff = BACKOFF_INTERVALS;
  };
  let timer: NodeJS.Timeout | undefined;
  const tick = () => {
    const state = checkpoint();
    if (backoff > 0) backoff -= 1;
    else if (data.pauseFlag !== null && state !== null && state.log >= data.restartPages && state.log !== copiedWhole) {
      restart(data.pauseFlag, state);
    }
    timer = setTimeout(tick, data.intervalMs);
  };
  port.on('message', (message) => {
    if (message !== 'stop') return;
    clearTimeout(timer);
    database.close();
    port.close();
  });
  timer = setTimeout(tick, data.intervalMs);
}

if (!isMainThread && isCheckpointerData(workerData)) runWorker(workerData);
