/**
 * The HTTP shell shared by the test MCP servers: a node:http server on loopback that checks the required
 * Authorization header (401 without it, before any MCP code runs), records every HTTP request and JSON-RPC
 * method from the raw bodies (so every protocol is counted the same way), serves the observed state as JSON on `/_state`
 * (for servers running in another process), and hands the rest to the protocol-specific routes.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { McpServerState } from './mcp-test-tools.ts';

export interface ShellRequest {
  req: IncomingMessage;
  res: ServerResponse;
  url: URL;
  /** The raw body (empty for GET/DELETE). */
  body: Buffer;
  /** The parsed JSON body, or undefined when it is not JSON. */
  json: unknown;
}

export interface ShellOptions {
  auth?: string | undefined;
  /** Runs before the Authorization check: true when it answered the request itself (e.g. an OAuth bearer check). */
  guard?: ((req: IncomingMessage, res: ServerResponse) => boolean) | undefined;
  port?: number | undefined;
  state: McpServerState;
  route(request: ShellRequest): Promise<void>;
}

export interface Shell {
  server: Server;
  origin: string;
  close(): Promise<void>;
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function parseJson(body: Buffer): unknown {
  if (body.byteLength === 0) return undefined;
  try {
    return JSON.parse(body.toString('utf8'));
  } catch {
    return undefined;
  }
}

function recordMethods(json: unknown, state: McpServerState): void {
  const messages = Array.isArray(json) ? json : [json];
  for (const message of messages) {
    if (typeof message !== 'object' || message === null || !('method' in message)) continue;
    if (typeof message.method !== 'string') continue;
    state.methods.push(message.method);
    if (message.method === 'tools/list') state.listRequests += 1;
  }
}

export async function startShell(options: ShellOptions): Promise<Shell> {
  const server = createServer((req, res) => {
    void (async () => {
      const url = new URL(req.url ?? '/', `http://${req.headers.host ?? '127.0.0.1'}`);
      if (url.pathname === '/_state') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(options.state));
        return;
      }
      options.state.http.push(`${req.method ?? 'GET'} ${url.pathname}`);
      if (options.guard?.(req, res) === true) return;
      if (options.auth !== undefined && req.headers.authorization !== options.auth) {
        res.writeHead(401, { 'content-type': 'application/json', 'www-authenticate': 'Bearer realm="mcp-test"' });
        res.end(JSON.stringify({ error: 'unauthorized' }));
        return;
      }
      const body = req.method === 'POST' ? await readBody(req) : Buffer.alloc(0);
      const json = parseJson(body);
      recordMethods(json, options.state);
      await options.route({ req, res, url, body, json });
    })().catch((error: unknown) => {
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(error instanceof Error ? error.message : String(error));
    });
  });
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('the test MCP server is not listening on TCP');
  const { port } = address;
  return {
    server,
    origin: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/**
 * Serves a web-standard handler (`Request` → `Response`) on a node response. The request's signal aborts when
 * the client goes away before the answer is complete, which is how a 2026-07-28 client cancels a call over
 * Streamable HTTP (it closes that request's response stream).
 */
export async function serveWeb(request: ShellRequest, handler: (request: Request) => Promise<Response>): Promise<void> {
  const { req, res, url, body } = request;
  const controller = new AbortController();
  res.on('close', () => {
    if (!res.writableFinished) controller.abort(new Error('client closed the connection'));
  });
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (value !== undefined) headers.set(name, Array.isArray(value) ? value.join(', ') : value);
  }
  const webRequest = new Request(url, {
    method: req.method ?? 'GET',
    headers,
    signal: controller.signal,
    ...(body.byteLength > 0 ? { body: new Uint8Array(body) } : {}),
  });
  const response = await handler(webRequest);
  res.writeHead(response.status, Object.fromEntries(response.headers));
  if (response.body === null) {
    res.end();
    return;
  }
  const reader = response.body.getReader();
  controller.signal.addEventListener('abort', () => void reader.cancel().catch(() => undefined), { once: true });
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      res.write(value);
    }
  } catch {
    // The client went away mid-stream; nothing left to deliver.
  }
  res.end();
}
