/**
 * A hostile MCP server in its own process (so that what it sends never counts against the test's own memory): it
 * speaks just enough 2025 Streamable HTTP (stateless, JSON or SSE answers) for a client to connect, and then
 * floods. Query parameters of the endpoint URL choose the flood:
 * - `tools=N` tools in `tools/list` (default 1), each with a description of `desc=N` characters, `page=N` per page;
 * - `tools/call` of any tool answers a text of `mb=N` MiB (default 1), streamed as it is written, as an event
 *   stream when `sse=1`; with `shape=deep` its structured content is instead `n=N` arrays nested in each other,
 *   with `shape=wide` one array of N numbers.
 * GET `/_state` answers `{sent}`: the bytes of tool results the server managed to write (a reader that stops
 * reading stops it too, through backpressure and the closed connection).
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnChild } from './children.ts';

const SERVER_SCRIPT = `
import http from 'node:http';
let sent = 0;
const MIB = Buffer.alloc(1024 * 1024, 'x');
function json(response, status, body) {
  response.writeHead(status, { 'content-type': 'application/json' });
  response.end(JSON.stringify(body));
}
async function write(response, chunk) {
  if (response.destroyed) return false;
  sent += chunk.length;
  if (!response.write(chunk)) {
    await new Promise((resolve) => { response.once('drain', resolve); response.once('close', resolve); });
  }
  return !response.destroyed;
}
async function flood(response, id, query) {
  const sse = query.get('sse') === '1';
  response.writeHead(200, { 'content-type': sse ? 'text/event-stream' : 'application/json' });
  if (sse) await write(response, 'event: message\\ndata: ');
  const shape = query.get('shape');
  if (shape === 'deep' || shape === 'wide') {
    const n = Number(query.get('n') || 1000);
    const value = shape === 'deep' ? '['.repeat(n) + ']'.repeat(n) : '[' + '0,'.repeat(n - 1) + '0]';
    await write(response, '{"jsonrpc":"2.0","id":' + JSON.stringify(id) +
      ',"result":{"content":[{"type":"text","text":"ok"}],"structuredContent":{"v":' + value + '}}}' + (sse ? '\\n\\n' : ''));
    return void response.end();
  }
  await write(response, '{"jsonrpc":"2.0","id":' + JSON.stringify(id) + ',"result":{"content":[{"type":"text","text":"');
  const mb = Number(query.get('mb') || 1);
  for (let i = 0; i < mb; i++) if (!(await write(response, MIB))) return;
  await write(response, '"}]}}' + (sse ? '\\n\\n' : ''));
  response.end();
}
function tools(query, cursor) {
  const count = Number(query.get('tools') || 1);
  const page = Number(query.get('page') || count);
  const from = Number(cursor || 0);
  const description = 'd'.repeat(Number(query.get('desc') || 10));
  const list = [];
  for (let i = from; i < Math.min(count, from + page); i++) {
    list.push({ name: 'tool_' + i, description, inputSchema: { type: 'object', properties: {} } });
  }
  return from + page < count ? { tools: list, nextCursor: String(from + page) } : { tools: list };
}
http.createServer((request, response) => {
  const url = new URL(request.url, 'http://flood');
  if (url.pathname === '/_state') return json(response, 200, { sent });
  if (request.method !== 'POST') { response.writeHead(405); return response.end(); }
  const chunks = [];
  request.on('data', (chunk) => chunks.push(chunk));
  request.on('end', () => {
    const message = JSON.parse(Buffer.concat(chunks).toString());
    if (message.id === undefined) { response.writeHead(202); return response.end(); }
    const answer = (result) => json(response, 200, { jsonrpc: '2.0', id: message.id, result });
    switch (message.method) {
      case 'initialize':
        return answer({ protocolVersion: message.params.protocolVersion, capabilities: { tools: {} },
          serverInfo: { name: 'flood', version: '1.0.0' } });
      case 'tools/list': return answer(tools(url.searchParams, message.params?.cursor));
      case 'tools/call': return void flood(response, message.id, url.searchParams);
      default:
        return json(response, 200, { jsonrpc: '2.0', id: message.id, error: { code: -32601, message: 'Method not found' } });
    }
  });
}).listen(0, '127.0.0.1', function () { process.stdout.write('listening ' + this.address().port + '\\n'); });
`;

export interface FloodServer {
  /** The MCP endpoint with the given flood parameters. */
  url(query?: Record<string, string | number>): string;
  /** Bytes of tool results written so far. */
  sent(): Promise<number>;
  stop(): void;
}

export async function startFloodServer(): Promise<FloodServer> {
  const directory = mkdtempSync(join(tmpdir(), 'agentry-flood-'));
  const script = join(directory, 'flood.mjs');
  writeFileSync(script, SERVER_SCRIPT);
  const child: ChildProcess = spawnChild(process.execPath, [script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('the flood server did not start')), 15_000);
    child.stdout?.on('data', (chunk: Buffer) => {
      const match = /listening (\d+)/.exec(chunk.toString());
      if (match?.[1] !== undefined) {
        clearTimeout(timer);
        resolve(Number(match[1]));
      }
    });
    child.once('exit', () => reject(new Error('the flood server exited')));
  });
  const origin = `http://127.0.0.1:${port}`;
  return {
    url: (query = {}) => {
      const search = new URLSearchParams(
        Object.entries(query).map(([key, value]): [string, string] => [key, String(value)]),
      );
      return `${origin}/mcp${search.size === 0 ? '' : `?${search}`}`;
    },
    sent: async () => {
      const state: unknown = await (await fetch(`${origin}/_state`)).json();
      const sent = typeof state === 'object' && state !== null ? Reflect.get(state, 'sent') : undefined;
      if (typeof sent !== 'number') throw new Error('unexpected /_state answer');
      return sent;
    },
    stop: () => {
      child.kill('SIGKILL');
      rmSync(directory, { recursive: true, force: true });
    },
  };
}
