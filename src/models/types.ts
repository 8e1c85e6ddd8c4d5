/**
 * The one small interface every model provider implements, in Agentry's own normalized shapes (provider wire
 * formats never leak past an adapter). The engine builds a ModelRequest per step and consumes ModelEvents.
 */
import { isAbsentOr, isBoolean, isJsonObject, isNumber, isString } from '../lib/guards.ts';

export interface ToolCall {
  callId: string;
  name: string;
  /** JSON text of the arguments, as the model produced it. */
  arguments: string;
}

export interface ToolResult {
  callId: string;
  name: string;
  /** The tool's output as text (JSON values are serialized by the engine). */
  output: string;
  isError?: boolean;
}

export type UserPart =
  | { type: 'text'; text: string }
  /** `detail` (`auto`, `low`, `high`, `original`) as the caller gave it; providers whose wire has none drop it. */
  | { type: 'image'; mediaType: string; data: Uint8Array; detail?: string }
  | { type: 'file'; mediaType: string; filename: string; data: Uint8Array };

/**
 * The conversation as the model sees it. One `assistant` entry is one step of the agent loop: its text and the
 * batch of tool calls it made; the `tool` entry after it carries that batch's results.
 */
export type ContextMessage =
  | { role: 'user'; content: UserPart[] }
  | { role: 'assistant'; text: string; toolCalls: ToolCall[] }
  | { role: 'tool'; results: ToolResult[] };

export interface ToolSpec {
  name: string;
  description: string;
  /** JSON Schema of the arguments (root type object). */
  parameters: Record<string, unknown>;
  strict: boolean;
}

export function isToolSpec(value: unknown): value is ToolSpec {
  return (
    isJsonObject(value) &&
    typeof value.name === 'string' &&
    typeof value.description === 'string' &&
    isJsonObject(value.parameters) &&
    typeof value.strict === 'boolean'
  );
}

export interface ModelSettings {
  temperature?: number;
  topP?: number;
  maxOutputTokens?: number;
  /** `auto` (default), `none`, `required`, or a tool name the model must call. */
  toolChoice?: 'auto' | 'none' | 'required' | { name: string };
  presencePenalty?: number;
  frequencyPenalty?: number;
  /**
   * false: at most one tool call per step (passed to providers that take it; the engine also runs only a step's
   * first call).
   */
  parallelToolCalls?: boolean;
  /** Tool calls the whole turn may make (the engine's limit; providers are not told). */
  maxToolCalls?: number;
}

function isToolChoice(value: unknown): value is ModelSettings['toolChoice'] {
  if (value === undefined || value === 'auto' || value === 'none' || value === 'required') return true;
  return isJsonObject(value) && typeof value.name === 'string';
}

export function isModelSettings(value: unknown): value is ModelSettings {
  return (
    isJsonObject(value) &&
    isAbsentOr(value.temperature, isNumber) &&
    isAbsentOr(value.topP, isNumber) &&
    isAbsentOr(value.maxOutputTokens, isNumber) &&
    isToolChoice(value.toolChoice) &&
    isAbsentOr(value.presencePenalty, isNumber) &&
    isAbsentOr(value.frequencyPenalty, isNumber) &&
    isAbsentOr(value.parallelToolCalls, isBoolean) &&
    isAbsentOr(value.maxToolCalls, isNumber)
  );
}

/**
 * The shape the final reply must take (Responses `text.format`, Chat Completions `response_format`). `json_schema`
 * carries the schema the reply must match; `json_object` asks only for a JSON object. Absent means free text.
 */
export type ResponseFormat =
  | { type: 'json_schema'; name: string; description?: string; schema: Record<string, unknown>; strict: boolean }
  | { type: 'json_object' };

export function isResponseFormat(value: unknown): value is ResponseFormat {
  if (!isJsonObject(value)) return false;
  if (value.type === 'json_object') return true;
  return (
    value.type === 'json_schema' &&
    typeof value.name === 'string' &&
    isAbsentOr(value.description, isString) &&
    isJsonObject(value.schema) &&
    typeof value.strict === 'boolean'
  );
}

export interface ModelRequest {
  /** Full model id, `provider/model` or `scripted`. */
  model: string;
  instructions: string;
  context: ContextMessage[];
  tools: ToolSpec[];
  settings?: ModelSettings;
  /** Structured output the model must produce; absent for free text. */
  responseFormat?: ResponseFormat;
  signal: AbortSignal;
  /** Extra HTTP headers of the provider request (W3C `traceparent`). */
  headers?: Record<string, string>;
}

export interface Usage {
  /** Every input token, including those read from the provider's prompt cache. */
  inputTokens: number;
  /** Of `inputTokens`, those the provider read from its prompt cache (absent or 0 when it reports none). */
  cachedInputTokens?: number;
  outputTokens: number;
}

/**
 * Why a model stopped before its reply was done, in the Responses API's words (`incomplete_details.reason`): it
 * reached its output token limit, or the provider's content filter cut it.
 */
export type IncompleteReason = 'max_output_tokens' | 'content_filter';

export type ModelEvent =
  | { type: 'text-delta'; text: string }
  | { type: 'tool-call'; call: ToolCall }
  /** The call's end; `incomplete` when the reply was cut short (absent: the model ended it itself). */
  | { type: 'finish'; usage: Usage; incomplete?: IncompleteReason };

/** Stable codes a failed model call ends a message with. */
export const MODEL_ERROR_CODES = [
  'model_error',
  'model_rate_limited',
  'model_unavailable',
  'model_auth_failed',
  'model_bad_request',
  'model_not_configured',
  'model_timeout',
  'model_context_exceeded',
] as const;
export type ModelErrorCode = (typeof MODEL_ERROR_CODES)[number];

export class ModelError extends Error {
  readonly code: ModelErrorCode;
  /** True for conditions worth retrying (429, 5xx, network), per the retry policy. */
  readonly retriable: boolean;
  readonly status: number | null;
  readonly retryAfterMs: number | null;

  constructor(
    code: ModelErrorCode,
    message: string,
    options: { retriable?: boolean; status?: number; retryAfterMs?: number; cause?: unknown } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.retriable = options.retriable ?? false;
    this.status = options.status ?? null;
    this.retryAfterMs = options.retryAfterMs ?? null;
  }
}

export interface ModelAdapter {
  /**
   * Streams one model call. Ends with exactly one `finish` event; throws ModelError on failure and an
   * AbortError (`signal.reason`) when the signal aborts.
   */
  stream(request: ModelRequest): AsyncIterable<ModelEvent>;
}
