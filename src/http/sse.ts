/**
 * Server-Sent Events framing and a bounded writer. A client that stops reading is disconnected once its unsent
 * bytes pass the limit, so a slow reader can never make the server's memory grow.
 */
import type { ServerResponse } from 'node:http';

/** Unsent bytes a client may fall behind by before its stream is closed. */
export const MAX_BUFFERED_BYTES = 1024 * 1024;

export interface SseWriter {
  /** Writes one frame; false when the connection is closed (or was just closed for being too slow). */
  send(id: string, data: unknown): boolean;
  /** Writes one frame of a named event (`event: <name>`), without an id. */
  named(event: string, data: unknown): boolean;
  comment(text: string): boolean;
  /** Writes one bare data line (`data: <text>`), such as the Responses stream's closing `[DONE]`. */
  data(text: string): boolean;
  end(): void;
  readonly closed: boolean;
}

/** Answers a hijacked request with an event stream's headers; frames are written as soon as they are sent. */
export function openSse(response: ServerResponse, requestId: string): void {
  response.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache, no-transform',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
    'x-request-id': requestId,
  });
  response.socket?.setNoDelay(true);
}

export function sseFrame(id: string, data: unknown): string {
  // JSON never contains a raw newline, so one data line carries one event.
  return `id: ${id}\ndata: ${JSON.stringify(data)}\n\n`;
}

export function createSseWriter(response: ServerResponse, maxBufferedBytes: number, onClose: () => void): SseWriter {
  let closed = false;
  const close = () => {
    if (closed) return;
    closed = true;
    onClose();
  };
  response.on('close', close);
  const write = (text: string): boolean => {
    if (closed) return false;
    response.write(text);
    if (response.writableLength > maxBufferedBytes) {
      // The client is not keeping up: drop it rather than buffer without bound. It can reconnect with
      // Last-Event-ID and lose nothing that is still retained.
      response.destroy();
      close();
      return false;
    }
    return true;
  };
  return {
    send: (id, data) => write(sseFrame(id, data)),
    named: (event, data) => write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`),
    comment: (text) => write(`: ${text}\n\n`),
    data: (text) => write(`data: ${text}\n\n`),
    end: () => {
      if (!closed) response.end();
      close();
    },
    get closed() {
      return closed;
    },
  };
}
