/**
 * Starts `mcp-server-main.ts` as a child process (see there for the flags) and reads what it observed over HTTP,
 * so a test can kill the process under test (Agentry) while the MCP server and its counters live on.
 */
import type { ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { spawnChild } from './children.ts';
import type { McpServerState } from './mcp-test-tools.ts';
import { listeningUrl } from './server-process.ts';

export interface McpServerProcess {
  child: ChildProcess;
  /** The MCP endpoint. */
  url: string;
  /** What the server has observed so far. */
  state(): Promise<McpServerState>;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

const MAIN = join(import.meta.dirname, 'mcp-server-main.ts');

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Checks the shape of `/_state` rather than trusting it (the child may be an older build of the helper). */
function parseState(value: unknown): McpServerState {
  if (
    !isRecord(value) ||
    !Array.isArray(value.calls) ||
    !Array.isArray(value.cancellations) ||
    !isRecord(value.counts) ||
    typeof value.listRequests !== 'number' ||
    !Array.isArray(value.http) ||
    !Array.isArray(value.methods)
  ) {
    throw new Error('unexpected /_state answer from the MCP server process');
  }
  const counts: Record<string, number> = {};
  for (const [key, count] of Object.entries(value.counts)) if (typeof count === 'number') counts[key] = count;
  return {
    calls: value.calls.filter(isRecord).map((call) => ({
      tool: String(call.tool),
      arguments: isRecord(call.arguments) ? call.arguments : {},
      meta: isRecord(call.meta) ? call.meta : {},
      at: Number(call.at),
    })),
    cancellations: value.cancellations.filter(isRecord).map((cancellation) => ({
      tool: String(cancellation.tool),
      arguments: isRecord(cancellation.arguments) ? cancellation.arguments : {},
      reason: String(cancellation.reason),
      at: Number(cancellation.at),
    })),
    counts,
    listRequests: value.listRequests,
    http: value.http.map(String),
    methods: value.methods.map(String),
  };
}

export async function startMcpServerProcess(
  args: string[],
  env: Record<string, string> = {},
): Promise<McpServerProcess> {
  const child = spawnChild(process.execPath, [MAIN, ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const collect = (chunk: Buffer) => {
    output += chunk.toString();
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  const url = await listeningUrl(child, 'the MCP server', /listening on (http:\/\/\S+)/, () => output);
  const origin = new URL(url).origin;
  return {
    child,
    url,
    async state() {
      const response = await fetch(`${origin}/_state`);
      return parseState(await response.json());
    },
    stop: (signal = 'SIGTERM') =>
      new Promise((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) {
          resolve();
          return;
        }
        const kill = setTimeout(() => child.kill('SIGKILL'), 5000);
        child.once('exit', () => {
          clearTimeout(kill);
          resolve();
        });
        child.kill(signal);
      }),
  };
}
