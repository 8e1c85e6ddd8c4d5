// The V8 heap of a server. Under a steady load V8 lets a process's young generation (where new objects start) grow
// to over 130 MB, and keeps it: a server's resident memory then rose by some 80 MB between its 2,000th and its
// 20,000th turn while what it used grew by 12 MB (docs/performance.md, "memory"). A server runs with semi-spaces of
// SEMI_SPACE_MB instead, which cost no measurable throughput. V8 reads the size once, when the process starts, so
// `agentry serve` replaces its process (same pid, so a supervisor's signals still reach it) with one started with
// the flag, before anything else runs. A size given in NODE_OPTIONS or on Node's command line is left as it is.
// The replaced process also gets MALLOC_ARENA_MAX=ARENAS (unless the environment sets it): glibc's allocator
// otherwise keeps an arena per thread that allocated, and one run of three grew some 19 MB outside the V8 heap.
// Plain JavaScript, as bin/agentry.js.

export const SEMI_SPACE_MB = 16;
export const ARENAS = '2';
const FLAG = '--max-semi-space-size';

/** Whether Node's command line or NODE_OPTIONS already sizes the semi-spaces. */
function sized(execArgv, nodeOptions) {
  return [...execArgv, ...(nodeOptions ?? '').split(/\s+/)].some(
    (argument) => argument === FLAG || argument.startsWith(`${FLAG}=`),
  );
}

/**
 * For `agentry serve` (its help aside), replaces this process with the same command under a Node.js started with
 * the server's heap size. Returns only when there is nothing to do, or where the platform cannot replace a process
 * (Windows), which then runs with V8's own sizing.
 */
export function startServerWithHeapSize() {
  const [, script, command, ...rest] = process.argv;
  if (command !== 'serve' || rest.includes('--help') || rest.includes('-h')) return;
  if (sized(process.execArgv, process.env.NODE_OPTIONS) || typeof process.execve !== 'function') return;
  try {
    process.execve(
      process.execPath,
      [process.execPath, ...process.execArgv, `${FLAG}=${SEMI_SPACE_MB}`, script, command, ...rest],
      { MALLOC_ARENA_MAX: ARENAS, ...process.env },
    );
  } catch {
    // The process could not be replaced: it goes on as it is.
  }
}
