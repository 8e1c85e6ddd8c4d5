/**
 * Fans live session events out to their listeners in this process (SSE streams, Responses waiting for their
 * turn): one bus subscription for the process, held only while someone listens, dispatched to the listeners of
 * each session, so an event costs O(listeners of that session), not O(all listeners). Also remembers every open
 * stream so shutdown can end them.
 */
import type { LiveSessionEvent } from '../domain/session-events.ts';
import type { Bus, LiveEvent } from './bus.ts';

export type LiveListener = (event: LiveSessionEvent) => void;

export interface StreamHub {
  subscribe(sessionId: string, listener: LiveListener): () => void;
  /**
   * Resolves once events published by any process reach the listeners subscribed so far (in cluster mode the
   * process's bus subscription is made with the first listener and confirmed by Redis a moment later).
   */
  ready(): Promise<void>;
  /** Open streams, by session, for tests and metrics. */
  size(): number;
  /** Registers a function that ends a stream; called on shutdown. */
  track(end: () => void): () => void;
  close(): void;
}

export function createStreamHub(bus: Bus): StreamHub {
  const listeners = new Map<string, Set<LiveListener>>();
  const open = new Set<() => void>();
  let count = 0;
  let unsubscribe: (() => void) | null = null;
  const dispatch = (message: LiveEvent) => {
    const set = listeners.get(message.sessionId);
    if (set === undefined) return;
    for (const listener of set) listener(message.event);
  };
  return {
    subscribe(sessionId, listener) {
      // In cluster mode this subscribes the process to every live event, so only while someone listens.
      unsubscribe ??= bus.subscribe('live', dispatch);
      let set = listeners.get(sessionId);
      if (set === undefined) {
        set = new Set();
        listeners.set(sessionId, set);
      }
      set.add(listener);
      count += 1;
      return () => {
        const current = listeners.get(sessionId);
        if (current?.delete(listener) === true) {
          count -= 1;
          if (current.size === 0) listeners.delete(sessionId);
          if (count === 0) {
            unsubscribe?.();
            unsubscribe = null;
          }
        }
      };
    },
    ready: () => bus.subscribed('live'),
    size: () => count,
    track(end) {
      open.add(end);
      return () => open.delete(end);
    },
    close() {
      unsubscribe?.();
      unsubscribe = null;
      for (const end of [...open]) end();
      open.clear();
    },
  };
}
