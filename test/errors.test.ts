import { readFileSync } from 'node:fs';
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
