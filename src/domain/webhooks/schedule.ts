/**
 * When a failed delivery is tried again: full-jitter exponential backoff from AGENTRY_WEBHOOK_RETRY_BASE_MS,
 * a receiver's Retry-After when it sends one, and never past the end of the retry window, so that the last attempt
 * lands inside it. After a failure at or past the window's end the delivery is failed.
 */
import { backoffDelay } from '../../lib/retry.ts';

/** No single wait is longer than this, so a long window keeps being probed. */
export const MAX_RETRY_DELAY_MS = 30 * 60_000;

export interface RetryInput {
  /** Attempts made so far, including the one that just failed (1 after the first). */
  attempts: number;
  now: number;
  deadline: number;
  baseMs: number;
  /** What the receiver asked for (Retry-After), if anything. */
  retryAfterMs: number | null;
  random: () => number;
}

/** The time of the next attempt, or null when the window is over and the delivery has failed. */
export function nextAttemptAt(input: RetryInput): number | null {
  if (input.now >= input.deadline) return null;
  const delay =
    input.retryAfterMs !== null
      ? Math.min(Math.max(0, input.retryAfterMs), MAX_RETRY_DELAY_MS)
      : backoffDelay(input.attempts, input.baseMs, MAX_RETRY_DELAY_MS, input.random);
  return Math.min(input.now + delay, input.deadline);
}
