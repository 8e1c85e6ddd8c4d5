/**
 * One HTTP exchange on an agent's behalf, under its network policy: what `http_request` and `web_browse` share.
 * Each destination is judged twice, like the sandbox's egress proxy judges it: by name and port here
 * (`policyAllows`, the allowed ports), then by address in the guarded fetch (`src/lib/egress-fetch.ts`: resolved
 * once, private/loopback/metadata refused, the connection pinned to the checked address).
 *
 * Redirects are followed, up to a limit, with a fresh check of every hop: the guarded fetch itself never follows
 * one, so each `Location` is a new request that passes both checks or is not made. A redirect to a refused
 * destination is not an error: the 3xx is returned as it came, with a note saying where it pointed and why it
 * was not followed. On a redirect to another origin, credentials (Authorization, Cookie) are not sent along.
 *
 * Bounds: the request body, the response bytes kept (the rest is not read, and the result says so), and one
 * timeout over every hop including the bodies.
 */
import type { EgressFetch } from '../../lib/egress-fetch.ts';
import { egressEnabled, policyAllows } from '../network/network-policy.ts';
import type { NetworkPolicy } from '../tool-config.ts';

export interface PolicyFetchLimits {
  /** One timeout over the whole exchange, redirects and bodies included. */
  timeoutMs: number;
  maxRequestBytes: number;
  /** Response body bytes kept; the rest is not read. */
  maxResponseBytes: number;
  maxRedirects: number;
  /** Destination ports allowed (as for the sandbox's proxy). */
  ports: readonly number[];
}

export interface PolicyRequest {
  method: string;
  url: string;
  headers?: Record<string, string> | undefined;
  body?: string | undefined;
}

export interface PolicyResponse {
  /** The URL that answered (after the redirects followed). */
  url: string;
  status: number;
  statusText: string;
  headers: [string, string][];
  body: Buffer;
  /** The body had more bytes than were kept. */
  truncated: boolean;
  /** Each redirect followed: from where, with which status, to where. */
  redirects: { from: string; status: number; to: string }[];
  /** A redirect that was not followed, and why. */
  unfollowed: { location: string; reason: string } | null;
}

/** A request the agent's policy (or these tools' rules) refuses: the model's to read, not a failure of ours. */
export class NetworkRefusal extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** Headers the exchange itself owns; a caller setting them could smuggle another host or framing past the checks. */
const RESERVED_HEADERS = new Set([
  'host',
  'content-length',
  'transfer-encoding',
  'connection',
  'keep-alive',
  'upgrade',
  'te',
  'trailer',
  'proxy-authorization',
  'proxy-connection',
]);
const CREDENTIAL_HEADERS = new Set(['authorization', 'cookie', 'proxy-authorization']);
const REDIRECTS = new Set([301, 302, 303, 307, 308]);

function effectivePort(url: URL): number {
  if (url.port !== '') return Number(url.port);
  return url.protocol === 'https:' ? 443 : 80;
}

/** Why the policy refuses `raw`, or null when the name and port may be tried (the address check comes next). */
export function destinationRefusal(raw: string, policy: NetworkPolicy | null, ports: readonly number[]): string | null {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return `${raw} is not an absolute URL`;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return `only http and https URLs can be fetched`;
  if (url.username !== '' || url.password !== '') return 'URLs must not embed credentials (send a header instead)';
  if (!egressEnabled(policy)) return "the agent's network policy allows no network access";
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (!policyAllows(policy, host)) return `${host} is not allowed by the agent's network policy`;
  const port = effectivePort(url);
  if (!ports.includes(port)) return `port ${port} is not allowed (allowed: ${ports.join(', ')})`;
  return null;
}

/** Reads at most `limit` bytes of a body and drops the rest unread. */
export async function readBounded(response: Response, limit: number): Promise<{ body: Buffer; truncated: boolean }> {
  if (response.body === null) return { body: Buffer.alloc(0), truncated: false };
  const reader = response.body.getReader();
  const chunks: Buffer[] = [];
  let kept = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return { body: Buffer.concat(chunks), truncated: false };
      const room = limit - kept;
      if (value.byteLength > room) {
        chunks.push(Buffer.from(value.subarray(0, room)));
        return { body: Buffer.concat(chunks), truncated: true };
      }
      chunks.push(Buffer.from(value));
      kept += value.byteLength;
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}

function checkRequest(request: PolicyRequest, limits: PolicyFetchLimits): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(request.headers ?? {})) {
    if (RESERVED_HEADERS.has(name.toLowerCase())) throw new NetworkRefusal(`the ${name} header cannot be set`);
    try {
      headers.append(name, value);
    } catch {
      throw new NetworkRefusal(`the header ${JSON.stringify(name)} is not a valid HTTP header`);
    }
  }
  if (request.body !== undefined) {
    if (request.method === 'GET' || request.method === 'HEAD') {
      throw new NetworkRefusal(`a ${request.method} request cannot have a body`);
    }
    const bytes = Buffer.byteLength(request.body, 'utf8');
    if (bytes > limits.maxRequestBytes) {
      throw new NetworkRefusal(`the body is ${bytes} bytes; the limit is ${limits.maxRequestBytes}`);
    }
  }
  return headers;
}

/** The method and body of the request that follows a redirect (RFC 9110 15.4, as browsers do it). */
function afterRedirect(status: number, method: string, body: string | undefined) {
  if (status === 303 && method !== 'HEAD') return { method: 'GET', body: undefined };
  if ((status === 301 || status === 302) && method === 'POST') return { method: 'GET', body: undefined };
  return { method, body };
}

/**
 * Performs `request` under `policy` (see the file header). Throws NetworkRefusal for what the policy or these
 * rules refuse, EgressError for refused addresses and network failures, and an Error on timeout; an abort of
 * `signal` rejects with its reason.
 */
export async function fetchUnderPolicy(
  fetcher: EgressFetch,
  request: PolicyRequest,
  options: { policy: NetworkPolicy | null; limits: PolicyFetchLimits; signal: AbortSignal },
): Promise<PolicyResponse> {
  const { policy, limits } = options;
  const headers = checkRequest(request, limits);
  const first = destinationRefusal(request.url, policy, limits.ports);
  if (first !== null) throw new NetworkRefusal(first);
  const timeout = AbortSignal.timeout(limits.timeoutMs);
  const signal = AbortSignal.any([options.signal, timeout]);
  let url = new URL(request.url).href;
  let method = request.method;
  let body = request.body;
  const redirects: PolicyResponse['redirects'] = [];
  try {
    for (;;) {
      const response = await fetcher(url, { method, headers, ...(body === undefined ? {} : { body }), signal });
      const location = response.headers.get('location');
      let unfollowed: PolicyResponse['unfollowed'] = null;
      if (REDIRECTS.has(response.status) && location !== null) {
        const next = URL.canParse(location, url) ? new URL(location, url).href : null;
        const refusal =
          next === null
            ? 'the Location is not a valid URL'
            : redirects.length >= limits.maxRedirects
              ? `more than ${limits.maxRedirects} redirects`
              : destinationRefusal(next, policy, limits.ports);
        if (refusal === null && next !== null) {
          await response.body?.cancel().catch(() => undefined);
          redirects.push({ from: url, status: response.status, to: next });
          if (new URL(next).origin !== new URL(url).origin) {
            for (const name of CREDENTIAL_HEADERS) headers.delete(name);
          }
          ({ method, body } = afterRedirect(response.status, method, body));
          if (body === undefined) headers.delete('content-type');
          url = next;
          continue;
        }
        unfollowed = { location: next ?? location, reason: refusal ?? 'not followed' };
      }
      const read =
        method === 'HEAD'
          ? { body: Buffer.alloc(0), truncated: false }
          : await readBounded(response, limits.maxResponseBytes);
      return {
        url,
        status: response.status,
        statusText: response.statusText,
        headers: [...response.headers],
        body: read.body,
        truncated: read.truncated,
        redirects,
        unfollowed,
      };
    }
  } catch (error) {
    if (options.signal.aborted) throw options.signal.reason;
    if (timeout.aborted) throw new Error(`no complete response within ${limits.timeoutMs} ms`, { cause: error });
    throw error;
  }
}
