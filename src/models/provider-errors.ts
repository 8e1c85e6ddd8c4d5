/**
 * Provider failures → ModelError, kept apart from the AI SDK mapping so that every HTTP client maps an HTTP status,
 * a Retry-After header or a failed connection to the same code and retry verdict.
 */
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
    return new ModelError('model_bad_request', message, base);
  }
  return new ModelError('model_error', message, base);
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
