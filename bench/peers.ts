/**
 * What the peer benches share to install a peer from the npm registry into a folder of its own (outside this
 * repository's dependencies) and to start it: commands run with this process's Node.js first on PATH, markers that
 * record a finished step so later runs reuse the folder, and a free port for servers that take theirs from PORT.
 */
import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { delimiter, dirname, join } from 'node:path';
import { type Agentry, startAgentry } from './agentry.ts';
import { type ServerProcess, startServer, stopProcess } from './children.ts';
import { type Defer, REPO_ROOT } from './support.ts';

const COMMAND_TIMEOUT_MS = 10 * 60_000;

/** This process's environment with its Node.js first on PATH (so npm, npx and what they spawn run on it), plus `extra`. */
export function peerEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return { ...process.env, PATH: `${dirname(process.execPath)}${delimiter}${process.env.PATH ?? ''}`, ...extra };
}

/** Runs `command args` in `cwd` and fails with the tail of its output unless it exits 0 (within 10 minutes). */
export function runCommand(
  command: string,
  args: readonly string[],
  cwd: string,
  env: NodeJS.ProcessEnv,
): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    const collect = (chunk: Buffer): void => {
      output = (output + chunk.toString('utf8')).slice(-8192);
    };
    child.stdout.on('data', collect);
    child.stderr.on('data', collect);
    const timer = setTimeout(() => child.kill('SIGKILL'), COMMAND_TIMEOUT_MS);
    child.once('error', (error) => {
      clearTimeout(timer);
      reject(new Error(`${command} ${args.join(' ')}: ${error.message}`));
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve();
      else
        reject(new Error(`${command} ${args.join(' ')} in ${cwd} failed (code ${code}, signal ${signal}):\n${output}`));
    });
  });
}

/** The text of a marker file, or null when there is none. */
export async function readMarker(path: string): Promise<string | null> {
  try {
    return await readFile(path, 'utf8');
  } catch {
    return null;
  }
}

/** A port nobody listens on right now. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (typeof address !== 'object' || address === null) throw new Error('no port');
  return address.port;
}

/** The zero-latency stub model, and Agentry (SQLite) with the stub as its provider: both sides of a peer bench. */
export async function startStubAndAgentry(
  bench: string,
  defer: Defer,
): Promise<{ stub: ServerProcess; agentry: Agentry }> {
  const stub = await startServer({
    name: 'stub model',
    args: [join(REPO_ROOT, 'bench/stub-model.ts')],
    cwd: REPO_ROOT,
    env: process.env,
    timeoutMs: 20_000,
  });
  defer(() => stopProcess(stub.child));
  const providers = JSON.stringify({ stub: { baseURL: `${stub.url}/v1`, apiKey: 'stub' } });
  const agentry = await startAgentry({ bench, mode: 'sqlite', env: { AGENTRY_PROVIDERS: providers } }, defer);
  return { stub, agentry };
}
