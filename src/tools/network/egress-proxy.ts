/**
 * The sandbox's only way out: an HTTP proxy on a Unix socket that is bind-mounted into one sandbox. The sandbox
 * has no network interface but loopback, so whatever ignores the proxy variables simply has no route. Each
 * destination is judged by host name (`policyAllows`), then resolved here, refused when any address is private,
 * loopback, link-local or metadata (the egress guard), and connected to at exactly the address that was checked,
 * so DNS rebinding cannot redirect it. It speaks CONNECT host:port (HTTPS and anything else tunnelled) and
 * absolute-URI plain HTTP requests; refusals answer 403 with a one-line reason.
 */
import { chmod, chown } from 'node:fs/promises';
import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { EgressError, type Resolver, resolveDestination } from '../../lib/egress.ts';
import { http } from '../../lib/node-http.ts';
import type { NetworkPolicy } from '../tool-config.ts';
import { normalizeHost, policyAllows } from './network-policy.ts';

export const DEFAULT_EGRESS_PORTS: readonly number[] = [80, 443];

export interface EgressProxyOptions {
  /** Where to listen; the file must not exist yet. Unix socket paths are limited to 107 bytes. */
  socketPath: string;
  /** The agent's network policy; null means the default (no egress: everything is refused). */
  policy: NetworkPolicy | null;
  /** AGENTRY_ALLOW_INSECURE_DESTINATIONS: private addresses pass; this host's own addresses never do. */
  allowInsecure: boolean;
  resolver?: Resolver | undefined;
  /** Destination ports that may be reached (default 80 and 443). */
  allowedPorts?: readonly number[] | undefined;
  logger: Logger;
  /** The uid/gid the sandbox runs as, which must be able to connect to the socket (mode 0600). */
  owner?: { uid: number; gid: number } | null | undefined;
  connectTimeoutMs?: number | undefined;
  /** A tunnel or request with no traffic either way for this long is closed. */
  idleTimeoutMs?: number | undefined;
  maxConnections?: number | undefined;
}

export interface EgressProxy {
  readonly socketPath: string;
  /** Destinations let through and refused so far, as `host:port`. */
  readonly allowed: readonly string[];
  readonly refused: readonly string[];
  /** Stops listening and cuts every open connection. */
  close(): Promise<void>;
}

type Decision = { ok: true; address: string; family: 4 | 6 } | { ok: false; status: 400 | 403 | 502; reason: string };

const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authorization',
  'proxy-authenticate',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/** Splits a CONNECT target `host:port` or `[v6]:port`; null when malformed. */
export function parseAuthority(raw: string): { host: string; port: number } | null {
  const match = /^(\[[0-9a-fA-F:.]+\]|[^:[\]/\s@]+):(\d{1,5})$/.exec(raw);
  if (match === null) return null;
  const [, host = '', portText = ''] = match;
  const port = Number(portText);
  return port >= 1 && port <= 65535 ? { host, port } : null;
}

function forwardHeaders(headers: IncomingHttpHeaders): OutgoingHttpHeaders {
  const listed = new Set(
    String(headers.connection ?? '')
      .split(',')
      .map((name) => name.trim().toLowerCase()),
  );
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined && !HOP_BY_HOP.has(name) && !listed.has(name)) out[name] = value;
  }
  return out;
}

function refusalResponse(status: number, reason: string): string {
  const text = { 400: 'Bad Request', 403: 'Forbidden', 502: 'Bad Gateway', 504: 'Gateway Timeout' }[status] ?? 'Error';
  const body = `${reason}\n`;
  return (
    `HTTP/1.1 ${status} ${text}\r\nContent-Type: text/plain; charset=utf-8\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`
  );
}

/** Starts a proxy for one sandbox. Resolves once it listens (and the socket's owner and mode are set). */
export async function startEgressProxy(options: EgressProxyOptions): Promise<EgressProxy> {
  const allowedPorts = options.allowedPorts ?? DEFAULT_EGRESS_PORTS;
  const connectTimeoutMs = options.connectTimeoutMs ?? 10_000;
  const idleTimeoutMs = options.idleTimeoutMs ?? 300_000;
  const { logger } = options;
  const allowed: string[] = [];
  const refused: string[] = [];
  const open = new Set<Duplex>();
  const track = (socket: Duplex) => {
    open.add(socket);
    socket.once('close', () => open.delete(socket));
  };

  async function decide(rawHost: string, port: number): Promise<Decision> {
    const destination = `${rawHost}:${port}`;
    const refuse = (status: 400 | 403 | 502, reason: string): Decision => {
      refused.push(destination);
      logger.debug({ destination, reason }, 'sandbox egress refused');
      return { ok: false, status, reason };
    };
    const host = normalizeHost(rawHost);
    if (host === null) return refuse(400, `invalid host ${JSON.stringify(rawHost)}`);
    if (!allowedPorts.includes(port))
      return refuse(403, `port ${port} is not allowed (allowed: ${allowedPorts.join(', ')})`);
    if (!policyAllows(options.policy, host)) return refuse(403, `${host} is not allowed by the agent's network policy`);
    try {
      // The guard validates a URL; the scheme only chooses its checks, the destination is what is judged.
      const literal = net.isIP(host) === 6 ? `[${host}]` : host;
      // This host's own addresses (Agentry, its database, anything listening on all interfaces) never, even insecure.
      const resolved = await resolveDestination(`https://${literal}:${port}/`, {
        allowInsecure: options.allowInsecure,
        refuseHostLocal: true,
        resolver: options.resolver,
      });
      allowed.push(destination);
      logger.debug({ destination, address: resolved.address }, 'sandbox egress allowed');
      return { ok: true, address: resolved.address, family: resolved.family };
    } catch (error) {
      if (error instanceof EgressError && error.code === 'destination_blocked') {
        // A literal refused by the URL check says so in URL terms (with a hint that does not apply here).
        const reason = error.message.startsWith('URL ') ? `${host} is a private or loopback address` : error.message;
        return refuse(403, reason);
      }
      if (error instanceof EgressError && error.code === 'dns_failed') return refuse(502, `could not resolve ${host}`);
      return refuse(400, `invalid destination ${host}`);
    }
  }

  const server = http.createServer();
  server.maxConnections = options.maxConnections ?? 128;

  server.on('connect', (request: IncomingMessage, client: Duplex, head: Buffer) => {
    track(client);
    client.on('error', () => client.destroy());
    const target = parseAuthority(request.url ?? '');
    if (target === null) {
      client.end(refusalResponse(400, 'CONNECT needs host:port'));
      return;
    }
    void decide(target.host.replace(/^\[|\]$/g, ''), target.port).then(
      (decision) => {
        if (!decision.ok) {
          client.end(refusalResponse(decision.status, decision.reason));
          return;
        }
        const upstream = net.connect({ host: decision.address, port: target.port, family: decision.family });
        track(upstream);
        const connectTimer = setTimeout(() => {
          upstream.destroy();
          client.end(
            refusalResponse(504, `no connection to ${target.host}:${target.port} within ${connectTimeoutMs} ms`),
          );
        }, connectTimeoutMs);
        upstream.once('connect', () => {
          clearTimeout(connectTimer);
          client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
          if (head.length > 0) upstream.write(head);
          upstream.setTimeout(idleTimeoutMs, () => upstream.destroy());
          client.pipe(upstream);
          upstream.pipe(client);
        });
        upstream.on('error', () => {
          clearTimeout(connectTimer);
          if (client.writable && upstream.connecting)
            client.end(refusalResponse(502, `could not connect to ${target.host}`));
          else client.destroy();
        });
        upstream.on('close', () => client.destroy());
        client.on('close', () => upstream.destroy());
      },
      () => client.destroy(),
    );
  });

  server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    const refuse = (status: number, reason: string) => {
      response.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', connection: 'close' });
      response.end(`${reason}\n`);
    };
    let url: URL;
    try {
      url = new URL(request.url ?? '');
    } catch {
      refuse(400, 'a proxy request needs an absolute http:// URL');
      return;
    }
    if (url.protocol !== 'http:') {
      refuse(400, 'only http:// URLs are forwarded; use CONNECT for https');
      return;
    }
    const port = url.port === '' ? 80 : Number(url.port);
    void decide(url.hostname.replace(/^\[|\]$/g, ''), port).then(
      (decision) => {
        if (!decision.ok) {
          refuse(decision.status, decision.reason);
          return;
        }
        const headers = forwardHeaders(request.headers);
        headers.host = url.host;
        const upstream = http.request({
          host: decision.address,
          family: decision.family,
          port,
          method: request.method,
          path: `${url.pathname}${url.search}`,
          headers,
          setHost: false,
          agent: false,
          timeout: connectTimeoutMs,
        });
        upstream.on('timeout', () => upstream.destroy(new Error('timed out')));
        upstream.on('response', (answer) => {
          response.writeHead(answer.statusCode ?? 502, forwardHeaders(answer.headers));
          answer.pipe(response);
          answer.on('error', () => response.destroy());
        });
        upstream.on('error', () => {
          if (!response.headersSent) refuse(502, `could not reach ${url.host}`);
          else response.destroy();
        });
        request.pipe(upstream);
      },
      () => response.destroy(),
    );
  });

  server.on('connection', (socket: net.Socket) => {
    track(socket);
    socket.setTimeout(idleTimeoutMs, () => socket.destroy());
  });
  server.on('clientError', (_error, socket) => {
    if (socket.writable) socket.end(refusalResponse(400, 'malformed request'));
    else socket.destroy();
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.socketPath, () => {
      server.off('error', reject);
      resolve();
    });
  });
  try {
    if (options.owner) await chown(options.socketPath, options.owner.uid, options.owner.gid);
    await chmod(options.socketPath, 0o600);
  } catch (error) {
    server.close();
    throw error;
  }

  return {
    socketPath: options.socketPath,
    allowed,
    refused,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of open) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
