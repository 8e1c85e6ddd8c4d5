/**
 * Server-Sent Events for every streaming route, written once: the headers, the framing (`event:`, `id:`, `data:`
 * lines and comments), heartbeats, the bound on what a slow client may leave unread, the count of open streams,
 * and the end of a stream when the client leaves or the server shuts down. A route supplies only what it sends.
 *
 * A client that stops reading is disconnected once its unsent bytes pass MAX_BUFFERED_BYTES, so a slow reader can
 * never make the server's memory grow; it may reconnect (with Last-Event-ID where the route replays).
 */
import type { ServerResponse } from 'node:http';
import type { FastifyReply } from 'fastify';
import { Type } from 'typebox';
import type { Metrics, SseSurface } from '../observability/metrics-types.ts';

/** Unsent bytes a client may fall behind by before its stream is closed. */
export const MAX_BUFFERED_BYTES = 1024 * 1024;

/** One frame: an optional event name and id, and its data (JSON-encoded unless it is already text). */
export interface SseFrame {
  event?: string;
  id?: string;
  data: unknown;
}

/** Why a stream ended: the route finished it, the client left, it fell too far behind, the server stopped, or the route failed. */
export type SseEnd = 'done' | 'client' | 'slow' | 'shutdown' | 'error';

export interface SseStream {
  /** Writes one frame; false when the stream is closed (or was just closed for being too slow). */
  send(frame: SseFrame): boolean;
  /** Writes one frame of bare text data (`data: <text>`), such as the closing `[DONE]` of some wires. */
  data(text: string): boolean;
  /** Writes a comment line (`: <text>`), which clients ignore. */
  comment(text: string): boolean;
  /** Aborted as soon as the stream closes for any reason: producers stop on it. */
  readonly signal: AbortSignal;
  readonly closed: boolean;
  /** Settles when the stream closed other than by the route finishing it: for routes whose events are pushed. */
  readonly ended: Promise<SseEnd>;
  /**
   * Sends each value of `source` through `frame` until it ends, `frame` returns false or the stream closes; then
   * returns the iterator, so a producer waiting for its next value is released at once, not at its next value.
   */
  pipe<T>(source: AsyncIterable<T>, frame: (value: T) => boolean): Promise<void>;
}

export interface StreamTracker {
  /** Registers a function that ends a stream, called on shutdown; returns its removal. */
  track(end: () => void): () => void;
}

/** What a stream needs of the server's deps (Deps has it all). */
export interface SseDeps {
  metrics: Pick<Metrics, 'sseStreams'>;
  /** Where open streams are registered so a graceful stop ends them (the stream hub). */
  live: StreamTracker;
  config: { sseHeartbeatMs: number };
}

export interface SseOptions {
  /** The `surface` label of `agentry_sse_streams_active`. */
  surface: SseSurface;
  /** The comment sent every `heartbeatMs` (`: <text>`), or null for a wire that has none. */
  heartbeat: string | null;
}

/** A Last-Event-ID: a persisted event's number, optionally `.n` for the n-th live-only frame after it. */
export const LAST_EVENT_ID_PATTERN = '^\\d{1,9}(\\.\\d{1,15})?$';

/** The `last-event-id` request header of a route that resumes, as its header schema declares it. */
export const lastEventIdHeader = (description: string) =>
  Type.Optional(Type.String({ pattern: LAST_EVENT_ID_PATTERN, description }));

/** The persisted event a client resumes after, from a Last-Event-ID the header schema let through; null without one. */
export function resumeAfter(lastEventId: string | undefined): number | null {
  if (lastEventId === undefined) return null;
  const seq = Number(lastEventId.split('.')[0]);
  return Number.isSafeInteger(seq) ? seq : null;
}

const HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache, no-transform',
  connection: 'keep-alive',
  'x-accel-buffering': 'no',
};

/** `field: value` lines; a value with line breaks becomes several lines of the field, as the format requires. */
function lines(field: string, value: string): string {
  return value
    .split(/\r\n|\r|\n/)
    .map((line) => `${field}: ${line}\n`)
    .join('');
}

/** The text of one frame, blank line included. */
export function sseFrame(frame: SseFrame): string {
  let text = '';
  if (frame.event !== undefined) text += lines('event', frame.event);
  if (frame.id !== undefined) text += lines('id', frame.id);
  // JSON never contains a raw line break, so one data line carries one event.
  return `${text}${lines('data', typeof frame.data === 'string' ? frame.data : JSON.stringify(frame.data))}\n`;
}

/**
 * Answers the request with an event stream and runs `produce` on it; resolves when the stream has ended, with why.
 * The reply is hijacked: call this only once every error that should be an ordinary JSON answer was raised.
 * A producer that throws is logged and its connection cut (a stream that merely stopped would look complete).
 */
export async function streamSse(
  reply: FastifyReply,
  deps: SseDeps,
  options: SseOptions,
  produce: (stream: SseStream) => Promise<void>,
): Promise<SseEnd> {
  reply.hijack();
  const response: ServerResponse = reply.raw;
  response.writeHead(200, { ...HEADERS, 'x-request-id': reply.request.id });
  response.socket?.setNoDelay(true);
  const abort = new AbortController();
  const { promise: ended, resolve: settle } = Promise.withResolvers<SseEnd>();
  let end: SseEnd | null = null;
  let heartbeat: NodeJS.Timeout | undefined;
  deps.metrics.sseStreams(1, options.surface);

  const close = (why: SseEnd) => {
    if (end !== null) return;
    end = why;
    deps.metrics.sseStreams(-1, options.surface);
    clearInterval(heartbeat);
    untrack();
    abort.abort();
    settle(why);
  };
  const onClientClose = () => close('client');
  response.on('close', onClientClose);
  const untrack = deps.live.track(() => {
    if (end !== null) return;
    close('shutdown');
    response.end();
  });

  const write = (text: string): boolean => {
    if (end !== null) return false;
    response.write(text);
    if (response.writableLength > MAX_BUFFERED_BYTES) {
      // The client is not keeping up: drop it rather than buffer without bound.
      close('slow');
      response.destroy();
      return false;
    }
    return true;
  };
  const comment = (text: string) => write(`${lines('', text)}\n`);
  const beat = options.heartbeat;
  if (beat !== null) heartbeat = setInterval(() => comment(beat), deps.config.sseHeartbeatMs);

  const stream: SseStream = {
    send: (frame) => write(sseFrame(frame)),
    data: (text) => write(sseFrame({ data: text })),
    comment,
    signal: abort.signal,
    get closed() {
      return end !== null;
    },
    ended,
    pipe: async (source, frame) => {
      const iterator = source[Symbol.asyncIterator]();
      const stopped = ended.then(() => null);
      try {
        for (;;) {
          const next = await Promise.race([iterator.next(), stopped]);
          if (next === null || next.done === true) return;
          if (!frame(next.value) || end !== null) return;
        }
      } finally {
        // Not awaited: a generator waiting for its next value finishes its own cleanup when that wait ends.
        void Promise.resolve(iterator.return?.(undefined)).catch(() => undefined);
      }
    },
  };

  try {
    await produce(stream);
    if (end === null) {
      close('done');
      response.end();
    }
  } catch (error) {
    if (end === null) {
      reply.request.log.error({ err: error }, `${options.surface} stream failed`);
      close('error');
      response.destroy();
    } else {
      // Most likely the producer's reaction to the stream's end (its signal aborted).
      reply.request.log.debug({ err: error }, `${options.surface} stream failed after it ended`);
    }
  } finally {
    response.off('close', onClientClose);
  }
  return end ?? 'done';
}
