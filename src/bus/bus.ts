/**
 * Signals between the API and the engine, never data: wake-ups ("a session has work"), interrupts, live
 * session events (text deltas, and persisted events once committed), and "the outbox has news" for the
 * background senders. In one process it is an in-memory
 * emitter; in cluster mode a Redis implementation of the same interface carries it between processes.
 */
import { EventEmitter } from 'node:events';
import type { LiveSessionEvent } from '../events/session-events.ts';

export interface LiveEvent {
  sessionId: string;
  /** A persisted session event once committed, or a text delta. */
  event: LiveSessionEvent;
}

export interface BusMessages {
  /** A session may have runnable work. */
  wake: { sessionId: string };
  /** Abort the turn in flight of a session. */
  /** The turn to stop: `messageId` when known (a worker already on the next turn ignores it), else the session's. */
  interrupt: { sessionId: string; messageId?: string };
  /** An event for live listeners of a session. */
  live: LiveEvent;
  /**
   * Changes were committed that the background senders may act on (webhook events, legacy task notices, A2A
   * task states, ended tool runs): they look now instead of at their next poll. Names the session whose change it
   * was; each sender looks in the database.
   */
  outbox: { sessionId: string };
}

export type Topic = keyof BusMessages;

export interface Bus {
  publish<T extends Topic>(topic: T, message: BusMessages[T]): void;
  /** Returns the unsubscribe function. */
  subscribe<T extends Topic>(topic: T, handler: (message: BusMessages[T]) => void): () => void;
  /**
   * Resolves once messages of `topic` published anywhere reach this process's subscribers (in cluster mode, once
   * Redis confirmed the subscription; at once in-process, or when nothing here subscribes to it).
   */
  subscribed(topic: Topic): Promise<void>;
  /**
   * Calls `listener(false)` when messages published by other processes stop reaching this one (in cluster mode, the
   * Redis subscription connection was lost), and `listener(true)` once every subscription is confirmed again. The
   * in-process bus cannot lose a message and never calls it. Returns the function that stops the calls.
   */
  watch(listener: (delivering: boolean) => void): () => void;
  close(): Promise<void>;
}

export function createLocalBus(): Bus {
  const emitter = new EventEmitter();
  emitter.setMaxListeners(0);
  return {
    publish(topic, message) {
      emitter.emit(topic, message);
    },
    subscribe(topic, handler) {
      emitter.on(topic, handler);
      return () => emitter.off(topic, handler);
    },
    subscribed: async () => undefined,
    watch: () => () => undefined,
    async close() {
      emitter.removeAllListeners();
    },
  };
}
