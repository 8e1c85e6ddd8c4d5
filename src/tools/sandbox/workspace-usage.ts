/**
 * One bounded walk over a workspace that measures it (allocated bytes and entries, for the quota) and keeps it
 * harmless on the host: it clears setuid/setgid bits a file should never have there, and can give every entry to
 * the workspace's owner. It runs in the server, often as root, over a tree a sandbox may be changing at the same
 * moment, so it never follows a path string: each directory is opened with O_NOFOLLOW from its parent's
 * descriptor, entries are looked at with lstat through `/proc/self/fd/N/name`, and a mode is changed only through
 * a descriptor of the very inode that was checked (O_PATH). File contents are never read.
 *
 * The walk is bounded: at most `maxEntries` entries, `maxDepth` levels and a deadline. It reports where it
 * stopped; callers decide what an unfinished walk means (the quota counts a workspace too big or too deep to
 * walk as over it, and a walk out of time as what it saw).
 *
 * Walks run on threads of their own (`createUsageThreads`), with synchronous calls: a large workspace takes
 * seconds, which must not be the event loop's, and synchronous calls are several times faster than a thread-pool
 * round trip per entry (20-40 µs an entry on a busy machine, against 50-100). Loaded as a worker: the code at
 * the bottom runs in the thread.
 */
import {
  chmodSync,
  closeSync,
  constants,
  fstatSync,
  lchownSync,
  lstatSync,
  opendirSync,
  openSync,
  type Stats,
} from 'node:fs';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { isJsonObject } from '../../lib/guards.ts';
import type { WorkspaceOwner } from './workspace-paths.ts';

/** open(2)'s O_PATH (not in Node's constants): a descriptor for the inode itself, needing no permission on it. */
const O_PATH = 0o10000000;
const SET_ID_BITS = 0o6000;
const DIRECTORY_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;

export interface WalkBounds {
  maxEntries: number;
  maxDepth: number;
  /** Give up after this many milliseconds. */
  timeoutMs: number;
}

/** 250,000 entries 256 levels deep are walked whole; 30 s is several times what that takes on a busy machine. */
export const DEFAULT_WALK_BOUNDS: Readonly<WalkBounds> = Object.freeze({
  maxEntries: 250_000,
  maxDepth: 256,
  timeoutMs: 30_000,
});

export interface WalkOptions {
  bounds?: WalkBounds | undefined;
  /** Clear setuid/setgid bits of regular files. */
  stripSetId?: boolean | undefined;
  /** Give every entry (the root excepted) not already theirs to this owner. */
  owner?: WorkspaceOwner | null | undefined;
}

export interface WorkspaceUsage {
  /** Allocated bytes (st_blocks × 512) of every entry seen, the root included; a hard-linked file counts once. */
  bytes: number;
  /** Entries seen below the root. */
  entries: number;
  /** Why the walk stopped before the end, or null when it saw everything. */
  incomplete: 'entries' | 'depth' | 'time' | null;
  /** Files (relative paths) whose setuid/setgid bits were cleared. */
  stripped: string[];
  /** Entries given to `owner`. */
  reowned: number;
  /** How long the walk took. */
  durationMs: number;
}

const at = (fd: number, name?: string) => (name === undefined ? `/proc/self/fd/${fd}` : `/proc/self/fd/${fd}/${name}`);

function attempt<T>(action: () => T): T | null {
  try {
    return action();
  } catch {
    return null;
  }
}

/** Clears the setuid/setgid bits of the regular file `name` in `directory`, if it still is the file seen. */
function stripSetId(directory: number, name: string, seen: Stats): boolean {
  const fd = attempt(() => openSync(at(directory, name), O_PATH | constants.O_NOFOLLOW));
  if (fd === null) return false;
  try {
    const stats = fstatSync(fd);
    if (!stats.isFile() || stats.ino !== seen.ino || (stats.mode & SET_ID_BITS) === 0) return false;
    // chmod through the descriptor's magic link reaches exactly that inode, whatever the name holds now.
    return attempt(() => chmodSync(at(fd), stats.mode & 0o1777)) !== null;
  } finally {
    closeSync(fd);
  }
}

/** Walks `root` within its bounds (see the file comment). Throws only when the root itself cannot be opened. */
export function walkWorkspaceTree(root: string, options: WalkOptions = {}): WorkspaceUsage {
  const bounds = options.bounds ?? DEFAULT_WALK_BOUNDS;
  const started = performance.now();
  const usage: WorkspaceUsage = { bytes: 0, entries: 0, incomplete: null, stripped: [], reowned: 0, durationMs: 0 };
  const linked = new Set<string>();
  const { owner } = options;

  /** Counts, re-owns and cleans one entry; true when it is a directory to enter. */
  const visit = (directory: number, name: string, path: string): boolean => {
    const stats = attempt(() => lstatSync(at(directory, name)));
    if (stats === null) return false; // removed meanwhile
    const key = `${stats.dev}:${stats.ino}`;
    if (stats.isDirectory() || stats.nlink < 2 || !linked.has(key)) usage.bytes += stats.blocks * 512;
    if (stats.nlink > 1 && !stats.isDirectory()) linked.add(key);
    if (owner && (stats.uid !== owner.uid || stats.gid !== owner.gid)) {
      // lchown never follows the final name, and the directory is pinned by its descriptor.
      if (attempt(() => lchownSync(at(directory, name), owner.uid, owner.gid)) !== null) usage.reowned += 1;
    }
    if (
      options.stripSetId &&
      stats.isFile() &&
      (stats.mode & SET_ID_BITS) !== 0 &&
      stripSetId(directory, name, stats)
    ) {
      usage.stripped.push(path);
    }
    return stats.isDirectory();
  };

  /** Walks the directory open as `fd` (depth 1 is the root); false when a bound stopped the walk. */
  const walk = (fd: number, prefix: string, depth: number): boolean => {
    const dir = attempt(() => opendirSync(at(fd), { bufferSize: 256 }));
    if (dir === null) return true;
    try {
      for (let entry = attempt(() => dir.readSync()); entry !== null; entry = attempt(() => dir.readSync())) {
        if (usage.entries >= bounds.maxEntries) {
          usage.incomplete = 'entries';
          return false;
        }
        usage.entries += 1;
        if (usage.entries % 256 === 0 && performance.now() - started > bounds.timeoutMs) {
          usage.incomplete = 'time';
          return false;
        }
        const path = prefix + entry.name;
        if (!visit(fd, entry.name, path)) continue;
        if (depth >= bounds.maxDepth) {
          usage.incomplete ??= 'depth';
          continue;
        }
        const child = attempt(() => openSync(at(fd, entry.name), DIRECTORY_FLAGS));
        if (child === null) continue; // replaced by something that is not a directory: not entered
        try {
          if (!walk(child, `${path}/`, depth + 1)) return false;
        } finally {
          closeSync(child);
        }
      }
      return true;
    } finally {
      attempt(() => dir.closeSync());
    }
  };

  const top = openSync(root, DIRECTORY_FLAGS);
  try {
    usage.bytes += fstatSync(top).blocks * 512;
    walk(top, '', 1);
  } finally {
    closeSync(top);
  }
  usage.durationMs = Math.round(performance.now() - started);
  return usage;
}

/** A thread that walks workspaces, one walk at a time, off the event loop. */
export interface UsageThread {
  walk(root: string, options?: WalkOptions): Promise<WorkspaceUsage>;
  /** False once the thread ended (closed, or crashed). */
  alive(): boolean;
  close(): Promise<void>;
}

interface WalkRequest {
  id: number;
  root: string;
  options: WalkOptions;
}

type WalkReply = { id: number; usage: WorkspaceUsage } | { id: number; error: string };

function isWalkRequest(value: unknown): value is WalkRequest {
  return isJsonObject(value) && typeof value.id === 'number' && typeof value.root === 'string';
}

/** Starts a walking thread; walks are answered in order. It does not keep the process alive. */
export function openUsageThread(): UsageThread {
  const worker = new Worker(new URL(import.meta.url), { workerData: 'workspace-usage' });
  worker.unref();
  const waiting = new Map<number, { resolve: (usage: WorkspaceUsage) => void; reject: (error: Error) => void }>();
  let next = 0;
  let closed: Promise<void> | null = null;
  let ended = false;
  const failAll = (error: Error) => {
    ended = true;
    for (const pending of waiting.values()) pending.reject(error);
    waiting.clear();
  };
  worker.on('message', (reply: WalkReply) => {
    const pending = waiting.get(reply.id);
    waiting.delete(reply.id);
    if ('error' in reply) pending?.reject(new Error(reply.error));
    else pending?.resolve(reply.usage);
  });
  worker.on('error', (error) => failAll(error));
  worker.on('exit', () => failAll(new Error('the workspace walker stopped')));
  return {
    alive: () => !ended && closed === null,
    walk(root, options = {}) {
      if (closed !== null) return Promise.reject(new Error('the workspace walker is closed'));
      const id = next++;
      return new Promise<WorkspaceUsage>((resolve, reject) => {
        waiting.set(id, { resolve, reject });
        worker.postMessage({ id, root, options } satisfies WalkRequest);
      });
    },
    close() {
      closed ??= worker.terminate().then(() => undefined);
      return closed;
    },
  };
}

/**
 * Walking threads kept for reuse: starting one costs 50-300 ms on a busy machine, more than most commands take.
 * A run holds one for its whole length (its walks are then never queued behind another workspace's); up to
 * `maxIdle` wait for the next run.
 */
export interface UsageThreads {
  acquire(): UsageThread;
  release(thread: UsageThread): void;
  /** One walk on a thread of the pool. */
  walk(root: string, options?: WalkOptions): Promise<WorkspaceUsage>;
  close(): Promise<void>;
}

export function createUsageThreads(maxIdle = 4): UsageThreads {
  const idle: UsageThread[] = [];
  const threads: UsageThreads = {
    acquire: () => idle.pop() ?? openUsageThread(),
    release(thread) {
      if (thread.alive() && idle.length < maxIdle) idle.push(thread);
      else void thread.close();
    },
    async walk(root, options) {
      const thread = threads.acquire();
      try {
        return await thread.walk(root, options);
      } finally {
        threads.release(thread);
      }
    },
    async close() {
      await Promise.all(idle.splice(0).map((thread) => thread.close()));
    },
  };
  return threads;
}

if (!isMainThread && workerData === 'workspace-usage') {
  parentPort?.on('message', (request: unknown) => {
    if (!isWalkRequest(request)) return;
    let reply: WalkReply;
    try {
      reply = { id: request.id, usage: walkWorkspaceTree(request.root, request.options) };
    } catch (error) {
      reply = { id: request.id, error: error instanceof Error ? error.message : String(error) };
    }
    parentPort?.postMessage(reply);
  });
}
