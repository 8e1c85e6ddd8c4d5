/**
 * Which host user an organization's sandboxes run as. A server running as root gives each organization an
 * identity of its own, uid = gid = AGENTRY_SANDBOX_UID_BASE + the organization's project id (unique, never
 * reused: organizations are never deleted), in a range no real user has; its workspaces belong to it, so a
 * process with one organization's identity, inside a sandbox or escaped from one, cannot read another's files.
 * Never root: the kernel does not enforce the process limit for root, and a root-mapped sandbox would be root on
 * the host should it escape. AGENTRY_SANDBOX_UID/GID instead give every organization one shared identity. A
 * server that is not root cannot switch users: every sandbox runs as the server's own user, and what keeps
 * organizations apart is the sandbox itself (mount namespaces) and closed directories (docs/sandbox.md).
 */
import { DEFAULT_UID_BASE, MAX_SANDBOX_UID } from '../../config/defaults.ts';
import type { WorkspaceOwner } from './workspace-paths.ts';

export type SandboxIdentity =
  /** Not root: sandboxes run as the server's own user. */
  | { kind: 'server' }
  /** AGENTRY_SANDBOX_UID/GID: one host user for every organization. */
  | { kind: 'shared'; user: WorkspaceOwner }
  /** Root: uid = gid = base + project id, one per organization. */
  | { kind: 'per_org'; base: number };

export { DEFAULT_UID_BASE, MAX_SANDBOX_UID };

/**
 * The identity sandboxes get on this server, or why none can be had. `user` is AGENTRY_SANDBOX_UID/GID.
 */
export function chooseIdentity(
  user: WorkspaceOwner | null | undefined,
  base: number = DEFAULT_UID_BASE,
  self: number = process.getuid?.() ?? -1,
): SandboxIdentity | string {
  if (user === undefined || user === null) return self === 0 ? { kind: 'per_org', base } : { kind: 'server' };
  if (user.uid === 0) return 'the sandbox must not run as uid 0 (the kernel exempts root from the process limit)';
  if (self !== 0 && user.uid !== self) {
    return `only root can run sandboxes as uid ${user.uid}; this server runs as uid ${self}`;
  }
  return self === 0 ? { kind: 'shared', user } : { kind: 'server' };
}

/** The host user of an organization's sandboxes (null: the server's own), or why it has none. */
export function organizationUser(identity: SandboxIdentity, projectId: number): WorkspaceOwner | null | string {
  switch (identity.kind) {
    case 'server':
      return null;
    case 'shared':
      return identity.user;
    case 'per_org': {
      const uid = identity.base + projectId;
      if (!Number.isSafeInteger(projectId) || projectId < 1 || uid > MAX_SANDBOX_UID) {
        return `project id ${projectId} gives no sandbox uid at or below ${MAX_SANDBOX_UID} (AGENTRY_SANDBOX_UID_BASE is ${identity.base})`;
      }
      return { uid, gid: uid };
    }
  }
}

/** The user of the startup trial: an identity no organization has (project ids start at 1). */
export function trialUser(identity: SandboxIdentity): WorkspaceOwner | null {
  if (identity.kind === 'server') return null;
  if (identity.kind === 'shared') return identity.user;
  return { uid: identity.base, gid: identity.base };
}

/** How the identity reads in the startup log line. */
export function describeIdentity(identity: SandboxIdentity): string {
  if (identity.kind === 'server') return "the server's own user (per-organization users need root)";
  if (identity.kind === 'shared') return `uid ${identity.user.uid} for every organization`;
  return `uid ${identity.base} + project id, one per organization`;
}
