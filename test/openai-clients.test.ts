/**
 * The real OpenAI clients against the real server, as a user would run them, with their defaults and no extra
 * header (reference/responses-wire.md 0-6): `openai` (responses create / stream / retrieve / inputItems / cancel /
 * delete, conversations, models) and `@openai/agents` (run in stateless, conversation, session and streaming modes
 * with a function tool). `scripted` model, once per dialect. The Agents SDK keeps its client in global settings,
 * so the tests of this file run one after another.
 */
import {
  Agent,
  OpenAIConversationsSession,
  OpenAIProvider,
  Runner,
  setDefaultOpenAIClient,
  setOpenAIAPI,
  setTracingDisabled,
  tool,
} from '@openai/agents';
import OpenAI from 'openai';
import type {
  Response as OpenAIResponse,
  ResponseFunctionToolCall,
  ResponseStreamEvent,
} from 'openai/resources/responses/responses';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ASK_USER_QUESTION_SERVER, flows, WEATHER_TOOL } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';

const TWO_CALLS = 'call get_weather {"city":"Paris"}\n---\ncall get_weather {"city":"Rome"}\n---\nAll done';
const WEATHER: Record<string, string> = { Paris: 'sunny', Rome: 'rainy' };

const calls = (response: OpenAIResponse): ResponseFunctionToolCall[] =>
  response.output.filter((item): item is ResponseFunctionToolCall => item.type === 'function_call');

/** The function_call_output answering the single function call of a response. */
function answer(response: OpenAIResponse) {
  const [call] = calls(response);
  expect(call, JSON.stringify(response.output)).toBeDefined();
  const city = JSON.parse(call?.arguments ?? '{}').city as string;
  return { type: 'function_call_output' as const, call_id: call?.call_id ?? '', output: WEATHER[city] ?? 'unknown' };
}

describe.each(dialects())('OpenAI clients (%s)', (dialect) => {
  let h: Harness;
  const flow = flows(() => h, { agentName: 'clients' });
  let client: OpenAI;
  let agentId: string;
  let toolAgentId: string;
  let askAgentId: string;
  let runner: Runner;

  beforeAll(async () => {
    h = await createHarness(dialect);
    const base = await h.listen();
    client = new OpenAI({ apiKey: h.key, baseURL: `${base}/v1` });
    agentId = await flow.createAgent({});
    toolAgentId = await flow.createAgent({ clientTools: [WEATHER_TOOL] });
    askAgentId = await flow.createAgent({ mcpServers: [ASK_USER_QUESTION_SERVER] });
    setTracingDisabled(true);
    setOpenAIAPI('responses');
    // The client exactly as users make it: no Agentry-Compat header, no stream-events header.
    setDefaultOpenAIClient(new OpenAI({ apiKey: h.key, baseURL: `${base}/v1` }));
    // `run()` uses one process-wide Runner whose provider keeps the first client it saw (the first dialect's
    // server); a Runner with a fresh OpenAIProvider reads the default client set just above.
    runner = new Runner({ modelProvider: new OpenAIProvider() });
  });
  afterAll(() => h.close());

  describe('openai', () => {
    it('creates and retrieves a response', async () => {
      const response = await client.responses.create({ model: agentId, input: 'Hello from the SDK' });
      expect(response.object).toBe('response');
      expect(response.status).toBe('completed');
      expect(response.output_text).toBe('Hello from the SDK');
      expect(response.conversation?.id).toMatch(/^conv_/);
      const retrieved = await client.responses.retrieve(response.id);
      expect(retrieved).toEqual(response);
    });

    it('maps error statuses to the typed errors', async () => {
      const missing = await client.responses.create({ model: crypto.randomUUID(), input: 'x' }).catch((e) => e);
      expect(missing).toBeInstanceOf(OpenAI.NotFoundError);
      const bad = await client.responses.create({ model: 'nope', input: 'x' }).catch((e) => e);
      expect(bad).toBeInstanceOf(OpenAI.BadRequestError);
      expect(bad).toMatchObject({ status: 400, param: 'model' });
    });

    it("says what model is here when given another vendor's model name", async () => {
      const vendor = await client.responses.create({ model: 'gpt-4o', input: 'x' }).catch((e) => e);
      expect(vendor).toBeInstanceOf(OpenAI.BadRequestError);
      expect(vendor).toMatchObject({ status: 400, param: 'model', code: 'validation_error' });
      expect(vendor.message).toBe(
        '400 model names one of your agents (its id, its name or agent:<name>); no agent is named "gpt-4o" (GET /v1/models or GET /v1/agents lists them)',
      );
    });

    it('takes the name of an agent as model when exactly one agent has it', async () => {
      const name = `named ${dialect}`;
      const named = await flow.createAgent({ name });
      const response = await client.responses.create({ model: name, input: 'by name' });
      expect(response).toMatchObject({ status: 'completed', model: named, output_text: 'by name' });
      const conversation = response.conversation?.id ?? '';
      const next = await client.responses.create({ model: name, conversation, input: 'on' });
      expect(next.conversation?.id).toBe(conversation);
      // Every agent of this file but that one is named "clients".
      const ambiguous = await client.responses.create({ model: 'clients', input: 'x' }).catch((e) => e);
      expect(ambiguous).toMatchObject({ status: 400, param: 'model' });
      expect(ambiguous.message).toBe(
        '400 several of your agents are named "clients"; use the id of the one you mean as model (GET /v1/models or GET /v1/agents lists them)',
      );
    });

    it('iterates a raw stream in the lifecycle order, ending with response.completed', async () => {
      const stream = await client.responses.create({
        model: agentId,
        input: 'streamed words arrive here',
        stream: true,
      });
      const events: ResponseStreamEvent[] = [];
      for await (const event of stream) events.push(event);
      const types = [...new Set(events.map((event) => event.type))];
      expect(types).toEqual([
        'response.created',
        'response.in_progress',
        'response.output_item.added',
        'response.content_part.added',
        'response.output_text.delta',
        'response.output_text.done',
        'response.content_part.done',
        'response.output_item.done',
        'response.completed',
      ]);
      const last = events.at(-1);
      expect(last?.type).toBe('response.completed');
      if (last?.type !== 'response.completed') return;
      expect(last.response.output_text ?? 'streamed words arrive here').toBe('streamed words arrive here');
      expect(last.response.output[0]).toMatchObject({
        type: 'message',
        content: [{ type: 'output_text', text: 'streamed words arrive here' }],
      });
      expect(events.map((event) => event.sequence_number)).toEqual(events.map((_, index) => index));
    });

    it('runs the responses.stream helper to its final response', async () => {
      const stream = client.responses.stream({ model: agentId, input: 'helper text here' });
      const deltas: string[] = [];
      stream.on('response.output_text.delta', (event) => deltas.push(event.delta));
      const final = await stream.finalResponse();
      expect(final.status).toBe('completed');
      expect(final.output_text).toBe('helper text here');
      expect(deltas.join('')).toBe('helper text here');
      // The helper adds `parsed: null` to text parts; otherwise the final response is what retrieve returns.
      const retrieved = await client.responses.retrieve(final.id);
      expect(final.output).toMatchObject(retrieved.output);

      const tooled = await client.responses.stream({ model: toolAgentId, input: TWO_CALLS }).finalResponse();
      expect(calls(tooled)).toEqual([
        expect.objectContaining({
          name: 'get_weather',
          arguments: '{"city":"Paris"}',
          id: expect.stringMatching(/^fc_/),
        }),
      ]);
    });

    it('persists a client tool output through conversations.items.create', async () => {
      const response = await client.responses.create({ model: toolAgentId, input: TWO_CALLS });
      const conversation = response.conversation?.id ?? '';
      const fco = answer(response);
      const created = await client.conversations.items.create(conversation, { items: [fco] });
      expect(created.data).toEqual([
        {
          id: expect.any(String),
          type: 'function_call_output',
          call_id: fco.call_id,
          output: 'sunny',
          status: 'completed',
        },
      ]);
      // An identical retry returns the same item; the list shows it after its call.
      const retried = await client.conversations.items.create(conversation, { items: [fco] });
      expect(retried.data[0]?.id).toBe(created.data[0]?.id);
      const listed = [];
      for await (const item of client.conversations.items.list(conversation, { order: 'asc' })) listed.push(item);
      expect(listed.map((item) => item.type)).toEqual(['message', 'function_call', 'function_call_output']);
      expect(listed[2]).toEqual(created.data[0]);
      const conflict = await client.conversations.items
        .create(conversation, { items: [{ ...fco, output: 'snow' }] }, { maxRetries: 0 })
        .catch((e) => e);
      expect(conflict).toBeInstanceOf(OpenAI.ConflictError);
      // The turn has every output it waited for: the conversation takes new input.
      const next = await client.responses.create({ model: toolAgentId, conversation, input: 'thanks' });
      expect(next.output_text).toBe('thanks');
    });

    it('drives a two-tool-call run by hand with function_call_output responses', async () => {
      const first = await client.responses.create({ model: toolAgentId, input: TWO_CALLS });
      const conversation = first.conversation?.id ?? '';
      expect(JSON.parse(calls(first)[0]?.arguments ?? '').city).toBe('Paris');
      const second = await client.responses.create({ model: toolAgentId, conversation, input: [answer(first)] });
      expect(JSON.parse(calls(second)[0]?.arguments ?? '').city).toBe('Rome');
      const third = await client.responses.create({ model: toolAgentId, conversation, input: [answer(second)] });
      expect(third.status).toBe('completed');
      expect(third.output_text).toBe('All done');
      expect(third.conversation?.id).toBe(conversation);
    });

    it('drives the same run by hand over streams', async () => {
      const first = await client.responses.stream({ model: toolAgentId, input: TWO_CALLS }).finalResponse();
      const conversation = first.conversation?.id ?? '';
      const second = await client.responses
        .stream({ model: toolAgentId, conversation, input: [answer(first)] })
        .finalResponse();
      expect(JSON.parse(calls(second)[0]?.arguments ?? '').city).toBe('Rome');
      // The last leg through the raw stream, with the vendor events left in.
      const raw = await client.responses.create({
        model: toolAgentId,
        conversation,
        input: [answer(second)],
        stream: true,
      });
      let final: OpenAIResponse | undefined;
      const types: string[] = [];
      for await (const event of raw) {
        types.push(event.type);
        if (event.type === 'response.completed') final = event.response;
      }
      expect(final?.status).toBe('completed');
      expect(final?.output).toEqual([expect.objectContaining({ type: 'message' })]);
      expect((await client.responses.retrieve(final?.id ?? '')).output_text).toBe('All done');
    });

    it('gets compatibility mode without a header: instructions, tools and include are accepted', async () => {
      const lookup = { type: 'function' as const, name: 'lookup', parameters: {}, strict: false };
      const { data, response } = await client.responses
        .create({ model: agentId, input: 'defaults work', instructions: 'Be brief.', include: [], tools: [lookup] })
        .withResponse();
      expect(response.headers.get('agentry-compat')).toBe('openai');
      expect(data).toMatchObject({ status: 'completed', output_text: 'defaults work', instructions: 'Be brief.' });
      expect(data.tools).toEqual([
        { type: 'function', name: 'lookup', description: null, parameters: {}, strict: false },
      ]);
    });

    it('streams a client tool call and a question through responses.stream() with no extra header', async () => {
      const tooled = await client.responses
        .stream({ model: toolAgentId, input: 'call get_weather {"city":"Paris"}' })
        .finalResponse();
      expect(calls(tooled)).toEqual([expect.objectContaining({ name: 'get_weather', arguments: '{"city":"Paris"}' })]);
      const asked = await client.responses.stream({ model: askAgentId, input: 'ask Your name?' }).finalResponse();
      expect(calls(asked)).toEqual([
        expect.objectContaining({ name: 'ask_user_question', arguments: '{"question":"Your name?"}' }),
      ]);
      // A raw stream of the same package keeps the vendor events, for clients that read them.
      const raw = await client.responses.create({ model: askAgentId, input: 'ask Your age?', stream: true });
      const types: string[] = [];
      for await (const event of raw) types.push(event.type);
      expect(types).toContain('response.agentry_tool_call.action_required');
    });

    it('lists the agents as models', async () => {
      const models = [];
      for await (const model of client.models.list()) models.push(model);
      expect(models.map((model) => model.id)).toEqual(expect.arrayContaining([agentId, toolAgentId, 'scripted']));
      expect(models.find((model) => model.id === agentId)).toMatchObject({ object: 'model', owned_by: 'default' });
    });

    it('creates, updates and deletes a conversation, with message items, and fixes its agent by the first response', async () => {
      const conversation = await client.conversations.create({
        metadata: { topic: 'cats' },
        items: [{ type: 'message', role: 'user', content: 'My cat is Tom.' }],
      });
      expect(conversation).toMatchObject({ object: 'conversation', metadata: { topic: 'cats' } });
      const sessionId = conversation.id.slice('conv_'.length);
      expect(json(await h.request('GET', `/v1/sessions/${sessionId}`)).session.agentId).toBeNull();
      const updated = await client.conversations.update(conversation.id, { metadata: { topic: 'dogs' } });
      expect(updated.metadata).toEqual({ topic: 'dogs' });
      const added = await client.conversations.items.create(conversation.id, {
        items: [
          { type: 'message', role: 'assistant', content: 'Nice cat.' },
          { type: 'message', role: 'user', content: 'What is its name?' },
        ],
      });
      expect(added.data.map((item) => item.type)).toEqual(['message', 'message']);
      const before = [];
      for await (const item of client.conversations.items.list(conversation.id, { order: 'asc' })) before.push(item);
      expect(before.map((item) => (item.type === 'message' ? [item.role, item.content[0]] : item.type))).toEqual([
        ['user', { type: 'input_text', text: 'My cat is Tom.' }],
        ['assistant', expect.objectContaining({ type: 'output_text', text: 'Nice cat.' })],
        ['user', { type: 'input_text', text: 'What is its name?' }],
      ]);
      const response = await client.responses.create({
        model: agentId,
        conversation: conversation.id,
        input: 'Tell me.',
      });
      expect(response.output_text).toBe('Tell me.');
      // The model saw the three stored items before the new input: 48 characters (12 tokens) instead of 8.
      expect(response.usage?.input_tokens).toBe(12);
      expect(json(await h.request('GET', `/v1/sessions/${sessionId}`)).session.agentId).toBe(agentId);
      const other = await client.responses
        .create({ model: toolAgentId, conversation: conversation.id, input: 'x' }, { maxRetries: 0 })
        .catch((error) => error);
      expect(other).toBeInstanceOf(OpenAI.BadRequestError);
      const deleted = await client.conversations.delete(conversation.id);
      expect(deleted).toEqual({ id: conversation.id, object: 'conversation.deleted', deleted: true });
      expect(await client.conversations.retrieve(conversation.id).catch((error) => error)).toBeInstanceOf(
        OpenAI.NotFoundError,
      );
    });

    it('lists the input items of a response, cancels a running one and deletes it', async () => {
      const done = await client.responses.create({ model: agentId, input: 'Hello input' });
      const inputs = [];
      for await (const item of client.responses.inputItems.list(done.id)) inputs.push(item);
      expect(inputs).toEqual([
        expect.objectContaining({
          type: 'message',
          role: 'user',
          content: [{ type: 'input_text', text: 'Hello input' }],
        }),
      ]);

      const slow = await client.responses.create({ model: agentId, input: 'sleep 5000\nlate', stream: true });
      let id = '';
      for await (const event of slow) {
        if (event.type === 'response.created') {
          id = event.response.id;
          const cancelled = await client.responses.cancel(id);
          expect(cancelled.status).toBe('cancelled');
        }
      }
      expect((await client.responses.retrieve(id)).status).toBe('cancelled');
      await client.responses.delete(id);
      expect(await client.responses.retrieve(id).catch((error) => error)).toBeInstanceOf(OpenAI.NotFoundError);
    });
  });

  describe('@openai/agents', () => {
    function weatherAgent(seen: string[], modelSettings: { store?: boolean } = {}) {
      const getWeather = tool({
        name: 'get_weather',
        description: 'Current weather for a city',
        parameters: z.object({ city: z.string() }),
        execute: async ({ city }) => {
          seen.push(city);
          return WEATHER[city] ?? 'unknown';
        },
      });
      return new Agent({ name: 'weather', model: agentId, tools: [getWeather], modelSettings });
    }

    it('runs a two-tool-call agent statelessly (full history every call)', async () => {
      const seen: string[] = [];
      const result = await runner.run(weatherAgent(seen), TWO_CALLS);
      expect(result.finalOutput).toBe('All done');
      expect(seen).toEqual(['Paris', 'Rome']);
    });

    it('runs it with store: false, and nothing of it can be retrieved afterwards', async () => {
      const seen: string[] = [];
      const result = await runner.run(weatherAgent(seen, { store: false }), TWO_CALLS);
      expect(result.finalOutput).toBe('All done');
      expect(seen).toEqual(['Paris', 'Rome']);
      const last = result.lastResponseId ?? '';
      expect(last).toMatch(/^resp_/);
      expect(await client.responses.retrieve(last).catch((error) => error)).toBeInstanceOf(OpenAI.NotFoundError);
    });

    it('runs it on an existing conversation', async () => {
      const start = await h.request('POST', '/v1/responses', { body: { model: agentId, input: 'warm up' } });
      expect(start.status, start.text).toBe(200);
      const conversationId = json(start).conversation.id as string;
      const seen: string[] = [];
      const result = await runner.run(weatherAgent(seen), TWO_CALLS, { conversationId });
      expect(result.finalOutput).toBe('All done');
      expect(seen).toEqual(['Paris', 'Rome']);
      const listed = [];
      for await (const item of client.conversations.items.list(conversationId, { order: 'asc' })) listed.push(item);
      expect(listed.map((item) => item.type)).toEqual([
        'message',
        'message',
        'message',
        'function_call',
        'function_call_output',
        'function_call',
        'function_call_output',
        'message',
      ]);
    });

    it('runs it streamed', async () => {
      const seen: string[] = [];
      const result = await runner.run(weatherAgent(seen), TWO_CALLS, { stream: true });
      const kinds = new Set<string>();
      for await (const event of result) kinds.add(event.type);
      await result.completed;
      expect(result.error).toBeNull();
      expect(result.finalOutput).toBe('All done');
      expect(seen).toEqual(['Paris', 'Rome']);
      expect(kinds).toContain('raw_model_stream_event');
    });

    it('keeps history in an OpenAIConversationsSession it starts itself', async () => {
      const session = new OpenAIConversationsSession();
      const seen: string[] = [];
      const first = await runner.run(weatherAgent(seen), TWO_CALLS, { session });
      expect(first.finalOutput).toBe('All done');
      expect(seen).toEqual(['Paris', 'Rome']);
      const conversationId = await session.getSessionId();
      expect(conversationId).toMatch(/^conv_/);
      const stored = await session.getItems();
      expect(stored.map((item) => item.type)).toEqual([
        'message',
        'function_call',
        'function_call_result',
        'function_call',
        'function_call_result',
        'message',
      ]);
      const second = await runner.run(weatherAgent(seen), 'and now?', { session });
      expect(second.finalOutput).toBe('and now?');
      expect((await session.getItems()).length).toBe(8);
    });

    it('uses an existing conversation in an OpenAIConversationsSession', async () => {
      const conversation = await client.conversations.create({});
      const session = new OpenAIConversationsSession({ conversationId: conversation.id });
      const seen: string[] = [];
      const result = await runner.run(weatherAgent(seen), TWO_CALLS, { session });
      expect(result.finalOutput).toBe('All done');
      const listed = [];
      for await (const item of client.conversations.items.list(conversation.id, { order: 'asc' })) listed.push(item);
      expect(listed.map((item) => item.type)).toEqual([
        'message',
        'function_call',
        'function_call_output',
        'function_call',
        'function_call_output',
        'message',
      ]);
    });
  });
});
