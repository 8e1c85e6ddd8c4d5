import { readFileSync } from 'node:fs';
import { STATUS_CODES } from 'node:http';
import { connect } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { errorCatalog } from '../src/errors/catalog.ts';
import { createHarness, type Harness, json } from './helpers/harness.ts';

describe('error catalog', () => {
  it('docs/errors.md lists exactly the catalog codes with their statuses', () => {
    const doc = readFileSync(join(import.meta.dirname, '..', 'docs', 'errors.md'), 'utf8');
    const rows = [...doc.matchAll(/^\|\s*`([a-z_]+)`\s*\|\s*(\d{3})\s*\|/gm)].map((match) => [
      match[1],
      Number(match[2]),
    ]);
    const documented = Object.fromEntries(rows);
    const catalog = Object.fromEntries(Object.entries(errorCatalog).map(([code, entry]) => [code, entry.status]));
    expect(documented).toEqual(catalog);
    expect(rows.length).toBe(Object.keys(errorCatalog).length);
  });
});

describe('malformed requests get a JSON error naming the problem, never a 500', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await createHarness('sqlite', { AGENTRY_BODY_LIMIT_BYTES: '4096' });
  });
  afterAll(() => h.close());

  const cases: [string, () => ReturnType<Harness['request']>, number, string, string | null][] = [
    [
      'malformed JSON',
      () => h.request('POST', '/v1/agents', { rawBody: '{"name":', headers: { 'content-type': 'application/json' } }),
      400,
      'invalid_json',
      'body',
    ],
    [
      'empty JSON body where one is required',
      () => h.request('POST', '/v1/agents', { rawBody: '', headers: { 'content-type': 'application/json' } }),
      400,
      'validation_error',
      'name',
    ],
    [
      'wrong content type',
      () =>
        h.request('POST', '/v1/agents', {
          rawBody: 'name=x',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
        }),
      400,
      'unsupported_content_type',
      'Content-Type',
    ],
    [
      'text/plain body',
      () => h.request('POST', '/v1/agents', { rawBody: 'x', headers: { 'content-type': 'text/plain' } }),
      400,
      'unsupported_content_type',
      'Content-Type',
    ],
    ['missing body', () => h.request('POST', '/v1/agents'), 400, 'validation_error', 'name'],
    [
      'body that is not an object',
      () => h.request('POST', '/v1/agents', { rawBody: '[1]', headers: { 'content-type': 'application/json' } }),
      400,
      'validation_error',
      'body',
    ],
    [
      'unknown field',
      () => h.request('POST', '/v1/agents', { body: { name: 'x', colour: 'red' } }),
      400,
      'validation_error',
      'colour',
    ],
    [
      'out-of-range value',
      () => h.request('POST', '/v1/agents', { body: { name: 'x', maxSteps: 0 } }),
      400,
      'validation_error',
      'maxSteps',
    ],
    ['wrong type', () => h.request('POST', '/v1/agents', { body: { name: 7 } }), 400, 'validation_error', 'name'],
    [
      'oversized body',
      () => h.request('POST', '/v1/agents', { body: { name: 'x', instructions: 'y'.repeat(5000) } }),
      413,
      'payload_too_large',
      'body',
    ],
    ['bad query value', () => h.request('GET', '/v1/sessions?limit=0'), 400, 'validation_error', 'limit'],
    ['unknown query parameter', () => h.request('GET', '/v1/sessions?colour=red'), 400, 'validation_error', 'colour'],
    ['bad path id', () => h.request('GET', '/v1/agents/not-a-uuid'), 400, 'validation_error', 'id'],
    [
      'prototype pollution',
      () =>
        h.request('POST', '/v1/agents', {
          rawBody: '{"name":"x","__proto__":{"a":1}}',
          headers: { 'content-type': 'application/json' },
        }),
      400,
      'invalid_json',
      'body',
    ],
    ['unknown route', () => h.request('GET', '/v1/nothing-here'), 404, 'route_not_found', null],
    ['unknown method on a known path', () => h.request('PUT', '/v1/agents'), 404, 'route_not_found', null],
  ];

  it.each(cases)('%s', async (_name, send, status, code, param) => {
    const response = await send();
    expect(response.status).toBe(status);
    expect(String(response.headers['content-type'])).toContain('application/json');
    const error = json(response).error;
    expect(error).toMatchObject({ code, type: errorCatalog[code as keyof typeof errorCatalog].type, param });
    expect(typeof error.message).toBe('string');
    expect(error.message.length).toBeGreaterThan(5);
  });
});

/** Sends raw bytes and returns everything the server wrote until it closed the connection. */
function rawExchange(url: string, bytes: string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => socket.write(bytes));
    let received = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      received += chunk;
    });
    socket.on('error', reject);
    socket.on('close', () => resolve(received));
    socket.setTimeout(5000, () => socket.destroy(new Error(`no close after ${received.length} bytes`)));
  });
}

describe("what Node's HTTP parser rejects gets the API's error body, and the connection closes", () => {
  let h: Harness;
  let url: string;
  beforeAll(async () => {
    h = await createHarness('sqlite');
    url = await h.listen();
  });
  afterAll(() => h.close());

  const cases: [string, string, number, string][] = [
    [
      'headers over the size limit',
      `GET /v1/agents HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
      431,
      'headers_too_large',
    ],
    [
      'a header line without a colon',
      'GET /v1/agents HTTP/1.1\r\nHost: x\r\nNot a header\r\n\r\n',
      400,
      'malformed_request',
    ],
    ['not HTTP at all', 'HELLO THERE\r\n\r\n', 400, 'malformed_request'],
  ];

  it.each(cases)('%s', async (_name, bytes, status, code) => {
    const answer = await rawExchange(url, bytes);
    const [head = '', body = ''] = answer.split('\r\n\r\n');
    expect(head.split('\r\n')[0]).toBe(`HTTP/1.1 ${status} ${STATUS_CODES[status]}`);
    expect(head.toLowerCase()).toContain('content-type: application/json');
    expect(head.toLowerCase()).toContain('connection: close');
    expect(JSON.parse(body)).toEqual({
      error: {
        code,
        type: 'invalid_request_error',
        param: null,
        message: expect.stringMatching(/.{10}/),
      },
    });
  });

  it('a request arriving while the server shuts down gets service_unavailable and a closed connection', async () => {
    h.lifecycle.accepting = false;
    try {
      const answer = await rawExchange(
        url,
        `GET /v1/agents HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${h.key}\r\n\r\n`,
      );
      const [head = '', body = ''] = answer.split('\r\n\r\n');
      expect(head.split('\r\n')[0]).toBe('HTTP/1.1 503 Service Unavailable');
      expect(head.toLowerCase()).toContain('connection: close');
      expect(head.toLowerCase()).toContain('x-request-id: ');
      expect(JSON.parse(body).error).toMatchObject({ code: 'service_unavailable', type: 'server_error' });
    } finally {
      h.lifecycle.accepting = true;
    }
    expect((await h.request('GET', '/v1/agents')).status).toBe(200);
  });
});
