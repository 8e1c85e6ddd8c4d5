/**
 * Answers in the API's error shape what Node's HTTP parser rejects before Fastify sees a request: a header block
 * over Node's limit (431), a request line or header it cannot parse (400), a client that does not send its
 * headers in time (408). The connection is closed afterwards, as Node itself does.
 */

import type { Duplex } from 'node:stream';
import { type ErrorCode, errorCatalog } from '../errors/catalog.ts';
import { http } from '../lib/node-http.ts';
import { errorBody } from './error-handler.ts';

function describe(error: NodeJS.ErrnoException): { code: ErrorCode; message: string } {
  if (error.code === 'HPE_HEADER_OVERFLOW')
    return { code: 'headers_too_large', message: "The request's headers exceed the server's size limit" };
  if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT')
    return { code: 'request_timeout', message: 'The request was not received in time' };
  return { code: 'malformed_request', message: 'The request is not valid HTTP/1.1' };
}

export function handleClientError(error: NodeJS.ErrnoException, socket: Duplex): void {
  // A reset connection has nobody left to answer.
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  if (socket.writable) {
    const { code, message } = describe(error);
    const status = errorCatalog[code].status;
    const body = JSON.stringify(errorBody(code, message));
    socket.write(
      `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(error);
}
