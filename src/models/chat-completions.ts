/**
 * The adapter of every OpenAI-compatible provider of AGENTRY_PROVIDERS: a direct, streamed
 * `POST {baseURL}/chat/completions` over undici's `request()` (no fetch, no web streams, no schema library), its
 * SSE body parsed incrementally as it arrives. Going through the AI SDK cost about a fifth of the server's CPU per
 * turn against an instant provider; this client sends the same body and reports the same events and errors (see
 * `chat-completions-request.ts` and `chat-completions-stream.ts`) for a fraction of that. `openai/` and
 * `anthropic/` models stay on the AI SDK (`ai-sdk.ts`).
 *
 * Retries and the single `finish` come from the call loop shared with the AI SDK adapters (`retrying-stream.ts`).
 * Timeouts: a connection must be established within 10 s (a retriable model_unavailable otherwise); after that the
 * one timeout is the idle timeout, armed whenever we wait on the provider (for the response head, and for each
 * piece of the body) and never while the consumer is busy: nothing for `idleTimeoutMs` (default 120 s) fails the
 * attempt with a retriable model_timeout. undici's own header and body timeouts are off so that only one clock
 * decides. An abort of `request.signal` cancels the HTTP request and rejects with `signal.reason`.
 *
 * Connections are pooled per provider (one undici Agent, keep-alive, shared by its models' adapters). A call reads its body to the end (past
 * `[DONE]`) before it finishes, so that the next call reuses the connection; a call that failed, timed out or was
 * closed early drops its connection.
 */
import { StringDecoder } from 'node:string_decoder';
import { Agent, type Dispatcher, request as httpRequest } from 'undici';
import type { ProviderConfig } from '../config.ts';
import { isJsonObject } from '../lib/guards.ts';
import { http } from '../lib/node-http.ts';
import { SseParser } from '../lib/sse-parser.ts';
import { toChatRequestBody } from './chat-completions-request.ts';
import { ChatStreamReader } from './chat-completions-stream.ts';
import { connectionFailed, fromStatus, retryAfterOf } from './provider-errors.ts';
import { type Attempt, DEFAULT_IDLE_TIMEOUT_MS, type ModelAdapterOptions, streamWithRetry } from './retrying-stream.ts';
import { type ModelAdapter, ModelError, type ModelEvent, type ModelRequest } from './types.ts';

const CONNECT_TIMEOUT_MS = 10_000;
/** An error body is read this far for its message; the rest is dropped with the connection. */
const ERROR_BODY_LIMIT = 64 * 1024;
const USER_AGENT = 'Agentry';

/** What every attempt of one call shares. */
interface Call {
  label: string;
  url: string;
  headers: Record<string, string>;
  body: string;
  dispatcher: Dispatcher;
  idleMs: number;
  request: ModelRequest;
}

/** The message of an error response: the OpenAI-style `error.message`, a plain `error` or `message`, else the reason phrase. */
function errorDetail(status: number, text: string): string {
  try {
    const value: unknown = JSON.parse(text);
    if (isJsonObject(value)) {
      const { error } = value;
      if (isJsonObject(error) && typeof error.message === 'string') return error.message;
      if (typeof error === 'string') return error;
      if (typeof value.message === 'string') return value.message;
    }
  } catch {
    // Not JSON (an HTML page from a proxy, say): the reason phrase says as much without echoing it.
  }
  return http.STATUS_CODES[status] ?? 'error';
}

/**
 * `reading` until `done` (`[DONE]` read, the rest of the body not yet), then `ended` (the body was read to its end:
 * the connection is back in the pool) or `failed` (the connection is dropped on close).
 */
type AttemptState = 'reading' | 'done' | 'ended' | 'failed';

/** One HTTP request of a call, read chunk by chunk as the consumer asks for events. */
class ChatCompletionsAttempt implements Attempt {
  readonly #call: Call;
  /** Aborted by the caller's signal, our idle timeout or an early close; cancels the HTTP request. */
  readonly #controller = new AbortController();
  readonly #timer: NodeJS.Timeout;
  /** Whether we are waiting on the provider: the idle timer only fires then. */
  #waiting = false;
  #chunks: AsyncIterator<unknown> | null = null;
  readonly #decoder = new StringDecoder('utf8');
  readonly #sse = new SseParser();
  readonly #reader: ChatStreamReader;
  #state: AttemptState = 'reading';
  #pendingError: ModelError | null = null;
  readonly #onAbort = () => this.#controller.abort(this.#call.request.signal.reason);

  constructor(call: Call) {
    this.#call = call;
    const { request } = call;
    const tools = request.tools;
    this.#reader = new ChatStreamReader({
      label: call.label,
      isKnownTool: (name) => tools.some((tool) => tool.name === name),
      toolChoice: tools.length > 0 ? request.settings?.toolChoice : undefined,
    });
    this.#timer = setTimeout(() => this.#idle(), call.idleMs);
    request.signal.addEventListener('abort', this.#onAbort, { once: true });
  }

  async next(): Promise<ModelEvent[] | null> {
    if (this.#pendingError !== null) {
      const error = this.#pendingError;
      this.#pendingError = null;
      throw error;
    }
    if (!this.#is('reading')) return null;
    this.#chunks ??= await this.#open();
    const chunks = this.#chunks;
    const events: ModelEvent[] = [];
    while (events.length === 0 && this.#is('reading')) {
      const chunk = await this.#read(chunks);
      if (chunk === null) {
        // An event without its closing blank line is dropped, as the format requires; no [DONE] is needed.
        this.#parse(this.#decoder.end(), events);
        if (this.#is('reading')) this.#finish(events);
        if (this.#is('done')) this.#state = 'ended';
      } else {
        this.#parse(this.#decoder.write(chunk), events);
      }
    }
    if (this.#is('done')) await this.#readToEnd(chunks);
    return events;
  }

  /** A method rather than a comparison, so that TypeScript does not narrow a state the awaits above change. */
  #is(state: AttemptState): boolean {
    return this.#state === state;
  }

  close(): void {
    this.#call.request.signal.removeEventListener('abort', this.#onAbort);
    clearTimeout(this.#timer);
    // Anything but a body read to its end leaves the connection in an unknown state: drop it.
    if (this.#state !== 'ended') this.#controller.abort(new Error('model call closed'));
  }

  #idle(): void {
    if (!this.#waiting) return;
    const { label, idleMs } = this.#call;
    this.#controller.abort(
      new ModelError('model_timeout', `${label} sent nothing for ${idleMs / 1000} s`, { retriable: true }),
    );
  }

  /** Awaits the provider with the idle timer armed; failures become ModelErrors (or the caller's abort reason). */
  async #wait<T>(pending: Promise<T>): Promise<T> {
    this.#waiting = true;
    this.#timer.refresh();
    try {
      return await pending;
    } catch (error) {
      throw this.#failure(error);
    } finally {
      this.#waiting = false;
    }
  }

  #failure(error: unknown): unknown {
    const { request, label } = this.#call;
    if (request.signal.aborted) return request.signal.reason;
    const reason: unknown = this.#controller.signal.reason;
    if (reason instanceof ModelError) return reason;
    if (error instanceof ModelError) return error;
    return connectionFailed(label, error);
  }

  async #open(): Promise<AsyncIterator<unknown>> {
    const { url, headers, body, dispatcher, label } = this.#call;
    const response = await this.#wait(
      httpRequest(url, { method: 'POST', headers, body, signal: this.#controller.signal, dispatcher }),
    );
    const chunks: AsyncIterator<unknown> = response.body[Symbol.asyncIterator]();
    const status = response.statusCode;
    if (status >= 200 && status <= 299) return chunks;
    let text = '';
    try {
      for (let step = await this.#wait(chunks.next()); step.done !== true; step = await this.#wait(chunks.next())) {
        if (step.value instanceof Uint8Array) text += this.#decoder.write(step.value);
        if (text.length > ERROR_BODY_LIMIT) break;
      }
    } catch (error) {
      // The status says enough; an abort still wins.
      if (this.#call.request.signal.aborted) throw error;
    }
    throw fromStatus(label, status, errorDetail(status, text), undefined, retryAfterOf(response.headers));
  }

  async #read(chunks: AsyncIterator<unknown>): Promise<Uint8Array | null> {
    const step = await this.#wait(chunks.next());
    if (step.done === true) return null;
    if (!(step.value instanceof Uint8Array))
      throw new ModelError('model_error', `${this.#call.label}: unreadable response body`);
    return step.value;
  }

  /**
   * Feeds decoded text to the SSE parser and each event's data to the chunk reader, up to `[DONE]`. A failure
   * after events of the same read goes out after them, as the AI SDK delivered it: the text before a broken chunk
   * is still the model's output (and, once out, makes the failure final rather than retried).
   */
  #parse(text: string, events: ModelEvent[]): void {
    if (text === '' || this.#state !== 'reading') return;
    try {
      for (const data of this.#sse.feed(text)) {
        if (data === '[DONE]') {
          this.#finish(events);
          return;
        }
        this.#reader.chunk(data, events);
      }
    } catch (error) {
      this.#state = 'failed';
      // The chunk reader throws ModelErrors; anything else (an oversized line) is the provider's stream too.
      const failure =
        error instanceof ModelError
          ? error
          : new ModelError(
              'model_error',
              `${this.#call.label}: ${error instanceof Error ? error.message : String(error)}`,
              {
                cause: error,
              },
            );
      if (events.length === 0) throw failure;
      this.#pendingError = failure;
    }
  }

  #finish(events: ModelEvent[]): void {
    this.#state = 'done';
    const end = this.#reader.end();
    for (const event of end.events) events.push(event);
    this.#pendingError = end.error;
  }

  /**
   * After `[DONE]`: reads the rest of the body (normally just the end of the chunked encoding, already here) before
   * the call's last events go out, so that the connection is back in the pool for the very next call. Whatever a
   * provider sends after `[DONE]` is ignored; one that holds the stream open is cut off by the idle timeout, without
   * failing a call whose answer is complete.
   */
  async #readToEnd(chunks: AsyncIterator<unknown>): Promise<void> {
    try {
      while ((await this.#wait(chunks.next())).done !== true) {
        // Ignored.
      }
      this.#state = 'ended';
    } catch (error) {
      if (this.#call.request.signal.aborted) throw error;
      this.#state = 'failed';
    }
  }
}

/** The connection pool of one provider, shared by the adapters of its models. */
export function providerConnections(): Dispatcher {
  return new Agent({ connect: { timeout: CONNECT_TIMEOUT_MS }, headersTimeout: 0, bodyTimeout: 0 });
}

/**
 * A model of a provider of AGENTRY_PROVIDERS; the provider's API key is optional (local servers such as Ollama need none). The request
 * body is built once per call, on its first attempt (so that conversion errors fail the call without a retry).
 */
export function createOpenAICompatibleAdapter(
  provider: string,
  model: string,
  config: ProviderConfig,
  connections: Dispatcher,
  options: ModelAdapterOptions = {},
): ModelAdapter {
  const idleMs = options.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS;
  const url = `${config.baseURL.replace(/\/$/, '')}/chat/completions`;
  const baseHeaders: Record<string, string> = {
    'content-type': 'application/json',
    'user-agent': USER_AGENT,
    ...(config.apiKey ? { authorization: `Bearer ${config.apiKey}` } : {}),
  };
  return {
    stream(request) {
      let call: Call | null = null;
      const open = (): Attempt => {
        call ??= {
          label: provider,
          url,
          headers: request.headers === undefined ? baseHeaders : { ...baseHeaders, ...request.headers },
          body: JSON.stringify(toChatRequestBody(provider, model, request)),
          dispatcher: connections,
          idleMs,
          request,
        };
        return new ChatCompletionsAttempt(call);
      };
      return streamWithRetry(request, open, options);
    },
  };
}
