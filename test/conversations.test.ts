/**
 * The Conversations routes (spec 4.1, 7; responses-wire 2, 4, 5; DESIGN 5): a Conversation is a Session, its items
 * are the conversation log in OpenAI shapes, and client function call outputs are persisted through the items
 * route without running the agent. Real server with the `scripted` model, once per dialect.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flows, type Json, textParts, WEATHER_TOOL } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, type Response as HarnessResponse, json } from './helpers/harness.ts';

const output = (callId: string, text: string, extra: Json = {}) => ({
  type: 'function_call_output',
  call_id: callId,
  output: text,
  ...extra,
});

describe.each(dialects())('conversations (%s)', (dialect) => {
  let h: Harness;
  const flow = flows(() => h, { agentName: 'conversations' });
  let agentId: string;
  let toolAgentId: string;

  beforeAll(async () => {
    h = await createHarness(dialect);
    agentId = await flow.createAgent({});
    toolAgentId = await flow.createAgent({ clientTools: [WEATHER_TOOL] });
  });
  afterAll(() => h.close());

  /** Starts a session with one message and waits until it reaches one of `statuses`. */
  async function run(text: string, statuses?: readonly string[], agent = agentId) {
    const { sessionId, message } = await flow.turn(agent, text, statuses);
    return { sessionId, conv: `conv_${sessionId}`, message };
  }

  // The spec's rules for added items: strict mode (compatibility mode, the default, is in responses-compat.test.ts).
  const addItems = (conv: string, items: unknown, key = h.key) =>
    h.request('POST', `/v1/conversations/${conv}/items`, {
      key,
      body: { items },
      headers: { 'agentry-compat': 'strict' },
    });

  async function listAll(conv: string, order: 'asc' | 'desc' = 'asc'): Promise<Json[]> {
    const response = await h.request('GET', `/v1/conversations/${conv}/items?order=${order}&limit=100`);
    expect(response.status, response.text).toBe(200);
    expect(json(response).has_more).toBe(false);
    return json(response).data;
  }

  const expectError = (response: HarnessResponse, status: number, code: string, param?: string | null) => {
    expect(response.status, response.text).toBe(status);
    expect(json(response).error.code, response.text).toBe(code);
    if (param !== undefined) expect(json(response).error.param, response.text).toBe(param);
  };

  describe('GET /v1/conversations/{id}', () => {
    it('returns the conversation of a session', async () => {
      const before = Math.floor(Date.now() / 1000);
      const sessionId = await flow.createSession(agentId);
      const response = await h.request('GET', `/v1/conversations/conv_${sessionId}`);
      expect(response.status, response.text).toBe(200);
      const body = json(response);
      expect(body).toEqual({
        id: `conv_${sessionId}`,
        object: 'conversation',
        created_at: expect.any(Number),
        metadata: {},
      });
      expect(body.created_at).toBeGreaterThanOrEqual(before);
      expect(body.created_at).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000));
      // The session's conversationId is that id.
      expect(json(await h.request('GET', `/v1/sessions/${sessionId}`)).session.conversationId).toBe(body.id);
      // Upper-case hex names the same conversation.
      const upper = await h.request('GET', `/v1/conversations/conv_${sessionId.toUpperCase()}`);
      expect(json(upper).id).toBe(`conv_${sessionId}`);
    });

    it('answers 400 for a malformed id and 404 for an unknown or foreign one', async () => {
      const sessionId = await flow.createSession(agentId);
      for (const bad of ['conv_nope', sessionId, `resp_${sessionId}`, `conv_${sessionId}x`]) {
        expectError(await h.request('GET', `/v1/conversations/${bad}`), 400, 'validation_error', 'conversation_id');
      }
      expectError(await h.request('GET', `/v1/conversations/conv_${randomUUID()}`), 404, 'not_found');
      const other = await h.createOrg(`conv-other-${randomUUID()}`);
      for (const url of [`/v1/conversations/conv_${sessionId}`, `/v1/conversations/conv_${sessionId}/items`]) {
        expectError(await h.request('GET', url, { key: other.key }), 404, 'not_found');
      }
      expectError(await h.request('GET', `/v1/conversations/conv_${sessionId}`, { key: null }), 401, 'missing_api_key');
    });
  });

  describe('client tool round trip through POST items', () => {
    it('persists an output without running the model, idempotently, and unblocks the conversation', async () => {
      const script = 'call get_weather {"city":"Paris"}\n---\nnever played';
      const { sessionId, conv, message } = await run(script, ['requires_action'], toolAgentId);
      const { callId } = message.requiredActions[0];

      const before = await listAll(conv);
      expect(before.map((item) => item.type)).toEqual(['message', 'function_call']);
      expect(before[1]).toEqual({
        id: expect.stringMatching(/^fc_/),
        type: 'function_call',
        call_id: callId,
        name: 'get_weather',
        arguments: '{"city":"Paris"}',
        status: 'completed',
      });
      // All pending outputs come before new input.
      expectError(await flow.postMessage(sessionId, textParts('new input')), 409, 'client_tool_output_required');

      const created = await addItems(conv, [output(callId, '18C')]);
      expect(created.status, created.text).toBe(200);
      const list = json(created);
      expect(list).toEqual({
        object: 'list',
        data: [
          {
            id: expect.stringMatching(/^fco_/),
            type: 'function_call_output',
            call_id: callId,
            output: '18C',
            status: 'completed',
          },
        ],
        first_id: list.data[0].id,
        last_id: list.data[0].id,
        has_more: false,
      });
      const itemId: string = list.data[0].id;

      // The turn ended without another model step.
      const done = await flow.getMessage(sessionId, message.id);
      expect(done.status).toBe('completed');
      expect(done.requiredActions).toEqual([]);
      expect(JSON.stringify(done.response)).not.toContain('never played');
      expect(json(await h.request('GET', `/v1/sessions/${sessionId}`)).session.status).toBe('idle');

      // Identical retries return the same durable item (also with the id and status a client may echo).
      const again = await addItems(conv, [output(callId, '18C')]);
      expect(again.status, again.text).toBe(200);
      expect(json(again)).toEqual(list);
      const echoed = await addItems(conv, [output(callId, '18C', { id: itemId, status: 'completed' })]);
      expect(json(echoed).data[0].id).toBe(itemId);
      // A different output conflicts.
      expectError(
        await addItems(conv, [output(callId, '20C')]),
        409,
        'function_call_output_conflict',
        'items[0].output',
      );

      const after = await listAll(conv);
      expect(after.map((item) => item.type)).toEqual(['message', 'function_call', 'function_call_output']);
      expect(after[2]).toEqual(list.data[0]);

      // The conversation accepts new input again.
      const next = await flow.submit(sessionId, 'thanks');
      expect((await flow.waitForMessage(sessionId, next.id)).response.parts[0].text).toBe('thanks');
      const last = await listAll(conv);
      expect(last.slice(3).map((item) => [item.type, item.role, item.content[0].text])).toEqual([
        ['message', 'user', 'thanks'],
        ['message', 'assistant', 'thanks'],
      ]);
    });

    it('returns created items in request order and completes the turn once every call has its output', async () => {
      const script = 'call get_weather {"city":"Lima"}\ncall get_weather {"city":"Oslo"}';
      const { sessionId, conv, message } = await run(script, ['requires_action'], toolAgentId);
      const [lima, oslo] = message.requiredActions.map((action: Json) => action.callId);
      expect(message.requiredActions.map((action: Json) => action.arguments)).toEqual([
        '{"city":"Lima"}',
        '{"city":"Oslo"}',
      ]);

      const first = await addItems(conv, [output(oslo, 'cold')]);
      expect(first.status, first.text).toBe(200);
      const osloItem = json(first).data[0];
      const half = await flow.getMessage(sessionId, message.id);
      expect(half.status).toBe('requires_action');
      expect(half.requiredActions.map((action: Json) => action.callId)).toEqual([lima]);
      expectError(await flow.postMessage(sessionId, textParts('too early')), 409, 'client_tool_output_required');

      const second = await addItems(conv, [output(oslo, 'cold'), output(lima, 'mild')]);
      expect(second.status, second.text).toBe(200);
      const body = json(second);
      expect(body.data.map((item: Json) => [item.call_id, item.output])).toEqual([
        [oslo, 'cold'],
        [lima, 'mild'],
      ]);
      expect(body.data[0]).toEqual(osloItem);
      expect(body.first_id).toBe(osloItem.id);
      expect(body.last_id).toBe(body.data[1].id);
      expect((await flow.getMessage(sessionId, message.id)).status).toBe('completed');
    });

    it('rejects unknown, foreign, server-side and repeated call ids without storing anything', async () => {
      const { sessionId, conv, message } = await run(
        'call get_weather {"city":"Rome"}',
        ['requires_action'],
        toolAgentId,
      );
      const { callId } = message.requiredActions[0];
      const other = await run('call get_weather {"city":"Bern"}', ['requires_action'], toolAgentId);
      const server = await run('call nothing {}');
      const serverCall = (await listAll(server.conv)).find((item) => item.type === 'mcp_call');
      const serverCallId = (
        await h.deps.storage.db
          .selectFrom('items')
          .select('call_id')
          .where('id', '=', serverCall?.id ?? '')
          .executeTakeFirstOrThrow()
      ).call_id;
      expect(serverCallId).toEqual(expect.any(String));

      expectError(await addItems(conv, [output('call_nope', 'x')]), 400, 'validation_error', 'items[0].call_id');
      expectError(
        await addItems(conv, [output(callId, 'x'), output(other.message.requiredActions[0].callId, 'y')]),
        400,
        'validation_error',
        'items[1].call_id',
      );
      expectError(
        await addItems(server.conv, [output(serverCallId ?? '', 'x')]),
        400,
        'validation_error',
        'items[0].call_id',
      );
      expectError(
        await addItems(conv, [output(callId, 'x'), output(callId, 'x')]),
        400,
        'validation_error',
        'items[1].call_id',
      );
      // Nothing was stored by the failed requests: the call is still waiting.
      expect((await listAll(conv)).map((item) => item.type)).toEqual(['message', 'function_call']);
      expect((await flow.getMessage(sessionId, message.id)).status).toBe('requires_action');
      expect((await addItems(conv, [output(callId, 'x')])).status).toBe(200);
    });
  });

  describe('items', () => {
    it('lists user and assistant messages in OpenAI shapes', async () => {
      const { conv } = await run('hello there');
      const items = await listAll(conv);
      expect(items).toEqual([
        {
          id: expect.stringMatching(/^msg_/),
          type: 'message',
          role: 'user',
          status: 'completed',
          content: [{ type: 'input_text', text: 'hello there' }],
        },
        {
          id: expect.stringMatching(/^msg_/),
          type: 'message',
          role: 'assistant',
          status: 'completed',
          content: [{ type: 'output_text', text: 'hello there', annotations: [], logprobs: [] }],
        },
      ]);
      expect(new Set(items.map((item) => item.id)).size).toBe(2);
    });

    it('shows a call the service ran as an mcp_call with its result folded in', async () => {
      const { conv, sessionId } = await run('call nothing {}');
      const items = await listAll(conv);
      expect(items.map((item) => item.type)).toEqual(['message', 'mcp_call', 'message']);
      const call = items[1] as Json;
      expect(call).toEqual({
        id: expect.stringMatching(/^fc_/),
        type: 'mcp_call',
        server_label: 'agentry',
        name: 'nothing',
        arguments: '{}',
        output: null,
        error: expect.stringContaining('no tool named "nothing"'),
        status: 'failed',
        approval_request_id: null,
      });
      const one = await h.request('GET', `/v1/conversations/${conv}/items/${call.id}`);
      expect(one.status, one.text).toBe(200);
      expect(json(one)).toEqual(call);
      // The server call's own output row is not an item of the list.
      const hidden = await h.deps.storage.db
        .selectFrom('items')
        .select('id')
        .where('session_id', '=', sessionId)
        .where('type', '=', 'function_call_output')
        .executeTakeFirstOrThrow();
      expectError(await h.request('GET', `/v1/conversations/${conv}/items/${hidden.id}`), 404, 'not_found');
    });

    it('gets one item, and 404s an unknown or foreign item', async () => {
      const { conv } = await run('one item');
      const { conv: otherConv } = await run('another');
      const [user, assistant] = await listAll(conv);
      for (const item of [user, assistant]) {
        const response = await h.request('GET', `/v1/conversations/${conv}/items/${item?.id}`);
        expect(response.status, response.text).toBe(200);
        expect(json(response)).toEqual(item);
      }
      expectError(await h.request('GET', `/v1/conversations/${conv}/items/msg_nope`), 404, 'not_found');
      expectError(await h.request('GET', `/v1/conversations/${otherConv}/items/${user?.id}`), 404, 'not_found');
      expectError(await h.request('GET', `/v1/conversations/conv_${randomUUID()}/items/${user?.id}`), 404, 'not_found');
      expectError(
        await h.request('GET', `/v1/conversations/conv_x/items/${user?.id}`),
        400,
        'validation_error',
        'conversation_id',
      );
    });

    it('returns an empty list for a conversation without messages', async () => {
      const sessionId = await flow.createSession(agentId);
      const response = await h.request('GET', `/v1/conversations/conv_${sessionId}/items`);
      expect(response.status, response.text).toBe(200);
      expect(json(response)).toEqual({ object: 'list', data: [], first_id: null, last_id: null, has_more: false });
    });
  });

  describe('listing order and pagination', () => {
    let conv: string;
    let asc: Json[];

    beforeAll(async () => {
      const sessionId = await flow.createSession(agentId);
      conv = `conv_${sessionId}`;
      // Eleven turns queue behind each other (FIFO): 22 items, more than the default page.
      let lastId = '';
      for (let i = 0; i < 11; i++) lastId = (await flow.submit(sessionId, `turn ${i}`)).id;
      await flow.waitForMessage(sessionId, lastId);
      asc = await listAll(conv);
    });

    it('lists in log order with asc and newest first by default', async () => {
      expect(asc).toHaveLength(22);
      expect(asc.map((item) => `${item.role} ${item.content[0].text}`)).toEqual(
        Array.from({ length: 11 }, (_, i) => [`user turn ${i}`, `assistant turn ${i}`]).flat(),
      );
      const response = await h.request('GET', `/v1/conversations/${conv}/items`);
      expect(response.status, response.text).toBe(200);
      const body = json(response);
      expect(body.data).toEqual([...asc].reverse().slice(0, 20));
      expect(body.has_more).toBe(true);
      expect(body.first_id).toBe(asc[21]?.id);
      expect(body.last_id).toBe(asc[2]?.id);
      expect(await listAll(conv, 'desc')).toEqual([...asc].reverse());
    });

    it.each([
      ['asc', 5],
      ['desc', 5],
      ['asc', 11],
      ['desc', 1],
    ] as const)('pages %s with limit %i and after, without gaps or duplicates', async (order, limit) => {
      const expected = order === 'asc' ? asc : [...asc].reverse();
      const seen: Json[] = [];
      let after: string | null = null;
      for (let page = 0; page < 30; page++) {
        const query: string = `order=${order}&limit=${limit}${after === null ? '' : `&after=${after}`}`;
        const response = await h.request('GET', `/v1/conversations/${conv}/items?${query}`);
        expect(response.status, response.text).toBe(200);
        const body = json(response);
        expect(body.object).toBe('list');
        expect(body.data.length).toBeLessThanOrEqual(limit);
        expect(body.first_id).toBe(body.data[0]?.id);
        expect(body.last_id).toBe(body.data[body.data.length - 1]?.id);
        seen.push(...body.data);
        expect(body.has_more).toBe(seen.length < expected.length);
        if (!body.has_more) break;
        after = body.last_id;
      }
      expect(seen).toEqual(expected);
    });

    it('returns an empty last page after the last item', async () => {
      const response = await h.request('GET', `/v1/conversations/${conv}/items?order=asc&after=${asc[21]?.id}`);
      expect(json(response)).toEqual({ object: 'list', data: [], first_id: null, last_id: null, has_more: false });
    });

    it('rejects bad query values', async () => {
      const base = `/v1/conversations/${conv}/items`;
      expectError(await h.request('GET', `${base}?after=msg_unknown`), 400, 'validation_error', 'after');
      const { conv: otherConv } = await run('elsewhere');
      const foreignItem = (await listAll(otherConv))[0]?.id;
      expectError(await h.request('GET', `${base}?after=${foreignItem}`), 400, 'validation_error', 'after');
      for (const limit of ['0', '101', 'x', '1.5']) {
        expectError(await h.request('GET', `${base}?limit=${limit}`), 400, 'validation_error', 'limit');
      }
      expectError(await h.request('GET', `${base}?order=sideways`), 400, 'validation_error', 'order');
      expectError(await h.request('GET', `${base}?cursor=abc`), 400, 'validation_error');
      // `include` is accepted and ignored.
      expect((await h.request('GET', `${base}?include=message.output_text.logprobs`)).status).toBe(200);
    });
  });

  describe('POST items validation and scopes', () => {
    let conv: string;
    let callId: string;

    beforeAll(async () => {
      const started = await run('call get_weather {"city":"Kyiv"}', ['requires_action'], toolAgentId);
      conv = started.conv;
      callId = started.message.requiredActions[0].callId;
    });

    it.each([
      ['a message item', [{ type: 'message', role: 'user', content: 'hi' }], 'items[0].type'],
      ['a missing type', [{ call_id: 'c', output: 'x' }], 'items[0].type'],
      ['a missing call_id', [{ type: 'function_call_output', output: 'x' }], 'items[0].call_id'],
      ['an empty call_id', [output('', 'x')], 'items[0].call_id'],
      ['a 513-char call_id', [output('c'.repeat(513), 'x')], 'items[0].call_id'],
      ['a missing output', [{ type: 'function_call_output', call_id: 'c' }], 'items[0].output'],
      [
        'an output that is not a string',
        [output('c', 'x', { output: [{ type: 'input_text', text: 'x' }] })],
        'items[0].output',
      ],
      ['an output over 1,000,000 chars', [output('c', 'x'.repeat(1_000_001))], 'items[0].output'],
      ['an unknown field', [output('c', 'x', { extra: 1 })], 'items[0].extra'],
      ['a bad status', [output('c', 'x', { status: 'done' })], 'items[0].status'],
      ['a bad item later', [output('c', 'x'), output('d', 'y', { type: 'mcp_call' })], 'items[1].type'],
      ['no items', [], 'items'],
      ['65 items', Array.from({ length: 65 }, (_, i) => output(`c${i}`, 'x')), 'items'],
    ])('rejects %s', async (_name, items, param) => {
      expectError(await addItems(conv, items), 400, 'validation_error', param);
    });

    it('rejects malformed bodies and conversation ids', async () => {
      const url = `/v1/conversations/${conv}/items`;
      expectError(await h.request('POST', url, { body: {} }), 400, 'validation_error', 'items');
      expectError(await h.request('POST', url, { body: { items: [], metadata: {} } }), 400, 'validation_error');
      expectError(
        await h.request('POST', url, { rawBody: '{', headers: { 'content-type': 'application/json' } }),
        400,
        'invalid_json',
      );
      expectError(await addItems('conv_nope', [output(callId, 'x')]), 400, 'validation_error', 'conversation_id');
      expectError(await addItems(`conv_${randomUUID()}`, [output(callId, 'x')]), 404, 'not_found');
      const other = await h.createOrg(`items-other-${randomUUID()}`);
      expectError(await addItems(conv, [output(callId, 'x')], other.key), 404, 'not_found');
      // The call is still waiting after all of these.
      expect((await listAll(conv)).map((item) => item.type)).toEqual(['message', 'function_call']);
    });

    it('accepts an output of exactly 1,000,000 chars', async () => {
      const big = 'x'.repeat(1_000_000);
      const response = await addItems(conv, [output(callId, big)]);
      expect(response.status, response.text).toBe(200);
      expect(json(response).data[0].output).toBe(big);
      const again = await addItems(conv, [output(callId, big)]);
      expect(json(again).data[0].id).toBe(json(response).data[0].id);
    });

    it('needs tasks:write to add items and tasks:read to read them', async () => {
      const { orgId } = await h.deps.storage.db
        .selectFrom('orgs')
        .select('id as orgId')
        .where('name', '=', 'default')
        .executeTakeFirstOrThrow();
      const readKey = await h.deps.orgs.createKey(orgId, ['tasks:read']);
      const writeKey = await h.deps.orgs.createKey(orgId, ['tasks:write']);
      const started = await run('call get_weather {"city":"Quito"}', ['requires_action'], toolAgentId);
      const pending = started.message.requiredActions[0].callId;

      expectError(await addItems(started.conv, [output(pending, 'x')], readKey), 403, 'insufficient_scopes');
      for (const url of [`/v1/conversations/${started.conv}`, `/v1/conversations/${started.conv}/items`]) {
        expect((await h.request('GET', url, { key: readKey })).status).toBe(200);
        expectError(await h.request('GET', url, { key: writeKey }), 403, 'insufficient_scopes');
      }
      expectError(await addItems(started.conv, [output(pending, 'x')], 'agk_invalid'), 401, 'invalid_api_key');
      const ok = await addItems(started.conv, [output(pending, 'x')], writeKey);
      expect(ok.status, ok.text).toBe(200);
    });
  });

  it('documents the routes in the OpenAPI document', async () => {
    const document = json(await h.request('GET', '/v1/openapi.json', { key: null }));
    const items = document.paths['/v1/conversations/{conversation_id}/items'];
    expect(Object.keys(items.post.responses).sort()).toEqual(['200', '400', '401', '403', '404', '409', '413']);
    expect(Object.keys(items.get.responses).sort()).toEqual(['200', '400', '401', '403', '404']);
    expect(items.post.description).toContain('Required scope: sessions:write (or tasks:write).');
    expect(document.paths['/v1/conversations/{conversation_id}'].get.description).toContain(
      'sessions:read (or tasks:read)',
    );
    expect(document.paths['/v1/conversations/{conversation_id}/items/{item_id}'].get).toBeDefined();
  });
});
