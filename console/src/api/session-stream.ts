/**
 * Reads GET /v1/sessions/{id}/stream. EventSource cannot send an Authorization header (and the key must never go
 * in a URL), so this is fetch + a small text/event-stream parser. It reconnects by itself with the last frame id
 * (Last-Event-ID) and tells the caller, so the caller can reconcile from the Message GETs: deltas are live only.
 */
import { readKey } from '../auth/key-store.ts';
import type { components } from './schema';

/** One event of the stream, typed by the server's `SessionEvent` schema: `kind` types `data`. */
export type SessionEvent = components['schemas']['SessionEvent'];

const KINDS = [
  'session.status',
  'message.created',
  'message.status',
  'message.delta',
  'message.event',
  'message.completed',
  'message.failed',
  'message.cancelled',
] as const satisfies readonly SessionEvent['kind'][];
// Every kind of the schema is listed: a kind the server adds fails the console's typecheck until it is.
const everyKind: Exclude<SessionEvent['kind'], (typeof KINDS)[number]> extends never ? true : never = true;
void everyKind;

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * Whether a frame has the envelope of a session event: a known kind, an object of data and its ids. Its data is the
 * server's, which writes it from the same schema the type is generated from.
 */
function isSessionEvent(value: unknown): value is SessionEvent {
  return (
    isRecord(value) &&
    KINDS.some((kind) => kind === value.kind) &&
    isRecord(value.data) &&
    typeof value.id === 'string' &&
    typeof value.session_id === 'string'
  );
}

export interface StreamHandlers {
  onEvent(event: SessionEvent): void;
  /** The stream is open: at the start, and again after every reconnect. */
  onOpen(reconnected: boolean): void;
  /** The stream dropped; it will reconnect after `retryMs`. */
  onDrop(retryMs: number): void;
}

function parseEvent(data: string): SessionEvent | null {
  try {
    const value: unknown = JSON.parse(data);
    return isSessionEvent(value) ? value : null;
  } catch {
    return null;
  }
}

/** Splits a growing text/event-stream buffer into complete frames; returns what is left over. */
export function takeFrames(buffer: string, frame: (id: string, data: string) => void): string {
  let rest = buffer.replace(/\r\n?/g, '\n');
  for (let end = rest.indexOf('\n\n'); end !== -1; end = rest.indexOf('\n\n')) {
    const block = rest.slice(0, end);
    rest = rest.slice(end + 2);
    let id = '';
    const data: string[] = [];
    for (const line of block.split('\n')) {
      if (line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const name = colon === -1 ? line : line.slice(0, colon);
      const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
      if (name === 'id') id = value;
      else if (name === 'data') data.push(value);
    }
    if (data.length > 0) frame(id, data.join('\n'));
  }
  return rest;
}

/** Follows a session's events until `signal` aborts. */
export async function followSession(sessionId: string, handlers: StreamHandlers, signal: AbortSignal): Promise<void> {
  let lastId: string | null = null;
  let attempt = 0;
  while (!signal.aborted) {
    const headers: Record<string, string> = { accept: 'text/event-stream' };
    const key = readKey();
    if (key === null) return;
    headers.authorization = `Bearer ${key}`;
    if (lastId !== null) headers['last-event-id'] = lastId;
    try {
      const response = await fetch(`/v1/sessions/${encodeURIComponent(sessionId)}/stream`, { headers, signal });
      if (response.status === 401 || response.status === 403 || response.status === 404) return;
      if (!response.ok || response.body === null) throw new Error(`stream answered ${response.status}`);
      handlers.onOpen(attempt > 0 || lastId !== null);
      attempt = 0;
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer = takeFrames(buffer + value, (id, data) => {
          const event = parseEvent(data);
          // Deltas (ids like 7.1) are not resumable points; persisted events are.
          if (id !== '' && !id.includes('.')) lastId = id;
          if (event !== null) handlers.onEvent(event);
        });
      }
    } catch (error) {
      if (signal.aborted) return;
      if (error instanceof DOMException && error.name === 'AbortError') return;
    }
    if (signal.aborted) return;
    attempt += 1;
    const retryMs = Math.min(250 * 2 ** Math.min(attempt - 1, 5), 5000);
    handlers.onDrop(retryMs);
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, retryMs);
      signal.addEventListener('abort', () => {
        clearTimeout(timer);
        resolve();
      });
    });
  }
}
