/** Runs the real server or CLI as a child process, the way a user does. */
import { type ChildProcess, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { spawnChild } from './children.ts';
import { START_TIMEOUT_MS } from './deadlines.ts';

const ROOT = join(import.meta.dirname, '..', '..');

export interface ServerProcess {
  child: ChildProcess;
  url: string;
  output(): string;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

function childEnv(env: Record<string, string>): NodeJS.ProcessEnv {
  const base = { ...process.env };
  for (const name of Object.keys(base)) {
    if (
      name === 'DATABASE_URL' ||
      name === 'REDIS_URL' ||
      name.startsWith('AGENTRY_') ||
      name === 'PORT' ||
      name === 'HOST'
    )
      delete base[name];
  }
  return { ...base, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', ...env };
}

/**
 * Environment of the servers of the crash tests: frequent polls, and a lease of an hour. A killed process's turns are
 * then taken over through the process registry (its row lapses AGENTRY_PROCESS_TTL_MS, 2.5 s, after the kill), and
 * a live process never loses a lease because a busy machine delayed its renewal.
 */
export const CRASH_TEST_ENV = { AGENTRY_LEASE_MS: '3600000', AGENTRY_POLL_MS: '200', LOG_LEVEL: 'warn' };

/**
 * A timeout for a test (or hook) that starts `starts` children one after another: each may use all of
 * START_TIMEOUT_MS, plus `workMs` for the rest of the test.
 */
export function startsTimeout(starts: number, workMs = 60_000): number {
  return starts * START_TIMEOUT_MS + workMs;
}

/**
 * Resolves with the URL a child prints as `listening on <url>` (matched by `pattern`, whose first group is the URL).
 * Rejects with everything the child printed when it exits first, or when it is still silent after
 * START_TIMEOUT_MS (it is then killed, so a stuck child never outlives its test).
 */
export function listeningUrl(
  child: ChildProcess,
  name: string,
  pattern: RegExp,
  output: () => string,
): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      finish();
      child.kill('SIGKILL');
      reject(
        new Error(
          `${name} printed no "listening on" line within ${START_TIMEOUT_MS / 1000} s; its output:\n${output()}`,
        ),
      );
    }, START_TIMEOUT_MS);
    const check = () => {
      const url = pattern.exec(output())?.[1];
      if (url === undefined) return;
      finish();
      resolve(url);
    };
    const exited = (code: number | null, signal: NodeJS.Signals | null) => {
      finish();
      reject(new Error(`${name} exited with ${code ?? signal} before listening; its output:\n${output()}`));
    };
    function finish() {
      clearTimeout(timer);
      child.stdout?.off('data', check);
      child.stderr?.off('data', check);
      child.off('exit', exited);
    }
    child.stdout?.on('data', check);
    child.stderr?.on('data', check);
    child.once('exit', exited);
    check();
  });
}

export interface LaunchedServerProcess extends Omit<ServerProcess, 'url'> {
  /** The URL once the server logs `listening on …` (after its first-start bootstrap); rejects if it exits first. */
  listening: Promise<string>;
}

/**
 * Starts `src/main.ts` with `env` (or Node.js with `args`, e.g. `bin/agentry.js serve`) and returns at once, before
 * it listens (for tests of what happens while it starts); `listening` settles as listeningUrl says.
 */
export function launchServerProcess(
  env: Record<string, string>,
  args: readonly string[] = [join(ROOT, 'src/main.ts')],
): LaunchedServerProcess {
  const child = spawnChild(process.execPath, [...args], {
    env: childEnv(env),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  const listening = listeningUrl(child, 'the server', /listening on (http:\/\/[0-9.]+:\d+)/, () => output);
  // A caller that stops the server before it listens does not wait on this.
  listening.catch(() => undefined);
  return {
    child,
    listening,
    output: () => output,
    stop: (signal = 'SIGTERM') =>
      new Promise((resolve) => {
        // Already gone (exitCode is null when a signal ended it).
        if (child.exitCode !== null || child.signalCode !== null) {
          resolve(child.exitCode);
          return;
        }
        // A graceful stop drains turns and connections; on a loaded machine that can take a while.
        const kill = setTimeout(() => child.kill('SIGKILL'), 60_000);
        child.once('exit', (code) => {
          clearTimeout(kill);
          resolve(code);
        });
        child.kill(signal);
      }),
  };
}

/** Starts `src/main.ts` with `env` and resolves once it listens (see listeningUrl for the failures). */
export async function startServerProcess(env: Record<string, string>): Promise<ServerProcess> {
  const launched = launchServerProcess(env);
  return { ...launched, url: await launched.listening };
}

export function runCli(
  args: string[],
  env: Record<string, string>,
): { status: number | null; stdout: string; stderr: string } {
  const result = spawnSync(process.execPath, [join(ROOT, 'bin/agentry.js'), ...args], {
    env: childEnv(env),
    encoding: 'utf8',
    // The CLI loads the same code and opens the same database as the server: as slow to start on a loaded machine.
    timeout: START_TIMEOUT_MS,
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}
