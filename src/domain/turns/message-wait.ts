/**
 * The long-poll of `GET /v1/sessions/{id}/messages/{messageId}?wait=`: answers once the message is terminal or
 * requires action, or when the wait ends, with the message as the ordinary GET answers it.
 *
 * It waits on the session's live events (the StreamHub that serves session streams: one bus subscription for the
 * process, dispatched per session), so a waiting client costs no database statement per event: the message is read
 * once before waiting, and once more only when an event says it may have settled (a `message.status` of a settled
 * status, or a terminal `message.*` event of this message). Where a publication can be lost (cluster mode: Redis
 * dropped, or a process died between its commit and its publish) it also re-reads every `recheckMs`, as session
 * streams check the database after a bus outage; the in-process bus loses nothing, so there it does not.
 */
import type { StreamHub } from '../../bus/live-hub.ts';
import type { LiveSessionEvent } from '../../events/session-events.ts';
import type { Message } from './message-types.ts';
import { RESPONSE_END_STATUSES } from './message-types.ts';

/** The longest wait a client may ask for, in seconds. */
export const MAX_WAIT_SECONDS = 60;

export interface MessageWaitDeps {
  hub: StreamHub;
  /** The message as the ordinary GET answers it (404 when not the org's). */
  read: () => Promise<Message>;
  /** Re-read this often while waiting (cluster mode), or never (null: every event arrives). */
  recheckMs: number | null;
  /** Ends the wait early (the client went away); the message as last read is returned. */
  signal?: AbortSignal;
}

/** Whether a message is where a waiting client wants it: ended, or waiting for the client. */
export function isSettled(message: Pick<Message, 'status'>): boolean {
  return RESPONSE_END_STATUSES.includes(message.status);
}

const SETTLING_KINDS: ReadonlySet<string> = new Set(['message.completed', 'message.failed', 'message.cancelled']);

/** Whether a live event may mean that `messageId` settled (so it is worth one read). */
function maySettle(event: LiveSessionEvent, messageId: string): boolean {
  if (event.message_id !== messageId) return false;
  if (event.kind === 'message.status') return RESPONSE_END_STATUSES.includes(event.data.status);
  return SETTLING_KINDS.has(event.kind);
}

/** Reads the message, then waits up to `waitMs` for it to settle; returns it as last read. */
export async function waitForMessage(
  deps: MessageWaitDeps,
  sessionId: string,
  messageId: string,
  waitMs: number,
): Promise<Message> {
  if (waitMs <= 0) return deps.read();
  const deadline = performance.now() + waitMs;
  const aborted = () => deps.signal?.aborted === true;
  // Set by an event, and cleared before each read: an event that lands while a read is under way reads again.
  let signalled = false;
  let wake: (() => void) | null = null;
  const nudge = () => {
    signalled = true;
    wake?.();
  };
  // Subscribed before the first read, so an event committed after that read is not missed.
  const unsubscribe = deps.hub.subscribe(sessionId, (event) => {
    if (maySettle(event, messageId)) nudge();
  });
  deps.signal?.addEventListener('abort', nudge);
  try {
    /** The wait is over: the read after it is the last. */
    let over = false;
    for (;;) {
      signalled = false;
      const message = await deps.read();
      if (isSettled(message) || over || aborted()) return message;
      if (signalled) continue;
      const left = deadline - performance.now();
      if (left <= 0) return message;
      const pause = deps.recheckMs === null ? left : Math.min(left, deps.recheckMs);
      const timedOut = await new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => resolve(true), pause);
        wake = () => {
          clearTimeout(timer);
          resolve(false);
        };
      });
      wake = null;
      if (aborted()) return message;
      over = timedOut && pause >= left;
    }
  } finally {
    deps.signal?.removeEventListener('abort', nudge);
    unsubscribe();
  }
}
