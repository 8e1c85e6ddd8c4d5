/**
 * One negotiated MCP connection (`client.ts` documents the contract): listing, concurrent calls with
 * server-side cancellation on abort or timeout, progress, and `list_changed` delivery, including the
 * 2026-07-28 `subscriptions/listen` stream and its re-opening after a drop.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type {
  Client,
  ElicitRequest,
  ElicitResult,
  McpSubscription,
  SSEClientTransport,
  Tool,
} from '@modelcontextprotocol/client';
import { ProtocolError, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import type { EgressError } from '../../lib/egress.ts';
import type {
  McpCallOptions,
  McpCallResult,
  McpCapabilities,
  McpConnection,
  McpConnectOptions,
  McpPage,
  McpProgress,
  McpPromptInfo,
  McpPromptResult,
  McpProtocol,
  McpResourceContent,
  McpResourceInfo,
  McpSamplingResult,
  McpToolInfo,
  McpToolList,
} from './client.ts';
import { isRecord, resultText } from './content.ts';
import { McpError } from './errors.ts';
import { classifyMcpFailure } from './failures.ts';
import { MAX_PROMPTS_PER_PAGE, promptContent, promptInfo, resourceContent, resourceInfo } from './resources.ts';
import { SamplingRequestRefused, samplingOf } from './sampling-request.ts';
import { boundToolList, withoutTaskTools } from './tool-list-bounds.ts';

/**
 * The params of one page of a list verb. The SDK's `listResources()` / `listPrompts()` without a cursor walk every
 * page (up to 64, each up to the read bound) and keep the aggregate in the client's cache; a server's list is
 * external input, so the first page is asked like any other, with a plain request.
 */
const pageParams = (cursor: string | null): Record<string, unknown> => (cursor === null ? {} : { cursor });

/** What the connection's fetch saw go wrong last while connecting (see `endpointFetch`). */
export interface Observed {
  egress?: EgressError | undefined;
}

export interface ConnectionParts {
  client: Client;
  transport: StreamableHTTPClientTransport | SSEClientTransport;
  protocol: McpProtocol;
  /**
   * `toolsChanged`: called by the client's `list_changed` handler, registered before connecting. `tooLarge`: a
   * stream no request opened carried a message past the read bound (bounded-response.ts).
   */
  hooks: { toolsChanged: () => void; tooLarge: (error: McpError) => void };
  /** The client declared `sampling` (the SDK refuses a handler for an undeclared capability). */
  sampling: boolean;
}

interface RequestBound {
  signal: AbortSignal;
  timeout: number;
}

/** Extra time the SDK's own request timer gets, so ours (with its clearer error) always fires first. */
const SDK_TIMEOUT_GRACE_MS = 1000;
const RELISTEN_MIN_MS = 1000;
const RELISTEN_MAX_MS = 30_000;

function toolInfo(tool: Tool): McpToolInfo {
  const info: McpToolInfo = { name: tool.name, inputSchema: { ...tool.inputSchema } };
  if (tool.title !== undefined) info.title = tool.title;
  if (tool.description !== undefined) info.description = tool.description;
  if (tool.annotations !== undefined) info.annotations = { ...tool.annotations };
  return info;
}

/** The call whose request is being answered: its handlers of the server's own requests. */
interface CallHandlers {
  onElicit: McpCallOptions['onElicit'] | undefined;
  onSample: McpCallOptions['onSample'] | undefined;
}

/**
 * The SDK gives a server's request no link to the call it belongs to. A call runs in this async context, and so
 * does what its response stream carries (a 2025 server's requests on the call's POST stream; a 2026-07-28
 * `input_required` result, fulfilled inside the call); a request arriving elsewhere (a 2025 GET stream, HTTP+SSE)
 * is given to the one call in flight that can answer it, and refused when there are several.
 */
const callScope = new AsyncLocalStorage<CallHandlers>();

/** The MCP specification's error code for a request the user (here: the agent's policy) refused. */
const USER_REJECTED = -1;
/** JSON-RPC's invalid params: a sampling request this client cannot take (its media are too large). */
const INVALID_PARAMS = -32602;

function elicitationOf(params: ElicitRequest['params']) {
  if (params.mode === 'url') {
    return {
      mode: 'url' as const,
      message: params.message,
      requestedSchema: null,
      url: params.url,
      elicitationId: params.elicitationId,
    };
  }
  return {
    mode: 'form' as const,
    message: params.message,
    requestedSchema: { ...params.requestedSchema },
    url: null,
    elicitationId: null,
  };
}

function ttlOf(result: object): number | null {
  const ttl = 'ttlMs' in result ? result.ttlMs : undefined;
  // The revision says a negative hint means 0 (already stale).
  return typeof ttl === 'number' && Number.isFinite(ttl) ? Math.max(0, ttl) : null;
}

export class Connection implements McpConnection {
  readonly protocol: McpProtocol;
  #closed = false;
  #closing: Promise<void> | undefined;
  readonly #client: Client;
  readonly #transport: StreamableHTTPClientTransport | SSEClientTransport;
  readonly #options: McpConnectOptions & { where: string };
  readonly #listeners = new Set<() => void>();
  #subscription: McpSubscription | undefined;
  #subscribing = false;
  #relistenTimer: NodeJS.Timeout | undefined;
  #relistenDelayMs = RELISTEN_MIN_MS;
  #missedEvents = false;
  /** Why the server's event stream was cut (HTTP+SSE carries every answer on it: the connection is then over). */
  #tooLarge: McpError | undefined;
  /** Progress listeners by our own progress token (see `callTool`). */
  readonly #progress = new Map<string, (progress: McpProgress) => void>();
  #nextProgressToken = 0;
  /** Handlers of the calls in flight, for a server request that arrives outside any call's context. */
  readonly #inFlight = new Set<CallHandlers>();

  constructor(parts: ConnectionParts, options: McpConnectOptions & { where: string }) {
    this.protocol = parts.protocol;
    this.#client = parts.client;
    this.#transport = parts.transport;
    this.#options = options;
    parts.hooks.toolsChanged = () => this.#emitChanged();
    parts.hooks.tooLarge = (error) => {
      if (this.protocol !== 'sse-2024') return;
      this.#tooLarge = error;
      void this.close();
    };
    // Progress is routed here rather than through the SDK's `onprogress`: the SDK drops the handler as soon as the
    // response arrives, before a progress notification that arrived in the same read has been dispatched.
    this.#client.setNotificationHandler('notifications/progress', (notification) => {
      const { progressToken, progress, total, message } = notification.params;
      const listener = this.#progress.get(String(progressToken));
      if (listener === undefined) return;
      try {
        listener({
          progress,
          ...(total === undefined ? {} : { total }),
          ...(message === undefined ? {} : { message }),
        });
      } catch (error) {
        this.#options.logger?.warn({ err: String(error) }, 'mcp: progress listener failed');
      }
    });
    this.#client.setRequestHandler('elicitation/create', async (request): Promise<ElicitResult> => {
      const onElicit = this.#handlersOf('onElicit')?.onElicit;
      // Without a call that can ask a person, the request is declined (the server may carry on without it).
      if (onElicit === undefined) return { action: 'decline' };
      const answer = await onElicit(elicitationOf(request.params));
      if (answer.action !== 'accept' || answer.content === undefined) return { action: answer.action };
      return { action: 'accept', content: answer.content as NonNullable<ElicitResult['content']> };
    });
    if (parts.sampling) this.#serveSampling();
    this.#client.onclose = () => {
      this.#closed = true;
    };
    this.#client.onerror = (error) => {
      // Stream hiccups the SDK recovers from itself (reconnecting GET streams) land here; messages carry no headers.
      this.#options.logger?.debug({ url: this.#options.where, err: error.message }, 'mcp: transport error');
    };
  }

  /**
   * Serves `sampling/createMessage` through the call's `onSample`; a request outside a call, or of a call whose
   * agent does not allow it, is refused (a backstop: only connections of allowing agents declare sampling).
   */
  #serveSampling(): void {
    this.#client.setRequestHandler('sampling/createMessage', async (request) => {
      const onSample = this.#handlersOf('onSample')?.onSample;
      if (onSample === undefined) throw new ProtocolError(USER_REJECTED, 'sampling is not allowed for this agent');
      let result: McpSamplingResult;
      try {
        result = await onSample(samplingOf(request.params));
      } catch (error) {
        // Refusals (too large, credits, budgets) and model errors reach the server as the request's error.
        const code = error instanceof SamplingRequestRefused ? INVALID_PARAMS : USER_REJECTED;
        throw new ProtocolError(code, error instanceof Error ? error.message : String(error));
      }
      return {
        role: 'assistant' as const,
        content: { type: 'text' as const, text: result.text },
        model: result.model,
        stopReason: result.stopReason,
      };
    });
  }

  /** The call a server request belongs to (see `callScope`), if one can answer this kind of request. */
  #handlersOf(kind: keyof CallHandlers): CallHandlers | undefined {
    const scoped = callScope.getStore();
    if (scoped !== undefined) return scoped;
    const able = [...this.#inFlight].filter((handlers) => handlers[kind] !== undefined);
    return able.length === 1 ? able[0] : undefined;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /**
   * Runs one request with a deadline and the caller's signal. Aborting cancels the request through the SDK
   * (which tells the server) before this rejects with `aborted` or `timeout`.
   */
  async #run<T>(
    kind: 'call' | 'list',
    what: string,
    signal: AbortSignal | undefined,
    timeoutMs: number,
    operation: (signal: AbortSignal, sdkTimeoutMs: number) => Promise<T>,
  ): Promise<T> {
    if (this.#closed) throw new McpError('unreachable', `${what}: the connection is closed`);
    if (signal?.aborted === true) throw new McpError('aborted', `${what} was aborted before it started`);
    const controller = new AbortController();
    const timer = setTimeout(
      () => controller.abort(new McpError('timeout', `${what} did not finish within ${timeoutMs} ms`)),
      timeoutMs,
    );
    const onAbort = () => controller.abort(new McpError('aborted', `${what} was aborted`));
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      return await operation(controller.signal, timeoutMs + SDK_TIMEOUT_GRACE_MS);
    } catch (error) {
      if (controller.signal.aborted && controller.signal.reason instanceof McpError) throw controller.signal.reason;
      throw this.#failure(kind, what, error);
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    }
  }

  #failure(kind: 'call' | 'list', what: string, error: unknown): McpError {
    const { error: classified } = classifyMcpFailure(error);
    const tooLarge = classified.code === 'too_large' ? classified : this.#tooLarge;
    if (tooLarge !== undefined) return new McpError('too_large', `${what}: ${tooLarge.message}`, { cause: error });
    // A JSON-RPC error answering a call (unknown tool, invalid arguments): the server is fine, the call failed.
    if (error instanceof ProtocolError && kind === 'call') {
      return new McpError('tool_error', `${what}: the server answered with error ${error.code}: ${error.message}`, {
        cause: error,
      });
    }
    const sessionful = this.protocol !== '2026-07-28';
    if (sessionful && classified.status === 404) {
      // A 2025 server that no longer knows our session (restarted, expired): only a new connection helps.
      this.#closed = true;
      return new McpError('unreachable', `${what}: the server no longer knows this session`, {
        cause: error,
        status: 404,
      });
    }
    if (sessionful && classified.code === 'unreachable') this.#closed = true;
    return new McpError(classified.code, `${what}: ${classified.message}`, { cause: error, status: classified.status });
  }

  listTools(signal?: AbortSignal): Promise<McpToolList> {
    const timeoutMs = this.#options.requestTimeoutMs;
    return this.#run('list', 'listing tools', signal, timeoutMs, async (requestSignal, sdkTimeoutMs) => {
      // 'refresh': always ask the server; the caller owns caching (with ttlMs). All pages are walked.
      const result = await this.#client.listTools(undefined, {
        cacheMode: 'refresh',
        signal: requestSignal,
        timeout: sdkTimeoutMs,
      });
      // Tools that must run as tasks cannot be called by this client (tool-list-bounds.ts says why).
      const callable = withoutTaskTools(result.tools);
      const { tools, note } = boundToolList(callable.tools.map(toolInfo));
      const notes = [callable.note, note].filter((text) => text !== null);
      return { tools, ttlMs: ttlOf(result), note: notes.length === 0 ? null : notes.join('; ') };
    });
  }

  get capabilities(): McpCapabilities {
    const announced = this.#client.getServerCapabilities();
    return { resources: announced?.resources !== undefined, prompts: announced?.prompts !== undefined };
  }

  /**
   * One request of the resource and prompt verbs, bounded like listing tools; a JSON-RPC error answering it (an
   * unknown URI, prompt or cursor) is `tool_error`: the server is fine, the request was not.
   */
  #ask<T>(
    what: string,
    signal: AbortSignal | undefined,
    operation: (options: RequestBound) => Promise<T>,
    kind: 'call' | 'list' = 'call',
  ) {
    return this.#run(kind, what, signal, this.#options.requestTimeoutMs, (requestSignal, sdkTimeoutMs) =>
      operation({ signal: requestSignal, timeout: sdkTimeoutMs }),
    );
  }

  listResources(cursor: string | null, signal?: AbortSignal): Promise<McpPage<McpResourceInfo>> {
    return this.#ask('listing resources', signal, async (bound) => {
      const result = await this.#client.request({ method: 'resources/list', params: pageParams(cursor) }, bound);
      return { items: result.resources.map(resourceInfo), nextCursor: result.nextCursor ?? null };
    });
  }

  readResource(uri: string, signal?: AbortSignal): Promise<McpResourceContent[]> {
    return this.#ask('reading a resource', signal, async (bound) => {
      const result = await this.#client.readResource({ uri }, { ...bound, cacheMode: 'refresh' });
      return result.contents.map(resourceContent);
    });
  }

  listPrompts(cursor: string | null, signal?: AbortSignal): Promise<McpPage<McpPromptInfo>> {
    return this.#ask('listing prompts', signal, async (bound) => {
      const result = await this.#client.request({ method: 'prompts/list', params: pageParams(cursor) }, bound);
      // A page is bounded by the transport's read bound; what it holds past MAX_PROMPTS_PER_PAGE is not shown.
      const items = result.prompts.slice(0, MAX_PROMPTS_PER_PAGE).map(promptInfo);
      return { items, nextCursor: result.nextCursor ?? null };
    });
  }

  getPrompt(name: string, args: Record<string, string>, signal?: AbortSignal): Promise<McpPromptResult> {
    return this.#ask(`getting prompt ${name}`, signal, async (bound) => {
      const result = await this.#client.getPrompt({ name, arguments: args }, bound);
      return {
        ...(result.description === undefined ? {} : { description: result.description }),
        messages: result.messages.map((message) => ({ role: message.role, content: promptContent(message.content) })),
      };
    });
  }

  callTool(name: string, args: unknown, options: McpCallOptions): Promise<McpCallResult> {
    const what = `calling ${name}`;
    if (args !== undefined && args !== null && !isRecord(args)) {
      return Promise.reject(new McpError('tool_error', `${what}: arguments must be a JSON object`));
    }
    const { onProgress } = options;
    const progressToken = onProgress === undefined ? undefined : `agentry-progress-${++this.#nextProgressToken}`;
    const meta = progressToken === undefined ? options.meta : { ...options.meta, progressToken };
    if (progressToken !== undefined && onProgress !== undefined) this.#progress.set(progressToken, onProgress);
    const handlers: CallHandlers = { onElicit: options.onElicit, onSample: options.onSample };
    this.#inFlight.add(handlers);
    return this.#run('call', what, options.signal, options.timeoutMs, async (requestSignal, sdkTimeoutMs) => {
      const result = await callScope.run(handlers, () =>
        this.#client.callTool(
          { name, arguments: args ?? {}, ...(meta === undefined ? {} : { _meta: meta }) },
          { signal: requestSignal, timeout: sdkTimeoutMs },
        ),
      );
      const content: readonly unknown[] = Array.isArray(result.content) ? result.content : [];
      const callResult: McpCallResult = {
        text: resultText(content, result.structuredContent),
        isError: result.isError === true,
      };
      if (result.structuredContent !== undefined) callResult.structuredContent = result.structuredContent;
      return callResult;
    }).finally(() => {
      this.#inFlight.delete(handlers);
      if (progressToken !== undefined) this.#progress.delete(progressToken);
    });
  }

  onToolsChanged(listener: () => void): () => void {
    this.#listeners.add(listener);
    if (this.protocol === '2026-07-28') this.#subscribe();
    return () => {
      this.#listeners.delete(listener);
      if (this.#listeners.size === 0) this.#unsubscribe();
    };
  }

  #emitChanged(): void {
    for (const listener of [...this.#listeners]) {
      try {
        listener();
      } catch (error) {
        this.#options.logger?.warn({ err: String(error) }, 'mcp: tools-changed listener failed');
      }
    }
  }

  /** Opens the 2026-07-28 `subscriptions/listen` stream for tool-list changes, if the server offers them. */
  #subscribe(): void {
    if (this.#subscription !== undefined || this.#subscribing || this.#closed || this.#relistenTimer !== undefined)
      return;
    if (this.#client.getServerCapabilities()?.tools?.listChanged !== true) {
      this.#options.logger?.debug({ url: this.#options.where }, 'mcp: server does not announce tool list changes');
      return;
    }
    this.#subscribing = true;
    this.#client.listen({ toolsListChanged: true }, { timeout: this.#options.requestTimeoutMs }).then(
      (subscription) => {
        this.#subscribing = false;
        if (this.#closed || this.#listeners.size === 0 || subscription.honoredFilter.toolsListChanged !== true) {
          void subscription.close().catch(() => undefined);
          return;
        }
        this.#subscription = subscription;
        this.#relistenDelayMs = RELISTEN_MIN_MS;
        if (this.#missedEvents) {
          this.#missedEvents = false;
          this.#emitChanged();
        }
        void subscription.closed.then((reason) => {
          if (this.#subscription === subscription) this.#subscription = undefined;
          if (reason !== 'local') this.#scheduleRelisten();
        });
      },
      (error: unknown) => {
        this.#subscribing = false;
        this.#options.logger?.debug({ url: this.#options.where, err: String(error) }, 'mcp: listen failed');
        this.#scheduleRelisten();
      },
    );
  }

  #scheduleRelisten(): void {
    if (this.#closed || this.#listeners.size === 0 || this.#relistenTimer !== undefined) return;
    this.#missedEvents = true;
    const delay = this.#relistenDelayMs;
    this.#relistenDelayMs = Math.min(delay * 2, RELISTEN_MAX_MS);
    this.#relistenTimer = setTimeout(() => {
      this.#relistenTimer = undefined;
      this.#subscribe();
    }, delay);
    this.#relistenTimer.unref();
  }

  #unsubscribe(): void {
    clearTimeout(this.#relistenTimer);
    this.#relistenTimer = undefined;
    const subscription = this.#subscription;
    this.#subscription = undefined;
    if (subscription !== undefined) void subscription.close().catch(() => undefined);
  }

  close(): Promise<void> {
    this.#closing ??= this.#shutdown();
    return this.#closing;
  }

  async #shutdown(): Promise<void> {
    this.#closed = true;
    this.#listeners.clear();
    this.#unsubscribe();
    if (this.protocol === 'streamable-http-2025' && this.#transport instanceof StreamableHTTPClientTransport) {
      // Tell a 2025 server its session is over (best effort, bounded: shutdown must not wait on a slow server).
      const bound = new Promise<void>((resolve) => setTimeout(resolve, 1000).unref());
      await Promise.race([this.#transport.terminateSession().catch(() => undefined), bound]);
    }
    await this.#client.close().catch(() => undefined);
  }
}
