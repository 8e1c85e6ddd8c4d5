/**
 * Fans live session events out to their listeners in this process (SSE streams, Responses waiting for their
 * turn): one bus subscription for the process, held only while someone listens, dispatched to the listeners of
 * each session, so an event costs O(listeners of that session), not O(all listeners). Also remembers every open
 * stream so shutdown can end them.
 *
 * A stream follows its session through a feed, which never skips a persisted event: events carry their
 * position in the session (`seq`, 1, 2, 3, … with no gap), so a feed that receives one further on than the next it
 * expects reads the missing ones from the database and delivers them in order, each once, before anything newer.
 * One query for every followed session finds the feeds that are behind when nothing arrives to show it: every
 * `catchUpMs` while the bus is not delivering (a Redis outage), once when it delivers again, and in cluster mode
 * every `catchUpMs` anyway (a publication can be lost elsewhere: its process lost Redis on its own, or died between
 * the commit and the publish). The in-process bus loses nothing: there feeds read only to fill a full queue.
 */
import type { Logger } from 'pino';
import type { LiveSessionEvent, SessionEvent } from '../events/session-events.ts';
import type { Bus, LiveEvent } from './bus.ts';

export type LiveListener = (event: LiveSessionEvent) => void;

/** Live events a feed holds while it waits for its start or for the database; past this it reads them back. */
const MAX_PENDING_EVENTS = 10_000;
/** Events read per query when a feed catches up. */
const PAGE = 500;
/** Sessions checked per query. */
const CHECK_BATCH = 500;

export interface FeedListener {
  /** The session's next event: persisted ones in `seq` order, each once; `stored` when read back from the database. */
  event(event: LiveSessionEvent, stored: boolean): void;
  /** Live-only events (text deltas, progress) may have been missed from here on. */
  missed?(): void;
}

export interface SessionFeed {
  /**
   * Starts delivery after the persisted event `afterSeq`: the events received since the feed was opened that are
   * newer, then live ones, with any persisted event missing in between read from the database first. With
   * `readStored`, the persisted events after `afterSeq` are read from the database at once (a replay of the past).
   */
  start(afterSeq: number, listener: FeedListener, options?: { readStored?: boolean }): void;
  close(): void;
}

/** Where feeds read the persisted events they missed. */
export interface StoredEvents {
  /** Persisted events of a session after `afterSeq`, oldest first, at most `limit`. */
  after(sessionId: string, afterSeq: number, limit: number): Promise<SessionEvent[]>;
  /** The newest persisted seq of each of these sessions that has events. */
  newest(sessionIds: readonly string[]): Promise<Map<string, number>>;
}

export interface StreamHubOptions {
  store: StoredEvents;
  logger: Logger;
  /** How often feeds check the database for events that did not arrive live. */
  catchUpMs: number;
  /** Check even while the bus delivers (cluster mode); otherwise only while it does not. */
  checkAlways: boolean;
}

export interface StreamHub {
  /** Live events of a session as they come, without catch-up (for callers that poll besides). */
  subscribe(sessionId: string, listener: LiveListener): () => void;
  /** Opens a feed of the session's events; it holds what arrives until it is started. */
  follow(sessionId: string): SessionFeed;
  /** Listeners and feeds, for tests and metrics. */
  size(): number;
  /** Registers a function that ends a stream; called on shutdown. */
  track(end: () => void): () => void;
  close(): void;
}

interface Feed extends SessionFeed {
  readonly sessionId: string;
  /** The last persisted seq delivered; null until started. */
  cursor(): number | null;
  receive(event: LiveSessionEvent): void;
  catchUp(): void;
  missed(): void;
}

/** Logs a failing database read once per streak, and its recovery. */
function readWarning(logger: Logger) {
  let failing = false;
  return {
    fail(error: unknown) {
      if (!failing) logger.warn({ err: error }, 'stream catch-up read failed; retrying');
      failing = true;
    },
    ok() {
      if (failing) logger.info('stream catch-up reads working again');
      failing = false;
    },
  };
}

export function createStreamHub(bus: Bus, options: StreamHubOptions): StreamHub {
  const { store } = options;
  const logger = options.logger.child({ component: 'stream-hub' });
  const warning = readWarning(logger);
  const listeners = new Map<string, Set<LiveListener>>();
  const feeds = new Map<string, Set<Feed>>();
  const open = new Set<() => void>();
  let count = 0;
  let unsubscribe: (() => void) | null = null;
  /** Whether live events published anywhere reach this process: subscribed, confirmed, and not lost since. */
  let confirmed = false;
  let delivering = true;
  let timer: NodeJS.Timeout | null = null;
  let checking = false;
  let recheck = false;
  let closed = false;

  const synced = () => confirmed && delivering;

  const dispatch = (message: LiveEvent) => {
    for (const listener of listeners.get(message.sessionId) ?? []) listener(message.event);
    for (const feed of feeds.get(message.sessionId) ?? []) feed.receive(message.event);
  };

  /** One query for every followed session; the feeds that are behind catch up. */
  const check = async (): Promise<void> => {
    if (closed) return;
    if (checking) {
      // The check under way may have read before what this one is for was committed.
      recheck = true;
      return;
    }
    checking = true;
    recheck = false;
    try {
      const all = [...feeds.values()].flatMap((set) => [...set]);
      const sessions = [...new Set(all.filter((feed) => feed.cursor() !== null).map((feed) => feed.sessionId))];
      const newest = new Map<string, number>();
      for (let i = 0; i < sessions.length; i += CHECK_BATCH) {
        for (const [id, seq] of await store.newest(sessions.slice(i, i + CHECK_BATCH))) newest.set(id, seq);
      }
      warning.ok();
      for (const feed of all) {
        const cursor = feed.cursor();
        if (cursor !== null && (newest.get(feed.sessionId) ?? 0) > cursor) feed.catchUp();
      }
    } catch (error) {
      warning.fail(error);
    } finally {
      checking = false;
    }
    if (recheck) await check();
  };

  const tick = () => {
    if (options.checkAlways || !synced()) void check();
  };

  const connect = () => {
    if (unsubscribe !== null) return;
    // In cluster mode this subscribes the process to every live event, so only while someone listens.
    unsubscribe = bus.subscribe('live', dispatch);
    confirmed = false;
    const current = unsubscribe;
    void bus.subscribed('live').then(() => {
      if (unsubscribe !== current) return;
      confirmed = true;
      // Whatever was published before the subscription took effect is in the database.
      if (synced()) void check();
    });
    timer = setInterval(tick, options.catchUpMs);
    timer.unref();
  };

  const disconnect = () => {
    if (count > 0 || unsubscribe === null) return;
    unsubscribe();
    unsubscribe = null;
    if (timer !== null) clearInterval(timer);
    timer = null;
  };

  const stopWatching = bus.watch((state) => {
    delivering = state;
    if (!state) {
      for (const set of feeds.values()) for (const feed of set) feed.missed();
    } else if (synced()) {
      void check();
    }
  });

  const createFeed = (sessionId: string, leave: () => void): Feed => {
    let listener: FeedListener | null = null;
    let cursor: number | null = null;
    let queue: LiveSessionEvent[] = [];
    /** Events were dropped from a full queue: read them back before going on. */
    let overflowed = false;
    let filling = false;
    let again = false;
    let ended = false;
    let retry: NodeJS.Timeout | null = null;

    const hold = (event: LiveSessionEvent) => {
      if (queue.length < MAX_PENDING_EVENTS) {
        queue.push(event);
        return;
      }
      queue = [];
      overflowed = true;
    };

    /** Delivers held events in order until one shows a gap, which starts a read from the database. */
    const drain = () => {
      if (overflowed) {
        overflowed = false;
        queue = [];
        listener?.missed?.();
        fill();
        return;
      }
      const pending = queue;
      queue = [];
      for (const [index, event] of pending.entries()) {
        if (!deliver(event)) {
          queue = [...pending.slice(index), ...queue];
          fill();
          return;
        }
      }
    };

    /** False when the event is further on than the next expected one (the gap is read first). */
    const deliver = (event: LiveSessionEvent): boolean => {
      if (listener === null || cursor === null) return true;
      if (!('seq' in event)) {
        listener.event(event, false);
        return true;
      }
      if (event.seq <= cursor) return true;
      if (event.seq > cursor + 1) return false;
      cursor = event.seq;
      listener.event(event, false);
      return true;
    };

    const read = async () => {
      let told = false;
      do {
        again = false;
        for (;;) {
          if (ended || cursor === null) return;
          const events = await store.after(sessionId, cursor, PAGE);
          for (const event of events) {
            if (ended || listener === null || event.seq <= cursor) continue;
            if (!told) listener.missed?.();
            told = true;
            cursor = event.seq;
            listener.event(event, true);
          }
          if (events.length < PAGE) break;
        }
      } while (again);
    };

    const fill = () => {
      if (cursor === null || ended) return;
      if (filling) {
        again = true;
        return;
      }
      filling = true;
      read().then(
        () => {
          warning.ok();
          filling = false;
          drain();
        },
        (error: unknown) => {
          warning.fail(error);
          filling = false;
          // Held events wait for the next attempt (or the next check, whichever comes first).
          retry ??= setTimeout(() => {
            retry = null;
            fill();
          }, options.catchUpMs);
          retry.unref();
        },
      );
    };

    const feed: Feed = {
      sessionId,
      cursor: () => cursor,
      receive(event) {
        if (ended) return;
        if (cursor === null || filling || queue.length > 0) hold(event);
        else if (!deliver(event)) {
          hold(event);
          fill();
        }
      },
      catchUp: () => fill(),
      missed: () => {
        if (cursor !== null && !ended) listener?.missed?.();
      },
      start(afterSeq, target, startOptions) {
        if (ended || cursor !== null) return;
        listener = target;
        cursor = afterSeq;
        drain();
        if (startOptions?.readStored === true) fill();
      },
      close() {
        if (ended) return;
        ended = true;
        queue = [];
        if (retry !== null) clearTimeout(retry);
        leave();
      },
    };
    return feed;
  };

  /** Adds a listener or feed of a session; returns the function that removes it. */
  const join = <T>(members: Map<string, Set<T>>, sessionId: string, member: T) => {
    connect();
    let set = members.get(sessionId);
    if (set === undefined) {
      set = new Set();
      members.set(sessionId, set);
    }
    set.add(member);
    count += 1;
    return () => {
      const current = members.get(sessionId);
      if (current?.delete(member) !== true) return;
      count -= 1;
      if (current.size === 0) members.delete(sessionId);
      disconnect();
    };
  };

  return {
    subscribe: (sessionId, listener) => join(listeners, sessionId, listener),
    follow(sessionId) {
      let leave: () => void = () => undefined;
      const feed = createFeed(sessionId, () => leave());
      leave = join(feeds, sessionId, feed);
      return feed;
    },
    size: () => count,
    track(end) {
      open.add(end);
      return () => open.delete(end);
    },
    close() {
      closed = true;
      stopWatching();
      for (const set of [...feeds.values()]) for (const feed of [...set]) feed.close();
      listeners.clear();
      count = 0;
      disconnect();
      for (const end of [...open]) end();
      open.clear();
    },
  };
}
