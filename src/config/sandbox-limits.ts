/**
 * The resource limits of one sandboxed command, with their defaults. Most are kernel rlimits applied inside the
 * sandbox (see docs/sandbox.md for which are per process and which are per sandbox); the rest are enforced by the
 * runner (wall time, captured output) or by mount options (the size of /tmp and /dev/shm).
 */

export interface SandboxLimits {
  /** Wall-clock time of one run when the caller gives none; the whole process tree is killed after it. */
  timeoutMs: number;
  /** Ceiling on a caller-given timeout. */
  maxTimeoutMs: number;
  /** CPU seconds per process (RLIMIT_CPU): SIGXCPU at the limit, SIGKILL a second later. */
  cpuSeconds: number;
  /** Writable private memory per process (RLIMIT_DATA): heap and anonymous mappings; allocations beyond fail. */
  memoryBytes: number;
  /** Virtual address space per process (RLIMIT_AS), a backstop for shared mappings; runtimes such as V8 and the
   *  JVM reserve far more address space than they use, so this is set well above `memoryBytes`. */
  addressSpaceBytes: number;
  /** Processes and threads in the sandbox at once (RLIMIT_NPROC, counted per sandbox: see docs/sandbox.md). */
  processes: number;
  /** Largest file a process may write (RLIMIT_FSIZE): SIGXFSZ beyond it. */
  fileSizeBytes: number;
  /** Open file descriptors per process (RLIMIT_NOFILE). */
  openFiles: number;
  /** Size of each of the sandbox's private /tmp and /dev/shm (memory-backed). */
  tmpBytes: number;
  /** stdout and stderr bytes kept for the result, together; the rest is dropped with a note. */
  outputBytes: number;
  /** Total output after which the command is killed (`killed: "output_limit"`). */
  outputKillBytes: number;
}

const MIB = 1024 * 1024;

export const LIMIT_NAMES = [
  'timeoutMs',
  'maxTimeoutMs',
  'cpuSeconds',
  'memoryBytes',
  'addressSpaceBytes',
  'processes',
  'fileSizeBytes',
  'openFiles',
  'tmpBytes',
  'outputBytes',
  'outputKillBytes',
] as const satisfies readonly (keyof SandboxLimits)[];

export const DEFAULT_SANDBOX_LIMITS: Readonly<SandboxLimits> = Object.freeze({
  timeoutMs: 120_000,
  maxTimeoutMs: 600_000,
  cpuSeconds: 120,
  memoryBytes: 1024 * MIB,
  addressSpaceBytes: 8 * 1024 * MIB,
  processes: 256,
  fileSizeBytes: 1024 * MIB,
  openFiles: 1024,
  tmpBytes: 256 * MIB,
  outputBytes: MIB,
  outputKillBytes: 16 * MIB,
});

/** Smallest sane value of each limit: below these even `true` may not start (the loader maps libraries, etc.). */
const MINIMUM: Readonly<SandboxLimits> = {
  timeoutMs: 100,
  maxTimeoutMs: 100,
  cpuSeconds: 1,
  memoryBytes: 16 * MIB,
  addressSpaceBytes: 64 * MIB,
  processes: 8,
  fileSizeBytes: 1024,
  openFiles: 32,
  tmpBytes: MIB,
  outputBytes: 1024,
  outputKillBytes: 1024,
};

/** The defaults overridden by `overrides`; throws a RangeError naming a limit that is not a sane integer. */
export function resolveLimits(...overrides: (Partial<SandboxLimits> | undefined)[]): SandboxLimits {
  const limits: SandboxLimits = { ...DEFAULT_SANDBOX_LIMITS };
  for (const override of overrides) {
    if (override === undefined) continue;
    for (const key of LIMIT_NAMES) {
      const value = override[key];
      if (value !== undefined) limits[key] = value;
    }
  }
  for (const key of LIMIT_NAMES) {
    const value = limits[key];
    if (!Number.isSafeInteger(value) || value < MINIMUM[key]) {
      throw new RangeError(`sandbox limit ${key} must be an integer of at least ${MINIMUM[key]}, got ${value}`);
    }
  }
  if (limits.outputKillBytes < limits.outputBytes) {
    throw new RangeError('sandbox limit outputKillBytes must be at least outputBytes');
  }
  if (limits.timeoutMs > limits.maxTimeoutMs) limits.timeoutMs = limits.maxTimeoutMs;
  return limits;
}

/** The wall-clock budget of one run: the caller's wish, else the default, never above the ceiling. */
export function runTimeout(limits: SandboxLimits, requested: number | undefined): number {
  if (requested === undefined || !Number.isFinite(requested)) return limits.timeoutMs;
  return Math.min(Math.max(Math.round(requested), 1), limits.maxTimeoutMs);
}
