/**
 * What an MCP server can make this process hold: every JSON-RPC message it sends is read only up to a bound
 * (AGENTRY_MCP_MAX_RESPONSE_BYTES), whatever follows. The cut happens in the response body the SDK reads, before
 * any parsing, so a 400 MB tool result costs at most the bound:
 * - a body that is one message (JSON) fails past the bound: its reader errors with McpError `too_large`, which fails
 *   the request it answers;
 * - an event stream carries many messages over a long life, so the bound is per event; past it the stream ends,
 *   unread, with a JSON-RPC error event answering the request the POST carried (so that request fails now, not at
 *   its timeout), or, for a stream no request opened, with McpError `too_large` and `onTooLarge`;
 * - the pages of one tool listing share the bound (`listed`, reset when a listing asks for its first page).
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

function tooLarge(maxBytes: number, list: boolean): McpError {
  const what = list ? 'tool list' : 'answer';
  return new McpError(
    'too_large',
    `the server's ${what} is larger than ${maxBytes} bytes (AGENTRY_MCP_MAX_RESPONSE_BYTES); it was not read further`,
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

  /** The index of the byte that passes the bound, or -1; counts the bytes and, in a stream, finds event ends. */
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
          // A blank line ends an event: the next one starts its own count.
          if (lineEmpty) message = 0;
          lineEmpty = true;
        } else lineEmpty = false;
      }
      message++;
      if (list) bounds.listed.bytes++;
      if (message > bounds.maxBytes || (list && bounds.listed.bytes > bounds.maxBytes)) return index;
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
      const cut = scan(next.value);
      if (cut === -1) {
        controller.enqueue(next.value);
        return;
      }
      const error = tooLarge(bounds.maxBytes, list);
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
