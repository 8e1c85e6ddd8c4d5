/**
 * The OpenAPI document says what the server does, so generated clients and fuzzers agree with it: optional
 * parameters are not required, patterns and formats are those the server checks, every status a route can
 * answer is declared, and non-JSON answers name their media type. Each claim is checked against the server too.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flows, type Json } from './helpers/fixtures.ts';
import { createHarness, type Harness, json } from './helpers/harness.ts';

const METHODS = ['get', 'post', 'put', 'patch', 'delete'] as const;
const BODY_METHODS = new Set(['post', 'put', 'patch', 'delete']);
const MAX_UPLOAD = 4096;

describe('the OpenAPI document matches the server', () => {
  let h: Harness;
  let document: Json;
  const flow = flows(() => h, { agentName: 'doc' });

  const operations = () =>
    Object.entries(document.paths as Record<string, Json>).flatMap(([path, item]) =>
      METHODS.filter((method) => item[method] !== undefined).map((method) => ({
        path,
        method,
        operation: item[method] as Json,
      })),
    );
  const operation = (method: string, path: string): Json => document.paths[path][method];
  const parameter = (method: string, path: string, name: string): Json =>
    operation(method, path).parameters.find((candidate: Json) => candidate.name === name);

  beforeAll(async () => {
    h = await createHarness('sqlite', { AGENTRY_MAX_UPLOAD_BYTES: String(MAX_UPLOAD) });
    document = json(await h.request('GET', '/v1/openapi.json', { key: null }));
  });
  afterAll(() => h?.close());

  it('does not require query parameters that have a default', () => {
    let checked = 0;
    for (const { path, method, operation: op } of operations()) {
      for (const param of op.parameters ?? []) {
        if (param.in === 'path') expect(param.required, `${method} ${path} ${param.name}`).toBe(true);
        if (param.schema?.default !== undefined) {
          checked++;
          expect(param.required ?? false, `${method} ${path} ${param.name}`).toBe(false);
        }
      }
    }
    expect(checked).toBeGreaterThan(10);
  });

  it('bounds every integer of a request to the safe range, as the server does', async () => {
    const offset = parameter('get', '/v1/sessions', 'offset');
    expect(offset.schema).toMatchObject({ type: 'integer', minimum: 0, maximum: Number.MAX_SAFE_INTEGER });
    for (const { path, method, operation: op } of operations()) {
      for (const param of op.parameters ?? []) {
        if (param.schema?.type === 'integer') {
          expect(param.schema.maximum, `${method} ${path} ${param.name}`).toBeLessThanOrEqual(Number.MAX_SAFE_INTEGER);
        }
      }
    }
    expect((await h.request('GET', `/v1/sessions?offset=${Number.MAX_SAFE_INTEGER + 2}`)).status).toBe(400);
  });

  it('declares 400 and 413 wherever a body is read, 401 and 403 wherever a key is needed, 401 and 404 on admin routes', () => {
    for (const { path, method, operation: op } of operations()) {
      const statuses = Object.keys(op.responses);
      if (BODY_METHODS.has(method))
        expect(statuses, `${method} ${path}`).toEqual(expect.arrayContaining(['400', '413']));
      const security: Record<string, unknown>[] = op.security ?? [];
      if (security.some((scheme) => 'AdminToken' in scheme)) {
        expect(path, 'only /v1/admin routes take the admin token').toMatch(/^\/v1\/admin\//);
        expect(statuses, `${method} ${path}`).toEqual(expect.arrayContaining(['401', '404']));
      } else if (security.length > 0) {
        expect(statuses, `${method} ${path}`).toEqual(expect.arrayContaining(['401', '403']));
      }
      if ((op.parameters ?? []).length > 0) expect(statuses, `${method} ${path}`).toContain('400');
    }
  });

  it('names the media type of answers that are not JSON', () => {
    expect(Object.keys(operation('get', '/v1/openapi.md').responses['200'].content)).toEqual(['text/markdown']);
    expect(Object.keys(operation('get', '/v1/sessions/{id}/stream').responses['200'].content)).toEqual([
      'text/event-stream',
    ]);
    expect(Object.keys(operation('post', '/v1/responses').responses['200'].content)).toEqual([
      'application/json',
      'text/event-stream',
    ]);
  });

  it('marks bodies that may be left out as optional, and the server accepts them left out', async () => {
    expect(operation('post', '/v1/webhook_endpoints/{id}/rotate_secret').requestBody.required).toBe(false);
    expect(operation('post', '/v1/webhook_endpoints/{id}/events/{event_id}/redeliver').requestBody.required).toBe(
      false,
    );
    for (const path of ['/v1/agents', '/v1/sessions', '/v1/responses', '/v1/webhook_endpoints/{id}/test']) {
      expect(operation('post', path).requestBody.required, path).toBe(true);
    }
    expect(operation('patch', '/v1/agents/{id}').requestBody.required).toBe(true);
  });

  it('gives resp_ and conv_ ids the exact pattern the server checks', async () => {
    const uuid = '[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}';
    expect(parameter('get', '/v1/responses/{id}', 'id').schema.pattern).toBe(`^resp_${uuid}$`);
    expect(parameter('get', '/v1/responses/{id}/trace', 'id').schema.pattern).toBe(`^resp_${uuid}$`);
    expect(parameter('get', '/v1/conversations/{conversation_id}', 'conversation_id').schema.pattern).toBe(
      `^conv_${uuid}$`,
    );
    // 36 hyphens matched the old pattern; the server never accepted them.
    expect((await h.request('GET', `/v1/responses/resp_${'-'.repeat(36)}`)).status).toBe(400);
  });

  it('describes model as an agent id or name in both modes, which is what the server accepts', async () => {
    // One body per mode: strict mode's, then OpenAI compatibility mode's.
    const [strict, compat] = operation('post', '/v1/responses').requestBody.content['application/json'].schema.anyOf;
    for (const schema of [strict, compat]) {
      expect(schema.properties.model).toMatchObject({ type: 'string', description: expect.stringContaining('name') });
      expect(schema.properties.model.format).toBeUndefined();
    }
    const name = 'documented by name';
    const agentId = await flow.createAgent({ name });
    for (const mode of ['openai', 'strict']) {
      for (const model of [name, `agent:${name}`, agentId]) {
        const response = await h.request('POST', '/v1/responses', {
          body: { model, input: 'hi' },
          headers: { 'agentry-compat': mode },
        });
        expect(response.status, response.text).toBe(200);
        expect(json(response).model).toBe(agentId);
      }
      // What is neither an id nor a name is a 400 on model.
      const response = await h.request('POST', '/v1/responses', {
        body: { model: `urn:uuid:${agentId}`, input: 'hi' },
        headers: { 'agentry-compat': mode },
      });
      expect(response.status).toBe(400);
      expect(json(response).error.param).toBe('model');
    }
  });

  it('gives store and background the values the server accepts, and 400 for the pairs it refuses', async () => {
    const [strict, compat] = operation('post', '/v1/responses').requestBody.content['application/json'].schema.anyOf;
    expect(strict.properties.store).toMatchObject({ type: 'boolean' });
    expect(strict.properties.background).toMatchObject({ type: 'boolean' });
    // Compatibility mode also takes null, as OpenAI clients send it.
    expect(compat.properties.store).toMatchObject({ type: ['boolean', 'null'] });
    expect(compat.properties.background).toMatchObject({ type: ['boolean', 'null'] });
    expect(parameter('get', '/v1/responses/{id}', 'stream').schema).toMatchObject({ type: 'boolean' });
    const startingAfter = parameter('get', '/v1/responses/{id}', 'starting_after').schema;
    expect(startingAfter).toMatchObject({ type: 'integer', minimum: 0 });
    const answers = operation('get', '/v1/responses/{id}').responses['200'].content;
    expect(Object.keys(answers)).toEqual(['application/json', 'text/event-stream']);
    const agentId = await flow.createAgent();
    for (const [extra, param] of [
      [{ store: false, background: true }, 'background'],
      [{ store: 'no' }, 'store'],
    ] as const) {
      const response = await h.request('POST', '/v1/responses', { body: { model: agentId, input: 'hi', ...extra } });
      expect(response.status).toBe(400);
      expect(json(response).error.param).toBe(param);
    }
  });

  it('closes the OpenAI request bodies, as the server refuses a field they do not declare', async () => {
    const [strict, compat] = operation('post', '/v1/responses').requestBody.content['application/json'].schema.anyOf;
    const chat = operation('post', '/v1/chat/completions').requestBody.content['application/json'].schema;
    for (const schema of [strict, compat, chat]) expect(schema.additionalProperties).toBe(false);
    expect(chat.required).toEqual(['model', 'messages']);
    const agentId = await flow.createAgent();
    for (const [path, body] of [
      ['/v1/responses', { model: agentId, input: 'hi', colour: 'blue' }],
      ['/v1/chat/completions', { model: agentId, messages: [{ role: 'user', content: 'hi' }], colour: 'blue' }],
    ] as const) {
      const response = await h.request('POST', path, { body });
      expect(response.status, response.text).toBe(400);
      expect(json(response).error).toMatchObject({ param: 'colour', message: "Unknown parameter: 'colour'." });
    }
  });

  it('declares the statuses the OpenAI routes answer beyond 400', () => {
    const declared = (method: string, path: string) => Object.keys(operation(method, path).responses);
    expect(declared('post', '/v1/responses')).toEqual(expect.arrayContaining(['404', '409', '504']));
    expect(declared('post', '/v1/chat/completions')).toEqual(expect.arrayContaining(['404', '502', '504']));
    expect(declared('delete', '/v1/conversations/{conversation_id}/items/{item_id}')).toEqual(
      expect.arrayContaining(['404', '409']),
    );
    expect(declared('get', '/v1/models/{id}')).toContain('404');
    expect(declared('post', '/v1/responses/input_tokens')).toEqual(expect.arrayContaining(['400', '404']));
  });

  it('gives webhook url the uri format and its length limit', () => {
    const body = operation('post', '/v1/webhook_endpoints').requestBody.content['application/json'].schema;
    expect(body.properties.url).toMatchObject({ type: 'string', format: 'uri', maxLength: 2048 });
  });

  it('gives Agentry-Beta a pattern the server honours', async () => {
    const pattern = new RegExp(parameter('get', '/v1/agents/sessions/{id}', 'agentry-beta').schema.pattern);
    const agentId = await flow.createAgent();
    const sessionId = await flow.createSession(agentId);
    for (const value of ['agents=v1', 'other=v2, agents=v1', ' agents=v1 ', 'agents=v2', 'agents=v10', '']) {
      const response = await h.request('GET', `/v1/agents/sessions/${sessionId}`, {
        headers: { 'agentry-beta': value },
      });
      expect(response.status === 200, value).toBe(pattern.test(value));
    }
  });

  it('states the upload size rules the server applies', () => {
    const upload = operation('post', '/v1/files').requestBody.content['multipart/form-data'].schema;
    expect(upload.properties.file).toMatchObject({ format: 'binary', minLength: 1, maxLength: MAX_UPLOAD });
  });
});
