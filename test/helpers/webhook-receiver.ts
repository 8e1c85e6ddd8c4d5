/**
 * A real local webhook receiver (node:http) for the webhook suites: records every request with its raw body and
 * answers with whatever the test says, and verifies deliveries with the `standardwebhooks` package.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { WAIT_MS } from './deadlines.ts';

export interface Received {
  at: number;
  path: string;
  headers: Record<string, string>;
  body: string;
}

export interface Answer {
  status: number;
  delayMs?: number;
  /** Answers only once this settles: a receiver that holds the request until the test lets it go. */
  until?: Promise<unknown>;
  headers?: Record<string, string>;
}

export interface Receiver {
  url: string;
  received: Received[];
  /** Decides each answer; the default is 200. */
  answer: (request: Received, index: number) => Answer | number;
  /**
   * Resolves when `predicate` holds for the requests received so far; rejects, naming `what`, after `timeoutMs`
   * (WAIT_MS unless given: a deadline for a condition, generous so that a loaded machine is slow, not failing).
   */
  waitFor(predicate: (received: Received[]) => boolean, what?: string, timeoutMs?: number): Promise<Received[]>;
  close(): Promise<void>;
}

export async function startReceiver(port = 0): Promise<Receiver> {
  const received: Received[] = [];
  const waiters = new Set<() => void>();
  const receiver: Receiver = {
    url: '',
    received,
    answer: () => 200,
    waitFor(predicate, what = 'webhook requests', timeoutMs = WAIT_MS) {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (!predicate(received)) return;
          clearTimeout(timer);
          waiters.delete(check);
          resolve(received);
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}; received ${received.length}`));
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const headers: Record<string, string> = {};
      for (const [name, value] of Object.entries(request.headers)) {
        if (typeof value === 'string') headers[name] = value;
      }
      const entry: Received = {
        at: Date.now(),
        path: request.url ?? '/',
        headers,
        body: Buffer.concat(chunks).toString('utf8'),
      };
      const index = received.length;
      received.push(entry);
      const raw = receiver.answer(entry, index);
      const answer = typeof raw === 'number' ? { status: raw } : raw;
      const send = () => {
        if (response.destroyed) return;
        response.writeHead(answer.status, { 'content-type': 'text/plain', ...answer.headers });
        response.end('ok');
      };
      if (answer.until !== undefined) void answer.until.finally(send);
      else if (answer.delayMs !== undefined) setTimeout(send, answer.delayMs).unref();
      else send();
      for (const waiter of [...waiters]) waiter();
    });
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', () => resolve()));
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return receiver;
}

/** Verifies one request with the standardwebhooks package; returns the parsed envelope (throws when invalid). */
export function verified(secret: string, request: Received): Record<string, any> {
  return new Webhook(secret).verify(request.body, request.headers) as Record<string, any>;
}
