/**
 * The sandbox runtime as the tool providers use it: one object, built once by the composition root, that knows
 * where workspaces live and whose they are, which limits and quota apply, whether this host can sandbox at all,
 * and which runs are in flight (so that shutdown can kill them). Workspaces are plain directories
 * `<dataDir>/workspaces/<org>/<agent>/` (workspace-layout.ts), durable across runs, sessions and restarts; each
 * run gets a fresh sandbox (and egress proxy) over it, as its organization's host user (sandbox-identity.ts),
 * watched by the workspace's quota (workspace-quota.ts), and ends with one walk of the workspace that measures it
 * and clears any setuid/setgid bit.
 */

import { stat } from 'node:fs/promises';
import { basename, dirname, join, relative, resolve, sep } from 'node:path';
import type { Logger } from 'pino';
import { resolveLimits, type SandboxLimits } from '../../config/sandbox-limits.ts';
import type { Resolver } from '../../lib/egress.ts';
import { DEFAULT_EGRESS_PORTS } from '../network/egress-proxy.ts';
import type { NetworkPolicy } from '../tool-config.ts';
import { type BubblewrapDetection, detectBubblewrap } from './bubblewrap-detect.ts';
import { createRunFolders } from './run-folders.ts';
import { runInSandbox, type SandboxRunResult } from './run-sandbox.ts';
import { SandboxError } from './sandbox-errors.ts';
import { organizationUser, trialUser } from './sandbox-identity.ts';
import {
  DEFAULT_LIST_ENTRIES,
  DEFAULT_READ_BYTES,
  DEFAULT_WRITE_BYTES,
  type ListOptions,
  listWorkspaceFiles,
  readWorkspaceFile,
  type WorkspaceEntry,
  type WorkspaceFile,
  writeWorkspaceFile,
} from './workspace-files.ts';
import { createWorkspaceLayout } from './workspace-layout.ts';
import type { WorkspaceOwner } from './workspace-paths.ts';
import {
  createWorkspaceQuota,
  DEFAULT_WORKSPACE_QUOTA_BYTES,
  fileSizeWithin,
  quotaFull,
  unmeasurable,
  watchQuota,
} from './workspace-quota.ts';
import {
  createUsageThreads,
  DEFAULT_WALK_BOUNDS,
  type UsageThread,
  type WalkBounds,
  type WorkspaceUsage,
} from './workspace-usage.ts';

export interface FileLimits {
  /** Largest part of a file the read tool returns (the rest is reported as truncated). */
  readBytes: number;
  /** Largest content the write tool accepts. */
  writeBytes: number;
  /** Most entries a listing returns. */
  listEntries: number;
}

export interface SandboxRuntimeOptions {
  /** AGENTRY_DATA_DIR; workspaces go to `<dataDir>/workspaces/`. */
  dataDir: string;
  limits?: Partial<SandboxLimits> | undefined;
  fileLimits?: Partial<FileLimits> | undefined;
  /** AGENTRY_SANDBOX_WORKSPACE_QUOTA_MB, in bytes (default 2 GiB). */
  quotaBytes?: number | undefined;
  /** Bounds of a workspace walk (default DEFAULT_WALK_BOUNDS); tests make them small. */
  walkBounds?: WalkBounds | undefined;
  /** An organization's numeric project id (unique, never reused): its sandboxes' host user derives from it. */
  projectIdOf: (orgId: string) => Promise<number | null>;
  logger: Logger;
  /** Name resolution for the egress proxy (tests inject one); default the system resolver. */
  resolver?: Resolver | undefined;
  /** AGENTRY_ALLOW_INSECURE_DESTINATIONS: the proxy then lets private (never loopback) addresses through. */
  allowInsecureDestinations: boolean;
  /** Destination ports the egress proxy allows (default 80 and 443). */
  egressPorts?: readonly number[] | undefined;
  /** The startup detection, when the caller ran detectBubblewrap() itself; otherwise it runs here. */
  detection?: BubblewrapDetection | undefined;
  /** Passed to detectBubblewrap() when `detection` is not given. */
  bwrapPath?: string | null | undefined;
  user?: WorkspaceOwner | null | undefined;
  uidBase?: number | undefined;
  /**
   * Where per-run directories (proxy socket, synthetic /etc files) go, kept by the caller; default a folder of this
   * process's own in the OS temp directory, removed on close, and by the next start after a kill (run-folders.ts).
   */
  tempDir?: string | undefined;
}

export interface SandboxRunOptions {
  /** A workspace returned by `workspaceFor`. */
  workspace: string;
  command: string;
  timeoutMs?: number | undefined;
  /** Abort to kill the command and everything it started (interrupt, end of turn). */
  signal?: AbortSignal | undefined;
  /** The agent's network policy; null means the default (no egress). */
  policy: NetworkPolicy | null;
}

export interface SandboxRuntime {
  /** Whether commands can run here, with the reason and an operator hint when not. */
  available(): BubblewrapDetection;
  /** The same, once the sandbox is detected (a deferred runtime's detection may still run: deferred-runtime.ts). */
  detected(): Promise<BubblewrapDetection>;
  readonly limits: Readonly<SandboxLimits>;
  readonly fileLimits: Readonly<FileLimits>;
  /** The disk quota of each workspace, in bytes. */
  readonly quotaBytes: number;
  /** The agent's workspace directory, created (mode 0700, owned by its organization's sandbox user) when missing. */
  workspaceFor(orgId: string, agentId: string): Promise<string>;
  /** The host user an organization's sandboxes run as (null: the server's own). */
  userFor(orgId: string): Promise<WorkspaceOwner | null>;
  /** Runs a command in a fresh sandbox over the workspace. Throws SandboxError when the sandbox is unavailable. */
  run(options: SandboxRunOptions): Promise<SandboxRunResult>;
  /** Reads up to `fileLimits.readBytes` of a file (or `maxBytes`, for a caller that serves whole files). */
  readFile(workspace: string, path: string, options?: { maxBytes?: number }): Promise<WorkspaceFile>;
  /** Writes a file; refused (`quota_exceeded`) when it would take the workspace past its quota. */
  writeFile(
    workspace: string,
    path: string,
    content: string | Uint8Array,
  ): Promise<{ path: string; bytes: number; created: boolean }>;
  listFiles(
    workspace: string,
    path?: string,
    options?: Pick<ListOptions, 'maxDepth'>,
  ): Promise<{ path: string; entries: WorkspaceEntry[]; truncated: boolean }>;
  /** Runs in flight. */
  activeRuns(): number;
  /** Kills every run in flight, waits for them to end, and removes the runs' folder (server shutdown). */
  close(): Promise<void>;
}

const ID = /^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/;

/** Whether `owner` may search (x) every directory from / down to `path`, i.e. bwrap running as it can bind it. */
async function traversable(path: string, owner: WorkspaceOwner): Promise<string | null> {
  const chain: string[] = [];
  for (let current = resolve(path); ; current = dirname(current)) {
    chain.unshift(current);
    if (dirname(current) === current) break;
  }
  for (const directory of chain) {
    const stats = await stat(directory).catch(() => null);
    if (stats === null) return null; // created later by us, with the right mode
    const searchable =
      (stats.mode & 0o001) !== 0 ||
      (stats.uid === owner.uid && (stats.mode & 0o100) !== 0) ||
      (stats.gid === owner.gid && (stats.mode & 0o010) !== 0);
    if (!searchable) return directory;
  }
  return null;
}

/** The runtime's limits, known from its options alone (before detection). */
export function sandboxSizes(
  options: Pick<SandboxRuntimeOptions, 'limits' | 'fileLimits' | 'quotaBytes'>,
): Pick<SandboxRuntime, 'limits' | 'fileLimits' | 'quotaBytes'> {
  return {
    limits: resolveLimits(options.limits),
    fileLimits: {
      readBytes: options.fileLimits?.readBytes ?? DEFAULT_READ_BYTES,
      writeBytes: options.fileLimits?.writeBytes ?? DEFAULT_WRITE_BYTES,
      listEntries: options.fileLimits?.listEntries ?? DEFAULT_LIST_ENTRIES,
    },
    quotaBytes: options.quotaBytes ?? DEFAULT_WORKSPACE_QUOTA_BYTES,
  };
}

export async function createSandboxRuntime(options: SandboxRuntimeOptions): Promise<SandboxRuntime> {
  const { limits, fileLimits } = sandboxSizes(options);
  const bounds = options.walkBounds ?? DEFAULT_WALK_BOUNDS;
  const threads = createUsageThreads();
  const quota = createWorkspaceQuota(sandboxSizes(options).quotaBytes, threads, bounds);
  const { logger } = options;
  const workspacesRoot = join(resolve(options.dataDir), 'workspaces');
  // A folder of this process's own for the runs (and the startup trial), unless the caller chose where they go or
  // nothing can run here at all.
  let folders =
    options.tempDir === undefined && options.detection?.available !== false ? await createRunFolders({ logger }) : null;
  const tempDir = options.tempDir ?? folders?.path;
  let detection: BubblewrapDetection;
  try {
    detection =
      options.detection ??
      (await detectBubblewrap({ bwrapPath: options.bwrapPath, user: options.user, uidBase: options.uidBase, tempDir }));
  } catch (error) {
    await folders?.close();
    throw error;
  }
  if (!detection.available && folders !== null) {
    await folders.close();
    folders = null;
  }
  const identity = detection.available ? detection.identity : ({ kind: 'server' } as const);
  const probe = trialUser(identity);
  if (detection.available && probe !== null) {
    const blocked = await traversable(workspacesRoot, probe);
    if (blocked !== null) {
      detection = {
        available: false,
        reason: `the sandbox user${identity.kind === 'per_org' ? 's' : ''} (uid ${probe.uid}${identity.kind === 'per_org' ? ' and up' : ''}) cannot reach ${workspacesRoot}: ${blocked} is not searchable`,
        hint: `chmod o+x ${blocked} (search only, not read), or put AGENTRY_DATA_DIR somewhere the sandbox users can reach`,
      };
    }
  }
  const layout = createWorkspaceLayout({ root: workspacesRoot, otherUsers: probe !== null, threads, bounds, logger });
  await layout.close();
  const users = new Map<string, WorkspaceOwner | null>();
  const active = new Set<{ controller: AbortController; done: Promise<unknown> }>();

  async function userFor(orgId: string): Promise<WorkspaceOwner | null> {
    const known = users.get(orgId);
    if (known !== undefined) return known;
    let user: WorkspaceOwner | null | string = null;
    if (identity.kind !== 'server') {
      const projectId = await options.projectIdOf(orgId);
      if (projectId === null) throw new SandboxError('invalid_workspace', `organization ${orgId} does not exist`);
      user = organizationUser(identity, projectId);
      if (typeof user === 'string') throw new SandboxError('unavailable', user, 'lower AGENTRY_SANDBOX_UID_BASE');
    }
    users.set(orgId, user);
    return user;
  }

  /** The workspace's absolute path and organization, when it is one of ours. */
  function checkWorkspace(workspace: string): { path: string; orgId: string } {
    const absolute = resolve(workspace);
    const inside = relative(workspacesRoot, absolute);
    if (inside === '' || inside.startsWith('..') || inside.split(sep).length !== 2) {
      throw new SandboxError('invalid_workspace', `${workspace} is not a workspace of this runtime`);
    }
    return { path: absolute, orgId: basename(dirname(absolute)) };
  }

  /** Runs a command and measures (and cleans) the workspace afterwards, on one walking thread. */
  async function runWatched(runOptions: SandboxRunOptions, signal: AbortSignal): Promise<SandboxRunResult> {
    if (!detection.available) throw new SandboxError('unavailable', detection.reason, detection.hint);
    const host = detection;
    const { path: workspace, orgId } = checkWorkspace(runOptions.workspace);
    const user = await userFor(orgId);
    const thread = threads.acquire();
    try {
      const before = await quota.usage(workspace, thread);
      const fileSizeBytes = fileSizeWithin(limits.fileSizeBytes, quota.quotaBytes, before);
      const stop = new AbortController();
      const watch = watchQuota({
        root: workspace,
        thread,
        quotaBytes: quota.quotaBytes,
        before,
        bounds,
        onExceeded: () => stop.abort(),
      });
      let result: SandboxRunResult;
      try {
        result = await runInSandbox({
          host,
          user,
          workspace,
          command: runOptions.command,
          limits: { ...limits, fileSizeBytes },
          timeoutMs: runOptions.timeoutMs,
          signal,
          quotaSignal: stop.signal,
          network: {
            policy: runOptions.policy,
            allowInsecure: options.allowInsecureDestinations,
            resolver: options.resolver,
            allowedPorts: options.egressPorts ?? DEFAULT_EGRESS_PORTS,
            logger,
          },
          tempDir,
        });
      } finally {
        watch.stop();
      }
      // A file stopped at a limit lowered to the room left in the workspace ran into the quota.
      const killed =
        result.killed === 'file_size' && fileSizeBytes < limits.fileSizeBytes ? 'disk_quota' : result.killed;
      const after = await afterRun(workspace, thread);
      return { ...result, killed, disk: after === null ? null : diskOf(after) };
    } finally {
      threads.release(thread);
    }
  }

  /** The walk after a run: measure, clear setuid/setgid bits, remember. Null (logged) when it fails. */
  async function afterRun(workspace: string, thread: UsageThread): Promise<WorkspaceUsage | null> {
    try {
      const usage = await thread.walk(workspace, { stripSetId: true, bounds });
      quota.record(workspace, usage);
      if (usage.stripped.length > 0) {
        logger.warn(
          { workspace, files: usage.stripped.slice(0, 20) },
          `cleared setuid/setgid bits of ${usage.stripped.length} files in ${workspace}`,
        );
      }
      return usage;
    } catch (error) {
      logger.error({ err: error, workspace }, 'could not measure the workspace after a command');
      return null;
    }
  }

  function diskOf(usage: WorkspaceUsage): NonNullable<SandboxRunResult['disk']> {
    return {
      usedBytes: usage.bytes,
      entries: usage.entries,
      quotaBytes: quota.quotaBytes,
      full: quotaFull(usage, quota.quotaBytes),
      unmeasured: usage.incomplete,
    };
  }

  return {
    available: () => detection,
    detected: async () => detection,
    limits,
    fileLimits,
    quotaBytes: quota.quotaBytes,
    userFor,

    async workspaceFor(orgId, agentId) {
      if (!ID.test(orgId) || !ID.test(agentId)) {
        throw new SandboxError('invalid_workspace', 'organization and agent ids must be plain identifiers');
      }
      return layout.ensure(orgId, agentId, await userFor(orgId));
    },

    async run(runOptions) {
      const controller = new AbortController();
      const signal = runOptions.signal ? AbortSignal.any([runOptions.signal, controller.signal]) : controller.signal;
      const done = runWatched(runOptions, signal);
      const entry = { controller, done };
      active.add(entry);
      try {
        return await done;
      } finally {
        active.delete(entry);
      }
    },

    async readFile(workspace, path, readOptions = {}) {
      return readWorkspaceFile(checkWorkspace(workspace).path, path, {
        maxBytes: readOptions.maxBytes ?? fileLimits.readBytes,
      });
    },
    async writeFile(workspace, path, content) {
      const { path: root, orgId } = checkWorkspace(workspace);
      const usage = await quota.usage(root);
      const written = await writeWorkspaceFile(root, path, content, {
        maxBytes: fileLimits.writeBytes,
        owner: await userFor(orgId),
        quota: {
          quotaBytes: quota.quotaBytes,
          usedBytes: unmeasurable(usage) ? Number.POSITIVE_INFINITY : usage.bytes,
        },
      });
      quota.grew(root, written.grew);
      return { path: written.path, bytes: written.bytes, created: written.created };
    },
    async listFiles(workspace, path = '', listOptions = {}) {
      return listWorkspaceFiles(checkWorkspace(workspace).path, path, {
        ...listOptions,
        maxEntries: fileLimits.listEntries,
      });
    },

    activeRuns: () => active.size,

    async close() {
      const runs = [...active];
      for (const run of runs) run.controller.abort(new Error('the sandbox runtime is closing'));
      await Promise.allSettled(runs.map((run) => run.done));
      await threads.close();
      await folders?.close();
    },
  };
}
