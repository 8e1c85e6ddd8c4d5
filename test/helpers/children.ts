/**
 * The processes tests start that could outlive them (servers, MCP servers, test hosts, daemons). Each is started
 * through spawnChild: in a process group of its own (`detached`), registered, and killed with its whole group
 * - when its test file ends (children-setup.ts, a vitest setup file: after the file's own afterAll hooks, so a
 *   test that timed out or never reached its cleanup leaves nothing running);
 * - when the worker process exits, or is stopped with SIGTERM, SIGINT or SIGHUP;
 * - and when the worker dies with SIGKILL (vitest's watchdog does that to the workers of a run that is killed):
 *   the child is started under `setpriv --pdeathsig SIGKILL` (util-linux), so the kernel kills it then.
 */
import {
  type ChildProcess,
  type ChildProcessWithoutNullStreams,
  type SpawnOptions,
  type SpawnOptionsWithoutStdio,
  spawn,
  spawnSync,
} from 'node:child_process';

/** The process groups started by this worker (kept on the process: a module instance per test file may load). */
const GROUPS_KEY = Symbol.for('agentry.test.childGroups');
const WATCHED_KEY = Symbol.for('agentry.test.childGroupsWatched');

interface Registry {
  [GROUPS_KEY]?: Set<number>;
  [WATCHED_KEY]?: boolean;
}

const registry: Registry = process as Registry;
const groups: Set<number> = registry[GROUPS_KEY] ?? new Set();
registry[GROUPS_KEY] = groups;

/** Whether `setpriv --pdeathsig` works here (it is Linux and util-linux only). */
const PDEATHSIG = spawnSync('setpriv', ['--pdeathsig', 'SIGKILL', 'true'], { stdio: 'ignore' }).status === 0;

/**
 * `spawn`, for a process that must not outlive its test file: see above. `child.pid` is the command's own (setpriv
 * replaces itself with it), and the group's id.
 */
export function spawnChild(
  command: string,
  args: readonly string[],
  options?: SpawnOptionsWithoutStdio,
): ChildProcessWithoutNullStreams;
export function spawnChild(command: string, args: readonly string[], options: SpawnOptions): ChildProcess;
export function spawnChild(command: string, args: readonly string[], options: SpawnOptions = {}): ChildProcess {
  const child = PDEATHSIG
    ? spawn('setpriv', ['--pdeathsig', 'SIGKILL', '--', command, ...args], { ...options, detached: true })
    : spawn(command, args, { ...options, detached: true });
  if (child.pid !== undefined) groups.add(child.pid);
  return child;
}

/** SIGKILLs the process group of every child started so far and forgets them; returns the groups signalled. */
export function killChildren(): number[] {
  const signalled: number[] = [];
  for (const group of groups) {
    try {
      process.kill(-group, 'SIGKILL');
      signalled.push(group);
    } catch {
      // ESRCH: the whole group is gone already.
    }
  }
  groups.clear();
  return signalled;
}

/** Kills the children when this process exits or is told to stop (once per process). */
export function killChildrenOnExit(): void {
  if (registry[WATCHED_KEY] === true) return;
  registry[WATCHED_KEY] = true;
  process.on('exit', () => killChildren());
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) {
    const handler = () => {
      killChildren();
      // Then die of the signal, as without this handler.
      process.off(signal, handler);
      process.kill(process.pid, signal);
    };
    process.on(signal, handler);
  }
}
