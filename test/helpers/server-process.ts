/** Runs the real server or CLI as a child process, the way a user does. */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { join } from 'node:path';

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

export interface LaunchedServerProcess extends Omit<ServerProcess, 'url'> {
  /** The URL once the server logs `listening on …` (after its first-start bootstrap); rejects if it exits first. */
  listening: Promise<string>;
}

/** Starts the server and returns at once, before it listens (for tests of what happens while it starts). */
export function launchServerProcess(env: Record<string, string>, timeoutMs = 20_000): LaunchedServerProcess {
  const child = spawn(process.execPath, [join(ROOT, 'src/main.ts')], {
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
  const listening = new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start in time:\n${output}`)), timeoutMs);
    const check = () => {
      const match = /listening on (http:\/\/[0-9.]+:\d+)/.exec(output);
      if (match?.[1] !== undefined) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    };
    child.stdout?.on('data', check);
    child.stderr?.on('data', check);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code}:\n${output}`));
    });
  });
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
        const kill = setTimeout(() => child.kill('SIGKILL'), 15_000);
        child.once('exit', (code) => {
          clearTimeout(kill);
          resolve(code);
        });
        child.kill(signal);
      }),
  };
}

export async function startServerProcess(env: Record<string, string>, timeoutMs = 20_000): Promise<ServerProcess> {
  const launched = launchServerProcess(env, timeoutMs);
  return { ...launched, url: await launched.listening };
}

export function runCli(
  args: string[],
  env: Record<string, string>,
): { status: number | null; stdout: string; stderr: string } {
  const result = spawnSync(process.execPath, [join(ROOT, 'bin/agentry.js'), ...args], {
    env: childEnv(env),
    encoding: 'utf8',
    timeout: 30_000,
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}
