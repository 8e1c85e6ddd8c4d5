/**
 * The one retry policy for outbound calls (model providers now; MCP servers and webhooks later): a bounded number
 * of attempts, full-jitter exponential backoff, the server's Retry-After honoured (capped), and prompt abort.
 * Callers decide what is retriable through `classify`, so this module knows nothing of HTTP clients or SDKs.
 */

export interface RetryClassification {
  retriable: boolean;
  /** A delay the server asked for (Retry-After), used instead of the backoff when present. */
  retryAfterMs?: number | null;
}

export interface RetryOptions {
  signal?: AbortSignal;
  /** Total attempts including the first (default 4). */
  maxAttempts?: number;
  /** Backoff ceiling of the first retry (default 500 ms); doubles per attempt. */
  baseDelayMs?: number;
  /** Upper bound of any wait, backoff or Retry-After (default 20 s). */
  maxDelayMs?: number;
  classify: (error: unknown) => RetryClassification;
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** Source of jitter in [0, 1); injectable so tests can pin delays. */
  random?: () => number;
}

export const RETRY_DEFAULTS = { maxAttempts: 4, baseDelayMs: 500, maxDelayMs: 20_000 } as const;

/** Resolves after `ms`, or rejects with `signal.reason` as soon as the signal aborts. */
/** Settles with `promise`, or rejects with `signal.reason` as soon as the signal aborts. */
export function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

export function abortableSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** The wait before retry number `attempt` (1 = first retry): uniform in [0, min(max, base * 2^(attempt-1))]. */
export function backoffDelay(attempt: number, baseDelayMs: number, maxDelayMs: number, random: () => number): number {
  const ceiling = Math.min(maxDelayMs, baseDelayMs * 2 ** (attempt - 1));
  return Math.floor(random() * ceiling);
}

/**
 * Runs `operation` until it succeeds, `classify` calls its error non-retriable, or attempts run out; then the
 * last error is rethrown unchanged. An abort (before, during or between attempts) rejects with `signal.reason`.
 */
export async function withRetry<T>(operation: (attempt: number) => Promise<T>, options: RetryOptions): Promise<T> {
  const maxAttempts = Math.max(1, options.maxAttempts ?? RETRY_DEFAULTS.maxAttempts);
  const baseDelayMs = options.baseDelayMs ?? RETRY_DEFAULTS.baseDelayMs;
  const maxDelayMs = options.maxDelayMs ?? RETRY_DEFAULTS.maxDelayMs;
  const sleep = options.sleep ?? abortableSleep;
  const random = options.random ?? Math.random;
  const { signal } = options;

  for (let attempt = 1; ; attempt++) {
    signal?.throwIfAborted();
    try {
      return await operation(attempt);
    } catch (error) {
      // An error caused by the abort is not a failure to retry: surface the abort itself.
      if (signal?.aborted) throw signal.reason;
      if (attempt >= maxAttempts) throw error;
      const verdict = options.classify(error);
      if (!verdict.retriable) throw error;
      const requested = verdict.retryAfterMs;
      const delay =
        requested !== undefined && requested !== null && Number.isFinite(requested)
          ? Math.min(Math.max(0, requested), maxDelayMs)
          : backoffDelay(attempt, baseDelayMs, maxDelayMs, random);
      await sleep(delay, signal);
    }
  }
}

/** Statuses worth retrying: request timeout, too early, rate limited, and server errors. */
export function classifyHttpStatus(status: number): boolean {
  return status === 408 || status === 425 || status === 429 || (status >= 500 && status <= 599);
}

/**
 * Milliseconds to wait per a Retry-After header: delta-seconds (`"120"`, fractions tolerated) or an HTTP date
 * (relative to `now`; a past date gives 0). Null when absent or unparseable.
 */
export function parseRetryAfter(header: string | null | undefined, now: number = Date.now()): number | null {
  if (header === null || header === undefined) return null;
  const value = header.trim();
  if (value === '') return null;
  if (/^\d+(\.\d+)?$/.test(value)) return Math.ceil(Number(value) * 1000);
  // HTTP dates always name a weekday or month; this keeps Date.parse from reading "-5" as the year 5 BC.
  if (!/[A-Za-z]/.test(value)) return null;
  const date = Date.parse(value);
  if (Number.isNaN(date)) return null;
  return Math.max(0, date - now);
}
