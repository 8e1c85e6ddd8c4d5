/**
 * The MCP client: one small interface over the v2 TypeScript SDK (`@modelcontextprotocol/client`) that talks to
 * any MCP server by URL, whichever protocol generation it speaks.
 *
 * Negotiation (`connectMcp`), once per connection, in this order unless `prefer` (the protocol that worked last
 * time, which the caller persists) puts its own first:
 *   1. `2026-07-28`: the SDK's `versionNegotiation: 'auto'` probes with `server/discover` (no `initialize`, each
 *      request stateless and self-describing);
 *   2. `streamable-http-2025`: when the probe is answered the 2025 way (a JSON-RPC error, HTTP 400/404/405), the
 *      SDK runs the `initialize` handshake over Streamable HTTP on the same connection;
 *   3. `sse-2024`: the deprecated HTTP+SSE transport (GET opens the event stream, POSTs go to the endpoint it names).
 * A step is skipped for the next one ONLY when its failure means "this server does not speak that": an HTTP 4xx
 * other than 401/403/408/429, a JSON-RPC error answer (e.g. -32022 unsupported protocol version), or an answer
 * that is not MCP at all (HTML, non-JSON-RPC JSON). A 401/403 is `auth_failed`, a timeout `timeout`, a refused
 * destination `blocked`, a network failure, 5xx or 429 `unreachable`: all end negotiation at once. When every
 * step mismatches, the error is `protocol`. `prefer: 'streamable-http-2025'` skips the probe (one round trip
 * less); a server upgraded since then still answers `initialize`, so such a hint never upgrades by itself: drop
 * it now and then to re-probe. Each step is bounded by `requestTimeoutMs` (the SSE stream's opening included).
 *
 * The connection (`connection.ts`): `listTools` always asks the server (it follows pagination cursors; caching
 * is the caller's, using the returned `ttlMs`); `callTool` runs calls concurrently on one connection, sends
 * `meta` as the request's `_meta`, reports progress, and on abort or `timeoutMs` cancels the call ON THE SERVER
 * (2026-07-28: the SDK closes that request's response stream, the revision's cancellation signal; 2025 and SSE:
 * `notifications/cancelled` with the request id) before rejecting with `aborted` / `timeout`. A tool result with
 * `isError: true` resolves (the model reads it); JSON-RPC errors answering a call reject as `tool_error`.
 * `onToolsChanged`: 2025 Streamable HTTP delivers `notifications/tools/list_changed` on the session's GET stream
 * (when the server offers one), HTTP+SSE on its event stream, and 2026-07-28 only on a `subscriptions/listen`
 * stream, which is opened on the first listener (if the server advertises `tools.listChanged`), re-opened with
 * backoff when it drops (listeners are then told "changed", since events may have been missed) and closed with
 * the last listener. Header values (e.g. Authorization) are secrets: they are sent, never logged, and never
 * appear in error messages.
 */
import type { Logger } from 'pino';
import { EgressError } from '../../lib/egress.ts';
import { untilAborted } from '../../lib/retry.ts';
import { boundedResponse, type ReadBounds, rpcRequestOf } from './bounded-response.ts';
import type { ConnectionParts, Observed } from './connection.ts';
import { McpError } from './errors.ts';

export { isMcpError, MCP_ERROR_CODES, McpError, type McpErrorCode } from './errors.ts';

export const MCP_PROTOCOLS = ['2026-07-28', 'streamable-http-2025', 'sse-2024'] as const;
export type McpProtocol = (typeof MCP_PROTOCOLS)[number];

export function isMcpProtocol(value: unknown): value is McpProtocol {
  return typeof value === 'string' && (MCP_PROTOCOLS as readonly string[]).includes(value);
}

export interface McpEndpoint {
  url: string;
  /** Sent on every request (e.g. Authorization). Secret: never logged. */
  headers: Record<string, string>;
  /**
   * Told the `WWW-Authenticate` header of every 401/403 answer (an OAuth server names the scope it needs there).
   * Not part of the endpoint's identity: the pool keeps the first one given for a connection.
   */
  onChallenge?: ((status: number, header: string | null) => void) | undefined;
  /**
   * Declare the `sampling` capability: only for a connection that serves agents allowing it (a server told it may
   * sample expects its requests to be served). Part of the endpoint's identity in the pool.
   */
  sampling?: boolean | undefined;
}

export interface McpClientOptions {
  /** The guarded fetch (`createEgressFetch`); tests may pass an insecure one. */
  fetch: typeof fetch;
  /** Bound on connecting (each negotiation step) and on listing tools. */
  requestTimeoutMs: number;
  /** Bytes of one message (a tool result; a tool list across its pages) read at most (default 16 MiB). */
  maxResponseBytes?: number | undefined;
  logger?: Pick<Logger, 'debug' | 'warn'> | undefined;
  clientInfo?: { name: string; version: string } | undefined;
}

export interface McpConnectOptions extends McpClientOptions {
  /** The protocol that worked last time: tried first. */
  prefer?: McpProtocol | undefined;
  /** Aborts connecting (rejects with McpError `aborted`). */
  signal?: AbortSignal | undefined;
}

export interface McpToolInfo {
  name: string;
  title?: string;
  description?: string;
  inputSchema: Record<string, unknown>;
  annotations?: Record<string, unknown>;
}

export interface McpToolList {
  /** The tools an agent may be offered (`tool-list-bounds.ts`: the first that fit). */
  tools: McpToolInfo[];
  /** The server's cache hint for this list (2026-07-28 `ttlMs`; 0 = already stale), or null when it gave none. */
  ttlMs: number | null;
  /** Why tools of the server's list were left out (what the server "lists …"), or null. */
  note: string | null;
}

export interface McpProgress {
  progress: number;
  total?: number;
  message?: string;
}

/** What a server asks a person during a call (`elicitation/create`, or a 2026-07-28 `input_required`). */
export interface McpElicitation {
  mode: 'form' | 'url';
  message: string;
  /** Form mode: the JSON Schema (a flat object of primitive fields) the answer must fit. */
  requestedSchema: Record<string, unknown> | null;
  /** URL mode: the page the person opens, and the server's id of the request. */
  url: string | null;
  elicitationId: string | null;
}

export interface McpElicitationAnswer {
  action: 'accept' | 'decline' | 'cancel';
  content?: Record<string, unknown>;
}

/** One part of a sampling message: text, or an image or audio clip (decoded; `sampling-request.ts` bounds it). */
export type McpSamplingPart =
  | { type: 'text'; text: string }
  | { type: 'image' | 'audio'; mediaType: string; data: Uint8Array };

/** A server's `sampling/createMessage`: what the client's model is asked. */
export interface McpSamplingRequest {
  messages: { role: 'user' | 'assistant'; content: McpSamplingPart[] }[];
  systemPrompt: string | null;
  maxTokens: number;
}

export interface McpSamplingResult {
  text: string;
  model: string;
  stopReason: 'endTurn' | 'maxTokens';
}

export interface McpCallOptions {
  signal: AbortSignal;
  timeoutMs: number;
  /** Sent as the request's `_meta` (e.g. `{ 'agentry/call_id': …, traceparent: … }`). */
  meta?: Record<string, unknown>;
  onProgress?: (progress: McpProgress) => void;
  /** Answers the server's elicitations during this call; absent: they are declined. */
  onElicit?: ((request: McpElicitation) => Promise<McpElicitationAnswer>) | undefined;
  /** Serves the server's sampling requests during this call; absent: they are refused. */
  onSample?: ((request: McpSamplingRequest) => Promise<McpSamplingResult>) | undefined;
}

export interface McpCallResult {
  /** Model-facing text: text parts joined; images/audio/blobs/links summarised; embedded text resources' text. */
  text: string;
  isError: boolean;
  structuredContent?: unknown;
}

/** What a server offers besides tools (its capabilities), as far as an agent can use it. */
export interface McpCapabilities {
  resources: boolean;
  prompts: boolean;
}

/** One page of a server's list (`resources/list`, `prompts/list`); `nextCursor` asks for the next page. */
export interface McpPage<T> {
  items: T[];
  nextCursor: string | null;
}

export interface McpResourceInfo {
  uri: string;
  name: string;
  title?: string;
  description?: string;
  mimeType?: string;
  size?: number;
}

/** One part of a read resource: text, or binary (`blob`, base64) which callers summarise rather than show. */
export interface McpResourceContent {
  uri: string;
  mimeType?: string;
  text?: string;
  blob?: string;
}

export interface McpPromptInfo {
  name: string;
  title?: string;
  description?: string;
  arguments: { name: string; description?: string; required: boolean }[];
}

/**
 * One content of a prompt message as Agentry can use it: text (an embedded text resource's text included), an
 * image (base64), or something a message cannot carry (audio, binary resources, links, unknown types), named.
 */
export type McpPromptContent =
  | { type: 'text'; text: string }
  | { type: 'image'; data: string; mimeType: string }
  | { type: 'unusable'; what: string };

/** A prompt as `prompts/get` renders it: its messages, in order. */
export interface McpPromptResult {
  description?: string;
  messages: { role: 'user' | 'assistant'; content: McpPromptContent }[];
}

export interface McpConnection {
  readonly protocol: McpProtocol;
  /** What the server announced it offers besides tools. */
  readonly capabilities: McpCapabilities;
  listResources(cursor: string | null, signal?: AbortSignal): Promise<McpPage<McpResourceInfo>>;
  readResource(uri: string, signal?: AbortSignal): Promise<McpResourceContent[]>;
  listPrompts(cursor: string | null, signal?: AbortSignal): Promise<McpPage<McpPromptInfo>>;
  getPrompt(name: string, args: Record<string, string>, signal?: AbortSignal): Promise<McpPromptResult>;
  /** True once closed, or once the transport is gone (the pool then reconnects). */
  readonly closed: boolean;
  listTools(signal?: AbortSignal): Promise<McpToolList>;
  callTool(name: string, args: unknown, options: McpCallOptions): Promise<McpCallResult>;
  onToolsChanged(listener: () => void): () => void;
  close(): Promise<void>;
}

type Step = 'negotiate' | 'initialize' | 'sse';

const STEP_LABEL: Record<Step, string> = {
  negotiate: '2026-07-28 (with 2025 fallback)',
  initialize: 'Streamable HTTP 2025',
  sse: 'HTTP+SSE',
};

function stepsFor(prefer: McpProtocol | undefined): Step[] {
  // 'negotiate' already runs `initialize` itself when the probe is answered the 2025 way or refused with a 4xx.
  if (prefer === 'streamable-http-2025') return ['initialize', 'negotiate', 'sse'];
  if (prefer === 'sse-2024') return ['sse', 'negotiate'];
  return ['negotiate', 'sse'];
}

/** The URL without its query string, for logs and messages (queries sometimes carry keys). */
export function describeUrl(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.origin}${parsed.pathname}`;
  } catch {
    return '(invalid URL)';
  }
}

/** Refuses header names or values HTTP cannot carry, naming the header but never its value. */
function checkHeaders(headers: Record<string, string>): void {
  for (const [name, value] of Object.entries(headers)) {
    try {
      new Headers([[name, value]]);
    } catch {
      throw new McpError('protocol', `header ${JSON.stringify(name)} has an invalid name or value`);
    }
  }
}

export const DEFAULT_MAX_RESPONSE_BYTES = 16 * 1024 * 1024;

/**
 * The connection's fetch: adds the endpoint's headers (the transport's own headers win: session id, protocol
 * version, content type), bounds what each answer may make us read (bounded-response.ts) and remembers the last
 * EgressError, which some transports flatten into text.
 */
function endpointFetch(
  base: typeof fetch,
  { headers, onChallenge }: McpEndpoint,
  observed: Observed,
  bounds: ReadBounds,
  hooks: ConnectionParts['hooks'],
): typeof fetch {
  return async (input, init) => {
    const merged = new Headers(headers);
    new Headers(init?.headers).forEach((value, name) => {
      merged.set(name, value);
    });
    let response: Response;
    try {
      response = await base(input, { ...init, headers: merged });
    } catch (error) {
      if (error instanceof EgressError) observed.egress = error;
      throw error;
    }
    if (onChallenge !== undefined && (response.status === 401 || response.status === 403)) {
      onChallenge(response.status, response.headers.get('www-authenticate'));
    }
    return boundedResponse(response, rpcRequestOf(init?.method, init?.body), bounds, (error) => hooks.tooLarge(error));
  };
}

class StepMismatch extends Error {}

/**
 * The MCP SDK, and the modules built on it (the connection, the reading of its errors), loaded by the first
 * connection: a process whose agents use no MCP server never loads them.
 */
const sdk = () => import('@modelcontextprotocol/client');
const failures = () => import('./failures.ts');
const connectionModule = () => import('./connection.ts');

async function openStep(step: Step, endpoint: McpEndpoint, options: McpConnectOptions): Promise<ConnectionParts> {
  const observed: Observed = {};
  const url = new URL(endpoint.url);
  const hooks: ConnectionParts['hooks'] = { toolsChanged: () => undefined, tooLarge: () => undefined };
  const bounds = { maxBytes: options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES, listed: { bytes: 0 } };
  const transportFetch = endpointFetch(options.fetch, endpoint, observed, bounds, hooks);
  const [{ Client, SSEClientTransport, StreamableHTTPClientTransport }, { classifyMcpFailure }] = await Promise.all([
    sdk(),
    failures(),
  ]);
  const client = new Client(options.clientInfo ?? { name: 'agentry', version: '1.0.0' }, {
    versionNegotiation: { mode: step === 'negotiate' ? 'auto' : 'legacy' },
    // Answered per call (connection.ts): elicitations by a person, sampling by the agent's model, declared only on
    // connections of agents that allow it.
    capabilities: { elicitation: { form: {}, url: {} }, ...(endpoint.sampling === true ? { sampling: {} } : {}) },
  });
  // Registered before connecting: a 2025 server may announce a change right after `initialize`.
  client.setNotificationHandler('notifications/tools/list_changed', () => hooks.toolsChanged());
  const transport =
    step === 'sse'
      ? new SSEClientTransport(url, { fetch: transportFetch })
      : new StreamableHTTPClientTransport(url, { fetch: transportFetch });
  const bound = new AbortController();
  const timer = setTimeout(
    () => bound.abort(new McpError('timeout', `no MCP handshake within ${options.requestTimeoutMs} ms`)),
    options.requestTimeoutMs,
  );
  const onAbort = () => bound.abort(new McpError('aborted', 'connecting was aborted'));
  if (options.signal?.aborted === true) onAbort();
  else options.signal?.addEventListener('abort', onAbort, { once: true });
  try {
    // The SDK bounds its own requests; the race also bounds an SSE stream that opens but never names its endpoint.
    await untilAborted(
      client.connect(transport, { timeout: options.requestTimeoutMs + 1000, signal: bound.signal }),
      bound.signal,
    );
  } catch (error) {
    await client.close().catch(() => undefined);
    if (bound.signal.aborted && bound.signal.reason instanceof McpError) throw bound.signal.reason;
    const classified = classifyMcpFailure(error, observed.egress);
    if (classified.mismatch) throw new StepMismatch(classified.error.message, { cause: classified.error });
    throw classified.error;
  } finally {
    clearTimeout(timer);
    options.signal?.removeEventListener('abort', onAbort);
  }
  const protocol: McpProtocol =
    step === 'sse' ? 'sse-2024' : client.getProtocolEra() === 'modern' ? '2026-07-28' : 'streamable-http-2025';
  return { client, transport, protocol, hooks, sampling: endpoint.sampling === true };
}

/**
 * Connects to the MCP server at `endpoint.url`, negotiating the protocol as the file header describes, and
 * rejects with an McpError (`blocked`, `unreachable`, `auth_failed`, `timeout`, `aborted` or `protocol`).
 */
export async function connectMcp(endpoint: McpEndpoint, options: McpConnectOptions): Promise<McpConnection> {
  const where = describeUrl(endpoint.url);
  if (!URL.canParse(endpoint.url)) throw new McpError('blocked', 'the MCP server URL is not a valid URL');
  checkHeaders(endpoint.headers);
  const mismatches: string[] = [];
  for (const step of stepsFor(options.prefer)) {
    options.logger?.debug({ url: where, step: STEP_LABEL[step] }, 'mcp: connecting');
    try {
      const parts = await openStep(step, endpoint, options);
      options.logger?.debug({ url: where, protocol: parts.protocol }, 'mcp: connected');
      const { Connection } = await connectionModule();
      return new Connection(parts, { ...options, where });
    } catch (error) {
      if (!(error instanceof StepMismatch)) throw error;
      mismatches.push(`${STEP_LABEL[step]}: ${error.message}`);
      options.logger?.debug({ url: where, step: STEP_LABEL[step], reason: error.message }, 'mcp: protocol not spoken');
    }
  }
  throw new McpError('protocol', `${where} does not speak MCP over HTTP (${mismatches.join('; ')})`);
}
