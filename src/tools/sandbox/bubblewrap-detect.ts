/**
 * Finding out, once at startup, whether this host can sandbox commands: bubblewrap installed, a bash to run
 * commands with, and the namespaces actually creatable (a trial sandbox runs with exactly the flags real runs use,
 * and checks from inside that it got its own user and network namespaces). Anything short of that is reported
 * unavailable with a hint for the operator; the sandbox tools are then offered nowhere, never run unisolated.
 */
import { execFile } from 'node:child_process';
import { access, chown, constants, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { type BubblewrapFeatures, SANDBOX_UID } from './bwrap-args.ts';
import { runInSandbox } from './run-sandbox.ts';
import { SandboxError } from './sandbox-errors.ts';
import { chooseIdentity, type SandboxIdentity, trialUser } from './sandbox-identity.ts';
import { type SeccompArch, seccompArch } from './seccomp-filter.ts';
import type { WorkspaceOwner } from './workspace-paths.ts';

/** A host that can run sandboxed commands, as detected. */
export interface SandboxHost {
  available: true;
  /** The bwrap binary. */
  path: string;
  /** e.g. "0.8.0". */
  version: string;
  features: BubblewrapFeatures;
  /** The bash that runs commands (inside the sandbox, from the read-only system). */
  shell: string;
  /** socat, the in-sandbox forwarder to the egress proxy; null means no egress is possible (a warning says so). */
  socat: string | null;
  /** Which host user an organization's sandboxes run as (sandbox-identity.ts). */
  identity: SandboxIdentity;
  /** The architecture of the seccomp filter (no setuid files, no unchecked preallocation); null: none here. */
  seccomp: SeccompArch | null;
  /** Things that work but less well than they could (missing socat, an old bubblewrap). */
  warnings: string[];
}

export interface SandboxUnavailable {
  available: false;
  reason: string;
  /** What an operator can do: how to install bubblewrap, or what blocks the namespaces. */
  hint: string;
}

export type BubblewrapDetection = SandboxHost | SandboxUnavailable;

export interface DetectOptions {
  /** AGENTRY_SANDBOX_BWRAP: the bwrap binary; by default the usual system locations are searched. */
  bwrapPath?: string | null | undefined;
  /**
   * AGENTRY_SANDBOX_UID/GID: one host user for every organization's sandboxes. By default a server running as
   * root gives each organization its own (`uidBase` + project id); any other server runs them as itself.
   */
  user?: WorkspaceOwner | null | undefined;
  /** AGENTRY_SANDBOX_UID_BASE (sandbox-identity.ts). */
  uidBase?: number | undefined;
  /** Where the trial's scratch directory goes (default the OS temp directory). */
  tempDir?: string | undefined;
}

export const INSTALL_HINT =
  'install bubblewrap: apt-get install bubblewrap (Debian/Ubuntu), dnf install bubblewrap (Fedora/RHEL), ' +
  'apk add bubblewrap (Alpine); or set AGENTRY_SANDBOX_BWRAP to its path';
const NAMESPACE_HINT =
  'bubblewrap cannot create user namespaces here. Check sysctl user.max_user_namespaces (must be > 0), ' +
  'kernel.unprivileged_userns_clone=1 on older Debian kernels, and on Ubuntu 23.10+ ' +
  'kernel.apparmor_restrict_unprivileged_userns=0 or an AppArmor profile allowing userns for bwrap; inside a ' +
  'container the runtime must allow unshare/mount (e.g. docker run --security-opt seccomp=unconfined ' +
  '--security-opt apparmor=unconfined, or a dedicated seccomp profile)';

const BWRAP_LOCATIONS = ['/usr/bin/bwrap', '/usr/local/bin/bwrap', '/bin/bwrap'];
const BASH_LOCATIONS = ['/bin/bash', '/usr/bin/bash'];
const SOCAT_LOCATIONS = ['/usr/bin/socat', '/usr/local/bin/socat', '/bin/socat'];

/** Inside the trial: the mapped uid is ours, and the only network interface is loopback. */
const TRIAL_COMMAND = `test "$(id -u)" = ${SANDBOX_UID} || exit 3
while read -r line; do case $line in *'|'*|lo:*) ;; *) exit 4 ;; esac; done </proc/net/dev`;
/** ... and the seccomp filter is on (mode 2: filter). */
const TRIAL_SECCOMP = `\ngrep -q '^Seccomp:[[:space:]]*2' /proc/self/status || exit 5`;

async function firstExecutable(candidates: readonly string[]): Promise<string | null> {
  for (const candidate of candidates) {
    try {
      await access(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here; try the next
    }
  }
  return null;
}

function parseVersion(output: string): [number, number, number] | null {
  const match = /(\d+)\.(\d+)(?:\.(\d+))?/.exec(output);
  if (match === null) return null;
  return [Number(match[1]), Number(match[2]), Number(match[3] ?? 0)];
}

function atLeast(version: [number, number, number], minor: number): boolean {
  return version[0] > 0 || version[1] >= minor;
}

function classify(stderr: string): string {
  if (/namespace|uid map|setting up uid|permission denied|operation not permitted|no permissions/i.test(stderr)) {
    return NAMESPACE_HINT;
  }
  return 'run the same bwrap command by hand to see why it fails; see docs/sandbox.md';
}

/** Detects whether sandboxed commands can run here (see the file comment). Never throws. */
export async function detectBubblewrap(options: DetectOptions = {}): Promise<BubblewrapDetection> {
  const bwrap = await firstExecutable(options.bwrapPath ? [options.bwrapPath] : BWRAP_LOCATIONS);
  if (bwrap === null) return { available: false, reason: 'bubblewrap (bwrap) is not installed', hint: INSTALL_HINT };
  const shell = await firstExecutable(BASH_LOCATIONS);
  if (shell === null) return { available: false, reason: 'bash is not installed', hint: 'apt-get install bash' };
  const identity = chooseIdentity(options.user, options.uidBase);
  if (typeof identity === 'string') return { available: false, reason: identity, hint: 'unset AGENTRY_SANDBOX_UID' };

  let versionText: string;
  try {
    versionText = (await promisify(execFile)(bwrap, ['--version'], { env: {}, timeout: 10_000 })).stdout.trim();
  } catch (error) {
    return { available: false, reason: `${bwrap} --version failed: ${String(error)}`, hint: INSTALL_HINT };
  }
  const version = parseVersion(versionText);
  if (version === null || !atLeast(version, 5)) {
    return {
      available: false,
      reason: `bubblewrap ${versionText} is too old (0.5 or later is needed)`,
      hint: INSTALL_HINT,
    };
  }
  const features: BubblewrapFeatures = { disableUserns: atLeast(version, 8), tmpfsSize: atLeast(version, 7) };
  const warnings: string[] = [];
  if (!features.disableUserns) {
    warnings.push('bubblewrap older than 0.8: sandboxes can create nested user namespaces (more kernel exposure)');
  }
  if (!features.tmpfsSize)
    warnings.push('bubblewrap older than 0.7: /tmp and /dev/shm in sandboxes have no size limit');
  const seccomp = seccompArch();
  if (seccomp === null) {
    warnings.push(
      `no seccomp filter for ${process.arch}: setuid/setgid bits are only cleared after each command, and preallocation is unchecked`,
    );
  }
  const socat = await firstExecutable(SOCAT_LOCATIONS);
  if (socat === null) {
    warnings.push(
      'socat is not installed: sandboxes cannot reach the network even where the policy allows it (apt-get install socat)',
    );
  }
  const host: SandboxHost = {
    available: true,
    path: bwrap,
    version: version.join('.'),
    features,
    shell,
    socat,
    identity,
    seccomp,
    warnings,
  };

  const scratch = await mkdtemp(join(options.tempDir ?? tmpdir(), 'agentry-sandbox-trial-'));
  try {
    const user = trialUser(identity);
    if (user) await chown(scratch, user.uid, user.gid);
    const trial = await runInSandbox({
      host,
      user,
      workspace: scratch,
      command: seccomp === null ? TRIAL_COMMAND : TRIAL_COMMAND + TRIAL_SECCOMP,
      limits: { timeoutMs: 20_000 },
    });
    if (trial.exitCode === 0) return host;
    const reason =
      trial.exitCode === 3 || trial.exitCode === 4
        ? 'a trial sandbox did not get its own user or network namespace'
        : trial.exitCode === 5
          ? 'a trial sandbox ran without its seccomp filter'
          : `a trial sandbox failed (${trial.killed ?? `exit ${trial.exitCode}`}): ${trial.stderr.trim()}`;
    return { available: false, reason, hint: classify(trial.stderr) };
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    const hint = error instanceof SandboxError ? classify(message) : 'see docs/sandbox.md';
    return { available: false, reason: `a trial sandbox could not start: ${message}`, hint };
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}
