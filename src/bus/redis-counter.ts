/**
 * Request counters in Redis, shared by every process of the deployment: the rate limiter's windows
 * (domain/limits/rate-limiter.ts) when REDIS_URL is set. One INCRBY and one PEXPIRE per counter, all in one
 * MULTI: one round trip per count (the limiter counts requests arriving together at once).
 * Commands are refused at once while Redis is disconnected, and time out soon: the limiter then counts in the
 * database instead.
 */
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { shut, throttledWarning } from './redis-bus.ts';

const COMMAND_TIMEOUT_MS = 500;

export interface RedisCounter {
  increment(buckets: readonly string[], windowStart: number, ttlMs: number, requests: number): Promise<number[]>;
  close(): Promise<void>;
}

/** `prefix` names the deployment (as the bus's channels do); the keys are `<prefix>rate:<bucket>:<window>`. */
export function createRedisCounter(url: string, prefix: string, logger: Logger): RedisCounter {
  const connection = new Redis(url, {
    connectionName: 'agentry-rate',
    enableOfflineQueue: false,
    commandTimeout: COMMAND_TIMEOUT_MS,
    maxRetriesPerRequest: 0,
  });
  const warning = throttledWarning(
    logger.child({ component: 'redis-counter' }),
    'redis rate counter connection failed; requests are counted in the database meanwhile',
  );
  let closed = false;
  connection.on('error', (error: unknown) => {
    if (!closed) warning.fail(error);
  });
  connection.on('ready', () => warning.recover('redis rate counter connection restored'));
  return {
    async increment(buckets, windowStart, ttlMs, requests) {
      const transaction = connection.multi();
      for (const bucket of buckets) {
        const key = `${prefix}rate:${bucket}:${windowStart}`;
        transaction.incrby(key, requests).pexpire(key, ttlMs);
      }
      const results = await transaction.exec();
      if (results === null) throw new Error('redis transaction was discarded');
      // Each bucket's INCR answer, skipping the PEXPIREs.
      return buckets.map((_bucket, index) => {
        const [failure, hits] = results[index * 2] ?? [new Error('redis answered too little'), null];
        if (failure !== null) throw failure;
        return Number(hits);
      });
    },
    async close() {
      closed = true;
      await shut(connection);
    },
  };
}
