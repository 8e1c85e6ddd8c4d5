/**
 * The egress guard (DESIGN section 7) for every outbound call: webhooks, MCP servers, the agent's network tools
 * and its sandbox's proxy, image imports, skill clones, search providers. A destination is resolved once, judged
 * by the class of EVERY address it resolves to (`address-class.ts`), and the connection then goes to exactly the
 * checked address: the hostname is never resolved a second time, so a DNS answer that changes between check and
 * connect (DNS rebinding) cannot redirect it. TLS still uses the hostname for SNI and certificate verification.
 * Redirects are never followed and nothing is retried here: callers apply `retry.ts` using `EgressError.retriable`.
 *
 * What is refused:
 * | | this host's own addresses | private addresses |
 * |---|---|---|
 * | default | refused | refused |
 * | `allowInsecure` (development; operator-configured destinations) | allowed | allowed |
 * | `allowInsecure` + `refuseHostLocal` (the agent's own destinations) | refused | allowed |
 */
import { lookup as dnsLookup } from 'node:dns/promises';
import type { IncomingHttpHeaders } from 'node:http';
import https from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import { classifyAddress, type HostAddresses, systemHostAddresses } from './address-class.ts';
import { http } from './node-http.ts';
import { untilAborted } from './retry.ts';
import { destinationUrlProblem } from './url-policy.ts';

export const EGRESS_ERROR_CODES = [
  'invalid_url',
  'destination_blocked',
  'dns_failed',
  'connect_failed',
  'timeout',
  'tls_failed',
  'response_too_large',
  'aborted',
] as const;
export type EgressErrorCode = (typeof EGRESS_ERROR_CODES)[number];

/** Whether another attempt could succeed: network trouble may pass; a refused or malformed destination will not. */
const RETRIABLE: Record<EgressErrorCode, boolean> = {
  invalid_url: false,
  destination_blocked: false,
  dns_failed: true,
  connect_failed: true,
  timeout: true,
  tls_failed: true,
  // Reserved for callers that refuse an oversized answer; postPinned truncates instead.
  response_too_large: false,
  aborted: false,
};

export class EgressError extends Error {
  readonly code: EgressErrorCode;
  readonly retriable: boolean;

  constructor(code: EgressErrorCode, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
    this.retriable = RETRIABLE[code];
  }
}

export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

/** Name resolution, injectable so tests can make any name resolve anywhere. */
export interface Resolver {
  lookup(hostname: string): Promise<ResolvedAddress[]>;
}

/** The operating system's resolver (getaddrinfo, so /etc/hosts counts), every address in its own order. */
export const systemResolver: Resolver = {
  async lookup(hostname) {
    const answers = await dnsLookup(hostname, { all: true, verbatim: true });
    return answers.map(({ address, family }) => ({ address, family: family === 6 ? 6 : 4 }));
  },
};

export interface ResolvedDestination {
  url: URL;
  address: string;
  family: 4 | 6;
}

export interface ResolveOptions {
  /**
   * AGENTRY_ALLOW_INSECURE_DESTINATIONS (or a destination the operator configured): allow http, private addresses
   * and, unless `refuseHostLocal`, this host's own (the connection is still pinned).
   */
  allowInsecure: boolean;
  /** This host's own addresses stay refused with `allowInsecure` too: destinations the agent chooses. */
  refuseHostLocal?: boolean | undefined;
  /** Plain http to public addresses passes too (the agent's network tools). */
  allowHttp?: boolean | undefined;
  resolver?: Resolver | undefined;
  /** This host's interface addresses (default: the system's, read again each second). */
  hostAddresses?: HostAddresses | undefined;
}

/** The options that decide which addresses pass, picked out of a wider options object. */
export function addressRules(options: ResolveOptions): ResolveOptions {
  return {
    allowInsecure: options.allowInsecure,
    refuseHostLocal: options.refuseHostLocal,
    allowHttp: options.allowHttp,
    resolver: options.resolver,
    hostAddresses: options.hostAddresses,
  };
}

/** Why an address is refused under `options`, or null when it may be connected to. */
function addressRefusal(address: string, options: ResolveOptions): 'host-local' | 'private' | null {
  const verdict = classifyAddress(address, options.hostAddresses ?? systemHostAddresses);
  if (verdict === 'host-local' && (!options.allowInsecure || options.refuseHostLocal === true)) return 'host-local';
  if (verdict === 'private' && !options.allowInsecure) return 'private';
  return null;
}

export function errorCode(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null || !('code' in error)) return undefined;
  return typeof error.code === 'string' ? error.code : undefined;
}

/** `url.hostname` without IPv6 brackets, as resolvers and sockets want it. */
function bareHostname(url: URL): string {
  return url.hostname.replace(/^\[|\]$/g, '');
}

/**
 * Why `rawUrl` cannot be a destination a user stores (a webhook endpoint, a push notification URL), worded for the
 * field `field` that holds it, or null when it can. A name that does not resolve right now passes: it may resolve
 * later, and every delivery checks again.
 */
export async function storedDestinationProblem(
  rawUrl: string,
  field: string,
  options: ResolveOptions,
): Promise<string | null> {
  try {
    await resolveDestination(rawUrl, options);
    return null;
  } catch (error) {
    if (!(error instanceof EgressError)) throw error;
    if (error.code === 'dns_failed') return null;
    return error.message.startsWith('URL ')
      ? `${field} ${error.message.slice(4)}`
      : `${field} is refused: ${error.message}`;
  }
}

/**
 * Validates `rawUrl` (https unless `allowInsecure`; no credentials; no fragment), resolves its host (an IP
 * literal is used as is) and returns the address to connect to. Unless `allowInsecure`, it is refused when ANY
 * address is non-public: a name with one private answer among public ones could be steered to it.
 */
export async function resolveDestination(rawUrl: string, options: ResolveOptions): Promise<ResolvedDestination> {
  const problem = destinationUrlProblem(rawUrl, options.allowInsecure, { allowHttp: options.allowHttp });
  if (problem !== null) {
    throw new EgressError(problem.kind === 'blocked' ? 'destination_blocked' : 'invalid_url', `URL ${problem.message}`);
  }
  const url = new URL(rawUrl);
  const host = bareHostname(url);
  const literal = isIP(host);
  let addresses: ResolvedAddress[];
  if (literal === 4 || literal === 6) {
    addresses = [{ address: host, family: literal }];
  } else {
    const resolver = options.resolver ?? systemResolver;
    try {
      addresses = await resolver.lookup(host);
    } catch (error) {
      throw new EgressError('dns_failed', `could not resolve ${host} (${errorCode(error) ?? 'unknown error'})`, {
        cause: error,
      });
    }
  }
  const first = addresses[0];
  if (first === undefined || addresses.some(({ address }) => isIP(address) === 0)) {
    throw new EgressError('dns_failed', `${host} did not resolve to an IP address`);
  }
  const refusals = new Set(addresses.map(({ address }) => addressRefusal(address, options)));
  if (refusals.has('host-local')) {
    throw new EgressError(
      'destination_blocked',
      `${host} resolves to this host's own address (loopback, unspecified or one of its interfaces)`,
    );
  }
  if (refusals.has('private')) {
    throw new EgressError('destination_blocked', `${host} resolves to a private, link-local or reserved address`);
  }
  return { url, address: first.address, family: first.family };
}

export interface PostPinnedOptions extends ResolveOptions {
  headers: Record<string, string>;
  /** Bound on the whole exchange: resolution, connect, TLS, request and response body. */
  timeoutMs: number;
  signal?: AbortSignal | undefined;
  /** Response body bytes kept (default 64 KiB); the rest is discarded unread, which is not an error. */
  maxResponseBytes?: number | undefined;
}

export interface PinnedResponse {
  status: number;
  /** Lower-case names; repeated headers joined with ", ". */
  headers: Record<string, string>;
  body: string;
  /** The checked address the request went to. */
  address: string;
  durationMs: number;
}

export const DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024;

/** OpenSSL and Node error codes that mean TLS, not the network, failed (certificate, protocol, SNI). */
const TLS_CODES = /^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_|HOSTNAME_MISMATCH|EPROTO$)/;

/**
 * Maps a network failure to an EgressError (already-classified errors pass through): timeouts, TLS, DNS, the
 * rest a connection failure. `duringHandshake` marks a failure known to happen in the TLS handshake.
 */
export function classifyNetworkError(error: unknown, duringHandshake = false): EgressError {
  if (error instanceof EgressError) return error;
  const code = errorCode(error);
  const detail = code ?? (error instanceof Error ? error.message : 'unknown error');
  if (code === 'UND_ERR_CONNECT_TIMEOUT' || code === 'ETIMEDOUT') {
    return new EgressError('timeout', `connection timed out (${detail})`, { cause: error });
  }
  if (duringHandshake || (code !== undefined && TLS_CODES.test(code))) {
    return new EgressError('tls_failed', `TLS handshake failed (${detail})`, { cause: error });
  }
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') {
    return new EgressError('dns_failed', `could not resolve (${detail})`, { cause: error });
  }
  return new EgressError('connect_failed', `connection failed (${detail})`, { cause: error });
}

function flattenHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  const flat: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined) flat[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return flat;
}

type Exchange = Pick<PinnedResponse, 'status' | 'headers'> & { bytes: Buffer };

function exchange(
  destination: ResolvedDestination,
  body: Uint8Array | null,
  options: PostPinnedOptions,
  signal: AbortSignal,
): Promise<Exchange> {
  const { url, address, family } = destination;
  const secure = url.protocol === 'https:';
  const limit = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
  // Called instead of DNS by the socket: the name resolves to the checked address and nothing else. (An IP
  // literal skips lookup and is itself the checked address.) Node asks for `all` when it races address families.
  const pinnedLookup: LookupFunction = (_hostname, lookupOptions, callback) => {
    if (lookupOptions.all === true) callback(null, [{ address, family }]);
    else callback(null, address, family);
  };
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(options.headers)) {
    if (name.toLowerCase() !== 'content-length') headers[name] = value;
  }
  if (body !== null) headers['content-length'] = String(body.byteLength);

  return new Promise<Exchange>((resolve, reject) => {
    let settled = false;
    let handshaking = false;
    const finish = (outcome: () => void) => {
      if (settled) return;
      settled = true;
      signal.removeEventListener('abort', onAbort);
      outcome();
    };
    const fail = (error: unknown) =>
      finish(() => reject(signal.aborted ? signal.reason : classifyNetworkError(error, handshaking)));
    // `hostname` (not the address) keeps the Host header, SNI and certificate verification on the original name.
    // No agent: a pooled keep-alive socket is keyed by name, not by the address this call checked.
    const request = (secure ? https : http).request({
      method: body === null ? 'GET' : 'POST',
      hostname: bareHostname(url),
      port: url.port === '' ? (secure ? 443 : 80) : Number(url.port),
      path: `${url.pathname}${url.search}`,
      headers,
      lookup: pinnedLookup,
      agent: false,
    });
    const onAbort = () => request.destroy(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    if (secure) {
      request.once('socket', (socket) => {
        socket.once('connect', () => {
          handshaking = true;
        });
        socket.once('secureConnect', () => {
          handshaking = false;
        });
      });
    }
    request.on('error', fail);
    request.on('response', (response) => {
      const chunks: Buffer[] = [];
      let kept = 0;
      const done = () =>
        finish(() =>
          resolve({
            status: response.statusCode ?? 0,
            headers: flattenHeaders(response.headers),
            bytes: Buffer.concat(chunks),
          }),
        );
      response.on('data', (chunk: Buffer) => {
        const part = chunk.subarray(0, limit - kept);
        chunks.push(part);
        kept += part.byteLength;
        if (kept >= limit) {
          // Enough kept: answer now and drop the connection rather than read a body that may never end.
          done();
          request.destroy();
        }
      });
      response.on('end', done);
      response.on('error', fail);
    });
    if (body === null) request.end();
    else request.end(body);
  });
}

/**
 * POSTs `body` to `rawUrl` through the egress guard: resolves and checks once, connects to that address only,
 * returns any status as is (a 3xx is not followed), and rejects with an EgressError on failure, timeout
 * (`timeoutMs` over the whole exchange) or abort (`signal`).
 */
export async function postPinned(
  rawUrl: string,
  body: string | Uint8Array,
  options: PostPinnedOptions,
): Promise<PinnedResponse> {
  const started = performance.now();
  const controller = new AbortController();
  const timer = setTimeout(() => {
    controller.abort(new EgressError('timeout', `no complete response within ${options.timeoutMs} ms`));
  }, options.timeoutMs);
  const { signal } = options;
  const onAbort = () =>
    controller.abort(new EgressError('aborted', 'the request was aborted', { cause: signal?.reason }));
  if (signal?.aborted) onAbort();
  else signal?.addEventListener('abort', onAbort, { once: true });
  try {
    const destination = await untilAborted(resolveDestination(rawUrl, addressRules(options)), controller.signal);
    const bytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
    const { bytes: received, ...response } = await exchange(destination, bytes, options, controller.signal);
    return {
      ...response,
      body: received.toString('utf8'),
      address: destination.address,
      durationMs: Math.round(performance.now() - started),
    };
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener('abort', onAbort);
  }
}

export interface FetchedBytes {
  status: number;
  headers: Record<string, string>;
  /** At most `maxResponseBytes` bytes of the body. */
  bytes: Buffer;
  /** True when the body had more bytes than `maxResponseBytes` (the rest was not read). */
  truncated: boolean;
}

/**
 * GETs `rawUrl` through the egress guard, like postPinned (one checked address, no redirects followed, one
 * timeout over the whole exchange), and returns the body's bytes.
 */
export async function getPinned(
  rawUrl: string,
  options: Omit<PostPinnedOptions, 'headers'> & { headers?: Record<string, string> },
): Promise<FetchedBytes> {
  const controller = new AbortController();
  const timer = setTimeout(() => {
    controller.abort(new EgressError('timeout', `no complete response within ${options.timeoutMs} ms`));
  }, options.timeoutMs);
  const limit = (options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES) + 1;
  try {
    const destination = await untilAborted(resolveDestination(rawUrl, addressRules(options)), controller.signal);
    const response = await exchange(
      destination,
      null,
      { ...options, headers: options.headers ?? {}, maxResponseBytes: limit },
      controller.signal,
    );
    const truncated = response.bytes.byteLength >= limit;
    return {
      status: response.status,
      headers: response.headers,
      bytes: truncated ? response.bytes.subarray(0, limit - 1) : response.bytes,
      truncated,
    };
  } finally {
    clearTimeout(timer);
  }
}
