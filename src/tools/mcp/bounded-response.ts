/**
 * What an MCP server can make this process hold: every JSON-RPC message it sends is read only up to a bound
 * (AGENTRY_MCP_MAX_RESPONSE_BYTES), whatever follows. The cut happens in the response body the SDK reads, before
 * any parsing, so a 400 MB tool result costs at most the bound:
 * - a body that is one message (JSON) fails past the bound: its reader errors with McpError `too_large`, which fails
 *   the request it answers;
 * - an event stream carries many messages over a long life, so the bound is per event; past it the stream ends,
 *   unread, with a JSON-RPC error event answering the request the POST carried (so that request fails now, not at
 *   its timeout), or, for a stream no request opened, with McpError `too_large` and `onTooLarge`;
 * - the pages of one tool listing share the bound (`listed`, reset when a listing asks for its first page);
 * - a message nested deeper than MAX_JSON_DEPTH arrays and objects is cut the same way: JSON that deep is no
 *   tool result, and everything that later walks it (the SDK's schema checks, JSON.stringify) recurses, which
 *   at millions of levels costs the event loop seconds or the stack. The depth is counted in the same pass over
 *   the bytes that counts them (brackets outside strings), so the check costs no second read.
 */
import { McpError, TOO_LARGE_RPC_CODE } from './errors.ts';

export interface ReadBounds {
  maxBytes: number;
  /** Bytes of the tool listing being read, across its pages. */
  listed: { bytes: number };
}

/** What the POST a response answers asked for, read from its body; null for anything else. */
export interface RpcRequest {
  id: string | number | null;
  method: string;
  /** A page after the first (`params.cursor` set). */
  paged: boolean;
}

export function rpcRequestOf(method: string | undefined, body: unknown): RpcRequest | null {
  if (method !== 'POST' || typeof body !== 'string') return null;
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return null;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return null;
  const id = Reflect.get(parsed, 'id');
  const name = Reflect.get(parsed, 'method');
  const params = Reflect.get(parsed, 'params');
  if (typeof name !== 'string') return null;
  return {
    id: typeof id === 'string' || typeof id === 'number' ? id : null,
    method: name,
    paged: typeof params === 'object' && params !== null && Reflect.get(params, 'cursor') !== undefined,
  };
}

const LF = 10;
const CR = 13;
const QUOTE = 34;
const BACKSLASH = 92;
const OPEN_ARRAY = 91;
const CLOSE_ARRAY = 93;
const OPEN_OBJECT = 123;
const CLOSE_OBJECT = 125;

/** Arrays and objects one message may nest (the JSON-RPC envelope takes three of them). */
export const MAX_JSON_DEPTH = 256;

type Cut = 'bytes' | 'depth';

function tooLarge(cut: Cut, maxBytes: number, list: boolean): McpError {
  const what = list ? 'tool list' : 'answer';
  return new McpError(
    'too_large',
    cut === 'depth'
      ? `the server's ${what} nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels; it was not read further`
      : `the server's ${what} is larger than ${maxBytes} bytes (AGENTRY_MCP_MAX_RESPONSE_BYTES); it was not read further`,
  );
}

/**
 * `response` with its body bounded as the file header says. `request` is what the POST carried (null for a GET
 * stream); `onTooLarge` hears of a cut that no request's answer can report.
 */
export function boundedResponse(
  response: Response,
  request: RpcRequest | null,
  bounds: ReadBounds,
  onTooLarge: (error: McpError) => void,
): Response {
  if (response.body === null) return response;
  const list = request?.method === 'tools/list';
  if (list && request?.paged === false) bounds.listed.bytes = 0;
  const stream = (response.headers.get('content-type') ?? '').toLowerCase().includes('text/event-stream');
  const reader = response.body.getReader();
  const encoder = new TextEncoder();
  let message = 0;
  let lineEmpty = true;
  let afterCR = false;
  let depth = 0;
  let inString = false;
  let escaped = false;
  let cut: Cut = 'bytes';

  /**
   * The index of the byte that passes a bound (`cut` says which), or -1; counts the bytes and the nesting and, in a
   * stream, finds event ends.
   */
  const scan = (chunk: Uint8Array): number => {
    for (let index = 0; index < chunk.length; index++) {
      const byte = chunk[index];
      if (stream) {
        if (byte === LF && afterCR) {
          afterCR = false;
          continue;
        }
        afterCR = byte === CR;
        if (byte === LF || byte === CR) {
          // A blank line ends an event: the next one starts its own count. JSON strings hold no raw line breaks,
          // so none is open at a line's end (a field line that is not JSON cannot leave one open either).
          if (lineEmpty) {
            message = 0;
            depth = 0;
          }
          lineEmpty = true;
          inString = false;
          escaped = false;
        } else lineEmpty = false;
      }
      message++;
      if (list) bounds.listed.bytes++;
      if (message > bounds.maxBytes || (list && bounds.listed.bytes > bounds.maxBytes)) {
        cut = 'bytes';
        return index;
      }
      if (inString) {
        if (escaped) escaped = false;
        else if (byte === BACKSLASH) escaped = true;
        else if (byte === QUOTE) inString = false;
      } else if (byte === QUOTE) inString = true;
      else if (byte === OPEN_ARRAY || byte === OPEN_OBJECT) {
        if (++depth > MAX_JSON_DEPTH) {
          cut = 'depth';
          return index;
        }
      } else if ((byte === CLOSE_ARRAY || byte === CLOSE_OBJECT) && depth > 0) depth--;
    }
    return -1;
  };

  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      let next: Awaited<ReturnType<typeof reader.read>>;
      try {
        next = await reader.read();
      } catch (error) {
        controller.error(error);
        return;
      }
      if (next.done) {
        controller.close();
        return;
      }
      if (scan(next.value) === -1) {
        controller.enqueue(next.value);
        return;
      }
      const error = tooLarge(cut, bounds.maxBytes, list);
      void reader.cancel(error).catch(() => undefined);
      if (stream && request !== null && request.id !== null) {
        // End the event in progress, then answer the request with the error instead.
        const answer = { jsonrpc: '2.0', id: request.id, error: { code: TOO_LARGE_RPC_CODE, message: error.message } };
        controller.enqueue(encoder.encode(`\n\ndata: ${JSON.stringify(answer)}\n\n`));
        controller.close();
        return;
      }
      if (stream) onTooLarge(error);
      controller.error(error);
    },
    cancel(reason) {
      return reader.cancel(reason);
    },
  });
  return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
}
