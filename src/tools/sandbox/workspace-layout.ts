/**
 * Where workspaces live on the host and who may reach them: `<dataDir>/workspaces/<org>/<agent>/`. Nothing in a
 * workspace can be trusted (a sandbox can `chmod 0755 /workspace`, and could once leave a setuid program there),
 * so what keeps other host users out is the two directories above it, which the sandbox never sees:
 *
 * - `workspaces/`: root's, 0711 (every sandbox user passes through, nobody lists it);
 * - `workspaces/<org>/`: root's, group = the organization's sandbox gid, 0710 (only that identity enters);
 * - `workspaces/<org>/<agent>/`: the organization's sandbox user's, 0700.
 * A server that is not root runs every sandbox as itself, and all three are its own, 0700.
 *
 * At startup every organization's folder loses any permission for others (and, when the server is not root,
 * for its group), so a data directory from an older version (every folder 0711, every workspace owned by nobody)
 * is closed before anything runs; each is reopened to its identity on first use. Folders already right are left
 * alone: another server process sharing the data directory keeps running commands. A workspace owned by another
 * identity (nobody, or a changed AGENTRY_SANDBOX_UID_BASE) is given, entry by entry, to the organization's
 * identity on first use (one bounded walk; entries past the bound keep their old owner, which then cannot reach
 * them: its organization folder is closed to it).
 */
import { chmod, chown, lstat, mkdir, readdir } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Logger } from 'pino';
import { SandboxError } from './sandbox-errors.ts';
import type { WorkspaceOwner } from './workspace-paths.ts';
import type { UsageThreads, WalkBounds } from './workspace-usage.ts';

function errnoCode(error: unknown): unknown {
  return typeof error === 'object' && error !== null && 'code' in error ? error.code : undefined;
}

/**
 * Creates a directory if missing (never through a symlink), then sets its mode and, when given, its owner.
 * Resolves true when it created it.
 */
async function ensureDirectory(path: string, mode: number, owner?: WorkspaceOwner | null): Promise<boolean> {
  const created = await mkdir(path, { mode }).then(
    () => true,
    (error: unknown) => {
      if (errnoCode(error) !== 'EEXIST') throw error;
      return false;
    },
  );
  const stats = await lstat(path);
  if (!stats.isDirectory()) throw new SandboxError('invalid_workspace', `${path} is not a directory`);
  // Owner first: chown clears nothing on a directory, and the mode is then set for the right owner.
  if (owner && (stats.uid !== owner.uid || stats.gid !== owner.gid)) await chown(path, owner.uid, owner.gid);
  if ((stats.mode & 0o7777) !== mode) await chmod(path, mode);
  return created;
}

export interface WorkspaceLayout {
  /** `<dataDir>/workspaces`. */
  readonly root: string;
  /** Closes the root and every organization's folder to other users (startup); see the file comment. */
  close(): Promise<void>;
  /** The agent's workspace, created or repaired for `user` (null: the server's own user). */
  ensure(orgId: string, agentId: string, user: WorkspaceOwner | null): Promise<string>;
}

export function createWorkspaceLayout(options: {
  root: string;
  /** Whether sandboxes run as users other than the server's (the server is root). */
  otherUsers: boolean;
  threads: UsageThreads;
  bounds: WalkBounds;
  logger: Logger;
}): WorkspaceLayout {
  const { root, otherUsers, logger } = options;
  const rootMode = otherUsers ? 0o711 : 0o700;
  const reowning = new Map<string, Promise<void>>();

  /** Gives every entry of `workspace` to `user`, then the workspace itself (once at a time per workspace). */
  function reown(workspace: string, user: WorkspaceOwner): Promise<void> {
    const running = reowning.get(workspace);
    if (running !== undefined) return running;
    const work = (async () => {
      const usage = await options.threads.walk(workspace, { owner: user, bounds: options.bounds });
      if (usage.incomplete !== null) {
        logger.warn(
          { workspace, reowned: usage.reowned, stoppedAt: usage.incomplete },
          `workspace ${workspace}: gave ${usage.reowned} entries to uid ${user.uid}, then stopped (${usage.incomplete} bound); the rest keep their old owner`,
        );
      }
      await chown(workspace, user.uid, user.gid);
    })().finally(() => reowning.delete(workspace));
    reowning.set(workspace, work);
    return work;
  }

  return {
    root,
    async close() {
      const stats = await lstat(root).catch(() => null);
      if (stats === null) return;
      if (!stats.isDirectory()) throw new SandboxError('invalid_workspace', `${root} is not a directory`);
      if ((stats.mode & 0o7777) !== rootMode) await chmod(root, rootMode);
      for (const name of await readdir(root)) {
        const org = join(root, name);
        const orgStats = await lstat(org).catch(() => null);
        const open = otherUsers ? 0o7007 : 0o7077;
        if (orgStats?.isDirectory() && (orgStats.mode & open) !== 0) await chmod(org, orgStats.mode & 0o777 & ~open);
      }
    },
    async ensure(orgId, agentId, user) {
      await mkdir(dirname(root), { recursive: true });
      await ensureDirectory(root, rootMode);
      const org = join(root, orgId);
      if (user === null) await ensureDirectory(org, 0o700);
      else await ensureDirectory(org, 0o710, { uid: process.getuid?.() ?? 0, gid: user.gid });
      const workspace = join(org, agentId);
      const created = await ensureDirectory(workspace, 0o700);
      if (user !== null) {
        const stats = await lstat(workspace);
        if (stats.uid === user.uid && stats.gid === user.gid) return workspace;
        if (created) await chown(workspace, user.uid, user.gid);
        else await reown(workspace, user);
      }
      return workspace;
    },
  };
}
