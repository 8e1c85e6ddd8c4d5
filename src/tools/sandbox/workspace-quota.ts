/**
 * The disk quota of a workspace (AGENTRY_SANDBOX_WORKSPACE_QUOTA_MB), held while a command runs and not only
 * afterwards. Three parts:
 * - the command's file-size limit (RLIMIT_FSIZE) is at most the room left, so one file (the common case: one
 *   `dd`, one download) stops exactly at the quota, with SIGXFSZ;
 * - a watcher polls the filesystem's free space (statfs, a few microseconds) every POLL_MS, and when the space
 *   used since the last measurement could have taken the workspace past its quota, or at least every second,
 *   measures the workspace (a bounded walk on the run's thread, never reading contents) and stops the command
 *   when it is over; what a command writes between two checks is the overshoot (docs/sandbox.md has figures);
 * - writes from the server (`sandbox_write_file`, reports, skills) are refused when they do not fit.
 * A workspace over its quota before a command starts (the quota was lowered) may still run commands, so that
 * they can delete files; they are stopped only if it grows further. A workspace the walk cannot finish (more
 * entries or levels than its bounds) counts as over its quota: whatever cannot be measured counts against it.
 */
import { statfs } from 'node:fs/promises';
import { DEFAULT_WORKSPACE_QUOTA_BYTES, MIB } from '../../config/defaults.ts';
import type { UsageThread, UsageThreads, WalkBounds, WorkspaceUsage } from './workspace-usage.ts';
import { DEFAULT_WALK_BOUNDS } from './workspace-usage.ts';

export { DEFAULT_WORKSPACE_QUOTA_BYTES, MIB };

/** How often the watcher looks at the filesystem's free space while a command runs. */
const POLL_MS = 50;
/** A measurement at least this often, whatever the filesystem says (other workspaces may free space meanwhile). */
const MEASURE_EVERY_MS = 1000;
/** A remembered measurement is used for this long; the runtime keeps it current after runs and writes. */
const REMEMBER_MS = 30_000;
/** The smallest file-size limit a command gets, even in a full workspace (what the limits allow at least). */
const MIN_FILE_SIZE = 1024;

/** Whether the walk could not see the whole workspace (more entries or levels than its bounds). */
export function unmeasurable(usage: WorkspaceUsage): boolean {
  return usage.incomplete === 'entries' || usage.incomplete === 'depth';
}

/** Whether a measurement puts the workspace at or over `quotaBytes` (an unmeasurable one counts as full). */
export function quotaFull(usage: WorkspaceUsage, quotaBytes: number): boolean {
  return usage.bytes >= quotaBytes || unmeasurable(usage);
}

/** The file-size limit of a command: the configured one, at most the room left in the workspace. */
export function fileSizeWithin(fileSizeBytes: number, quotaBytes: number, usage: WorkspaceUsage): number {
  const room = unmeasurable(usage) ? 0 : quotaBytes - usage.bytes;
  return Math.max(MIN_FILE_SIZE, Math.min(fileSizeBytes, room));
}

export interface QuotaWatch {
  /** Stops watching (the command ended). */
  stop(): void;
}

export interface WatchOptions {
  root: string;
  thread: UsageThread;
  quotaBytes: number;
  /** The workspace as it was when the command started. */
  before: WorkspaceUsage;
  bounds?: WalkBounds | undefined;
  /** Called once, with the measurement that found the workspace over its quota. */
  onExceeded: (usage: WorkspaceUsage) => void;
}

async function usedBytes(path: string): Promise<number | null> {
  try {
    const stats = await statfs(path);
    return (stats.blocks - stats.bfree) * stats.bsize;
  } catch {
    return null;
  }
}

/** Watches a running command's workspace and calls `onExceeded` when it grows past its quota. */
export function watchQuota(options: WatchOptions): QuotaWatch {
  const { root, thread, quotaBytes, before } = options;
  // Over already (the quota was lowered): the command may delete, not grow further.
  const limit = Math.max(quotaBytes, before.bytes);
  const unbounded = unmeasurable(before);
  const exceeds = (usage: WorkspaceUsage) => usage.bytes > limit || (!unbounded && unmeasurable(usage));
  let stopped = false;

  const loop = async () => {
    let last = { bytes: before.bytes, fsUsed: await usedBytes(root), at: performance.now(), durationMs: 0 };
    while (!stopped) {
      await new Promise((resolve) => setTimeout(resolve, POLL_MS).unref());
      if (stopped) return;
      const fsUsed = await usedBytes(root);
      const grown = fsUsed === null || last.fsUsed === null ? 0 : Math.max(0, fsUsed - last.fsUsed);
      const due = performance.now() - last.at >= Math.max(MEASURE_EVERY_MS, 5 * last.durationMs);
      if ((last.bytes + grown <= limit && !due) || stopped) continue;
      const usage = await thread.walk(root, { bounds: options.bounds });
      if (stopped) return;
      last = { bytes: usage.bytes, fsUsed, at: performance.now(), durationMs: usage.durationMs };
      if (exceeds(usage)) {
        stopped = true;
        options.onExceeded(usage);
      }
    }
  };
  // A failed walk (the thread was closed at the end of the run) just ends the watch.
  loop().catch(() => undefined);
  return {
    stop() {
      stopped = true;
    },
  };
}

/** The quota of the runtime's workspaces, with the last measurement of each. */
export interface WorkspaceQuota {
  readonly quotaBytes: number;
  readonly bounds: WalkBounds;
  /** The last measurement when recent, else a new one (on `thread`, or on one of `threads`). */
  usage(root: string, thread?: UsageThread): Promise<WorkspaceUsage>;
  /** Remembers a measurement (taken after a run). */
  record(root: string, usage: WorkspaceUsage): void;
  /** Adjusts the remembered measurement by a write of the server's. */
  grew(root: string, bytes: number): void;
}

export function createWorkspaceQuota(
  quotaBytes: number,
  threads: UsageThreads,
  bounds: WalkBounds = DEFAULT_WALK_BOUNDS,
): WorkspaceQuota {
  if (!Number.isSafeInteger(quotaBytes) || quotaBytes < MIB) {
    throw new RangeError(`the workspace quota must be at least 1 MiB, got ${quotaBytes} bytes`);
  }
  const remembered = new Map<string, { usage: WorkspaceUsage; at: number }>();
  const record = (root: string, usage: WorkspaceUsage) => {
    remembered.delete(root); // re-inserted last: the map stays in age order and is trimmed from the front
    remembered.set(root, { usage, at: performance.now() });
    for (const [key, entry] of remembered) {
      if (performance.now() - entry.at <= REMEMBER_MS) break;
      remembered.delete(key);
    }
  };
  return {
    quotaBytes,
    bounds,
    async usage(root, thread) {
      const known = remembered.get(root);
      if (known !== undefined && performance.now() - known.at <= REMEMBER_MS) return known.usage;
      const usage = await (thread ?? threads).walk(root, { bounds });
      record(root, usage);
      return usage;
    },
    record,
    grew(root, bytes) {
      const known = remembered.get(root);
      if (known !== undefined) known.usage = { ...known.usage, bytes: Math.max(0, known.usage.bytes + bytes) };
    },
  };
}
