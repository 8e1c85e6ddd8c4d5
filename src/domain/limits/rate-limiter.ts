/**
 * Requests per minute of organizations and API keys, counted where every process of the deployment counts the
 * same requests: in Redis when the deployment has it (cluster mode), else in the database (table `rate_windows`),
 * and in the database too while Redis does not answer. Never in one process's memory alone.
 *
 * The window is the minute of the clock (a fixed window): a request counts towards the minute it arrives in, and
 * the counts start again at the next minute. The answer names what is left of each limit and when it resets, for
 * the `RateLimit` and `RateLimit-Policy` headers (draft-ietf-httpapi-ratelimit-headers) and `Retry-After`.
 */
import type { LimitDefaults } from '../../config.ts';
import type { Executor } from '../../storage/db.ts';
import type { Limits } from './limit-store.ts';

export const WINDOW_MS = 60_000;

/** A shared counter of requests per window (Redis: bus/redis-counter.ts). */
export interface RateCounter {
  /**
   * Counts `requests` requests in the window of each bucket, in one round trip, and returns each window's count so
   * far, these included (in the order of `buckets`); rejects when it cannot count.
   */
  increment(buckets: readonly string[], windowStart: number, ttlMs: number, requests: number): Promise<number[]>;
}

/** The limits of the request's organization and key, as the key's principal carries them. */
export interface RateSubject {
  orgId: string;
  keyId: string;
  limits: { organization: Limits; apiKey: Limits };
}

export interface RatePolicyState {
  /** `organization` or `api_key`: the policy's name in the headers. */
  name: 'organization' | 'api_key';
  quota: number;
  remaining: number;
  /** Seconds until the window resets. */
  resetS: number;
}

export interface RateDecision {
  /** The limits that apply, with their state; empty when the request is not limited. */
  policies: RatePolicyState[];
  /** The policy over its limit, if any: the request must be refused. */
  exceeded: RatePolicyState | null;
}

const NOT_LIMITED: RateDecision = { policies: [], exceeded: null };

/** Counts in the database: one row per organization or key and minute, upserted (one statement for all). */
export function databaseCounter(db: Executor): RateCounter & { sweep(before: number): Promise<void> } {
  return {
    async increment(buckets, windowStart, _ttlMs, requests) {
      const rows = await db
        .insertInto('rate_windows')
        .values(buckets.map((bucket) => ({ bucket, window_start: windowStart, hits: requests })))
        .onConflict((conflict) =>
          conflict
            .columns(['bucket', 'window_start'])
            .doUpdateSet((eb) => ({ hits: eb('rate_windows.hits', '+', requests) })),
        )
        .returning(['bucket', 'hits'])
        .execute();
      const hits = new Map(rows.map((row) => [row.bucket, Number(row.hits)]));
      return buckets.map((bucket) => hits.get(bucket) ?? requests);
    },
    async sweep(before) {
      await db.deleteFrom('rate_windows').where('window_start', '<', before).execute();
    },
  };
}

export interface RateLimiterDeps {
  db: Executor;
  defaults: LimitDefaults;
  /** The Redis counter when the deployment has one (null until it is connected, or without Redis). */
  shared: () => RateCounter | null;
  /** Told when the shared counter failed and the database counted instead (throttled by the caller). */
  onSharedFailure?: (error: unknown) => void;
}

export type RateLimiter = ReturnType<typeof createRateLimiter>;

interface Waiting {
  resolve(counts: number[]): void;
  reject(error: unknown): void;
}

/**
 * Counts requests of the same buckets and window that arrive while a count of them is on its way in one increment
 * of their number, once the count on its way answers: a busy key costs one round trip at a time, not one per
 * request. The first count waits for the requests already read in the same turn of the event loop (on SQLite a
 * count answers within the turn, so without it every request was a write of its own). Exact: each request gets its own place in the total (the batch's total minus those counted after it),
 * so the limit is enforced as if each had been counted alone, in every process.
 */
function coalescing(
  count: (buckets: string[], windowStart: number, requests: number) => Promise<number[]>,
): (buckets: string[], windowStart: number) => Promise<number[]> {
  const queues = new Map<string, Waiting[]>();
  async function drain(key: string, buckets: string[], windowStart: number): Promise<void> {
    for (;;) {
      const batch = queues.get(key) ?? [];
      if (batch.length === 0) {
        queues.delete(key);
        return;
      }
      queues.set(key, []);
      try {
        const totals = await count(buckets, windowStart, batch.length);
        for (const [index, waiting] of batch.entries()) {
          waiting.resolve(totals.map((total) => total - batch.length + index + 1));
        }
      } catch (error) {
        for (const waiting of batch) waiting.reject(error);
      }
    }
  }
  return (buckets, windowStart) =>
    new Promise<number[]>((resolve, reject) => {
      const key = `${windowStart} ${buckets.join(' ')}`;
      const queue = queues.get(key);
      if (queue !== undefined) {
        queue.push({ resolve, reject });
        return;
      }
      queues.set(key, [{ resolve, reject }]);
      // After the requests already read in this turn of the event loop: they join the first count.
      setImmediate(() => void drain(key, buckets, windowStart));
    });
}

export function createRateLimiter(deps: RateLimiterDeps) {
  const database = databaseCounter(deps.db);
  let sweptWindow = 0;

  const count = coalescing(async (buckets, windowStart, requests) => {
    const shared = deps.shared();
    if (shared !== null) {
      try {
        return await shared.increment(buckets, windowStart, WINDOW_MS * 2, requests);
      } catch (error) {
        deps.onSharedFailure?.(error);
      }
    }
    if (sweptWindow !== windowStart) {
      // Once per minute and process: the windows before the last one are of no use any more.
      sweptWindow = windowStart;
      database.sweep(windowStart - WINDOW_MS).catch(() => {});
    }
    return database.increment(buckets, windowStart, WINDOW_MS * 2, requests);
  });

  return {
    /** Counts the request against its organization's and key's limits; `exceeded` says whether to refuse it. */
    async check(subject: RateSubject, now: number): Promise<RateDecision> {
      const orgLimit = subject.limits.organization.requestsPerMinute ?? deps.defaults.requestsPerMinute;
      const keyLimit = subject.limits.apiKey.requestsPerMinute ?? deps.defaults.requestsPerMinute;
      if (orgLimit === null && keyLimit === null) return NOT_LIMITED;
      const windowStart = now - (now % WINDOW_MS);
      const limits: { name: RatePolicyState['name']; bucket: string; quota: number }[] = [];
      if (orgLimit !== null) limits.push({ name: 'organization', bucket: `o:${subject.orgId}`, quota: orgLimit });
      if (keyLimit !== null) limits.push({ name: 'api_key', bucket: `k:${subject.keyId}`, quota: keyLimit });
      const counts = await count(
        limits.map((limit) => limit.bucket),
        windowStart,
      );
      const resetS = Math.max(1, Math.ceil((windowStart + WINDOW_MS - now) / 1000));
      let exceeded: RatePolicyState | null = null;
      const policies = limits.map(({ name, quota }, index) => {
        const hits = counts[index] ?? 0;
        const policy = { name, quota, remaining: Math.max(0, quota - hits), resetS };
        // Over the limit when this request is beyond the quota; the first such policy is the one named.
        if (hits > quota && exceeded === null) exceeded = policy;
        return policy;
      });
      return { policies, exceeded };
    },
  };
}

/** `RateLimit-Policy`: each limit that applies, e.g. `"api_key";q=60;w=60`. */
export function policyHeader(decision: RateDecision): string {
  return decision.policies.map((policy) => `"${policy.name}";q=${policy.quota};w=${WINDOW_MS / 1000}`).join(', ');
}

/** `RateLimit`: what is left of each limit and when it resets, e.g. `"api_key";r=42;t=17`. */
export function stateHeader(decision: RateDecision): string {
  return decision.policies.map((policy) => `"${policy.name}";r=${policy.remaining};t=${policy.resetS}`).join(', ');
}
