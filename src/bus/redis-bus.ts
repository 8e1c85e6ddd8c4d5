/**
 * The Bus over Redis pub/sub, for cluster mode: wake-ups, interrupts and live events reach every process of
 * the deployment. Redis carries signals only, never data; Postgres stays the source of truth.
 *
 * - Two connections: one publishes, one subscribes (a subscribed Redis connection can do nothing else).
 * - One channel per topic, `<prefix><topic>`; the prefix names the deployment (by default `agentry:` plus the
 *   Postgres database and schema), so two deployments sharing one Redis never see each other's messages.
 * - Messages are JSON envelopes `{"o": <origin>, "m": <message>}`. A publish runs this process's handlers at
 *   once (as the in-process bus does, and even while Redis is down); Redis then delivers the same message back
 *   to our own subscriber connection, and that echo is recognised by its origin and dropped, so every handler
 *   runs exactly once per published message, in every process.
 * - Publishing is best effort. While Redis is unreachable, messages for other processes are dropped (with a
 *   rate-limited warning) and ioredis keeps reconnecting, resubscribing when it is back. Nothing is lost:
 *   workers also poll the database every AGENTRY_POLL_MS for claimable sessions (a missed wake-up costs at most
 *   one poll interval), a worker's heartbeat reads `cancel_requested` from the database (a missed interrupt
 *   costs at most a third of AGENTRY_LEASE_MS), and every persisted event can be replayed from the database by
 *   the session stream (only transient text deltas are missed).
 * - Watchers learn when the subscriber connection is lost and when, reconnected, its subscriptions are confirmed
 *   again, so that open streams read what they missed from the database instead of skipping it.
 * - Connection errors are logged, never thrown: the process keeps serving on the polling fallback.
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Bus, BusMessages, Topic } from './bus.ts';
import { busMessageParser } from './bus-messages.ts';

export const DEFAULT_CHANNEL_PREFIX = 'agentry:';

/** How long startup waits for Redis before going on without it (the polling fallback covers the gap). */
const CONNECT_WAIT_MS = 5000;
/** At most one warning per this interval while Redis is unreachable. */
const WARN_INTERVAL_MS = 10_000;
const TOPICS: readonly Topic[] = ['wake', 'interrupt', 'live', 'outbox'];

export interface RedisBusOptions {
  /** Channel name prefix, ending in a separator: `agentry:test:public:`. */
  channelPrefix?: string;
  /** How long createRedisBus waits for the first connection; default 5 s. */
  connectWaitMs?: number;
}

/**
 * The channel prefix of one deployment: `agentry:` + database + `:` + schema + `:`. Processes of one
 * deployment share it whatever host name they reach Postgres by.
 */
export function deploymentChannelPrefix(base: string, database: string, schema: string): string {
  return `${base}${database}:${schema}:`;
}

export function channelOf(prefix: string, topic: Topic): string {
  return `${prefix}${topic}`;
}

/** The handlers of each topic, each typed by its topic's message. */
type Handlers = { [T in Topic]: Set<(message: BusMessages[T]) => void> };

interface Envelope {
  o: string;
  m: unknown;
}

/** Parses the envelope of a message from Redis; null if it is not one. Its message is checked by its topic. */
function parseEnvelope(raw: string): Envelope | null {
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    return null;
  }
  if (typeof parsed !== 'object' || parsed === null || !('o' in parsed) || !('m' in parsed)) return null;
  return typeof parsed.o === 'string' ? { o: parsed.o, m: parsed.m } : null;
}

/** Logs a recurring problem once, then at most every WARN_INTERVAL_MS with a count, and its recovery. */
export function throttledWarning(logger: Logger, what: string) {
  let failing = false;
  let lastAt = 0;
  let suppressed = 0;
  return {
    fail(error: unknown, fields: Record<string, unknown> = {}) {
      const now = Date.now();
      if (!failing || now - lastAt >= WARN_INTERVAL_MS) {
        logger.warn({ err: error, ...fields, ...(suppressed > 0 ? { suppressed } : {}) }, what);
        lastAt = now;
        suppressed = 0;
      } else {
        suppressed += 1;
      }
      failing = true;
    },
    recover(message: string) {
      if (!failing) return;
      failing = false;
      suppressed = 0;
      logger.info(message);
    },
  };
}

async function settle(connection: Redis, waitMs: number): Promise<boolean> {
  if (connection.status === 'ready') return true;
  return new Promise<boolean>((resolve) => {
    const done = (ready: boolean) => {
      clearTimeout(timer);
      connection.off('ready', onReady);
      resolve(ready);
    };
    const onReady = () => done(true);
    const timer = setTimeout(() => done(false), waitMs);
    connection.on('ready', onReady);
  });
}

export async function shut(connection: Redis): Promise<void> {
  if (connection.status === 'end') return;
  if (connection.status === 'ready') {
    const quit = connection.quit().then(
      () => true,
      () => false,
    );
    const timeout = new Promise<false>((resolve) => setTimeout(() => resolve(false), 1000).unref());
    if (await Promise.race([quit, timeout])) return;
  }
  connection.disconnect();
}

export async function createRedisBus(url: string, logger: Logger, options: RedisBusOptions = {}): Promise<Bus> {
  const prefix = options.channelPrefix ?? DEFAULT_CHANNEL_PREFIX;
  const origin = randomBytes(8).toString('hex');
  const log = logger.child({ component: 'redis-bus' });
  const handlers: Handlers = { wake: new Set(), interrupt: new Set(), live: new Set(), outbox: new Set() };
  const subscribedTopics = () => TOPICS.filter((topic) => handlers[topic].size > 0);
  const parseMessage = busMessageParser();
  /** Per subscribed topic: settles once Redis confirmed the subscription (or refused it, which is logged). */
  const confirmed = new Map<Topic, Promise<void>>();
  const topicOf = new Map<string, Topic>(TOPICS.map((topic) => [channelOf(prefix, topic), topic]));
  let closed = false;

  // Both reconnect forever with ioredis's default backoff (50 ms more per attempt, at most 2 s). The publisher
  // refuses commands while disconnected instead of queueing them: a backlog of stale text deltas and wake-ups
  // replayed after an outage helps nobody. The subscriber queues its SUBSCRIBE commands until it is connected and
  // resubscribes after every reconnect.
  const publisher = new Redis(url, { connectionName: 'agentry-pub', enableOfflineQueue: false });
  const subscriber = new Redis(url, {
    connectionName: 'agentry-sub',
    maxRetriesPerRequest: null,
    autoResubscribe: true,
  });

  for (const [name, connection] of [
    ['publisher', publisher],
    ['subscriber', subscriber],
  ] as const) {
    const warning = throttledWarning(log, `redis ${name} connection failed; reconnecting (database polling covers)`);
    connection.on('error', (error: unknown) => {
      if (!closed) warning.fail(error);
    });
    connection.on('ready', () => warning.recover(`redis ${name} connection restored`));
  }
  const publishWarning = throttledWarning(log, 'redis publish failed; other processes rely on database polling');

  function dispatch<T extends Topic>(topic: T, message: BusMessages[T]): void {
    const set: Handlers[T] = handlers[topic];
    for (const handler of [...set]) {
      try {
        handler(message);
      } catch (error) {
        log.error({ err: error, topic }, 'bus handler failed');
      }
    }
  }

  // Delivery from other processes stops with the subscriber connection, and resumes once Redis has confirmed the
  // subscriptions again: ioredis resubscribes before it emits 'ready' (the event is emitted on the next tick), so
  // a SUBSCRIBE of our own sent then is answered after its. `losses` tells a confirmation from before a later loss.
  const watchers = new Set<(delivering: boolean) => void>();
  let delivering = true;
  let losses = 0;
  const tell = (state: boolean) => {
    if (delivering === state) return;
    delivering = state;
    for (const watcher of [...watchers]) {
      try {
        watcher(state);
      } catch (error) {
        log.error({ err: error }, 'bus watcher failed');
      }
    }
  };
  subscriber.on('close', () => {
    if (closed) return;
    losses += 1;
    tell(false);
  });
  subscriber.on('ready', () => {
    if (closed || delivering) return;
    const loss = losses;
    const channels = subscribedTopics().map((topic) => channelOf(prefix, topic));
    const resubscribed = channels.length === 0 ? Promise.resolve() : subscriber.subscribe(...channels);
    resubscribed.then(
      () => {
        if (!closed && loss === losses) tell(true);
      },
      (error: unknown) => {
        if (!closed) log.warn({ err: error }, 'redis resubscribe failed');
      },
    );
  });

  /** A message from Redis: handed to the topic's handlers once it is known to be a message of the topic. */
  function receive<T extends Topic>(topic: T, channel: string, raw: string): void {
    const envelope = parseEnvelope(raw);
    // Our own publish, already handled locally when it was published.
    if (envelope?.o === origin) return;
    const message = envelope === null ? null : parseMessage(topic, envelope.m);
    if (message === null) {
      log.warn({ channel }, 'ignored a malformed bus message');
      return;
    }
    dispatch(topic, message);
  }

  subscriber.on('message', (channel: string, raw: string) => {
    const topic = topicOf.get(channel);
    if (topic !== undefined) receive(topic, channel, raw);
  });

  const [publisherReady, subscriberReady] = await Promise.all([
    settle(publisher, options.connectWaitMs ?? CONNECT_WAIT_MS),
    settle(subscriber, options.connectWaitMs ?? CONNECT_WAIT_MS),
  ]);
  if (!publisherReady || !subscriberReady) {
    log.warn({ channelPrefix: prefix }, 'redis is not reachable yet; starting anyway, on database polling until it is');
  } else {
    log.info({ channelPrefix: prefix }, 'redis bus connected');
  }

  return {
    publish<T extends Topic>(topic: T, message: BusMessages[T]): void {
      dispatch(topic, message);
      if (closed) return;
      let payload: string;
      try {
        payload = JSON.stringify({ o: origin, m: message });
      } catch (error) {
        log.error({ err: error, topic }, 'bus message is not JSON-serializable; not sent to other processes');
        return;
      }
      publisher.publish(channelOf(prefix, topic), payload).then(
        () => publishWarning.recover('redis publish working again'),
        (error: unknown) => publishWarning.fail(error, { topic }),
      );
    },

    subscribe<T extends Topic>(topic: T, handler: (message: BusMessages[T]) => void): () => void {
      const set: Handlers[T] = handlers[topic];
      if (set.size === 0) {
        // Only topics someone here listens to are subscribed: an API process never receives wake-ups.
        if (!closed) {
          confirmed.set(
            topic,
            subscriber.subscribe(channelOf(prefix, topic)).then(
              () => undefined,
              (error: unknown) => {
                if (!closed) log.warn({ err: error, topic }, 'redis subscribe failed');
              },
            ),
          );
        }
      }
      // A wrapper per subscription: subscribing the same function twice gives two deliveries, as it would with
      // the in-process bus.
      const entry = (message: BusMessages[T]) => handler(message);
      set.add(entry);
      return () => {
        if (!set.delete(entry) || set.size > 0) return;
        confirmed.delete(topic);
        if (!closed) {
          subscriber.unsubscribe(channelOf(prefix, topic)).catch((error: unknown) => {
            if (!closed) log.warn({ err: error, topic }, 'redis unsubscribe failed');
          });
        }
      };
    },

    subscribed: (topic) => confirmed.get(topic) ?? Promise.resolve(),

    watch(listener) {
      watchers.add(listener);
      return () => watchers.delete(listener);
    },

    async close() {
      if (closed) return;
      closed = true;
      for (const topic of TOPICS) handlers[topic].clear();
      watchers.clear();
      await Promise.all([shut(publisher), shut(subscriber)]);
    },
  };
}
