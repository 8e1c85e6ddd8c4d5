/**
 * Input a fuzzer or an official client sends that once got a 5xx or a confusing answer: empty JSON bodies on
 * routes that take none, NUL characters and lone surrogates on every write path (the same 400 on SQLite and
 * Postgres), integers beyond the safe range, deep nesting, over-long and malformed path parameters, and bodies
 * on unknown routes. Once per dialect, with identical expectations.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_JSON_DEPTH } from '../src/http/json-body.ts';
import { ASK_USER_QUESTION_SERVER, flows, type Json, WEATHER_TOOL } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json, type Response } from './helpers/harness.ts';

const NUL = 'a\u0000b';
const LONE_SURROGATE = 'a\ud800b';
const JSON_TYPE = { 'content-type': 'application/json' };
/** A webhook URL that needs no DNS and that nothing answers (port 1 of loopback): allowed in development mode. */
const LOCAL_HOOK = 'https://127.0.0.1:1/in';

function expectError(response: Response, status: number, code: string, param: string | null): Json {
  expect(response.status, response.text).toBe(status);
  const error = json(response).error;
  expect(error).toMatchObject({ code, param });
  return error;
}

/** `depth` arrays inside one another. */
const nested = (depth: number) => `${'['.repeat(depth)}${']'.repeat(depth)}`;

function multipart(filename: string): { rawBody: string; headers: Record<string, string> } {
  const boundary = 'hostileboundary';
  return {
    rawBody: `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${filename}"\r\nContent-Type: text/plain\r\n\r\nhello\r\n--${boundary}--\r\n`,
    headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
  };
}

describe.each(dialects())('hostile input (%s)', (dialect) => {
  let h: Harness;
  const flow = flows(() => h, { agentName: 'hostile' });
  let agentId: string;
  let sessionId: string;
  let conversation: string;
  let questionMessage: string;
  let endpointId: string;

  beforeAll(async () => {
    h = await createHarness(dialect, { AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true' });
    agentId = await flow.createAgent({ mcpServers: [ASK_USER_QUESTION_SERVER], clientTools: [WEATHER_TOOL] });
    sessionId = await flow.createSession(agentId);
    conversation = `conv_${sessionId}`;
    const asked = await flow.submit(sessionId, 'ask Your name?');
    questionMessage = (await flow.waitForMessage(sessionId, asked.id, ['requires_action'])).id;
    const endpoint = await h.request('POST', '/v1/webhook_endpoints', {
      body: { name: 'hook', url: LOCAL_HOOK, event_types: ['agent.session.created'] },
    });
    expect(endpoint.status, endpoint.text).toBe(200);
    endpointId = json(endpoint).id;
  });
  afterAll(() => h?.close());

  describe('strings no database stores unchanged are a 400 naming the field, on every write path', () => {
    const writes: [string, string, () => string, (text: string) => unknown, string][] = [
      ['agent name', 'POST', () => '/v1/agents', (text) => ({ name: text }), 'name'],
      ['agent description', 'POST', () => '/v1/agents', (text) => ({ name: 'x', description: text }), 'description'],
      ['agent instructions', 'POST', () => '/v1/agents', (text) => ({ name: 'x', instructions: text }), 'instructions'],
      ['agent update', 'PATCH', () => `/v1/agents/${agentId}`, (text) => ({ name: text }), 'name'],
      ['session title', 'POST', () => '/v1/sessions', (text) => ({ agentId, title: text }), 'title'],
      [
        'message text',
        'POST',
        () => `/v1/sessions/${sessionId}/messages`,
        (text) => ({ parts: [{ type: 'text', text }] }),
        'parts[0].text',
      ],
      ['Responses input', 'POST', () => '/v1/responses', (text) => ({ model: agentId, input: text }), 'input'],
      [
        'Responses message content',
        'POST',
        () => '/v1/responses',
        (text) => ({ model: agentId, input: [{ role: 'user', content: text }] }),
        'input[0].content',
      ],
      [
        'Responses function output',
        'POST',
        () => '/v1/responses',
        (text) => ({
          model: agentId,
          conversation,
          input: [{ type: 'function_call_output', call_id: 'call_1', output: text }],
        }),
        'input[0].output',
      ],
      [
        'answer',
        'POST',
        () => `/v1/sessions/${sessionId}/messages/${questionMessage}/answer`,
        (text) => ({ actionId: 0, answer: { name: text } }),
        'answer.name',
      ],
      [
        'answer property name',
        'POST',
        () => `/v1/sessions/${sessionId}/messages/${questionMessage}/answer`,
        (text) => ({ actionId: 0, answer: { [text]: 1 } }),
        'answer',
      ],
      [
        'conversation item output',
        'POST',
        () => `/v1/conversations/${conversation}/items`,
        (text) => ({ items: [{ type: 'function_call_output', call_id: 'call_1', output: text }] }),
        'items[0].output',
      ],
      [
        'webhook name',
        'POST',
        () => '/v1/webhook_endpoints',
        (text) => ({ name: text, url: LOCAL_HOOK, event_types: ['agent.session.created'] }),
        'name',
      ],
      [
        'webhook URL',
        'POST',
        () => '/v1/webhook_endpoints',
        (text) => ({ name: 'x', url: `${LOCAL_HOOK}/${text}`, event_types: ['agent.session.created'] }),
        'url',
      ],
      ['webhook update', 'POST', () => `/v1/webhook_endpoints/${endpointId}`, (text) => ({ name: text }), 'name'],
    ];

    it.each(writes)('%s', async (_name, method, path, body, param) => {
      const headers = { 'idempotency-key': randomUUID() };
      const withNul = expectError(
        await h.request(method, path(), { body: body(NUL), headers }),
        400,
        'validation_error',
        param,
      );
      expect(withNul.message).toContain('NUL character (U+0000)');
      const withSurrogate = expectError(
        await h.request(method, path(), { body: body(LONE_SURROGATE), headers: { 'idempotency-key': randomUUID() } }),
        400,
        'validation_error',
        param,
      );
      expect(withSurrogate.message).toContain('lone UTF-16 surrogate');
    });

    it('a query value with NUL is refused the same way', async () => {
      expectError(
        await h.request('GET', `/v1/webhook_endpoints/${endpointId}/events/evt_x/delivery?replay_key=a%00b`),
        400,
        'validation_error',
        'replay_key',
      );
    });

    it('file names lose their control characters on upload, the same on every dialect', async () => {
      const response = await h.request('POST', '/v1/files', multipart(NUL));
      expect(response.status, response.text).toBe(201);
      const file = json(response);
      expect(file.filename).toBe('ab');
      expect(json(await h.request('GET', `/v1/files/${file.id}`)).filename).toBe('ab');
    });

    it('well-formed text outside the Basic Multilingual Plane is stored and returned unchanged', async () => {
      const name = 'Agent 🧪 𝒜';
      const created = await h.request('POST', '/v1/agents', { body: { name } });
      expect(created.status, created.text).toBe(201);
      expect(json(await h.request('GET', `/v1/agents/${json(created).agent.id}`)).agent.name).toBe(name);
    });
  });

  describe('integers stay in the safe range', () => {
    it.each([
      ['2^63', '9223372036854775808'],
      ['2^53 + 1 (would round)', '9007199254740993'],
      ['1e30', '1e30'],
    ])('offset %s is a 400', async (_name, value) => {
      const error = expectError(
        await h.request('GET', `/v1/sessions?offset=${value}`),
        400,
        'validation_error',
        'offset',
      );
      expect(error.message).toBe('offset must be <= 9007199254740991');
      expectError(
        await h.request('GET', `/v1/sessions/${sessionId}/messages?offset=${value}`),
        400,
        'validation_error',
        'offset',
      );
    });

    it('the largest safe offset is answered', async () => {
      const response = await h.request('GET', `/v1/sessions?offset=${Number.MAX_SAFE_INTEGER}`);
      expect(response.status, response.text).toBe(200);
      expect(json(response)).toMatchObject({ data: [], offset: Number.MAX_SAFE_INTEGER });
    });

    it('an integer beyond the safe range in a body is a 400', async () => {
      expectError(
        await h.request('POST', `/v1/sessions/${sessionId}/messages/${questionMessage}/answer`, {
          rawBody: '{"actionId":9223372036854775808,"answer":"x"}',
          headers: JSON_TYPE,
        }),
        400,
        'validation_error',
        'actionId',
      );
    });
  });

  describe('nesting', () => {
    it('an answer nested 5,000 levels deep is a 400, not a stack overflow', async () => {
      const error = expectError(
        await h.request('POST', `/v1/sessions/${sessionId}/messages/${questionMessage}/answer`, {
          rawBody: `{"actionId":0,"answer":${nested(5000)}}`,
          headers: JSON_TYPE,
        }),
        400,
        'validation_error',
        'body',
      );
      expect(error.message).toContain(`${MAX_JSON_DEPTH} levels`);
    });

    it('brackets inside strings do not count, and nesting up to the limit is accepted', async () => {
      const response = await h.request('POST', `/v1/sessions/${sessionId}/messages/${questionMessage}/answer`, {
        rawBody: `{"actionId":0,"answer":{"text":"${'['.repeat(500)}","deep":${nested(MAX_JSON_DEPTH - 2)}}}`,
        headers: JSON_TYPE,
      });
      expect(response.status, response.text).toBe(200);
      expect(json(response).status).toBe('resuming');
    });
  });

  describe('path parameters', () => {
    it.each([200, 10_000])('an id of %i characters gets the standard 400 naming it', async (length) => {
      const error = expectError(
        await h.request('GET', `/v1/agents/${'a'.repeat(length)}`),
        400,
        'validation_error',
        'id',
      );
      expect(error.message).toBe('id must be a valid uuid');
    });

    it('a urn:uuid: id is not a uuid here', async () => {
      expectError(await h.request('GET', `/v1/sessions/urn:uuid:${sessionId}`), 400, 'validation_error', 'id');
    });

    it('a path that is not valid percent-encoding gets the standard 400', async () => {
      const response = await h.request('GET', '/v1/agents/%E0%A4%A');
      expectError(response, 400, 'validation_error', 'path');
      expect(String(response.headers['content-type'])).toContain('application/json');
    });
  });

  describe('empty JSON bodies where a route takes no body or an optional one', () => {
    const empty = { rawBody: '', headers: JSON_TYPE };

    it('interrupt, rotate_secret and redeliver accept them', async () => {
      const interrupt = await h.request('POST', `/v1/sessions/${sessionId}/interrupt`, empty);
      expect(interrupt.status, interrupt.text).toBe(200);

      const rotated = await h.request('POST', `/v1/webhook_endpoints/${endpointId}/rotate_secret`, empty);
      expect(rotated.status, rotated.text).toBe(200);
      expect(json(rotated).signing_secret).toMatch(/^whsec_/);

      // A test event is recorded in the endpoint's history whether or not the receiver answers (it does not).
      await h.request('POST', `/v1/webhook_endpoints/${endpointId}/test`, {
        body: { event_type: 'agent.session.created' },
      });
      const events = json(await h.request('GET', `/v1/webhook_endpoints/${endpointId}/events`));
      expect(events.data.length).toBeGreaterThan(0);
      const redelivered = await h.request(
        'POST',
        `/v1/webhook_endpoints/${endpointId}/events/${events.data[0].id}/redeliver`,
        { rawBody: '', headers: { ...JSON_TYPE, 'idempotency-key': 'empty-body' } },
      );
      expect(redelivered.status, redelivered.text).toBe(202);
    });

    it('DELETE routes accept them', async () => {
      const doomedAgent = await flow.createAgent();
      expect((await h.request('DELETE', `/v1/agents/${doomedAgent}`, empty)).status).toBe(204);
      const doomedSession = await flow.createSession(agentId);
      expect((await h.request('DELETE', `/v1/sessions/${doomedSession}`, empty)).status).toBe(204);
      const file = json(await h.request('POST', '/v1/files', multipart('x.txt')));
      expect((await h.request('DELETE', `/v1/files/${file.id}`, empty)).status).toBe(200);
      const endpoint = json(
        await h.request('POST', '/v1/webhook_endpoints', {
          body: { name: 'gone', url: `${LOCAL_HOOK}/gone`, event_types: ['agent.session.created'] },
        }),
      );
      expect((await h.request('DELETE', `/v1/webhook_endpoints/${endpoint.id}`, empty)).status).toBe(200);
    });

    it('a route that needs a body names the first missing field', async () => {
      expectError(await h.request('POST', '/v1/sessions', empty), 400, 'validation_error', 'agentId');
    });
  });

  describe('unknown routes answer 404 route_not_found whatever the body', () => {
    it.each([
      ['no body', {}],
      ['an empty JSON body', { rawBody: '', headers: JSON_TYPE }],
      ['malformed JSON', { rawBody: '{', headers: JSON_TYPE }],
      ['a deep body', { rawBody: nested(1000), headers: JSON_TYPE }],
      ['text/plain', { rawBody: 'x', headers: { 'content-type': 'text/plain' } }],
    ])('%s', async (_name, options) => {
      expectError(await h.request('POST', '/v1/nothing-here', options), 404, 'route_not_found', null);
    });
  });

  describe('the OpenAI surfaces (Responses, Chat Completions, Conversations, Models)', () => {
    const chat = (content: unknown, extra: Record<string, unknown> = {}) => ({
      model: agentId,
      messages: [{ role: 'user', content }],
      ...extra,
    });
    const tool = (name: string, description: string, parameters: unknown = { type: 'object' }) => ({
      type: 'function',
      name,
      description,
      parameters,
    });
    const chatTool = (name: string, description: string, parameters: unknown = { type: 'object' }) => ({
      type: 'function',
      function: { name, description, parameters },
    });
    const format = (name: string, schema: unknown) => ({ format: { type: 'json_schema', name, schema } });
    const objectWith = (key: string) => ({ type: 'object', properties: { [key]: { type: 'string' } } });

    const strings: [string, string, () => string, (text: string) => unknown, string][] = [
      ['Responses model', 'POST', () => '/v1/responses', (text) => ({ model: text, input: 'hi' }), 'model'],
      [
        'input_tokens model',
        'POST',
        () => '/v1/responses/input_tokens',
        (text) => ({ model: text, input: 'hi' }),
        'model',
      ],
      [
        'Responses tool name',
        'POST',
        () => '/v1/responses',
        (text) => ({ model: agentId, input: 'hi', tools: [tool(text, 'd')] }),
        'tools[0].name',
      ],
      [
        'Responses tool description',
        'POST',
        () => '/v1/responses',
        (text) => ({ model: agentId, input: 'hi', tools: [tool('t', text)] }),
        'tools[0].description',
      ],
      [
        'text.format name',
        'POST',
        () => '/v1/responses',
        (text) => ({ model: agentId, input: 'hi', text: format(text, objectWith('a')) }),
        'text.format.name',
      ],
      [
        'text.format schema key',
        'POST',
        () => '/v1/responses',
        (text) => ({ model: agentId, input: 'hi', text: format('f', objectWith(text)) }),
        'text.format.schema.properties',
      ],
      [
        'Responses metadata value',
        'POST',
        () => '/v1/responses',
        (text) => ({ model: agentId, input: 'hi', metadata: { k: text } }),
        'metadata.k',
      ],
      [
        'Responses metadata key',
        'POST',
        () => '/v1/responses',
        (text) => ({ model: agentId, input: 'hi', metadata: { [text]: 'v' } }),
        'metadata',
      ],
      ['chat model', 'POST', () => '/v1/chat/completions', (text) => ({ ...chat('hi'), model: text }), 'model'],
      ['chat content', 'POST', () => '/v1/chat/completions', (text) => chat(text), 'messages[0].content'],
      [
        'chat content part',
        'POST',
        () => '/v1/chat/completions',
        (text) => chat([{ type: 'text', text }]),
        'messages[0].content[0].text',
      ],
      [
        'chat tool name',
        'POST',
        () => '/v1/chat/completions',
        (text) => chat('hi', { tools: [chatTool(text, 'd')] }),
        'tools[0].function.name',
      ],
      [
        'chat tool description',
        'POST',
        () => '/v1/chat/completions',
        (text) => chat('hi', { tools: [chatTool('t', text)] }),
        'tools[0].function.description',
      ],
      [
        'chat response_format name',
        'POST',
        () => '/v1/chat/completions',
        (text) => chat('hi', { response_format: { type: 'json_schema', json_schema: { name: text, schema: {} } } }),
        'response_format.json_schema.name',
      ],
      [
        'chat metadata',
        'POST',
        () => '/v1/chat/completions',
        (text) => chat('hi', { metadata: { k: text } }),
        'metadata.k',
      ],
      [
        'agent outputFormat name',
        'POST',
        () => '/v1/agents',
        (text) => ({ name: 'x', outputFormat: { type: 'json_schema', name: text, schema: objectWith('a') } }),
        'outputFormat.name',
      ],
      [
        'message outputFormat schema key',
        'POST',
        () => `/v1/sessions/${sessionId}/messages`,
        (text) => ({
          parts: [{ type: 'text', text: 'hi' }],
          outputFormat: { type: 'json_schema', name: 'f', schema: objectWith(text) },
        }),
        'outputFormat.schema.properties',
      ],
    ];

    it.each(strings)('%s with NUL or a lone surrogate is a 400 naming it', async (_name, method, path, body, param) => {
      for (const [text, says] of [
        [NUL, 'NUL character (U+0000)'],
        [LONE_SURROGATE, 'lone UTF-16 surrogate'],
      ]) {
        const response = await h.request(method, path(), {
          body: body(text as string),
          headers: { 'idempotency-key': randomUUID() },
        });
        expect(expectError(response, 400, 'validation_error', param).message).toContain(says);
      }
    });

    it.each([
      ['/v1/responses', () => ({ model: agentId, input: 'hi', colour: 'blue' })],
      ['/v1/responses/input_tokens', () => ({ model: agentId, input: 'hi', colour: 'blue' })],
      ['/v1/chat/completions', () => chat('hi', { colour: 'blue' })],
    ])('an unknown top-level field on %s is refused as OpenAI refuses it', async (path, body) => {
      const error = expectError(await h.request('POST', path, { body: body() }), 400, 'validation_error', 'colour');
      expect(error.message).toBe("Unknown parameter: 'colour'.");
    });

    it.each([
      ['%00', 'a%00b'],
      ['a lone surrogate', 'a%ED%A0%80b'],
      ['an over-long id', 'i'.repeat(10_000)],
    ])('a conversation item id with %s is a 400 or a 404, never a 5xx', async (_name, item) => {
      for (const method of ['GET', 'DELETE']) {
        const response = await h.request(method, `/v1/conversations/${conversation}/items/${item}`);
        expect([400, 404], response.text).toContain(response.status);
        if (response.status === 400) expect(json(response).error.param).toMatch(/^(item_id|path)$/);
      }
    });

    it.each([
      ['%00', 'a%00b'],
      ['a lone surrogate', 'a%ED%A0%80b'],
      ['an over-long id', 'm'.repeat(10_000)],
    ])('a model id with %s is a 400 or a 404, never a 5xx', async (_name, id) => {
      const response = await h.request('GET', `/v1/models/${id}`);
      expect([400, 404], response.text).toContain(response.status);
    });

    const huge = ['9007199254740993', '9223372036854775808', '1e30'];
    const integers: [string, string, (value: string) => string, string][] = [
      [
        'max_output_tokens',
        '/v1/responses',
        (v) => `{"model":"${agentId}","input":"hi","max_output_tokens":${v}}`,
        'max_output_tokens',
      ],
      [
        'max_tool_calls',
        '/v1/responses',
        (v) => `{"model":"${agentId}","input":"hi","max_tool_calls":${v}}`,
        'max_tool_calls',
      ],
      [
        'top_logprobs',
        '/v1/responses',
        (v) => `{"model":"${agentId}","input":"hi","top_logprobs":${v}}`,
        'top_logprobs',
      ],
      [
        'chat max_tokens',
        '/v1/chat/completions',
        (v) => `${JSON.stringify(chat('hi')).slice(0, -1)},"max_tokens":${v}}`,
        'max_tokens',
      ],
      [
        'chat max_completion_tokens',
        '/v1/chat/completions',
        (v) => `${JSON.stringify(chat('hi')).slice(0, -1)},"max_completion_tokens":${v}}`,
        'max_completion_tokens',
      ],
      ['chat n', '/v1/chat/completions', (v) => `${JSON.stringify(chat('hi')).slice(0, -1)},"n":${v}}`, 'n'],
      [
        'chat top_logprobs',
        '/v1/chat/completions',
        (v) => `${JSON.stringify(chat('hi')).slice(0, -1)},"top_logprobs":${v}}`,
        'top_logprobs',
      ],
    ];

    it.each(integers)('%s past 2^53 and 2^63 is a 400 naming it', async (_name, path, body, param) => {
      for (const value of huge) {
        expectError(
          await h.request('POST', path, { rawBody: body(value), headers: JSON_TYPE }),
          400,
          'validation_error',
          param,
        );
      }
    });

    it('starting_after past 2^53 and 2^63 is a 400 naming it', async () => {
      for (const value of huge) {
        const response = await h.request(
          'GET',
          `/v1/responses/resp_${randomUUID()}?stream=true&starting_after=${value}`,
        );
        expectError(response, 400, 'validation_error', 'starting_after');
      }
    });

    const deep = (depth: number) => `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
    const deepBodies: [string, string, string][] = [
      [
        'chat content parts',
        '/v1/chat/completions',
        `{"model":"x","messages":[{"role":"user","content":${nested(3000)}}]}`,
      ],
      [
        'json_schema schema',
        '/v1/responses',
        `{"model":"x","input":"hi","text":{"format":{"type":"json_schema","name":"f","schema":${deep(3000)}}}}`,
      ],
      [
        'tool parameters',
        '/v1/responses',
        `{"model":"x","input":"hi","tools":[{"type":"function","name":"t","parameters":${deep(3000)}}]}`,
      ],
      [
        'chat tool parameters',
        '/v1/chat/completions',
        `{"model":"x","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"t","parameters":${deep(3000)}}}]}`,
      ],
      ['metadata', '/v1/responses', `{"model":"x","input":"hi","metadata":${deep(3000)}}`],
    ];

    it.each(deepBodies)('%s nested thousands deep is a 400', async (_name, path, rawBody) => {
      const error = expectError(
        await h.request('POST', path, { rawBody, headers: JSON_TYPE }),
        400,
        'validation_error',
        'body',
      );
      expect(error.message).toContain(`${MAX_JSON_DEPTH} levels`);
    });

    it('a json_schema schema within the body limit but past the schema depth is a 400 naming it', async () => {
      const schema = JSON.parse(
        `${'{"type":"object","properties":{"a":'.repeat(20)}{"type":"string"}${'}}'.repeat(20)}`,
      );
      for (const [path, body, param] of [
        ['/v1/responses', { model: agentId, input: 'hi', text: format('f', schema) }, 'text.format.schema'],
        [
          '/v1/chat/completions',
          chat('hi', { response_format: { type: 'json_schema', json_schema: { name: 'f', schema } } }),
          'response_format.json_schema.schema',
        ],
      ] as const) {
        const error = expectError(await h.request('POST', path, { body }), 400, 'validation_error', param);
        expect(error.message).toContain('levels');
      }
    });

    const evil: [string, unknown][] = [
      ['a catastrophic pattern', { type: 'object', properties: { a: { type: 'string', pattern: '^(a+)+$' } } }],
      ['a catastrophic patternProperties key', { type: 'object', patternProperties: { '(x*)*y': { type: 'string' } } }],
      ['an invalid pattern', { type: 'object', properties: { a: { type: 'string', pattern: '([' } } }],
      ['a remote $ref', { type: 'object', properties: { a: { $ref: 'https://example.com/s.json' } } }],
      ['a dangling $ref', { type: 'object', properties: { a: { $ref: '#/$defs/missing' } } }],
      [
        'a huge schema',
        {
          type: 'object',
          properties: Object.fromEntries(
            Array.from({ length: 5000 }, (_, i) => [`p${i}`, { type: 'string', description: 'x'.repeat(20) }]),
          ),
        },
      ],
    ];

    it.each(evil)('a structured-output schema with %s is a 400 naming it', async (_name, schema) => {
      for (const [method, path, body, param] of [
        ['POST', '/v1/responses', { model: agentId, input: 'hi', text: format('f', schema) }, 'text.format.schema'],
        [
          'POST',
          '/v1/chat/completions',
          chat('hi', { response_format: { type: 'json_schema', json_schema: { name: 'f', schema } } }),
          'response_format.json_schema.schema',
        ],
        [
          'POST',
          '/v1/agents',
          { name: 'x', outputFormat: { type: 'json_schema', name: 'f', schema } },
          'outputFormat.schema',
        ],
        [
          'POST',
          `/v1/sessions/${sessionId}/messages`,
          { parts: [{ type: 'text', text: 'hi' }], outputFormat: { type: 'json_schema', name: 'f', schema } },
          'outputFormat.schema',
        ],
      ] as const) {
        const headers = { 'idempotency-key': randomUUID() };
        expectError(await h.request(method, path, { body, headers }), 400, 'validation_error', param);
      }
    });

    it('a schema whose $ref cycles through itself is compiled and answered, not a stack overflow', async () => {
      const schema = {
        type: 'object',
        $defs: {
          node: { type: 'object', properties: { next: { $ref: '#/$defs/node' } } },
          loop: { $ref: '#/$defs/loop' },
        },
        properties: { head: { $ref: '#/$defs/node' }, spin: { $ref: '#/$defs/loop' } },
      };
      for (const [path, body] of [
        ['/v1/responses', { model: agentId, input: 'hi', text: format('f', schema) }],
        [
          '/v1/chat/completions',
          chat('hi', { response_format: { type: 'json_schema', json_schema: { name: 'f', schema } } }),
        ],
      ] as const) {
        const response = await h.request('POST', path, { body });
        expect(response.status, response.text).toBeLessThan(500);
      }
    });
  });

  describe('webhook URL messages', () => {
    // Without development mode, as deployed.
    let strict: Harness;
    beforeAll(async () => {
      strict = await createHarness(dialect);
    });
    afterAll(() => strict?.close());

    it('an over-long URL is "at most 2048 characters"', async () => {
      const error = expectError(
        await h.request('POST', '/v1/webhook_endpoints', {
          body: {
            name: 'x',
            url: `https://hooks.example.com/${'a'.repeat(2100)}`,
            event_types: ['agent.session.created'],
          },
        }),
        400,
        'validation_error',
        'url',
      );
      expect(error.message).toBe('url must be at most 2048 characters');
    });

    it('an http or local URL names the setting that allows it for development', async () => {
      for (const url of ['http://hooks.example.com/in', 'https://127.0.0.1/in', 'https://localhost/in']) {
        const error = expectError(
          await strict.request('POST', '/v1/webhook_endpoints', {
            body: { name: 'x', url, event_types: ['agent.session.created'] },
          }),
          400,
          'validation_error',
          'url',
        );
        expect(error.message).toContain('AGENTRY_ALLOW_INSECURE_DESTINATIONS=true');
      }
    });
  });
});
