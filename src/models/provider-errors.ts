/**
 * Provider failures → ModelError, shared by the AI SDK adapters and the chat-completions client so that an HTTP
 * status, a Retry-After header or an error object inside a stream maps to the same code and retry verdict
 * whichever client made the call.
 */
import { isJsonObject } from '../lib/guards.ts';
import { classifyHttpStatus, parseRetryAfter } from '../lib/retry.ts';
import { ModelError } from './types.ts';

/** Response headers as either client hands them over (undici may repeat a header as an array). */
export type ResponseHeaders = Record<string, string | string[] | undefined>;

function header(headers: ResponseHeaders | undefined, name: string): string | undefined {
  if (headers === undefined) return undefined;
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() === name) return Array.isArray(value) ? value[0] : value;
  }
  return undefined;
}

/** OpenAI sends the precise `retry-after-ms`; everyone else the standard Retry-After. */
export function retryAfterOf(headers: ResponseHeaders | undefined): number | undefined {
  const preciseHeader = header(headers, 'retry-after-ms');
  const precise = Number(preciseHeader);
  if (preciseHeader !== undefined && Number.isFinite(precise) && precise >= 0) return precise;
  return parseRetryAfter(header(headers, 'retry-after')) ?? undefined;
}

/**
 * The ModelError of a provider's HTTP status: 401/403 auth, 429 rate limited, 408/425/5xx unavailable (those three
 * retriable, with `retryAfterMs`), 400/404/413/422 bad request, anything else model_error.
 */
export function fromStatus(
  label: string,
  status: number,
  detail: string,
  cause: unknown,
  retryAfterMs?: number,
): ModelError {
  const message = `${label} returned HTTP ${status}: ${detail}`;
  const base = { status, cause };
  const retriable = { ...base, retriable: true, ...(retryAfterMs === undefined ? {} : { retryAfterMs }) };
  if (status === 401 || status === 403) return new ModelError('model_auth_failed', message, base);
  if (status === 429) return new ModelError('model_rate_limited', message, retriable);
  if (classifyHttpStatus(status)) return new ModelError('model_unavailable', message, retriable);
  if (status === 400 || status === 404 || status === 413 || status === 422) {
    return new ModelError(contextExceeded(detail) ? 'model_context_exceeded' : 'model_bad_request', message, base);
  }
  return new ModelError('model_error', message, base);
}

/**
 * Whether a refusal says the request was longer than the model's context window: OpenAI's
 * `context_length_exceeded` ("This model's maximum context length is N tokens…"), and the wording of other
 * providers that follow it (Anthropic's "prompt is too long", vLLM's and others' "context length").
 */
export function contextExceeded(detail: string): boolean {
  return /context_length_exceeded|maximum context length|context length|prompt is too long|context window/i.test(
    detail,
  );
}

/** The window a context-exceeded message states ("maximum context length is 8192 tokens"), or null. */
export function statedContextLimit(message: string): number | null {
  const found = /maximum context length is (\d+) tokens/i.exec(message);
  const limit = found === null ? Number.NaN : Number(found[1]);
  return Number.isSafeInteger(limit) && limit > 0 ? limit : null;
}

/** The request never got an answer (refused, reset, timed out) or the connection broke while the answer streamed. */
export function connectionFailed(label: string, error: unknown): ModelError {
  const message = error instanceof Error ? error.message : String(error);
  const cause = error instanceof Error && error.cause instanceof Error ? `: ${error.cause.message}` : '';
  return new ModelError('model_unavailable', `${label} connection failed: ${message}${cause}`, {
    retriable: true,
    cause: error,
  });
}

/** An HTTP status carried in an error object: a 4xx/5xx number, or such a number as a three-digit string. */
function statusIn(value: unknown): number | undefined {
  const status = typeof value === 'string' && /^\d{3}$/.test(value) ? Number(value) : value;
  return typeof status === 'number' && Number.isInteger(status) && status >= 400 && status <= 599 ? status : undefined;
}

/** Messages some providers send without a status, and the status they stand for. */
function statusOfMessage(message: string): number | undefined {
  switch (message.trim().toLowerCase()) {
    case 'overloaded':
    case 'overloaded error':
    case 'model overloaded':
    case 'service unavailable':
      return 503;
    case 'internal server error':
      return 500;
    default:
      return undefined;
  }
}

/**
 * The ModelError of an `error` object a provider sent INSIDE a successful stream (`{"error":{"message":…,"code":…}}`):
 * a status in `code` (or implied by a message such as "overloaded") maps like the HTTP status would; otherwise it is
 * a model_error. Mirrors how the AI SDK normalizes such stream errors, so both clients retry the same ones.
 */
export function fromStreamError(label: string, error: unknown): ModelError {
  if (!isJsonObject(error) || typeof error.message !== 'string') {
    return new ModelError('model_error', `${label} sent an error: ${JSON.stringify(error) ?? String(error)}`);
  }
  const status = statusIn(error.code) ?? statusOfMessage(error.message);
  if (status !== undefined) return fromStatus(label, status, error.message, error);
  return new ModelError('model_error', `${label}: ${error.message}`, { cause: error });
}
