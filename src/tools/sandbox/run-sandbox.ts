/**
 * Runs one shell command under bubblewrap and returns what happened. The command never runs unisolated: without
 * a detected sandbox host there is nothing to call. The bwrap process is started in its own process group as the
 * sandbox user with an empty environment; on timeout, abort or runaway output the whole group is SIGKILLed, and
 * because the command lives in a fresh PID namespace whose init dies with bwrap (`--die-with-parent`), every
 * process it started dies too. With egress allowed, a per-run egress proxy listens on a Unix socket in a private
 * per-run directory and is closed with the run.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { chmod, type FileHandle, lstat, mkdtemp, open, rm, writeFile } from 'node:fs/promises';
import { constants as osConstants, tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { resolveLimits, runTimeout, type SandboxLimits } from '../../config/sandbox-limits.ts';
import type { Resolver } from '../../lib/egress.ts';
import { type EgressProxy, startEgressProxy } from '../network/egress-proxy.ts';
import { egressEnabled } from '../network/network-policy.ts';
import type { NetworkPolicy } from '../tool-config.ts';
import type { SandboxHost } from './bubblewrap-detect.ts';
import { bwrapArgs, syntheticEtcFiles } from './bwrap-args.ts';
import { OutputCapture } from './output-capture.ts';
import { SandboxError } from './sandbox-errors.ts';
import { seccompProgram } from './seccomp-filter.ts';
import type { WorkspaceOwner } from './workspace-paths.ts';

export interface NetworkAccess {
  /** The agent's policy; null is the default (no egress). */
  policy: NetworkPolicy | null;
  allowInsecure: boolean;
  resolver?: Resolver | undefined;
  allowedPorts?: readonly number[] | undefined;
  logger: Logger;
}

export interface RunInSandboxOptions {
  host: SandboxHost;
  /** The host user the sandbox runs as (its organization's identity); null: the server's own. */
  user: WorkspaceOwner | null;
  /** Host directory mounted read-write at /workspace; must exist and not be a symlink. */
  workspace: string;
  /** Run as `bash -lc <command>` in /workspace. */
  command: string;
  limits?: Partial<SandboxLimits> | undefined;
  /** Wall-clock budget of this run; defaults to `limits.timeoutMs`, capped by `limits.maxTimeoutMs`. */
  timeoutMs?: number | undefined;
  /** Aborting kills the command and its whole process tree (interrupt, end of turn). */
  signal?: AbortSignal | undefined;
  /** Aborted by the quota watcher: kills the command like `signal`, reported as `disk_quota`. */
  quotaSignal?: AbortSignal | undefined;
  /** Network access under a policy; absent or null: no network at all. */
  network?: NetworkAccess | null | undefined;
  /** Where the per-run directory (proxy socket, synthetic /etc files) is made; default the OS temp directory. */
  tempDir?: string | undefined;
}

/**
 * Why a command did not end by itself: `timeout`, `aborted`, `output_limit` and `disk_quota` are kills by the
 * runner; `cpu_time` and `file_size` are the kernel's SIGXCPU/SIGXFSZ at the rlimit (the runtime reports a
 * SIGXFSZ at a file-size limit lowered to the room left in the workspace as `disk_quota`); `memory` means the
 * command failed with an out-of-memory message (the memory limit refuses allocations; the program decides how to
 * die).
 */
export type SandboxKillReason =
  | 'timeout'
  | 'aborted'
  | 'output_limit'
  | 'disk_quota'
  | 'cpu_time'
  | 'file_size'
  | 'memory';

export interface SandboxRunResult {
  /** The command's exit status (128+n when a signal ended it), or null when the runner killed it. */
  exitCode: number | null;
  /** The signal that ended the command, when known. */
  signal: string | null;
  stdout: string;
  stderr: string;
  /** Some output was dropped (the text says how much). */
  truncated: boolean;
  timedOut: boolean;
  killed: SandboxKillReason | null;
  durationMs: number;
  /** Destinations the egress proxy let through and refused (`host:port`), or null without network. */
  egress: { allowed: string[]; refused: string[] } | null;
  /** The workspace as measured after the command (by the runtime), or null when it was not. */
  disk: WorkspaceDisk | null;
}

export interface WorkspaceDisk {
  /** Allocated bytes in the workspace. */
  usedBytes: number;
  entries: number;
  quotaBytes: number;
  /** At or over the quota (or too many entries to measure): commands cannot grow it, writes are refused. */
  full: boolean;
  /** Why the measurement stopped early (too many entries or levels, out of time), or null. */
  unmeasured: 'entries' | 'depth' | 'time' | null;
}

/** Signal names by number; the first name wins where two share a number (SIGABRT before SIGIOT). */
const SIGNAL_NAMES = new Map<number, string>();
for (const [name, number] of Object.entries(osConstants.signals)) {
  if (!SIGNAL_NAMES.has(number)) SIGNAL_NAMES.set(number, name);
}
const OUT_OF_MEMORY = /cannot allocate memory|out of memory|memoryerror|bad_alloc|xmalloc|xrealloc|allocation failed/i;
/** Longest Unix socket path (sun_path holds 108 bytes with the terminating NUL). */
const MAX_SOCKET_PATH = 107;

function abortedResult(): SandboxRunResult {
  return {
    exitCode: null,
    signal: null,
    stdout: '',
    stderr: '',
    truncated: false,
    timedOut: false,
    killed: 'aborted',
    durationMs: 0,
    egress: null,
    disk: null,
  };
}

/**
 * A private directory for one run: synthetic /etc files, the seccomp filter and the proxy socket. bwrap (running
 * as the sandbox user) only needs to search it and read the files, so it stays the server's (0711, files 0444):
 * no other process of the sandbox user can swap what is in it. Only the socket is given to the sandbox user.
 */
async function makeRunDirectory(
  tempDir: string,
  host: SandboxHost,
): Promise<{ path: string; etc: Record<string, string>; seccomp: string | null }> {
  const path = await mkdtemp(join(tempDir, 'agentry-sandbox-'));
  await chmod(path, 0o711);
  const etc: Record<string, string> = {};
  for (const [name, content] of Object.entries(syntheticEtcFiles())) {
    const file = join(path, name);
    await writeFile(file, content, { mode: 0o444 });
    etc[name] = file;
  }
  let seccomp: string | null = null;
  if (host.seccomp !== null) {
    seccomp = join(path, 'seccomp.bpf');
    await writeFile(seccomp, seccompProgram(host.seccomp), { mode: 0o400 });
  }
  return { path, etc, seccomp };
}

function killGroup(child: ChildProcess): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    child.kill('SIGKILL');
  }
}

interface Execution {
  code: number | null;
  signal: string | null;
  killed: 'timeout' | 'aborted' | 'output_limit' | 'disk_quota' | null;
  capture: OutputCapture;
}

/** The spawn of one bwrap, and what can stop it. */
interface Launch {
  host: SandboxHost;
  user: WorkspaceOwner | null;
  args: string[];
  /** Given to bwrap as descriptor 3 (the seccomp filter), or null. */
  fd3: FileHandle | null;
  limits: SandboxLimits;
  timeoutMs: number;
  signal: AbortSignal | undefined;
  quotaSignal: AbortSignal | undefined;
}

function execute(launch: Launch): Promise<Execution> {
  const { host, user, args, limits, timeoutMs, signal, quotaSignal } = launch;
  return new Promise<Execution>((resolve, reject) => {
    const child = spawn(host.path, args, {
      stdio: ['ignore', 'pipe', 'pipe', ...(launch.fd3 === null ? [] : [launch.fd3.fd])],
      // Nothing of the server's environment: bwrap's own environment is readable inside as /proc/1/environ.
      env: {},
      detached: true,
      ...(user ? { uid: user.uid, gid: user.gid } : {}),
    });
    let killed: Execution['killed'] = null;
    let straggler: NodeJS.Timeout | undefined;
    const kill = (reason: NonNullable<Execution['killed']>) => {
      if (killed !== null) return;
      killed = reason;
      killGroup(child);
      // The pipes close when the last process holding them dies; should that not happen, stop waiting.
      straggler = setTimeout(() => {
        child.stdout?.destroy();
        child.stderr?.destroy();
      }, 5000);
    };
    const capture = new OutputCapture(limits.outputBytes, limits.outputKillBytes, () => kill('output_limit'));
    child.stdout?.on('data', (chunk: Buffer) => capture.add('stdout', chunk));
    child.stderr?.on('data', (chunk: Buffer) => capture.add('stderr', chunk));
    const timer = setTimeout(() => kill('timeout'), timeoutMs);
    const onAbort = () => kill('aborted');
    const onQuota = () => kill('disk_quota');
    signal?.addEventListener('abort', onAbort, { once: true });
    quotaSignal?.addEventListener('abort', onQuota, { once: true });
    const cleanup = () => {
      clearTimeout(timer);
      clearTimeout(straggler);
      signal?.removeEventListener('abort', onAbort);
      quotaSignal?.removeEventListener('abort', onQuota);
    };
    child.once('error', (error) => {
      cleanup();
      killGroup(child);
      reject(new SandboxError('setup_failed', `could not start bubblewrap: ${error.message}`, null, { cause: error }));
    });
    child.once('close', (code, closeSignal) => {
      cleanup();
      resolve({ code, signal: closeSignal, killed, capture });
    });
  });
}

/**
 * Runs `command` in a fresh sandbox over `workspace` and resolves when it and everything it started are gone.
 * Rejects with SandboxError only when the sandbox itself cannot be set up; a failing command is a result.
 */
export async function runInSandbox(options: RunInSandboxOptions): Promise<SandboxRunResult> {
  const { host } = options;
  const limits = resolveLimits(options.limits);
  const timeoutMs = runTimeout(limits, options.timeoutMs);
  if (options.signal?.aborted) return abortedResult();
  const workspaceStats = await lstat(options.workspace).catch(() => null);
  if (workspaceStats === null || !workspaceStats.isDirectory()) {
    throw new SandboxError('invalid_workspace', `workspace ${options.workspace} is not a directory`);
  }
  const network = options.network ?? null;
  const withEgress = network !== null && egressEnabled(network.policy);
  if (withEgress && host.socat === null) {
    throw new SandboxError(
      'egress_unavailable',
      'the network policy allows egress, but socat (the in-sandbox forwarder to the egress proxy) is not installed',
      'apt-get install socat',
    );
  }

  const started = performance.now();
  const runDirectory = await makeRunDirectory(options.tempDir ?? tmpdir(), host);
  let proxy: EgressProxy | null = null;
  let filter: FileHandle | null = null;
  try {
    if (withEgress && network !== null) {
      const socketPath = join(runDirectory.path, 'proxy.sock');
      if (socketPath.length > MAX_SOCKET_PATH) {
        throw new SandboxError(
          'setup_failed',
          `the proxy socket path ${socketPath} is too long`,
          'use a shorter tempDir',
        );
      }
      proxy = await startEgressProxy({
        socketPath,
        policy: network.policy,
        allowInsecure: network.allowInsecure,
        resolver: network.resolver,
        allowedPorts: network.allowedPorts,
        logger: network.logger,
        owner: options.user,
      });
    }
    if (runDirectory.seccomp !== null) filter = await open(runDirectory.seccomp, 'r');
    const args = bwrapArgs({
      features: host.features,
      workspace: options.workspace,
      etcFiles: runDirectory.etc,
      proxySocket: proxy?.socketPath ?? null,
      socat: host.socat,
      shell: host.shell,
      limits,
      command: options.command,
      seccompFd: filter === null ? null : 3,
    });
    const execution = await execute({
      host,
      user: options.user,
      args,
      fd3: filter,
      limits,
      timeoutMs,
      signal: options.signal,
      quotaSignal: options.quotaSignal,
    });
    const stdout = execution.capture.text('stdout');
    const stderr = execution.capture.text('stderr');
    if (execution.killed === null && setupFailure(execution.code, stderr)) {
      throw new SandboxError('setup_failed', `the sandbox could not start: ${stderr.trim()}`);
    }
    return {
      exitCode: execution.killed === null ? execution.code : null,
      signal: execution.killed === null ? exitSignal(execution.code, execution.signal) : 'SIGKILL',
      stdout,
      stderr,
      truncated: execution.capture.truncated,
      timedOut: execution.killed === 'timeout',
      killed: execution.killed ?? limitReason(execution.code, stdout, stderr),
      durationMs: Math.round(performance.now() - started),
      egress: proxy === null ? null : { allowed: [...proxy.allowed], refused: [...proxy.refused] },
      disk: null,
    };
  } finally {
    await filter?.close();
    await proxy?.close();
    await rm(runDirectory.path, { recursive: true, force: true });
  }
}

/** bubblewrap's own errors ("bwrap: ...", status 1) and the wrapper's (status 125) mean nothing ran. */
function setupFailure(code: number | null, stderr: string): boolean {
  return (code === 1 && stderr.startsWith('bwrap: ')) || (code === 125 && stderr.includes('agentry-sandbox: '));
}

function exitSignal(code: number | null, signal: string | null): string | null {
  if (signal !== null) return signal;
  if (code === null || code <= 128 || code > 128 + 64) return null;
  return SIGNAL_NAMES.get(code - 128) ?? null;
}

function limitReason(code: number | null, stdout: string, stderr: string): SandboxKillReason | null {
  if (code === null || code === 0) return null;
  if (code === 128 + osConstants.signals.SIGXCPU) return 'cpu_time';
  if (code === 128 + osConstants.signals.SIGXFSZ) return 'file_size';
  if (OUT_OF_MEMORY.test(stderr.slice(-4096)) || OUT_OF_MEMORY.test(stdout.slice(-4096))) return 'memory';
  return null;
}
