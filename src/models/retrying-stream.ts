/**
 * The call loop every HTTP model adapter shares: open an attempt, retry it through the one retry policy while
 * nothing has been yielded, then stream its events with exactly one `finish`, always last. Adapters differ only in
 * how an attempt talks to its provider (the AI SDK's `streamText`, or the direct chat-completions client), so
 * retry and finish semantics cannot drift apart between them.
 *
 * Retries: `withRetry` re-opens the call only while nothing has been yielded to the caller, so a retry can never
 * duplicate streamed text. Once output has flowed, a failure ends the call with a ModelError. An abort of
 * `request.signal` rejects with `signal.reason`, never a ModelError.
 */
import { type RetryOptions, withRetry } from '../lib/retry.ts';
import { ModelError, type ModelEvent, type ModelRequest } from './types.ts';

export interface ModelAdapterOptions {
  /** Overrides of the shared retry policy (tests shorten the delays). */
  retry?: Pick<RetryOptions, 'maxAttempts' | 'baseDelayMs' | 'maxDelayMs' | 'sleep'>;
  /** A call that sends nothing for this long fails with model_timeout (default 120 s). */
  idleTimeoutMs?: number;
  /** The HTTP client of the AI SDK adapters (tests see the provider request through it); global fetch if absent. */
  fetch?: typeof globalThis.fetch;
}

export const DEFAULT_IDLE_TIMEOUT_MS = 120_000;

/** One opened provider call, its output already mapped to our events. */
export interface Attempt {
  /**
   * Events of the next piece of provider output (possibly none); null once the call has ended. Throws a
   * ModelError on failure, or the caller's abort reason once `request.signal` aborted.
   */
  next(): Promise<ModelEvent[] | null>;
  /** Releases the connection when the consumer stops early or the call failed; harmless after a clean end. */
  close(): void;
}

/** Opens the call and reads up to its first event; everything up to there may be retried. */
async function openWithFirstEvents(open: () => Attempt): Promise<{ attempt: Attempt; first: ModelEvent[] }> {
  const attempt = open();
  try {
    for (;;) {
      const events = await attempt.next();
      if (events === null) return { attempt, first: [] };
      if (events.length > 0) return { attempt, first: events };
    }
  } catch (error) {
    attempt.close();
    throw error;
  }
}

/**
 * Streams one model call made of attempts opened by `open`: retried (per `options.retry`) until the first event,
 * then streamed as is. Ends with exactly one `finish` (a zero-usage one when the provider sent none).
 */
export async function* streamWithRetry(
  request: ModelRequest,
  open: () => Attempt,
  options: ModelAdapterOptions,
): AsyncGenerator<ModelEvent> {
  const { attempt, first } = await withRetry(() => openWithFirstEvents(open), {
    ...options.retry,
    signal: request.signal,
    classify: (error) =>
      error instanceof ModelError
        ? { retriable: error.retriable, retryAfterMs: error.retryAfterMs }
        : { retriable: false },
  });
  let finished = false;
  try {
    let events: ModelEvent[] | null = first;
    while (events !== null) {
      for (const event of events) {
        // Exactly one finish, and always last: whatever a provider sends after it is dropped.
        if (finished) continue;
        if (event.type === 'finish') finished = true;
        yield event;
      }
      events = await attempt.next();
    }
    if (!finished) {
      request.signal.throwIfAborted();
      yield { type: 'finish', usage: { inputTokens: 0, outputTokens: 0 } };
    }
  } finally {
    attempt.close();
  }
}
