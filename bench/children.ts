/**
 * Server child processes of the benches: started with `node <args>`, ready once they print their URL, stopped
 * with SIGTERM (SIGKILL if they linger). Servers run as children so the load generator never shares their event
 * loop. A child's output goes either to a pipe this process reads (quiet servers) or straight to a file, for
 * servers that log every request (Agentry at its default `info` level): writing to a file costs the server what
 * writing to a log collector would, and costs this process, which generates the load, nothing.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';

export interface ServerProcess {
  name: string;
  child: ChildProcess;
  /** Base URL as the server announced it, without a trailing slash. */
  url: string;
  /** Last few KB of the child's stdout+stderr, for error messages. */
  output(): string;
}

// The server may log JSON, so the URL can be followed by a quote or escaped characters.
const LISTENING = /listening on (https?:\/\/[^\s"'\\]+)/;
const OUTPUT_TAIL_CHARS = 8192;
const FILE_POLL_MS = 25;

// Children still alive when the bench process exits (an uncaught error, process.exit) would keep ports and
// CPU busy for the next run, so they are killed synchronously on the way out.
const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

export interface StartOptions {
  name: string;
  args: readonly string[];
  cwd: string;
  env: NodeJS.ProcessEnv;
  timeoutMs: number;
  /** Appends the child's stdout and stderr to this file instead of piping them to this process. */
  logFile?: string;
  /**
   * The line that says the server is ready; its first group is the base URL. Default: `listening on <url>`.
   * `url` replaces the captured one (for servers that announce a host name rather than the address they bound).
   */
  ready?: { pattern: RegExp; url?: string };
}

/** The last `chars` characters of a file (fewer when it is shorter), read synchronously for error messages. */
function fileTail(path: string, chars: number): string {
  try {
    const fd = openSync(path, 'r');
    try {
      const size = fstatSync(fd).size;
      const length = Math.min(size, chars);
      const buffer = Buffer.alloc(length);
      readSync(fd, buffer, 0, length, size - length);
      return buffer.toString('utf8');
    } finally {
      closeSync(fd);
    }
  } catch {
    return '';
  }
}

/** Calls `onText` with what is appended to `path` from now on, until the returned function is called. */
function followFile(path: string, onText: (text: string) => void): () => void {
  let offset = 0;
  const timer = setInterval(() => {
    const fd = openSync(path, 'r');
    try {
      const size = fstatSync(fd).size;
      if (size <= offset) return;
      const buffer = Buffer.alloc(size - offset);
      const read = readSync(fd, buffer, 0, buffer.length, offset);
      offset += read;
      onText(buffer.subarray(0, read).toString('utf8'));
    } finally {
      closeSync(fd);
    }
  }, FILE_POLL_MS);
  return () => clearInterval(timer);
}

/** Spawns `node <args>` and resolves once it prints its ready line (`listening on <url>`) on either stream. */
export function startServer(options: StartOptions): Promise<ServerProcess> {
  const logFile = options.logFile;
  let child: ChildProcess;
  if (logFile === undefined) {
    child = spawn(process.execPath, options.args, {
      cwd: options.cwd,
      env: options.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  } else {
    const fd = openSync(logFile, 'a');
    try {
      child = spawn(process.execPath, options.args, { cwd: options.cwd, env: options.env, stdio: ['ignore', fd, fd] });
    } finally {
      // The child has its own copy of the descriptor.
      closeSync(fd);
    }
  }
  live.add(child);
  child.once('exit', () => live.delete(child));

  let tail = '';
  const output = (): string => (logFile === undefined ? tail : fileTail(logFile, OUTPUT_TAIL_CHARS));
  const pattern = options.ready?.pattern ?? LISTENING;
  return new Promise<ServerProcess>((resolvePromise, reject) => {
    let settled = false;
    let unfollow = (): void => {};
    // Per-stream buffers until the line is found: a chunk boundary can split the URL, and interleaving the
    // two streams could splice unrelated text into it.
    const pending = { stdout: '', stderr: '' };
    const finish = (error: Error | null, url?: string): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      unfollow();
      child.off('exit', onExit);
      child.off('error', onError);
      if (error !== null || url === undefined) {
        void stopProcess(child);
        reject(error ?? new Error(`${options.name}: no URL`));
        return;
      }
      resolvePromise({ name: options.name, child, url: url.replace(/\/+$/, ''), output });
    };
    const onText = (stream: 'stdout' | 'stderr', text: string): void => {
      // Keep reading after startup too: an undrained pipe would eventually block the server's writes.
      if (logFile === undefined) tail = (tail + text).slice(-OUTPUT_TAIL_CHARS);
      if (settled) return;
      pending[stream] = (pending[stream] + text).slice(-OUTPUT_TAIL_CHARS);
      const match = pattern.exec(pending[stream]);
      if (match?.[1] !== undefined) finish(null, options.ready?.url ?? match[1]);
    };
    const onExit = (code: number | null, signal: NodeJS.Signals | null): void => {
      // A file may still hold the last lines the child wrote before exiting.
      finish(new Error(`${options.name} exited (code ${code}, signal ${signal}) before it was ready:\n${output()}`));
    };
    const onError = (error: Error): void => finish(new Error(`${options.name} failed to start: ${error.message}`));
    const timer = setTimeout(() => {
      finish(new Error(`${options.name} did not print its ready line within ${options.timeoutMs} ms:\n${output()}`));
    }, options.timeoutMs);
    if (logFile === undefined) {
      child.stdout?.on('data', (chunk: Buffer) => onText('stdout', chunk.toString('utf8')));
      child.stderr?.on('data', (chunk: Buffer) => onText('stderr', chunk.toString('utf8')));
    } else {
      unfollow = followFile(logFile, (text) => onText('stdout', text));
    }
    child.once('exit', onExit);
    child.once('error', onError);
  });
}

function exited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

function waitForExit(child: ChildProcess, ms: number): Promise<boolean> {
  if (exited(child)) return Promise.resolve(true);
  return new Promise((resolvePromise) => {
    const timer = setTimeout(() => {
      child.off('exit', onExit);
      resolvePromise(false);
    }, ms);
    const onExit = (): void => {
      clearTimeout(timer);
      resolvePromise(true);
    };
    child.once('exit', onExit);
  });
}

/** SIGTERM so the server can shut down cleanly, SIGKILL if it has not gone after 5 s. */
export async function stopProcess(child: ChildProcess): Promise<void> {
  if (exited(child)) return;
  child.kill('SIGTERM');
  if (await waitForExit(child, 5000)) return;
  child.kill('SIGKILL');
  await waitForExit(child, 5000);
}
