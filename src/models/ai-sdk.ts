/**
 * Model adapters over the Vercel AI SDK: `openai/<model>` (Responses API) and `anthropic/<model>` (Messages API).
 * Each model call is ONE `streamText` step with tools that have no execute function, so tool calls come back to
 * the engine. (OpenAI-compatible providers of AGENTRY_PROVIDERS use the direct client of `chat-completions.ts`.)
 *
 * Retries: the SDK's own are off (`maxRetries: 0`); the call loop of `retrying-stream.ts` re-opens an attempt only
 * while nothing has been yielded to the caller, so a retry can never duplicate streamed text. Once output has
 * flowed, a failure ends the call with a ModelError. An abort of `request.signal` rejects with `signal.reason`,
 * never a ModelError.
 */
import { createAnthropic } from '@ai-sdk/anthropic';
import { createOpenAI } from '@ai-sdk/openai';
import { type LanguageModel, type LanguageModelUsage, streamText, type TextStreamPart, type ToolSet } from 'ai';
import { toModelError, toSdkMessages, toSdkOutput, toSdkSettings, toSdkTools } from './ai-sdk-convert.ts';
import { type Attempt, DEFAULT_IDLE_TIMEOUT_MS, type ModelAdapterOptions, streamWithRetry } from './retrying-stream.ts';
import {
  type IncompleteReason,
  type ModelAdapter,
  ModelError,
  type ModelEvent,
  type ModelRequest,
  type ToolCall,
  type Usage,
} from './types.ts';

// Explicit endpoints, so that the SDK does not consult OPENAI_BASE_URL / ANTHROPIC_BASE_URL behind config's back.
const OPENAI_BASE_URL = 'https://api.openai.com/v1';
const ANTHROPIC_BASE_URL = 'https://api.anthropic.com/v1';

type Part = TextStreamPart<ToolSet>;

/** The SDK's usage → ours: cache reads (OpenAI's cached tokens, Anthropic's cache_read_input_tokens) are counted. */
function usageOf(usage: LanguageModelUsage): Usage {
  const cached = usage.inputTokenDetails?.cacheReadTokens;
  return {
    inputTokens: usage.inputTokens ?? 0,
    ...(cached === undefined ? {} : { cachedInputTokens: cached }),
    outputTokens: usage.outputTokens ?? 0,
  };
}
/** `ai` does not re-export its ProviderOptions type; take it from streamText's own signature. */
type ProviderOptions = NonNullable<Parameters<typeof streamText>[0]['providerOptions']>;

function argumentsText(part: Extract<Part, { type: 'tool-call' }>): string {
  // An unparsable call arrives with its raw text as input; keep it so that the engine can report it as is.
  if (part.invalid === true && typeof part.input === 'string') return part.input;
  return JSON.stringify(part.input ?? {});
}

/** Resolves with `pending`, or rejects first with the abort reason or an idle timeout. */
function race<T>(pending: Promise<T>, signal: AbortSignal, idleMs: number, onIdle: () => Error): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const cleanup = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
    };
    const onAbort = () => {
      cleanup();
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      cleanup();
      reject(onIdle());
    }, idleMs);
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
    pending.then(
      (value) => {
        cleanup();
        resolve(value);
      },
      (error: unknown) => {
        cleanup();
        reject(error);
      },
    );
  });
}

interface Target {
  /** Names the provider in error messages. */
  label: string;
  resolveModel: () => LanguageModel;
  providerOptions?: (request: ModelRequest) => ProviderOptions;
}

/** Whether a request keeps each step to one tool call (`parallelToolCalls: false`, with tools to call). */
const oneToolCall = (request: ModelRequest): boolean =>
  request.settings?.parallelToolCalls === false && request.tools.length > 0;

function openAttempt(model: LanguageModel, target: Target, request: ModelRequest, idleMs: number): Attempt {
  const { label } = target;
  // Aborted by the caller's signal, or by us on idle timeout / early close, which also cancels the HTTP request.
  const local = new AbortController();
  const signal = AbortSignal.any([request.signal, local.signal]);
  const tools = toSdkTools(request.tools);
  const output = toSdkOutput(request.responseFormat);
  const providerOptions = target.providerOptions?.(request);
  const result = streamText({
    model,
    messages: toSdkMessages(request.context),
    ...(request.instructions === '' ? {} : { instructions: request.instructions }),
    ...(tools === undefined ? {} : { tools }),
    ...toSdkSettings(request.settings, tools !== undefined),
    ...(output === undefined ? {} : { output }),
    maxRetries: 0,
    abortSignal: signal,
    ...(request.headers === undefined ? {} : { headers: request.headers }),
    ...(providerOptions === undefined ? {} : { providerOptions }),
    // Errors arrive as stream parts and are thrown from next(); the default handler would print them.
    onError: () => {},
  });
  const iterator = result.stream[Symbol.asyncIterator]();
  const idle = () => {
    const error = new ModelError('model_timeout', `${label} sent nothing for ${idleMs / 1000} s`, { retriable: true });
    local.abort(error);
    return error;
  };

  const toEvents = (part: Part): ModelEvent[] => {
    switch (part.type) {
      case 'text-delta':
        return part.text === '' ? [] : [{ type: 'text-delta', text: part.text }];
      case 'tool-call': {
        if (part.providerExecuted === true) return [];
        const call: ToolCall = { callId: part.toolCallId, name: part.toolName, arguments: argumentsText(part) };
        return [{ type: 'tool-call', call }];
      }
      case 'finish': {
        const incomplete = incompleteReason(part.finishReason);
        return [{ type: 'finish', usage: usageOf(part.totalUsage), ...(incomplete === null ? {} : { incomplete }) }];
      }
      case 'error':
        throw toModelError(part.error, label);
      case 'abort':
        // Our own idle abort carries the timeout error; otherwise it was the caller's signal.
        if (request.signal.aborted) throw request.signal.reason;
        throw local.signal.reason instanceof ModelError ? local.signal.reason : toModelError(part.reason, label);
      default:
        return [];
    }
  };

  return {
    async next() {
      let step: IteratorResult<Part>;
      try {
        step = await race(iterator.next(), request.signal, idleMs, idle);
      } catch (error) {
        if (request.signal.aborted) throw request.signal.reason;
        throw toModelError(error, label);
      }
      return step.done ? null : toEvents(step.value);
    },
    close() {
      // Releases the connection when the consumer stops early or the call failed; a no-op after a clean end.
      local.abort(new Error('model call closed'));
      iterator.return?.().catch(() => undefined);
    },
  };
}

function createAdapter(target: Target, options: ModelAdapterOptions): ModelAdapter {
  const idleMs = options.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS;
  let model: LanguageModel | null = null;
  // Resolved on the first attempt, so that a missing API key fails the call (model_not_configured, not retried).
  const open = (request: ModelRequest): Attempt => {
    model ??= target.resolveModel();
    return openAttempt(model, target, request, idleMs);
  };
  return { stream: (request) => streamWithRetry(request, () => open(request), options) };
}

function notConfigured(label: string, variable: string): never {
  throw new ModelError('model_not_configured', `${label} models need an API key: set ${variable}`);
}

export function createOpenAIAdapter(
  model: string,
  apiKey: string | null,
  options: ModelAdapterOptions = {},
): ModelAdapter {
  return createAdapter(
    {
      label: 'openai',
      resolveModel: () => {
        if (apiKey === null) return notConfigured('openai', 'OPENAI_API_KEY');
        const fetch = options.fetch;
        return createOpenAI({ apiKey, baseURL: OPENAI_BASE_URL, ...(fetch === undefined ? {} : { fetch }) }).responses(
          model,
        );
      },
      // Nothing stored at OpenAI: Agentry keeps the conversation and sends it whole each step. A JSON schema is
      // strict only when the request says so (the SDK's default is strict).
      providerOptions: (request) => ({
        openai: {
          store: false,
          ...(request.responseFormat?.type === 'json_schema'
            ? { strictJsonSchema: request.responseFormat.strict }
            : {}),
          ...(oneToolCall(request) ? { parallelToolCalls: false } : {}),
        },
      }),
    },
    options,
  );
}

export function createAnthropicAdapter(
  model: string,
  apiKey: string | null,
  options: ModelAdapterOptions = {},
): ModelAdapter {
  return createAdapter(
    {
      label: 'anthropic',
      resolveModel: () => {
        if (apiKey === null) return notConfigured('anthropic', 'ANTHROPIC_API_KEY');
        const fetch = options.fetch;
        return createAnthropic({
          apiKey,
          baseURL: ANTHROPIC_BASE_URL,
          ...(fetch === undefined ? {} : { fetch }),
        }).messages(model);
      },
      providerOptions: (request) => (oneToolCall(request) ? { anthropic: { disableParallelToolUse: true } } : {}),
    },
    options,
  );
}

/** The AI SDK's finish reasons that mean the reply was cut short. */
function incompleteReason(reason: string): IncompleteReason | null {
  if (reason === 'length') return 'max_output_tokens';
  if (reason === 'content-filter') return 'content_filter';
  return null;
}
