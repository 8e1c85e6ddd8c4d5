/**
 * Fans live session events out to SSE connections in this process: one bus subscription for the process,
 * dispatched to the listeners of each session, so an event costs O(listeners of that session), not O(all
 * streams). Also remembers every open stream so shutdown can end them.
 */
import type { Bus, LiveEvent } from '../bus/bus.ts';

export type LiveListener = (event: Record<string, unknown>) => void;

export interface StreamHub {
  subscribe(sessionId: string, listener: LiveListener): () => void;
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
  const unsubscribe = bus.subscribe('live', (message: LiveEvent) => {
    const set = listeners.get(message.sessionId);
    if (set === undefined) return;
    for (const listener of set) listener(message.event);
  });
  return {
    subscribe(sessionId, listener) {
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
        }
      };
    },
    size: () => count,
    track(end) {
      open.add(end);
      return () => open.delete(end);
    },
    close() {
      unsubscribe();
      for (const end of [...open]) end();
      open.clear();
    },
  };
}
