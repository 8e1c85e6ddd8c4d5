/**
 * The sandbox runtime as the tool providers use it: one object, built once by the composition root, that knows
 * where workspaces live, which limits apply, whether this host can sandbox at all, and which runs are in flight
 * (so that shutdown can kill them). Workspaces are plain directories `<dataDir>/workspaces/<org>/<agent>/`,
 * durable across runs, sessions and restarts; each run gets a fresh sandbox (and egress proxy) over it.
 */
import { chmod, chown, lstat, mkdir, stat } from 'node:fs/promises';
import { dirname, join, relative, resolve, sep } from 'node:path';
import type { Logger } from 'pino';
import type { NetworkPolicy } from '../../domain/agents/agent-types.ts';
import type { Resolver } from '../../lib/egress.ts';
import { DEFAULT_EGRESS_PORTS } from '../network/egress-proxy.ts';
import { type BubblewrapDetection, detectBubblewrap } from './bubblewrap-detect.ts';
import { runInSandbox, type SandboxRunResult } from './run-sandbox.ts';
import { SandboxError } from './sandbox-errors.ts';
import { resolveLimits, type SandboxLimits } from './sandbox-limits.ts';
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
import type { WorkspaceOwner } from './workspace-paths.ts';

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
  /** Where per-run directories (proxy socket, synthetic /etc files) go; default the OS temp directory. */
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
  readonly limits: Readonly<SandboxLimits>;
  readonly fileLimits: Readonly<FileLimits>;
  /** The agent's workspace directory, created (mode 0700, owned by the sandbox user) when missing. */
  workspaceFor(orgId: string, agentId: string): Promise<string>;
  /** Runs a command in a fresh sandbox over the workspace. Throws SandboxError when the sandbox is unavailable. */
  run(options: SandboxRunOptions): Promise<SandboxRunResult>;
  /** Reads up to `fileLimits.readBytes` of a file (or `maxBytes`, for a caller that serves whole files). */
  readFile(workspace: string, path: string, options?: { maxBytes?: number }): Promise<WorkspaceFile>;
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
  /** Kills every run in flight and waits for them to end (server shutdown). */
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

/** Creates a directory if missing (never through a symlink) and sets its mode. */
async function ensureDirectory(path: string, mode: number): Promise<void> {
  await mkdir(path, { mode }).catch((error: unknown) => {
    if (!(typeof error === 'object' && error !== null && 'code' in error && error.code === 'EEXIST')) throw error;
  });
  const stats = await lstat(path);
  if (!stats.isDirectory()) throw new SandboxError('invalid_workspace', `${path} is not a directory`);
  if ((stats.mode & 0o777) !== mode) await chmod(path, mode);
}

export async function createSandboxRuntime(options: SandboxRuntimeOptions): Promise<SandboxRuntime> {
  const limits = resolveLimits(options.limits);
  const fileLimits: FileLimits = {
    readBytes: options.fileLimits?.readBytes ?? DEFAULT_READ_BYTES,
    writeBytes: options.fileLimits?.writeBytes ?? DEFAULT_WRITE_BYTES,
    listEntries: options.fileLimits?.listEntries ?? DEFAULT_LIST_ENTRIES,
  };
  const workspacesRoot = join(resolve(options.dataDir), 'workspaces');
  let detection =
    options.detection ??
    (await detectBubblewrap({ bwrapPath: options.bwrapPath, user: options.user, tempDir: options.tempDir }));
  const owner = detection.available ? detection.user : null;
  if (detection.available && owner !== null) {
    const blocked = await traversable(workspacesRoot, owner);
    if (blocked !== null) {
      detection = {
        available: false,
        reason: `the sandbox user (uid ${owner.uid}) cannot reach ${workspacesRoot}: ${blocked} is not searchable`,
        hint: `chmod o+x ${blocked} (search only, not read), or put AGENTRY_DATA_DIR somewhere the sandbox user can reach`,
      };
    }
  }
  // Traverse-only for the sandbox user when it is not us; closed otherwise.
  const parentMode = owner === null ? 0o700 : 0o711;
  const active = new Set<{ controller: AbortController; done: Promise<unknown> }>();

  function checkWorkspace(workspace: string): string {
    const absolute = resolve(workspace);
    const inside = relative(workspacesRoot, absolute);
    if (inside === '' || inside.startsWith('..') || inside.split(sep).length !== 2) {
      throw new SandboxError('invalid_workspace', `${workspace} is not a workspace of this runtime`);
    }
    return absolute;
  }

  return {
    available: () => detection,
    limits,
    fileLimits,

    async workspaceFor(orgId, agentId) {
      if (!ID.test(orgId) || !ID.test(agentId)) {
        throw new SandboxError('invalid_workspace', 'organization and agent ids must be plain identifiers');
      }
      await mkdir(dirname(workspacesRoot), { recursive: true });
      await ensureDirectory(workspacesRoot, parentMode);
      await ensureDirectory(join(workspacesRoot, orgId), parentMode);
      const workspace = join(workspacesRoot, orgId, agentId);
      await ensureDirectory(workspace, 0o700);
      if (owner !== null) {
        const stats = await lstat(workspace);
        if (stats.uid !== owner.uid || stats.gid !== owner.gid) await chown(workspace, owner.uid, owner.gid);
      }
      return workspace;
    },

    async run(runOptions) {
      if (!detection.available) throw new SandboxError('unavailable', detection.reason, detection.hint);
      const workspace = checkWorkspace(runOptions.workspace);
      const controller = new AbortController();
      const signal = runOptions.signal ? AbortSignal.any([runOptions.signal, controller.signal]) : controller.signal;
      const done = runInSandbox({
        host: detection,
        workspace,
        command: runOptions.command,
        limits,
        timeoutMs: runOptions.timeoutMs,
        signal,
        network: {
          policy: runOptions.policy,
          allowInsecure: options.allowInsecureDestinations,
          resolver: options.resolver,
          allowedPorts: options.egressPorts ?? DEFAULT_EGRESS_PORTS,
          logger: options.logger,
        },
        tempDir: options.tempDir,
      });
      const entry = { controller, done };
      active.add(entry);
      try {
        return await done;
      } finally {
        active.delete(entry);
      }
    },

    async readFile(workspace, path, readOptions = {}) {
      return readWorkspaceFile(checkWorkspace(workspace), path, {
        maxBytes: readOptions.maxBytes ?? fileLimits.readBytes,
      });
    },
    async writeFile(workspace, path, content) {
      return writeWorkspaceFile(checkWorkspace(workspace), path, content, { maxBytes: fileLimits.writeBytes, owner });
    },
    async listFiles(workspace, path = '', listOptions = {}) {
      return listWorkspaceFiles(checkWorkspace(workspace), path, {
        ...listOptions,
        maxEntries: fileLimits.listEntries,
      });
    },

    activeRuns: () => active.size,

    async close() {
      const runs = [...active];
      for (const run of runs) run.controller.abort(new Error('the sandbox runtime is closing'));
      await Promise.allSettled(runs.map((run) => run.done));
    },
  };
}
