/**
 * POST and GET /v1/responses over the real server (spec 4.1, 7, 8; reference/responses-wire.md 1-3; DESIGN 5, 9):
 * validation, the Response object, conversations, client tools and questions, the SSE event stream, the
 * synchronous timeout, file inputs, OpenAI compatibility mode and organization isolation. `scripted` model, once
 * per dialect.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ASK_USER_QUESTION_SERVER, flows, type Json, waitUntil, weatherTool } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, type Response as HarnessResponse, json } from './helpers/harness.ts';

const WEATHER_TOOL = weatherTool({ description: 'Weather' });
/** A real 1x1 PNG. */
const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==',
  'base64',
);
const RESP_ID = /^resp_[0-9a-f-]{36}$/;
const CONV_ID = /^conv_[0-9a-f-]{36}$/;
const COMPAT = { 'agentry-compat': 'openai' };
const STRICT = { 'agentry-compat': 'strict' };
const output = (callId: string, text: string) => ({ type: 'function_call_output', call_id: callId, output: text });

/** Parses an SSE body and checks the framing of every frame: `event:` = data.type, sequence numbers 0,1,2…, [DONE] last. */
function parseSse(text: string): Json[] {
  expect(text.endsWith('data: [DONE]\n\n'), text.slice(-300)).toBe(true);
  const frames: Json[] = [];
  for (const block of text.slice(0, -'data: [DONE]\n\n'.length).split('\n\n')) {
    const lines = block.split('\n').filter((line) => line !== '' && !line.startsWith(':'));
    if (lines.length === 0) continue;
    const event = lines.find((line) => line.startsWith('event: '))?.slice('event: '.length);
    const payload = lines.flatMap((line) => (line.startsWith('data: ') ? [line.slice('data: '.length)] : []));
    const data = JSON.parse(payload.join('\n'));
    expect(event, block).toBe(data.type);
    frames.push(data);
  }
  expect(frames.map((frame) => frame.sequence_number)).toEqual(frames.map((_, index) => index));
  return frames;
}

describe.each(dialects())('responses (%s)', (dialect) => {
  let h: Harness;
  const flow = flows(() => h, { agentName: 'responses' });
  let base: string;
  let agentId: string;
  let toolAgentId: string;
  let askAgentId: string;
  let other: { orgId: string; key: string };

  beforeAll(async () => {
    h = await createHarness(dialect);
    base = await h.listen();
    agentId = await flow.createAgent({});
    toolAgentId = await flow.createAgent({ clientTools: [WEATHER_TOOL] });
    askAgentId = await flow.createAgent({ mcpServers: [ASK_USER_QUESTION_SERVER] });
    other = await h.createOrg(`responses-other-${randomUUID()}`);
  });
  afterAll(() => h.close());

  const post = (body: Json, headers: Record<string, string> = {}, key = h.key) =>
    h.request('POST', '/v1/responses', { body, headers, key });

  async function create(body: Json, headers: Record<string, string> = {}): Promise<Json> {
    const response = await post(body, headers);
    expect(response.status, response.text).toBe(200);
    return json(response);
  }

  const expectError = (response: HarnessResponse, status: number, code: string, param?: string | null) => {
    expect(response.status, response.text).toBe(status);
    expect(json(response).error.code, response.text).toBe(code);
    if (param !== undefined) expect(json(response).error.param, response.text).toBe(param);
  };

  /** Posts a body that must fail with this status, code and (when given) param; a 409 says not to retry. */
  async function fails(body: Json, status: number, code: string, param?: string, headers: Record<string, string> = {}) {
    const response = await post(body, headers);
    expectError(response, status, code, param);
    if (status === 409) expect(response.headers['x-should-retry']).toBe('false');
    return response;
  }

  async function items(conv: string): Promise<Json[]> {
    const response = await h.request('GET', `/v1/conversations/${conv}/items?order=asc&limit=100`);
    expect(response.status, response.text).toBe(200);
    return json(response).data;
  }

  const fetchPost = (body: Json, headers: Record<string, string> = {}) =>
    fetch(`${base}/v1/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${h.key}`, 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ ...body, stream: true }),
    });

  async function stream(body: Json, headers: Record<string, string> = {}): Promise<Json[]> {
    const response = await fetchPost(body, headers);
    const text = await response.text();
    expect(response.status, text).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
    return parseSse(text);
  }

  const types = (frames: Json[]) => frames.map((frame) => frame.type);

  describe('validation', () => {
    it('answers 400 naming the parameter, and 404 for unknown or foreign agents and conversations', async () => {
      const conv = `conv_${randomUUID()}`;
      const messages = (n: number) => Array.from({ length: n }, () => ({ role: 'user', content: 'hi' }));
      const outputs = (n: number) => Array.from({ length: n }, (_, i) => output(`call_${i}`, 'x'));
      const parts = (...content: Json[]) => [{ role: 'user', content }];
      const a = (input: unknown, extra: Json = {}) => ({ model: agentId, input, ...extra });
      const cases: [Json, string][] = [
        [{ input: 'hi' }, 'model'],
        [{ model: 'not-a-uuid', input: 'hi' }, 'model'],
        [{ model: agentId }, 'input'],
        [a(''), 'input'],
        [a('x'.repeat(100_001)), 'input'],
        [a(messages(33)), 'input'],
        [a([{ role: 'assistant', content: 'hi' }]), 'input[0].role'],
        [a(parts(...Array(33).fill({ type: 'input_text', text: 'a' }))), 'input[0].content'],
        [a(parts({ type: 'input_audio' })), 'input[0].content[0].type'],
        [a(parts({ type: 'input_file', file_id: 'file-abc' })), 'input[0].content[0].file_id'],
        [a(outputs(65), { conversation: conv }), 'input'],
        [a([output('c'.repeat(513), 'x')], { conversation: conv }), 'input[0].call_id'],
        [a([output('call_1', 'x'.repeat(1_000_001))], { conversation: conv }), 'input[0].output'],
        [a([output('call_1', 'x')]), 'conversation'],
        [a([...messages(1), output('call_1', 'x')], { conversation: conv }), 'input'],
        [a('hi', { store: false, conversation: conv }), 'store'],
        [a('hi', { background: true, store: false }), 'background'],
        [a('hi', { temperature: 0.5 }), 'temperature'],
        [a('hi', { conversation: 'abc' }), 'conversation'],
        [a('hi', { conversation: 'conv_nope' }), 'conversation'],
      ];
      for (const [body, param] of cases) {
        const response = await post(body, STRICT);
        expect(response.status, `${param}: ${response.text.slice(0, 300)}`).toBe(400);
        expect(json(response).error, response.text.slice(0, 300)).toMatchObject({ code: 'validation_error', param });
      }

      // What model is, and where the agents are listed, when a vendor's model name arrives (in either mode).
      for (const headers of [STRICT, COMPAT]) {
        expect(json(await post({ model: 'gpt-4o', input: 'hi' }, headers)).error).toMatchObject({
          param: 'model',
          message:
            'model names one of your agents (its id, its name or agent:<name>); no agent is named "gpt-4o" (GET /v1/models or GET /v1/agents lists them)',
        });
      }

      const foreignAgent = await flow.createAgent({}, other.key);
      await fails({ model: foreignAgent, input: 'hi' }, 404, 'not_found');
      await fails({ model: randomUUID(), input: 'hi' }, 404, 'not_found');
      const foreignConv = json(await post({ model: foreignAgent, input: 'hi' }, {}, other.key)).conversation.id;
      expect(foreignConv).toMatch(CONV_ID);
      await fails(a('hi', { conversation: foreignConv }), 404, 'not_found');
      await fails(a('hi', { conversation: `conv_${randomUUID()}` }), 404, 'not_found');
      const { conversation } = await create(a('hi'));
      await fails({ model: toolAgentId, input: 'hi', conversation }, 400, 'validation_error', 'model');
    });
  });

  describe('non-streaming', () => {
    it('returns the full Response object of the wire reference', async () => {
      const before = Math.floor(Date.now() / 1000);
      const response = await create({ model: agentId, input: 'Hello there, agent' });
      expect(response).toMatchObject({
        object: 'response',
        status: 'completed',
        model: agentId,
        output_text: 'Hello there, agent',
        error: null,
        incomplete_details: null,
        metadata: {},
        tools: [],
        tool_choice: 'auto',
        parallel_tool_calls: true,
      });
      expect(response.id).toMatch(RESP_ID);
      expect(response.conversation.id).toMatch(CONV_ID);
      expect(response.created_at).toBeGreaterThanOrEqual(before);
      const part = { type: 'output_text', text: 'Hello there, agent', annotations: [], logprobs: [] };
      const message = { type: 'message', role: 'assistant', status: 'completed', content: [part] };
      expect(response.output).toEqual([{ id: expect.stringMatching(/^msg_/), ...message }]);
      const details = { input_tokens_details: { cached_tokens: 0 }, output_tokens_details: { reasoning_tokens: 0 } };
      expect(response.usage).toEqual({ input_tokens: 5, output_tokens: 5, total_tokens: 10, ...details });

      const fetched = await h.request('GET', `/v1/responses/${response.id}`);
      expect(fetched.status, fetched.text).toBe(200);
      expect(json(fetched)).toEqual(response);
      expectError(await h.request('GET', `/v1/responses/resp_${randomUUID()}`), 404, 'not_found');
      expectError(await h.request('GET', '/v1/responses/resp_nope'), 400, 'validation_error', 'id');
      expectError(await h.request('GET', `/v1/responses/${response.id}`, { key: other.key }), 404, 'not_found');
    });

    it('continues a conversation: the second call sees the first exchange', async () => {
      const first = await create({ model: agentId, input: 'hello one' });
      const conv = first.conversation.id;
      const second = await create({ model: agentId, input: 'hello two', conversation: { id: conv } });
      expect(second.conversation.id).toBe(conv);
      expect(second.output_text).toBe('hello two');
      // The context of the second call holds the first exchange: 27 characters instead of 9.
      expect(first.usage.input_tokens).toBe(3);
      expect(second.usage.input_tokens).toBe(7);
      const log = await items(conv);
      expect(log.map((item) => [item.role, item.content[0].text])).toEqual([
        ['user', 'hello one'],
        ['assistant', 'hello one'],
        ['user', 'hello two'],
        ['assistant', 'hello two'],
      ]);
      expect(log[1]?.id).toBe(first.output[0].id);
      expect(log[3]?.id).toBe(second.output[0].id);
    });

    it('reports a failing turn as status failed with the model error', async () => {
      const response = await create({ model: agentId, input: 'fail boom' });
      expect(response.status).toBe('failed');
      expect(response.error).toEqual({ code: 'model_error', message: 'boom' });
      expect(json(await h.request('GET', `/v1/responses/${response.id}`))).toEqual(response);
    });

    it('replays an Idempotency-Key with the same body and refuses it with another body', async () => {
      const key = randomUUID();
      const body = { model: agentId, input: 'once only' };
      const first = await post(body, { 'idempotency-key': key });
      expect(first.status, first.text).toBe(200);
      const again = await post(body, { 'idempotency-key': key });
      expect(again.status, again.text).toBe(200);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(json(again).id).toBe(json(first).id);
      const changed = { ...body, input: 'something else' };
      await fails(changed, 409, 'idempotency_conflict', undefined, { 'idempotency-key': key });
    });
  });

  describe('client tools and questions', () => {
    it('returns a function_call, requires its output, and continues with it', async () => {
      const script = 'call get_weather {"city":"Paris"}\n---\nDone';
      const first = await create({ model: toolAgentId, input: script });
      expect(first.status).toBe('completed');
      const call = { type: 'function_call', name: 'get_weather', arguments: '{"city":"Paris"}', status: 'completed' };
      expect(first.output).toEqual([{ id: expect.stringMatching(/^fc_/), call_id: expect.any(String), ...call }]);
      const conv = first.conversation.id;
      const callId = first.output[0].call_id;
      const on = (input: unknown) => ({ model: toolAgentId, conversation: conv, input });

      await fails(on('new question'), 409, 'client_tool_output_required');
      await fails(on([output('call_unknown', '18C')]), 400, 'validation_error', 'input[0].call_id');
      const answered = await create(on([output(callId, '18C')]));
      expect(answered).toMatchObject({ status: 'completed', output_text: 'Done' });
      expect(answered.conversation.id).toBe(conv);
      expect(answered.id).not.toBe(first.id);

      // The same output again holds nothing new; a different one conflicts with the recorded result.
      await fails(on([output(callId, '18C')]), 400, 'validation_error', 'input');
      await fails(on([output(callId, '25C')]), 409, 'function_call_output_conflict');
      expect((await items(conv)).filter((item) => item.type === 'function_call_output')).toHaveLength(1);
    });

    it('needs the outputs of parallel calls together', async () => {
      const script = 'call get_weather {"city":"Paris"}\ncall get_weather {"city":"Rome"}\n---\nBoth known';
      const first = await create({ model: toolAgentId, input: script });
      const calls = first.output.filter((item: Json) => item.type === 'function_call');
      expect(calls.map((call: Json) => JSON.parse(call.arguments).city)).toEqual(['Paris', 'Rome']);
      const on = (...input: Json[]) => ({ model: toolAgentId, conversation: first.conversation.id, input });
      const partial = await fails(on(output(calls[0].call_id, 'sun')), 400, 'validation_error', 'input');
      expect(json(partial).error.message).toMatch(/^No tool output found/);
      const both = await create(on(output(calls[0].call_id, 'sun'), output(calls[1].call_id, 'rain')));
      expect(both).toMatchObject({ status: 'completed', output_text: 'Both known' });
    });

    it('previews the run of tool outputs alone (previous_response_id) as the outputs it sent', async () => {
      const first = await create({ model: toolAgentId, input: 'call get_weather {"city":"Oslo"}\n---\nCold' });
      const callId = first.output[0].call_id;
      const long = 'x'.repeat(1200);
      const answered = await create({
        model: toolAgentId,
        previous_response_id: first.id,
        input: [output(callId, `snow ${long}`)],
      });
      expect(answered).toMatchObject({ status: 'completed', output_text: 'Cold' });
      const runs = json(await h.request('GET', `/v1/runs?conversation_id=${first.conversation.id}`)).data;
      const run = runs.find((each: Json) => each.response_id === answered.id);
      expect(run.input_preview).toBe(`[tool output ${callId}] snow ${long}`.slice(0, 1000));
      // Its model call answers the output, which is stored with the turn that called the tool.
      const trace = json(await h.request('GET', `/v1/runs/${run.id}/trace`)).data;
      const modelCall = trace.find((span: Json) => span.kind === 'model_call');
      expect(modelCall?.input_preview).toBe(`get_weather: snow ${long}`.slice(0, 1000));
    });

    it('returns a question as an ask_user_question function_call, answered by a function_call_output', async () => {
      const first = await create({ model: askAgentId, input: 'ask Your name?\n---\nHi there' });
      expect(first.status).toBe('completed');
      const question = { type: 'function_call', name: 'ask_user_question', arguments: '{"question":"Your name?"}' };
      expect(first.output).toEqual([expect.objectContaining(question)]);
      const { conversation } = first;
      const answered = await create({
        model: askAgentId,
        conversation,
        input: [output(first.output[0].call_id, 'Ada')],
      });
      expect(answered).toMatchObject({ status: 'completed', output_text: 'Hi there' });
    });
  });

  describe('streaming', () => {
    it('streams the text lifecycle and ends with the full Response', async () => {
      const text = 'one two three four five six';
      const frames = await stream({ model: agentId, input: text });
      const deltas = frames.filter((frame) => frame.type === 'response.output_text.delta');
      expect(deltas.length).toBeGreaterThanOrEqual(2);
      expect(types(frames)).toEqual([
        'response.created',
        'response.in_progress',
        'response.output_item.added',
        'response.content_part.added',
        ...deltas.map(() => 'response.output_text.delta'),
        'response.output_text.done',
        'response.content_part.done',
        'response.output_item.done',
        'response.completed',
      ]);
      expect(frames[0]?.response).toMatchObject({ object: 'response', output: [], model: agentId });
      const terminal = frames.at(-1)?.response;
      const itemId = terminal.output[0].id;
      expect(frames[2]).toMatchObject({ output_index: 0, item: { id: itemId, type: 'message', role: 'assistant' } });
      for (const frame of frames.slice(3, -2)) expect(frame).toMatchObject({ item_id: itemId, output_index: 0 });
      expect(deltas.map((delta) => delta.delta).join('')).toBe(text);
      expect(frames.at(-4)).toMatchObject({ type: 'response.output_text.done', text });
      expect(frames.at(-2)).toMatchObject({ output_index: 0, item: terminal.output[0] });
      expect(terminal).toMatchObject({ status: 'completed', output_text: text, id: frames[0]?.response.id });
      expect(json(await h.request('GET', `/v1/responses/${terminal.id}`))).toEqual(terminal);
    });

    it('streams a function call with the vendor action_required event unless standard events are asked for', async () => {
      const body = { model: toolAgentId, input: 'call get_weather {"city":"Paris"}\n---\nDone' };
      const frames = await stream(body);
      const terminal = frames.at(-1)?.response;
      const call = terminal.output[0];
      expect(call).toMatchObject({ type: 'function_call', name: 'get_weather', arguments: '{"city":"Paris"}' });
      expect(types(frames)).toEqual([
        'response.created',
        'response.in_progress',
        'response.output_item.added',
        'response.function_call_arguments.delta',
        'response.function_call_arguments.done',
        'response.output_item.done',
        'response.agentry_tool_call.action_required',
        'response.completed',
      ]);
      expect(frames[4]).toMatchObject({ item_id: call.id, output_index: 0, name: 'get_weather' });
      const run = json(await h.request('GET', `/v1/runs?conversation_id=${terminal.conversation.id}`)).data[0];
      expect(frames[6]).toEqual({
        type: 'response.agentry_tool_call.action_required',
        sequence_number: 6,
        response_id: terminal.id,
        run_id: run.id,
        step: expect.any(Number),
        source_type: 'tool_client',
        data: expect.objectContaining({ call_id: call.call_id, name: 'get_weather' }),
      });
      expect(terminal.status).toBe('completed');

      const standard = await stream(body, { 'agentry-stream-events': 'standard' });
      expect(types(standard).filter((type) => type.startsWith('response.agentry_tool_call.'))).toEqual([]);
      expect(types(standard)).toContain('response.function_call_arguments.done');
    });

    it('streams a failing turn as response.failed', async () => {
      const frames = await stream({ model: agentId, input: 'fail x' });
      expect(types(frames).slice(0, 2)).toEqual(['response.created', 'response.in_progress']);
      const failed = { status: 'failed', error: { code: 'model_error', message: 'x' } };
      expect(frames.at(-1)).toMatchObject({ type: 'response.failed', response: failed });
    });

    it('streams an unknown server-side tool as a failed mcp_call, then the reply', async () => {
      const frames = await stream({ model: agentId, input: 'call nothing {}\n---\nrecovered' });
      const added = frames.find((frame) => frame.type === 'response.output_item.added');
      expect(added?.item).toMatchObject({ type: 'mcp_call', name: 'nothing', server_label: 'agentry' });
      const find = (type: string) => frames.find((frame) => frame.type === type);
      expect(find('response.mcp_call.failed')).toMatchObject({ item_id: added?.item.id, output_index: 0 });
      const vendorFailed = {
        response_id: expect.stringMatching(RESP_ID),
        data: expect.objectContaining({ name: 'nothing' }),
      };
      expect(find('response.agentry_tool_call.failed')).toMatchObject(vendorFailed);
      const terminal = frames.at(-1)?.response;
      expect(terminal).toMatchObject({ status: 'completed', output_text: 'recovered' });
      expect(terminal.output[0]).toMatchObject({ type: 'mcp_call', status: 'failed', output: null });
      expect(terminal.output[0].error).toEqual(expect.any(String));
    });

    it('answers errors before the stream as plain JSON', async () => {
      const response = await fetchPost({ model: randomUUID(), input: 'hi' });
      expect(response.status).toBe(404);
      expect(response.headers.get('content-type')).toMatch(/^application\/json/);
      expect(((await response.json()) as Json).error.code).toBe('not_found');
    });
  });

  describe('files', () => {
    async function upload(data: Uint8Array | string, name: string, type: string, key = h.key): Promise<string> {
      const form = new FormData();
      form.append('file', new Blob([data], { type }), name);
      const init = { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: form };
      const response = await fetch(`${base}/v1/files`, init);
      const body = (await response.json()) as Json;
      expect(response.status, JSON.stringify(body)).toBe(201);
      return body.id;
    }
    const withFile = (file: Json) => [{ role: 'user', content: [{ type: 'input_text', text: 'summarise' }, file] }];

    it('reads a text file and an image given as input parts', async () => {
      const notes = 'The quarterly numbers went up by four percent.';
      const textId = await upload(notes, 'notes.txt', 'text/plain');
      const plain = await create({ model: agentId, input: 'summarise' });
      const read = await create({ model: agentId, input: withFile({ type: 'input_file', file_id: textId }) });
      expect(read.status).toBe('completed');
      // The scripted model echoes what it read: the text and the file's content.
      expect(read.output_text).toContain('summarise');
      expect(read.output_text).toContain(notes);
      expect(read.usage.input_tokens).toBeGreaterThanOrEqual(plain.usage.input_tokens + notes.length / 4);
      const log = await items(read.conversation.id);
      expect(log[0]).toMatchObject({ role: 'user', content: [{ type: 'input_text', text: 'summarise' }] });

      const imageId = await upload(PNG, 'pixel.png', 'image/png');
      const imageInput = withFile({ type: 'input_image', file_id: imageId, detail: 'low' });
      const image = await create({ model: agentId, input: imageInput });
      expect(image).toMatchObject({ status: 'completed', output_text: 'summarise' });
    });

    it('previews the run of an input of files alone as the files it gave', async () => {
      const imageId = await upload(PNG, 'pixel.png', 'image/png');
      const input = [{ role: 'user', content: [{ type: 'input_image', file_id: imageId, detail: 'low' }] }];
      const response = await create({ model: agentId, input });
      expect(response.status).toBe('completed');
      const runs = json(await h.request('GET', `/v1/runs?conversation_id=${response.conversation.id}`)).data;
      expect(runs).toEqual([expect.objectContaining({ response_id: response.id, input_preview: '[image]' })]);
      // Its model call names the files the same way.
      const trace = json(await h.request('GET', `/v1/runs/${runs[0].id}/trace`)).data;
      const modelCall = trace.find((span: Json) => span.kind === 'model_call');
      expect(modelCall?.input_preview).toBe('[image]');
    });

    it('refuses files a model cannot read (400 on file_id) and other organizations’ files (404)', async () => {
      const binId = await upload(new Uint8Array([0, 1, 2, 3]), 'blob.bin', 'application/octet-stream');
      const file = (fileId: string) => ({ model: agentId, input: withFile({ type: 'input_file', file_id: fileId }) });
      await fails(file(await upload('secret', 'secret.txt', 'text/plain', other.key)), 404, 'not_found');
      await fails(file(binId), 400, 'validation_error', 'input[0].content[1].file_id');
    });
  });

  describe('compatibility mode', () => {
    it('accepts instructions, sampling settings, metadata and include, and echoes them', async () => {
      const echoed = { instructions: 'Be brief.', temperature: 0.5, top_p: 0.9, metadata: { ticket: 'T-1' } };
      const response = await create({ model: agentId, input: 'hi there', ...echoed, include: [] }, COMPAT);
      expect(response).toMatchObject({ status: 'completed', output_text: 'hi there', ...echoed });
      expect(json(await h.request('GET', `/v1/responses/${response.id}`)).metadata).toEqual({ ticket: 'T-1' });
    });

    it('refuses a field OpenAI does not know either, naming it', async () => {
      const body = { model: agentId, input: 'hi there', some_future_field: { anything: true } };
      const refused = await h.request('POST', '/v1/responses', { body, headers: COMPAT });
      expect(refused.status).toBe(400);
      expect(json(refused).error).toMatchObject({ param: 'some_future_field', type: 'invalid_request_error' });
    });

    it('turns a per-response function tool into a client tool', async () => {
      const lookup = { type: 'function', name: 'lookup', description: 'Look it up', parameters: {}, strict: false };
      const response = await create({ model: agentId, input: 'call lookup {}', tools: [lookup] }, COMPAT);
      const call = { type: 'function_call', name: 'lookup', arguments: '{}' };
      expect(response.output).toEqual([expect.objectContaining(call)]);
      expect(response.tools).toEqual([expect.objectContaining({ type: 'function', name: 'lookup' })]);
    });

    it('continues with previous_response_id and does not duplicate replayed items', async () => {
      const first = await create({ model: agentId, input: 'first words' }, COMPAT);
      const next = await create({ model: agentId, input: 'next words', previous_response_id: first.id }, COMPAT);
      expect(next.conversation.id).toBe(first.conversation.id);
      expect(next.output_text).toBe('next words');
      const conv = first.conversation.id;
      const before = await items(conv);
      expect(before).toHaveLength(4);

      // The first user item and the first reply, replayed with their ids, then one new message.
      const input = [
        { type: 'message', role: 'user', content: 'first words', id: before[0]?.id },
        first.output[0],
        { role: 'user', content: 'third words' },
      ];
      const replayed = await create({ model: agentId, conversation: conv, input }, COMPAT);
      expect(replayed.output_text).toBe('third words');
      const after = await items(conv);
      expect(after.slice(0, 4)).toEqual(before);
      expect(after.slice(4).map((item) => [item.role, item.content[0].text])).toEqual([
        ['user', 'third words'],
        ['assistant', 'third words'],
      ]);
    });
  });
});

describe.each(dialects())('responses sync timeout (%s)', (dialect) => {
  let h: Harness;
  beforeAll(async () => {
    h = await createHarness(dialect, { AGENTRY_RESPONSES_SYNC_TIMEOUT_MS: '300' });
  });
  afterAll(() => h.close());

  it('answers 504 response_timeout and lets the turn finish', async () => {
    const agent = await h.request('POST', '/v1/agents', { body: { name: 'slow' } });
    const agentId = json(agent).agent.id;
    // The turn sleeps 1.5 s: a 504 means the 0.3 s limit answered, not the turn's end.
    const response = await h.request('POST', '/v1/responses', { body: { model: agentId, input: 'sleep 1500\nawake' } });
    expect(response.status, response.text).toBe(504);
    expect(json(response).error.code).toBe('response_timeout');
    expect(response.headers['x-should-retry']).toBe('false');

    const runs = json(await h.request('GET', `/v1/runs?agent_id=${agentId}`)).data;
    expect(runs).toHaveLength(1);
    const id = runs[0].response_id;
    expect(json(response).error.message).toContain(id);
    const last = await waitUntil(
      async () => {
        const body: Json = json(await h.request('GET', `/v1/responses/${id}`));
        return body.status === 'completed' ? body : null;
      },
      { what: `response ${id} to complete`, everyMs: 25 },
    );
    expect(last).toMatchObject({ status: 'completed', output_text: 'awake' });
  });
});
