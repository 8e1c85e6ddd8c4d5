/**
 * A `fetch` for user-chosen destinations (MCP servers, the `http_request` and `web_browse` tools) behind the egress
 * guard of `egress.ts`: the URL must pass `url-policy.ts` (public https, or http too with `allowHttp`, unless
 * `allowInsecure`), and every new connection resolves its host ONCE, is refused (EgressError
 * `destination_blocked`) when any answer is this host's own address or a private, link-local, CGNAT or metadata
 * one (as `egress.ts` rules), and then connects to exactly the checked address. TLS keeps the hostname for SNI and certificate verification. Redirects are never
 * followed: a 3xx comes back as is (`redirect: 'error'` still makes it an error), so a redirect can never lead past
 * the guard.
 *
 * Why undici's own `fetch` over a custom `Agent` connector: fetch semantics (streaming bodies, AbortSignal,
 * Request inputs, header handling) are undici's and well tested, while the connector is the single place every
 * socket is opened, so the check and the connect cannot drift apart. The check runs per connection, not per
 * request: a kept-alive connection was checked when it opened and stays pinned to that address; a new
 * connection is checked anew. The connector also bounds resolution + connect + TLS with `connectTimeoutMs`.
 * Header and body timeouts are off: callers bound requests with their own signals (an MCP call may legitimately
 * stream for minutes), and an idle SSE stream must not be cut.
 *
 * Failures: refusals throw EgressError (`invalid_url`, `destination_blocked`); network failures throw EgressError
 * too (`dns_failed`, `connect_failed`, `tls_failed`, `timeout`) with the underlying error as `cause`; an abort
 * rejects with the signal's reason, as `fetch` does.
 */
import { isIP, Socket } from 'node:net';
import type { Agent } from 'undici';
import type { HostAddresses } from './address-class.ts';
import { classifyNetworkError, EgressError, errorCode, type Resolver, resolveDestination } from './egress.ts';
import { destinationUrlProblem } from './url-policy.ts';

export interface EgressFetchOptions {
  /**
   * AGENTRY_ALLOW_INSECURE_DESTINATIONS (or the operator's own destinations): allow http, private addresses and,
   * unless `refuseHostLocal`, this host's own (connections are still pinned).
   */
  allowInsecure: boolean;
  /** This host's own addresses stay refused with `allowInsecure` too (the agent's network tools). */
  refuseHostLocal?: boolean | undefined;
  resolver?: Resolver | undefined;
  hostAddresses?: HostAddresses | undefined;
  /** Bound on resolving, connecting and the TLS handshake of one new connection (default 10 s). */
  connectTimeoutMs?: number | undefined;
  /** Plain http to public addresses too (the agent's network tools); addresses are checked the same way. */
  allowHttp?: boolean | undefined;
  /** Certificates to trust instead of the system's (PEM; tests with their own certificate authority). */
  ca?: string | undefined;
}

/** `fetch`, plus `close()` to drop its pooled connections at shutdown. */
export interface EgressFetch {
  (input: string | URL | Request, init?: RequestInit): Promise<Response>;
  close(): Promise<void>;
}

export const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;

/** Rejects with an EgressError `timeout` when `promise` has not settled within `ms`. */
function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new EgressError('timeout', `${what} took longer than ${ms} ms`)), ms);
    promise.then(resolve, reject).finally(() => clearTimeout(timer));
  });
}

function urlOf(input: string | URL | Request): string {
  if (typeof input === 'string') return input;
  return input instanceof URL ? input.href : input.url;
}

/** Statuses whose responses have no body by definition (a Response refuses one). */
const NULL_BODY_STATUSES = new Set([204, 205, 304]);

/**
 * The request as undici's fetch takes it. The platform's own Request normalises the input once (method, headers,
 * any body type, the content-type a body implies); the body is then buffered, so a JSON-RPC POST goes out with a
 * Content-Length rather than chunked, and undici never has to recognise another fetch implementation's objects.
 */
async function normalizedRequest(url: string, input: string | URL | Request, init: RequestInit | undefined) {
  const request = new Request(input instanceof Request ? input : url, init);
  const body = request.body === null ? null : new Uint8Array(await request.arrayBuffer());
  return {
    method: request.method,
    headers: [...request.headers],
    body,
    signal: init?.signal ?? (input instanceof Request ? input.signal : undefined),
    refuseRedirects: request.redirect === 'error',
  };
}

type Undici = typeof import('undici');

/** The connection pool of one guarded fetch, with undici's fetch to use it. */
interface Pool {
  agent: Agent;
  fetch: Undici['fetch'];
}

/** The pool's agent: every connection it opens goes through the egress guard. */
function createAgent(undici: Undici, options: EgressFetchOptions): Agent {
  const connectTimeoutMs = options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
  const connect = undici.buildConnector({
    timeout: connectTimeoutMs,
    ...(options.ca === undefined ? {} : { ca: options.ca }),
  });
  const resolveOptions = {
    allowInsecure: options.allowInsecure,
    refuseHostLocal: options.refuseHostLocal,
    allowHttp: options.allowHttp,
    resolver: options.resolver,
    hostAddresses: options.hostAddresses,
  };
  return new undici.Agent({
    headersTimeout: 0,
    bodyTimeout: 0,
    connect: (target, callback) => {
      const host = target.hostname.replace(/^\[|\]$/g, '');
      const port = target.port === '' ? (target.protocol === 'https:' ? '443' : '80') : target.port;
      const literal = isIP(host);
      const origin = `${target.protocol}//${literal === 6 ? `[${host}]` : host}:${port}/`;
      within(resolveDestination(origin, resolveOptions), connectTimeoutMs, `resolving ${host}`).then(
        (destination) => {
          let handshaking = false;
          // The socket goes to the checked address; the name stays the TLS server name (SNI and certificate).
          const socket: unknown = connect(
            {
              ...target,
              hostname: destination.address,
              ...(literal === 0 ? { servername: target.servername ?? host } : {}),
            },
            (...result) => {
              const [error] = result;
              if (error === null || !handshaking) callback(...result);
              else
                callback(
                  new EgressError('tls_failed', `TLS handshake failed (${errorCode(error) ?? error.message})`, {
                    cause: error,
                  }),
                  null,
                );
            },
          );
          // Past the TCP connect, an https failure is the handshake's (a reset after the ClientHello included).
          if (target.protocol === 'https:' && socket instanceof Socket) {
            socket.once('connect', () => {
              handshaking = true;
            });
          }
        },
        (error: unknown) => callback(classifyNetworkError(error), null),
      );
    },
  });
}

/**
 * Builds a guarded fetch with its own connection pool. Every connection it opens goes through the egress guard;
 * see the file header for what is refused, pinned and returned. undici and the pool are made by the first request:
 * a process (or a CLI command) that sends none never loads undici.
 */
export function createEgressFetch(options: EgressFetchOptions): EgressFetch {
  let pool: Promise<Pool> | null = null;
  const open = (): Promise<Pool> => {
    pool ??= import('undici').then((undici) => ({ agent: createAgent(undici, options), fetch: undici.fetch }));
    return pool;
  };

  const guarded = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const url = urlOf(input);
    const problem = destinationUrlProblem(url, options.allowInsecure, { allowHttp: options.allowHttp });
    if (problem !== null) {
      throw new EgressError(
        problem.kind === 'blocked' ? 'destination_blocked' : 'invalid_url',
        `URL ${problem.message}`,
      );
    }
    const request = await normalizedRequest(url, input, init);
    const { signal } = request;
    const { agent, fetch } = await open();
    try {
      const response = await fetch(url, {
        method: request.method,
        headers: request.headers,
        body: request.body,
        redirect: 'manual',
        ...(signal === undefined || signal === null ? {} : { signal }),
        dispatcher: agent,
      });
      if (
        request.refuseRedirects &&
        response.status >= 300 &&
        response.status < 400 &&
        response.headers.has('location')
      ) {
        await response.body?.cancel();
        throw new TypeError(`refused a redirect (HTTP ${response.status}) as the request asked`);
      }
      // Re-wrapped as the platform's Response, which is what callers' types (and `typeof fetch`) expect.
      return new Response(NULL_BODY_STATUSES.has(response.status) ? null : response.body, {
        status: response.status,
        statusText: response.statusText,
        headers: [...response.headers],
      });
    } catch (error) {
      if (signal?.aborted === true) throw signal.reason;
      if (error instanceof TypeError && error.cause === undefined) throw error;
      throw classifyNetworkError(error instanceof TypeError ? error.cause : error);
    }
  };
  return Object.assign(guarded, { close: async () => (pool === null ? undefined : (await pool).agent.close()) });
}
