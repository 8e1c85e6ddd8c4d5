import { describe, expect, it } from 'vitest';
import { abortableSleep, backoffDelay, classifyHttpStatus, parseRetryAfter, withRetry } from './retry.ts';

class HttpError extends Error {
  readonly status: number;
  readonly retryAfterMs: number | null;
  constructor(status: number, retryAfterMs: number | null = null) {
    super(`HTTP ${status}`);
    this.status = status;
    this.retryAfterMs = retryAfterMs;
  }
}

const classify = (error: unknown) =>
  error instanceof HttpError
    ? { retriable: classifyHttpStatus(error.status), retryAfterMs: error.retryAfterMs }
    : { retriable: false };

/** A sleep that records the requested delays and returns at once (honouring an already-aborted signal). */
function recordingSleep() {
  const delays: number[] = [];
  const sleep = async (ms: number, signal?: AbortSignal) => {
    delays.push(ms);
    signal?.throwIfAborted();
  };
  return { delays, sleep };
}

/** An operation that fails with the given errors in turn, then returns `result`. */
function failing<T>(errors: unknown[], result: T) {
  const attempts: number[] = [];
  const operation = async (attempt: number) => {
    attempts.push(attempt);
    const error = errors[attempt - 1];
    if (error !== undefined) throw error;
    return result;
  };
  return { attempts, operation };
}

describe('withRetry', () => {
  it('returns the first success without waiting', async () => {
    const { delays, sleep } = recordingSleep();
    const { attempts, operation } = failing([], 'ok');
    await expect(withRetry(operation, { classify, sleep })).resolves.toBe('ok');
    expect(attempts).toEqual([1]);
    expect(delays).toEqual([]);
  });

  it('retries retriable errors with full-jitter exponential backoff', async () => {
    const { delays, sleep } = recordingSleep();
    const { attempts, operation } = failing([new HttpError(503), new HttpError(500), new HttpError(429)], 'ok');
    const result = await withRetry(operation, { classify, sleep, random: () => 0.5, baseDelayMs: 100 });
    expect(result).toBe('ok');
    expect(attempts).toEqual([1, 2, 3, 4]);
    // Ceilings 100, 200, 400; jitter 0.5 of each.
    expect(delays).toEqual([50, 100, 200]);
  });

  it('draws each delay anywhere in [0, ceiling] and caps the ceiling at maxDelayMs', () => {
    expect(backoffDelay(1, 500, 20_000, () => 0)).toBe(0);
    expect(backoffDelay(1, 500, 20_000, () => 0.999999)).toBe(499);
    expect(backoffDelay(3, 500, 20_000, () => 0.999999)).toBe(1999);
    expect(backoffDelay(10, 500, 20_000, () => 0.999999)).toBe(19_999);
  });

  it('gives up after maxAttempts (default 4) and rethrows the last error unchanged', async () => {
    const { delays, sleep } = recordingSleep();
    const last = new HttpError(502);
    const { attempts, operation } = failing([new HttpError(500), new HttpError(500), new HttpError(500), last], 'ok');
    await expect(withRetry(operation, { classify, sleep })).rejects.toBe(last);
    expect(attempts).toEqual([1, 2, 3, 4]);
    expect(delays).toHaveLength(3);
  });

  it('honours maxAttempts', async () => {
    const { sleep } = recordingSleep();
    const { attempts, operation } = failing([new HttpError(500), new HttpError(500)], 'ok');
    await expect(withRetry(operation, { classify, sleep, maxAttempts: 2 })).rejects.toBeInstanceOf(HttpError);
    expect(attempts).toEqual([1, 2]);
  });

  it('does not retry non-retriable errors', async () => {
    const { delays, sleep } = recordingSleep();
    const { attempts, operation } = failing([new HttpError(401)], 'ok');
    await expect(withRetry(operation, { classify, sleep })).rejects.toMatchObject({ status: 401 });
    expect(attempts).toEqual([1]);
    expect(delays).toEqual([]);
  });

  it('waits what Retry-After asks instead of the backoff, capped at maxDelayMs', async () => {
    const { delays, sleep } = recordingSleep();
    const { operation } = failing([new HttpError(429, 0), new HttpError(429, 3000), new HttpError(429, 90_000)], 'ok');
    await withRetry(operation, { classify, sleep, random: () => 0.5, maxDelayMs: 10_000 });
    expect(delays).toEqual([0, 3000, 10_000]);
  });

  it('rejects with the abort reason when aborted before the first attempt', async () => {
    const controller = new AbortController();
    const reason = new Error('stop');
    controller.abort(reason);
    const { attempts, operation } = failing([], 'ok');
    await expect(withRetry(operation, { classify, signal: controller.signal })).rejects.toBe(reason);
    expect(attempts).toEqual([]);
  });

  it('surfaces the abort reason, not the operation error, when the abort caused the failure', async () => {
    const controller = new AbortController();
    const reason = new Error('interrupted');
    const operation = async () => {
      controller.abort(reason);
      throw new HttpError(500);
    };
    await expect(withRetry(operation, { classify, signal: controller.signal })).rejects.toBe(reason);
  });

  it('stops waiting between attempts as soon as the signal aborts', async () => {
    const controller = new AbortController();
    const reason = new Error('interrupted');
    let attempts = 0;
    const operation = async () => {
      attempts++;
      throw new HttpError(503, 60_000);
    };
    const started = performance.now();
    const pending = withRetry(operation, { classify, signal: controller.signal, maxDelayMs: 60_000 });
    setTimeout(() => controller.abort(reason), 20);
    await expect(pending).rejects.toBe(reason);
    // Long before the 60 s Retry-After (the bound is room for a busy machine).
    expect(performance.now() - started).toBeLessThan(30_000);
    expect(attempts).toBe(1);
  });
});

describe('abortableSleep', () => {
  it('resolves after the delay', async () => {
    await expect(abortableSleep(1)).resolves.toBeUndefined();
  });

  it('rejects at once with the reason of an aborted signal', async () => {
    const controller = new AbortController();
    controller.abort(new Error('already'));
    await expect(abortableSleep(10_000, controller.signal)).rejects.toThrow('already');
  });
});

describe('classifyHttpStatus', () => {
  it('retries 408, 425, 429 and 5xx only', () => {
    const retriable = [408, 425, 429, 500, 502, 503, 504, 599];
    const final = [200, 301, 400, 401, 403, 404, 409, 413, 422, 600];
    for (const status of retriable) expect(classifyHttpStatus(status), String(status)).toBe(true);
    for (const status of final) expect(classifyHttpStatus(status), String(status)).toBe(false);
  });
});

describe('parseRetryAfter', () => {
  const now = Date.parse('2026-01-01T00:00:00Z');

  it('reads delta-seconds', () => {
    expect(parseRetryAfter('0', now)).toBe(0);
    expect(parseRetryAfter('5', now)).toBe(5000);
    expect(parseRetryAfter(' 120 ', now)).toBe(120_000);
    expect(parseRetryAfter('1.5', now)).toBe(1500);
  });

  it('reads an HTTP date relative to now, never negative', () => {
    expect(parseRetryAfter('Thu, 01 Jan 2026 00:00:30 GMT', now)).toBe(30_000);
    expect(parseRetryAfter('Wed, 31 Dec 2025 23:59:00 GMT', now)).toBe(0);
  });

  it('gives null for missing or unparseable values', () => {
    expect(parseRetryAfter(null, now)).toBeNull();
    expect(parseRetryAfter(undefined, now)).toBeNull();
    expect(parseRetryAfter('', now)).toBeNull();
    expect(parseRetryAfter('soon', now)).toBeNull();
    expect(parseRetryAfter('-5', now)).toBeNull();
  });
});
