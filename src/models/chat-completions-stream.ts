/**
 * The data of a streamed chat completion (one JSON chunk per SSE event) → our ModelEvents. Text deltas (and a
 * refusal, which is text to us) go out as they come; tool calls are assembled from their fragments and go out,
 * complete, when the stream ends, followed by the one `finish` with the usage of the last usage chunk (zeros when
 * none came).
 *
 * What counts as a failure mirrors what the AI SDK made of the same stream: an `error` object in a chunk, a chunk
 * that is not JSON or not a chunk, a stream that ends without a finish reason, a tool call without a name, and a
 * reply that breaks a tool choice other than `auto` (a call under `none`; no call, or not the named one, under
 * `required` or a named tool).
 */
import { isArrayOf, isJsonObject } from '../lib/guards.ts';
import { randomBase62 } from '../lib/ids.ts';
import { fromStreamError } from './provider-errors.ts';
import { argumentsFromModel } from './tool-arguments.ts';
import {
  type IncompleteReason,
  ModelError,
  type ModelEvent,
  type ModelSettings,
  type ToolCall,
  type Usage,
} from './types.ts';

/** One fragment of a tool call in `delta.tool_calls`: the first carries id and name, later ones more arguments. */
export interface ChatToolCallDelta {
  index?: number | null;
  id?: string | null;
  function?: { name?: string | null; arguments?: string | null } | null;
}

/** `content` is text, or (some providers) a list of typed parts of which the `text` ones are text. */
export interface ChatDelta {
  content?: string | Array<{ type: string; text?: unknown }> | null;
  refusal?: unknown;
  tool_calls?: ChatToolCallDelta[] | null;
}

export interface ChatChoice {
  delta?: ChatDelta | null;
  finish_reason?: string | null;
}

export interface ChatUsage {
  prompt_tokens?: number | null;
  completion_tokens?: number | null;
  /** `cached_tokens`: of `prompt_tokens`, those read from the provider's prompt cache (OpenAI and compatibles). */
  prompt_tokens_details?: { cached_tokens?: number | null } | null;
}

/** Only the first choice is read (we never ask for more), so only it is validated, by `isChatChoice`. */
export interface ChatChunk {
  choices: unknown[];
  usage?: ChatUsage | null;
}

const isNullish = (value: unknown): value is null | undefined => value === null || value === undefined;
const nullishOr = (value: unknown, type: 'string' | 'number'): boolean => isNullish(value) || typeof value === type;

function isToolCallDelta(value: unknown): value is ChatToolCallDelta {
  if (!isJsonObject(value) || !nullishOr(value.index, 'number') || !nullishOr(value.id, 'string')) return false;
  const fn = value.function;
  return isNullish(fn) || (isJsonObject(fn) && nullishOr(fn.name, 'string') && nullishOr(fn.arguments, 'string'));
}

function isContentPart(value: unknown): value is { type: string; text?: unknown } {
  return isJsonObject(value) && typeof value.type === 'string';
}

function isChatDelta(value: unknown): value is ChatDelta {
  if (!isJsonObject(value)) return false;
  const { content } = value;
  return (
    (nullishOr(content, 'string') || isArrayOf(content, isContentPart)) &&
    (isNullish(value.tool_calls) || isArrayOf(value.tool_calls, isToolCallDelta))
  );
}

export function isChatChoice(value: unknown): value is ChatChoice {
  return (
    isJsonObject(value) &&
    (isNullish(value.delta) || isChatDelta(value.delta)) &&
    nullishOr(value.finish_reason, 'string')
  );
}

function isChatUsage(value: unknown): value is ChatUsage {
  return (
    isJsonObject(value) &&
    nullishOr(value.prompt_tokens, 'number') &&
    nullishOr(value.completion_tokens, 'number') &&
    (isNullish(value.prompt_tokens_details) ||
      (isJsonObject(value.prompt_tokens_details) && nullishOr(value.prompt_tokens_details.cached_tokens, 'number')))
  );
}

export function isChatChunk(value: unknown): value is ChatChunk {
  return isJsonObject(value) && Array.isArray(value.choices) && (isNullish(value.usage) || isChatUsage(value.usage));
}

interface PendingCall {
  index: number | undefined;
  id: string | undefined;
  name: string | undefined;
  arguments: string;
}

const nonBlank = (value: string | null | undefined): string | undefined =>
  value === null || value === undefined || value.trim() === '' ? undefined : value;

/** Arguments text that opens a JSON object or array: with a name, the start of a call. */
function opensValue(text: string): boolean {
  const first = text.trimStart()[0];
  return first === '{' || first === '[';
}

function isCompleteJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/** Where reading a stream ended: its last events, and the error to throw once they are out (if any). */
export interface StreamEnd {
  events: ModelEvent[];
  error: ModelError | null;
}

export interface ChatStreamOptions {
  /** Names the provider in error messages. */
  label: string;
  /** Whether the request offered a tool of this name (empty arguments of other calls are passed on verbatim). */
  isKnownTool: (name: string) => boolean;
  /** The request's tool choice when tools were offered; enforced as the AI SDK did. */
  toolChoice: ModelSettings['toolChoice'];
}

/** The chat completion finish reasons that mean the reply was cut short. */
const INCOMPLETE_REASONS = new Map<string, IncompleteReason>([
  ['length', 'max_output_tokens'],
  ['content_filter', 'content_filter'],
]);

/** Reads one streamed chat completion; feed it each event's data, then call `end` once. */
export class ChatStreamReader {
  readonly #options: ChatStreamOptions;
  readonly #calls: PendingCall[] = [];
  /** The latest call per `index`: a new id at a known index starts another call (providers that reuse 0). */
  readonly #byIndex = new Map<number, PendingCall>();
  #usage: Usage = { inputTokens: 0, outputTokens: 0 };
  #finishReason: string | null = null;

  constructor(options: ChatStreamOptions) {
    this.#options = options;
  }

  /** Appends the text events of one chunk to `events`; throws ModelError for an error or malformed chunk. */
  chunk(data: string, events: ModelEvent[]): void {
    const { label } = this.#options;
    let value: unknown;
    try {
      value = JSON.parse(data);
    } catch (error) {
      throw new ModelError('model_error', `${label} sent a chunk that is not JSON: ${data.slice(0, 200)}`, {
        cause: error,
      });
    }
    if (isJsonObject(value) && !isNullish(value.error)) throw fromStreamError(label, value.error);
    if (!isChatChunk(value)) throw this.#malformed(data);
    const { usage } = value;
    if (!isNullish(usage)) {
      const cached = usage.prompt_tokens_details?.cached_tokens;
      this.#usage = {
        inputTokens: usage.prompt_tokens ?? 0,
        ...(isNullish(cached) ? {} : { cachedInputTokens: cached }),
        outputTokens: usage.completion_tokens ?? 0,
      };
    }
    const choice = value.choices[0];
    if (choice === undefined) return;
    if (!isChatChoice(choice)) throw this.#malformed(data);
    if (!isNullish(choice.finish_reason)) this.#finishReason = choice.finish_reason;
    const delta = choice.delta;
    if (isNullish(delta)) return;
    const { content, refusal, tool_calls: toolCalls } = delta;
    if (typeof content === 'string') {
      if (content !== '') events.push({ type: 'text-delta', text: content });
    } else if (Array.isArray(content)) {
      for (const part of content) {
        if (part.type === 'text' && typeof part.text === 'string' && part.text !== '') {
          events.push({ type: 'text-delta', text: part.text });
        }
      }
    }
    if (typeof refusal === 'string' && refusal !== '') events.push({ type: 'text-delta', text: refusal });
    if (!isNullish(toolCalls)) for (const fragment of toolCalls) this.#toolCall(fragment);
  }

  /** The stream is over (`[DONE]` or the body ended): its tool calls and finish, or why it failed. */
  end(): StreamEnd {
    const { label } = this.#options;
    if (this.#finishReason === null) {
      // The AI SDK reported its tool calls before this error; so do we.
      return {
        events: this.#completedCalls(),
        error: new ModelError('model_error', `${label}: Response stream ended without a finish reason.`),
      };
    }
    const calls = this.#completedCalls();
    const violation = this.#toolChoiceViolation(calls);
    if (violation !== null) return violation;
    const incomplete = INCOMPLETE_REASONS.get(this.#finishReason);
    const finish: ModelEvent = {
      type: 'finish',
      usage: this.#usage,
      ...(incomplete === undefined ? {} : { incomplete }),
    };
    return { events: [...calls, finish], error: null };
  }

  #malformed(data: string): ModelError {
    return new ModelError('model_error', `${this.#options.label} sent an unexpected chunk: ${data.slice(0, 200)}`);
  }

  #toolCall(fragment: ChatToolCallDelta): void {
    const id = nonBlank(fragment.id);
    const rawName = fragment.function?.name;
    const name = nonBlank(rawName);
    const text = fragment.function?.arguments ?? '';
    const index = isNullish(fragment.index) ? undefined : fragment.index;
    let call: PendingCall | undefined;
    if (index !== undefined) {
      const latest = this.#byIndex.get(index);
      const sameCall =
        latest !== undefined &&
        (id === undefined || latest.id === undefined || latest.id === id) &&
        // Providers that send every call whole at one index: a named fragment opening a new value after a
        // complete one is the next call.
        !(name !== undefined && latest.name !== undefined && opensValue(text) && isCompleteJson(latest.arguments));
      if (sameCall) call = latest;
    } else if (id !== undefined) {
      call = this.#calls.findLast((candidate) => candidate.id === id);
    } else if (name === undefined) {
      call = this.#calls.at(-1);
    }
    if (call === undefined) {
      // A call that starts with a blank name is dropped, as the AI SDK did.
      if (typeof rawName === 'string' && name === undefined) return;
      call = { index, id, name, arguments: text };
      this.#calls.push(call);
      if (index !== undefined) this.#byIndex.set(index, call);
      return;
    }
    call.id ??= id;
    call.name ??= name;
    call.arguments += text;
  }

  /** Complete calls, ordered by index when every call has one, with unique ids (generated where missing). */
  #completedCalls(): Extract<ModelEvent, { type: 'tool-call' }>[] {
    if (this.#calls.length === 0) return [];
    const ordered = this.#calls.every((call) => call.index !== undefined)
      ? this.#calls.toSorted((a, b) => (a.index ?? 0) - (b.index ?? 0))
      : this.#calls;
    const used = new Set<string>();
    return ordered.map((pending) => {
      if (pending.name === undefined) {
        throw new ModelError('model_error', `${this.#options.label}: a streamed tool call has no function name`);
      }
      let callId = pending.id !== undefined && !used.has(pending.id) ? pending.id : randomBase62(16);
      while (used.has(callId)) callId = randomBase62(16);
      used.add(callId);
      const call: ToolCall = {
        callId,
        name: pending.name,
        arguments: argumentsFromModel(pending.arguments, this.#options.isKnownTool(pending.name)),
      };
      return { type: 'tool-call', call };
    });
  }

  #toolChoiceViolation(calls: Extract<ModelEvent, { type: 'tool-call' }>[]): StreamEnd | null {
    const { label, toolChoice } = this.#options;
    const fail = (message: string) => new ModelError('model_error', `${label}: ${message}`);
    if (toolChoice === undefined || toolChoice === 'auto') return null;
    if (toolChoice === 'none') {
      if (calls.length === 0) return null;
      return { events: [], error: fail('Model response contained a tool call even though tool choice was none.') };
    }
    if (toolChoice === 'required') {
      if (calls.length > 0) return null;
      return {
        events: [],
        error: fail('Model response did not contain a tool call even though tool choice was required.'),
      };
    }
    if (calls.some((event) => event.call.name === toolChoice.name)) return null;
    return {
      events: calls,
      error: fail(`Model response did not contain a call to the required tool '${toolChoice.name}'.`),
    };
  }
}
