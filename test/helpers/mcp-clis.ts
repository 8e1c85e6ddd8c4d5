/**
 * Running the MCP project's command-line tools (the conformance suite, the inspector's CLI) against a server under
 * test: each as a child process whose output the test reads, and, for a tool that cannot send headers of its own, a
 * loopback HTTP proxy that adds the API key to every request it forwards (as `mcp-remote --header` does for a
 * client).
 */
import { createServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { spawnChild } from './children.ts';

const ROOT = join(import.meta.dirname, '..', '..');

/** The path of a command installed in node_modules/.bin. */
export const binOf = (name: string): string => join(ROOT, 'node_modules', '.bin', name);

export interface CommandResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `command` to its end (killed after `timeoutMs`), without blocking this process's event loop. */
export function runCommand(
  command: string,
  args: string[],
  options: { cwd?: string; timeoutMs: number },
): Promise<CommandResult> {
  return new Promise((resolve, reject) => {
    const child = spawnChild(command, args, { cwd: options.cwd ?? ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs);
    child.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

export interface KeyedProxy {
  /** The proxy's origin (http://127.0.0.1:<port>): a path on it is the same path on the target. */
  url: string;
  close(): Promise<void>;
}

/** Forwards every request to `target` unchanged (Host and Origin included) but for `Authorization: Bearer <key>`. */
export async function startKeyedProxy(target: string, key: string): Promise<KeyedProxy> {
  const upstream = new URL(target);
  const server = createServer((req, res) => {
    const forwarded = httpRequest(
      {
        host: upstream.hostname,
        port: upstream.port,
        path: req.url,
        method: req.method,
        headers: { ...req.headers, authorization: `Bearer ${key}` },
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    forwarded.on('error', () => res.destroy());
    res.on('close', () => forwarded.destroy());
    req.pipe(forwarded);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
