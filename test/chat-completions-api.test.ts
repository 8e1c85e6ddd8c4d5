/**
 * POST /v1/chat/completions with the real clients at their defaults, as a user would point them at Agentry:
 * `openai` (create, tools round trip, stream with include_usage, the stream helper, parse with zodResponseFormat),
 * LangChain's ChatOpenAI (invoke, stream, bindTools), the AI SDK's chat model (generateText, streamText), and the
 * Agents SDK's OpenAIChatCompletionsModel; the Run each call records, and errors in OpenAI's shape. `scripted`
 * model, once per dialect.
 */

import { randomUUID } from 'node:crypto';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { createOpenAI } from '@ai-sdk/openai';
import { tool as langchainTool } from '@langchain/core/tools';
import { ChatOpenAI } from '@langchain/openai';
import { Agent, OpenAIChatCompletionsModel, Runner, setTracingDisabled, tool } from '@openai/agents';
import { tool as aiTool, generateText, jsonSchema, streamText } from 'ai';
import OpenAI from 'openai';
import { zodResponseFormat } from 'openai/helpers/zod';
import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { parseChatRequest } from '../src/domain/chat-completions/chat-request.ts';
import { type Stub, startStub, textReply } from './helpers/chat-completions-stub.ts';
import { flows, waitUntil } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';
import { type McpTestServer, startModernMcpServer } from './helpers/mcp-servers.ts';

/** A real 1x1 PNG, as a data: URL. */
const PNG_URL =
  'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==';
/**
 * An image server that holds every request until the test answers it: `next()` resolves with the response of the
 * next request once it has arrived.
 */
async function heldImages() {
  const held: ServerResponse[] = [];
  const server = createServer((_request, response) => held.push(response));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/image`,
    next: () => waitUntil(async () => held.shift(), { what: 'a fetch of the image', everyMs: 10 }),
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
const WEATHER_SCRIPT = 'call get_weather {"city":"Paris"}\n---\nIt is sunny in Paris';
const weatherFunction = {
  name: 'get_weather',
  description: 'Current weather for a city',
  parameters: {
    type: 'object' as const,
    properties: { city: { type: 'string' as const } },
    required: ['city'],
    additionalProperties: false,
  },
};

/** The status of the message of a hidden session once it is completed (or what it is after 10 s). */
async function statusOnceSettled(harness: Harness, sessionId: string): Promise<string | undefined> {
  const status = async () =>
    (
      await harness.deps.storage.db
        .selectFrom('messages')
        .select('status')
        .where('session_id', '=', sessionId)
        .executeTakeFirst()
    )?.status;
  const deadline = Date.now() + 10_000;
  while ((await status()) !== 'completed' && Date.now() < deadline) await sleep(50);
  return status();
}

describe.each(dialects())('POST /v1/chat/completions (%s)', (dialect) => {
  let h: Harness;
  const flow = flows(() => h, { agentName: 'chat-agent' });
  let base: string;
  let client: OpenAI;
  let agentId: string;

  let mcp: McpTestServer;
  let stub: Stub;

  beforeAll(async () => {
    mcp = await startModernMcpServer({ name: 'ops' });
    stub = await startStub();
    h = await createHarness(dialect, {
      AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true',
      AGENTRY_PROVIDERS: JSON.stringify({ stub: { baseURL: stub.url } }),
    });
    base = await h.listen();
    client = new OpenAI({ apiKey: h.key, baseURL: `${base}/v1` });
    agentId = await flow.createAgent({});
    setTracingDisabled(true);
  });
  afterAll(async () => {
    await h.close();
    await mcp.close();
    await stub.close();
  });

  /** The Runs of the organization with source chat_completions, newest first. */
  async function chatRuns(): Promise<Record<string, any>[]> {
    const response = await h.request('GET', '/v1/runs?limit=50');
    expect(response.status, response.text).toBe(200);
    return json(response).data.filter((run: Record<string, any>) => run.source === 'chat_completions');
  }

  describe('openai', () => {
    it('answers a plain completion and records a Run with source chat_completions', async () => {
      const before = (await chatRuns()).length;
      const completion = await client.chat.completions.create({
        model: 'chat-agent',
        messages: [
          { role: 'system', content: 'Be brief.' },
          { role: 'user', content: 'Hello from chat' },
        ],
      });
      expect(completion).toMatchObject({
        object: 'chat.completion',
        model: 'chat-agent',
        choices: [
          {
            index: 0,
            message: { role: 'assistant', content: 'Hello from chat', refusal: null },
            logprobs: null,
            finish_reason: 'stop',
          },
        ],
      });
      expect(completion.id).toMatch(/^chatcmpl-/);
      expect(completion.created).toBeGreaterThan(1_700_000_000);
      expect(completion.usage?.total_tokens).toBe(
        (completion.usage?.prompt_tokens ?? -1) + (completion.usage?.completion_tokens ?? -1),
      );
      expect(completion.usage?.completion_tokens).toBeGreaterThan(0);
      const runs = await chatRuns();
      expect(runs.length).toBe(before + 1);
      expect(runs[0]).toMatchObject({ source: 'chat_completions', status: 'completed', agent_id: agentId });
      expect(completion.id).toBe(`chatcmpl-${runs[0]?.message_id}`);
    });

    it('takes agent:<name> and the agent id as model; each call is its own conversation', async () => {
      const first = await client.chat.completions.create({
        model: 'agent:chat-agent',
        messages: [{ role: 'user', content: 'first' }],
      });
      const second = await client.chat.completions.create({
        model: agentId,
        messages: [{ role: 'user', content: 'second' }],
      });
      expect(first.choices[0]?.message.content).toBe('first');
      expect(second.choices[0]?.message.content).toBe('second');
      const runs = await chatRuns();
      expect(runs[0]?.session_id).not.toBe(runs[1]?.session_id);
      // The sessions of chat completions are hidden: the Sessions API does not list them.
      const sessions = json(await h.request('GET', '/v1/sessions?limit=50'));
      const ids = new Set(sessions.data.map((session: Record<string, any>) => session.id));
      expect(ids.has(runs[0]?.session_id)).toBe(false);
    });

    it('hands function calls back and continues from the tool messages of the next call', async () => {
      const tools = [{ type: 'function' as const, function: weatherFunction }];
      const messages: ChatCompletionMessageParam[] = [{ role: 'user', content: WEATHER_SCRIPT }];
      const first = await client.chat.completions.create({ model: 'chat-agent', messages, tools });
      const choice = first.choices[0];
      expect(choice?.finish_reason).toBe('tool_calls');
      expect(choice?.message.content).toBeNull();
      const [call] = choice?.message.tool_calls ?? [];
      expect(call).toMatchObject({
        type: 'function',
        function: { name: 'get_weather', arguments: '{"city":"Paris"}' },
      });
      expect(call?.id).toMatch(/^call_/);
      // The turn is over: nothing waits in its hidden session.
      expect((await chatRuns())[0]).toMatchObject({ status: 'completed' });

      messages.push(choice?.message as ChatCompletionMessageParam);
      messages.push({ role: 'tool', tool_call_id: call?.id ?? '', content: 'sunny' });
      const second = await client.chat.completions.create({ model: 'chat-agent', messages, tools });
      expect(second.choices[0]).toMatchObject({
        finish_reason: 'stop',
        message: { content: 'It is sunny in Paris' },
      });
      expect(second.choices[0]?.message.tool_calls).toBeUndefined();
      // The run of a request that ends with the tool's output previews that output.
      expect((await chatRuns())[0]?.input_preview).toBe(`[tool output ${call?.id}] sunny`);
    });

    it('sends presence_penalty, frequency_penalty and parallel_tool_calls: false to the provider', async () => {
      await flow.createAgent({ name: 'chat-stub', model: 'stub/test-model' });
      stub.bodies.length = 0;
      stub.responders.push(textReply(['penalised']));
      const completion = await client.chat.completions.create({
        model: 'chat-stub',
        messages: [{ role: 'user', content: 'hi' }],
        presence_penalty: 0.5,
        frequency_penalty: -0.25,
        parallel_tool_calls: false,
        tools: [{ type: 'function', function: weatherFunction }],
      });
      expect(completion.choices[0]?.message.content).toBe('penalised');
      expect(stub.bodies[0]).toMatchObject({
        presence_penalty: 0.5,
        frequency_penalty: -0.25,
        parallel_tool_calls: false,
      });
      stub.responders.push(textReply(['plain']));
      await client.chat.completions.create({ model: 'chat-stub', messages: [{ role: 'user', content: 'hi' }] });
      for (const field of ['presence_penalty', 'frequency_penalty', 'parallel_tool_calls']) {
        expect(stub.bodies[1], field).not.toHaveProperty(field);
      }
    });

    it('hands back one tool call per step with parallel_tool_calls: false', async () => {
      const tools = [{ type: 'function' as const, function: weatherFunction }];
      const script = 'call get_weather {"city":"Paris"}\ncall get_weather {"city":"Rome"}\n---\nBoth sunny';
      const messages: ChatCompletionMessageParam[] = [{ role: 'user', content: script }];
      const both = await client.chat.completions.create({ model: 'chat-agent', messages, tools });
      expect(both.choices[0]?.message.tool_calls?.length).toBe(2);
      const one = await client.chat.completions.create({
        model: 'chat-agent',
        messages,
        tools,
        parallel_tool_calls: false,
      });
      expect(one.choices[0]?.finish_reason).toBe('tool_calls');
      expect(
        one.choices[0]?.message.tool_calls?.map((call) => call.type === 'function' && call.function.arguments),
      ).toEqual(['{"city":"Paris"}']);
    });

    it('hands the turn back when the client of a stream ending in tool calls goes away early', async () => {
      const abort = new AbortController();
      const response = await fetch(`${base}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${h.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          model: agentId,
          stream: true,
          messages: [{ role: 'user', content: 'Looking\nsleep 300\ncall get_weather {"city":"Paris"}' }],
          tools: [{ type: 'function', function: weatherFunction }],
        }),
        signal: abort.signal,
      });
      const reader = response.body?.getReader();
      await reader?.read();
      abort.abort();
      const [run] = await chatRuns();
      const session = run?.session_id as string;
      expect(await statusOnceSettled(h, session)).toBe('completed');
      expect((await chatRuns())[0]).toMatchObject({ session_id: session, status: 'completed' });
    });

    it('runs a server-side call of the agent inside the turn', async () => {
      const completion = await client.chat.completions.create({
        model: 'chat-agent',
        messages: [{ role: 'user', content: 'call nothing {}\n---\nrecovered' }],
      });
      expect(completion.choices[0]).toMatchObject({ finish_reason: 'stop', message: { content: 'recovered' } });
      expect(completion.choices[0]?.message.tool_calls).toBeUndefined();
    });

    it('takes images by data: URL in earlier and newest user messages, and names a refused one', async () => {
      const before = json(await h.request('GET', '/v1/files')).data.length;
      const image = { type: 'image_url' as const, image_url: { url: PNG_URL, detail: 'low' as const } };
      const completion = await client.chat.completions.create({
        model: 'chat-agent',
        messages: [
          { role: 'user', content: [{ type: 'text', text: 'first look' }, image] },
          { role: 'assistant', content: 'seen' },
          { role: 'user', content: [image, { type: 'text', text: 'describe' }] },
        ],
      });
      expect(completion.choices[0]?.message.content).toBe('describe');
      const files = json(await h.request('GET', '/v1/files')).data;
      expect(files.length).toBe(before + 2);
      expect(files[0]).toMatchObject({ purpose: 'vision', filename: 'image.png' });
      const refused = await h.request('POST', '/v1/chat/completions', {
        body: {
          model: agentId,
          messages: [
            { role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:text/plain;base64,aGk=' } }] },
          ],
        },
      });
      expect(refused.status).toBe(400);
      expect(json(refused).error).toMatchObject({ param: 'messages[0].content[0].image_url.url' });
      // A completion refused after its first image was stored (the second is no image) keeps none of them.
      const half = await h.request('POST', '/v1/chat/completions', {
        body: {
          model: agentId,
          messages: [
            { role: 'user', content: [image] },
            { role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:text/plain;base64,aGk=' } }] },
          ],
        },
      });
      expect(half.status, half.text).toBe(400);
      // So does one whose agent does not exist (refused in the transaction, after the images).
      const unknown = await h.request('POST', '/v1/chat/completions', {
        body: { model: 'agent_missing', messages: [{ role: 'user', content: [image] }] },
      });
      expect(unknown.status, unknown.text).toBe(400);
      expect(json(await h.request('GET', '/v1/files')).data.length).toBe(before + 2);
    });

    it('fetches the images it is given by URL before it follows the turn, so a slow fetch holds no feed', async () => {
      const images = await heldImages();
      // Once the streams of the tests before have ended, no feed is open.
      const noFeeds = () => waitUntil(async () => h.hub.size() === 0 || null, { what: 'no open feed' });
      const complete = () =>
        h.request('POST', '/v1/chat/completions', {
          body: {
            model: agentId,
            messages: [
              {
                role: 'user',
                content: [
                  { type: 'text', text: 'describe' },
                  { type: 'image_url', image_url: { url: images.url } },
                ],
              },
            ],
          },
        });
      try {
        await noFeeds();
        const answered = complete();
        const image = await images.next();
        expect(h.hub.size()).toBe(0);
        image.writeHead(200, { 'content-type': 'image/png' }).end(Buffer.from(PNG_URL.split(',')[1] ?? '', 'base64'));
        const completion = await answered;
        expect(completion.status, completion.text).toBe(200);
        expect(json(completion).choices[0].message.content).toBe('describe');
        // One that is no image is refused when its fetch ends, having followed nothing meanwhile.
        await noFeeds();
        const refused = complete();
        const page = await images.next();
        expect(h.hub.size()).toBe(0);
        page.writeHead(200, { 'content-type': 'text/html' }).end('<p>hi</p>');
        const refusal = await refused;
        expect(refusal.status, refusal.text).toBe(400);
        expect(json(refusal).error).toMatchObject({ param: 'messages[0].content[1].image_url.url' });
      } finally {
        await images.close();
      }
    });

    it('runs the MCP tools of the agent inside the turn, and cancels a turn that waits for an approval', async () => {
      await flow.createAgent({
        name: 'chat-ops',
        mcpServers: [{ type: 'url', name: 'ops', url: mcp.url }],
        toolApprovals: { default: 'auto', overrides: { count: 'always_ask' } },
      });
      const ran = await client.chat.completions.create({
        model: 'chat-ops',
        messages: [{ role: 'user', content: 'call echo {"text":"ping from chat"}' }],
      });
      // The scripted model's next step replies with the tool's output.
      expect(ran.choices[0]?.finish_reason).toBe('stop');
      expect(ran.choices[0]?.message.content).toMatch(/echo: ping from chat$/);
      const error = await client.chat.completions
        .create({ model: 'chat-ops', messages: [{ role: 'user', content: 'call count {"key":"chat"}\n---\ndone' }] })
        .catch((thrown: unknown) => thrown);
      expect(error).toBeInstanceOf(OpenAI.APIError);
      expect((error as InstanceType<typeof OpenAI.APIError>).status).toBe(502);
      expect(String((error as Error).message)).toMatch(/needs an approval/);
      expect(mcp.counts.chat ?? 0).toBe(0);
      expect((await chatRuns())[0]).toMatchObject({ status: 'cancelled' });
    });

    it('streams chunks with include_usage, ending with the usage chunk', async () => {
      const stream = await client.chat.completions.create({
        model: 'chat-agent',
        messages: [{ role: 'user', content: 'one two three four five' }],
        stream: true,
        stream_options: { include_usage: true },
      });
      const chunks = [];
      for await (const chunk of stream) chunks.push(chunk);
      expect(chunks[0]?.choices[0]?.delta).toMatchObject({ role: 'assistant' });
      const text = chunks.map((chunk) => chunk.choices[0]?.delta.content ?? '').join('');
      expect(text).toBe('one two three four five');
      expect(chunks.filter((chunk) => (chunk.choices[0]?.delta.content ?? '') !== '').length).toBeGreaterThan(1);
      const last = chunks.at(-1);
      expect(last?.choices).toEqual([]);
      expect(last?.usage?.completion_tokens).toBeGreaterThan(0);
      expect(chunks.at(-2)?.choices[0]?.finish_reason).toBe('stop');
      expect(chunks.slice(0, -1).every((chunk) => chunk.usage === null)).toBe(true);
      expect(new Set(chunks.map((chunk) => chunk.id)).size).toBe(1);
      expect(chunks.every((chunk) => chunk.object === 'chat.completion.chunk')).toBe(true);
    });

    it('streams tool call deltas that the stream helper assembles', async () => {
      const stream = client.chat.completions.stream({
        model: 'chat-agent',
        messages: [{ role: 'user', content: WEATHER_SCRIPT }],
        tools: [{ type: 'function', function: weatherFunction }],
      });
      const final = await stream.finalChatCompletion();
      expect(final.choices[0]?.finish_reason).toBe('tool_calls');
      expect(final.choices[0]?.message.tool_calls?.[0]).toMatchObject({
        type: 'function',
        function: { name: 'get_weather', arguments: '{"city":"Paris"}' },
      });
    });

    it('ends the stream with [DONE] after the last chunk, without usage unless asked', async () => {
      const response = await fetch(`${base}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${h.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: agentId, messages: [{ role: 'user', content: 'hi' }], stream: true }),
      });
      expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
      const frames = (await response.text()).split('\n\n').filter((frame) => frame.startsWith('data: '));
      expect(frames.at(-1)).toBe('data: [DONE]');
      const chunks = frames.slice(0, -1).map((frame) => JSON.parse(frame.slice('data: '.length)));
      expect(chunks.at(-1).choices[0]).toEqual({ index: 0, delta: {}, logprobs: null, finish_reason: 'stop' });
      expect(chunks.some((chunk) => 'usage' in chunk)).toBe(false);
    });

    it('parses a structured reply with zodResponseFormat', async () => {
      const Weather = z.object({ city: z.string(), sunny: z.boolean() });
      const completion = await client.chat.completions.parse({
        model: 'chat-agent',
        // A script with a directive plays as written (without one, the scripted model answers the smallest valid
        // instance of the schema).
        messages: [{ role: 'user', content: 'sleep 0\n{"city":"Paris","sunny":true}' }],
        response_format: zodResponseFormat(Weather, 'weather'),
      });
      expect(completion.choices[0]?.message.parsed).toEqual({ city: 'Paris', sunny: true });
    });

    it('refuses a reply that does not match response_format, naming the violation', async () => {
      const Weather = z.object({ city: z.string(), sunny: z.boolean() });
      const call = client.chat.completions.create({
        model: 'chat-agent',
        messages: [{ role: 'user', content: 'sleep 0\n{"city":"Paris"}' }],
        response_format: zodResponseFormat(Weather, 'weather'),
      });
      await expect(call).rejects.toMatchObject({ status: 502, message: expect.stringMatching(/sunny/) });
    });

    it('streams a failed turn as an error the client throws', async () => {
      const stream = await client.chat.completions.create({
        model: 'chat-agent',
        messages: [{ role: 'user', content: 'fail broken model' }],
        stream: true,
      });
      const read = async () => {
        for await (const _ of stream) {
          // drain
        }
      };
      await expect(read()).rejects.toThrow(/broken model/);
    });
  });

  describe('errors in OpenAI shape', () => {
    const post = (body: unknown) => h.request('POST', '/v1/chat/completions', { body });

    it('refuses n other than 1, naming n', async () => {
      const response = await post({ model: agentId, n: 2, messages: [{ role: 'user', content: 'hi' }] });
      expect(response.status).toBe(400);
      expect(json(response).error).toMatchObject({ type: 'invalid_request_error', param: 'n' });
      expect(json(response).error.message).toMatch(/n must be 1/);
    });

    it('names the message whose role is unknown', async () => {
      const response = await post({
        model: agentId,
        messages: [
          { role: 'user', content: 'hi' },
          { role: 'assistant', content: 'hello' },
          { role: 'wizard', content: 'boo' },
        ],
      });
      expect(response.status).toBe(400);
      expect(json(response).error).toMatchObject({ code: 'validation_error', param: 'messages[2].role' });
    });

    it('says that model names an agent and where agents are listed', async () => {
      const error = await client.chat.completions
        .create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] })
        .catch((thrown: unknown) => thrown);
      expect(error).toBeInstanceOf(OpenAI.BadRequestError);
      const { param, message } = (error as InstanceType<typeof OpenAI.BadRequestError>).error as Record<string, any>;
      expect(param).toBe('model');
      expect(message).toMatch(/GET \/v1\/models/);
      const byId = await post({ model: randomUUID(), messages: [{ role: 'user', content: 'hi' }] });
      expect(byId.status).toBe(400);
      expect(json(byId).error).toMatchObject({ code: 'validation_error', param: 'model' });
      expect(json(byId).error.message).toMatch(/GET \/v1\/models/);
    });

    it('refuses what it cannot honour by name, and a tool message that answers no call', async () => {
      const messages = [{ role: 'user', content: 'hi' }];
      for (const [field, value] of [
        ['stop', ['\n']],
        ['seed', 7],
        ['logprobs', true],
      ] as const) {
        const response = await post({ model: agentId, messages, [field]: value });
        expect(response.status, field).toBe(400);
        expect(json(response).error.param).toBe(field);
      }
      const orphan = await post({
        model: agentId,
        messages: [...messages, { role: 'tool', tool_call_id: 'call_x', content: 'out' }],
      });
      expect(orphan.status).toBe(400);
      expect(json(orphan).error.param).toBe('messages[1].tool_call_id');
    });

    it('answers hostile input with a 400, never a 500', async () => {
      const nul = await post({ model: agentId, messages: [{ role: 'user', content: 'a\u0000b' }] });
      expect(nul.status).toBe(400);
      const deep = `${'['.repeat(5000)}"x"${']'.repeat(5000)}`;
      const rawBody = `{"model":"${agentId}","messages":[{"role":"user","content":${deep}}]}`;
      const nested = await h.request('POST', '/v1/chat/completions', {
        rawBody,
        headers: { 'content-type': 'application/json' },
      });
      expect(nested.status).toBe(400);
      expect(json(nested).error.param).toMatch(/^messages\[0\]\.content|^body$/);
      const failed = await post({ model: agentId, messages: [{ role: 'user', content: 'fail boom' }] });
      expect(failed.status).toBe(502);
      expect(json(failed).error).toMatchObject({ code: 'turn_failed', type: 'server_error' });
    });
  });

  describe('a call that times out', () => {
    let slow: Harness;
    beforeAll(async () => {
      slow = await createHarness(dialect, { AGENTRY_RESPONSES_SYNC_TIMEOUT_MS: '150' });
      expect((await slow.request('POST', '/v1/agents', { body: { name: 'slow', model: 'scripted' } })).status).toBe(
        201,
      );
    });
    afterAll(() => slow.close());

    it('hands back the turn that stops for tool calls after the 504', async () => {
      const response = await slow.request('POST', '/v1/chat/completions', {
        body: {
          model: 'slow',
          messages: [{ role: 'user', content: 'sleep 400\ncall get_weather {"city":"Paris"}' }],
          tools: [{ type: 'function', function: weatherFunction }],
        },
      });
      expect(response.status).toBe(504);
      expect(json(response).error.code).toBe('response_timeout');
      const runs = json(await slow.request('GET', '/v1/runs?limit=1')).data;
      expect(await statusOnceSettled(slow, runs[0]?.session_id)).toBe('completed');
    });
  });

  describe('a turn its request left waiting', () => {
    it('is completed by the sweep once it has waited long enough, as a handed-back turn would be', async () => {
      const orgId = (await h.deps.storage.db.selectFrom('orgs').select('id').executeTakeFirstOrThrow()).id;
      // The process serving the request stops before handing the turn back: the turn is accepted and run, and
      // nothing follows it.
      const started = await h.deps.chatCompletions.start(
        orgId,
        parseChatRequest({
          model: 'chat-agent',
          messages: [{ role: 'user', content: 'call get_weather {"city":"Oslo"}' }],
          tools: [{ type: 'function', function: weatherFunction }],
        }),
      );
      const messageId = started.message.id;
      const status = async () =>
        (
          await h.deps.storage.db
            .selectFrom('messages')
            .select('status')
            .where('id', '=', messageId)
            .executeTakeFirstOrThrow()
        ).status;
      const deadline = Date.now() + 10_000;
      while ((await status()) !== 'requires_action' && Date.now() < deadline) await sleep(25);
      expect(await status()).toBe('requires_action');
      // Within the grace period a live request may still hand it back: the sweep leaves it.
      await h.deps.chatCompletions.settleAbandoned();
      expect(await status()).toBe('requires_action');
      expect(await h.deps.chatCompletions.settleAbandoned(0)).toBeGreaterThanOrEqual(1);
      expect(await status()).toBe('completed');
      const run = (await chatRuns()).find((each) => each.id === started.message.run_id);
      expect(run?.status).toBe('completed');
      expect(await h.deps.chatCompletions.settleAbandoned(0)).toBe(0);
    });
  });

  describe('LangChain ChatOpenAI (chat completions by default)', () => {
    const model = () =>
      new ChatOpenAI({ model: 'chat-agent', apiKey: h.key, configuration: { baseURL: `${base}/v1` } });

    it('invokes and streams', async () => {
      const reply = await model().invoke('Hello LangChain');
      expect(reply.content).toBe('Hello LangChain');
      let streamed = '';
      for await (const chunk of await model().stream('streamed words from LangChain')) streamed += chunk.content;
      expect(streamed).toBe('streamed words from LangChain');
    });

    it('binds tools and gets the tool call back', async () => {
      const weather = langchainTool(async ({ city }: { city: string }) => `sunny in ${city}`, {
        name: 'get_weather',
        description: 'Current weather for a city',
        schema: z.object({ city: z.string() }),
      });
      const reply = await model().bindTools([weather]).invoke(WEATHER_SCRIPT);
      expect(reply.tool_calls?.[0]).toMatchObject({ name: 'get_weather', args: { city: 'Paris' } });
    });
  });

  describe('AI SDK chat model', () => {
    const chatModel = () => createOpenAI({ apiKey: h.key, baseURL: `${base}/v1` }).chat('chat-agent');

    it('generates and streams text', async () => {
      const generated = await generateText({ model: chatModel(), prompt: 'Hello AI SDK' });
      expect(generated.text).toBe('Hello AI SDK');
      expect(generated.finishReason).toBe('stop');
      const streamed = streamText({ model: chatModel(), prompt: 'streamed from the AI SDK' });
      let text = '';
      for await (const delta of streamed.textStream) text += delta;
      expect(text).toBe('streamed from the AI SDK');
      expect((await streamed.usage).outputTokens).toBeGreaterThan(0);
    });

    it('runs a tool loop over two calls', async () => {
      const generated = await generateText({
        model: chatModel(),
        prompt: WEATHER_SCRIPT,
        tools: {
          get_weather: aiTool({
            description: 'Current weather for a city',
            inputSchema: jsonSchema<{ city: string }>(weatherFunction.parameters),
            execute: async ({ city }) => `sunny in ${city}`,
          }),
        },
        stopWhen: ({ steps }) => steps.length >= 2,
      });
      expect(generated.steps[0]?.toolCalls[0]).toMatchObject({ toolName: 'get_weather', input: { city: 'Paris' } });
      expect(generated.text).toBe('It is sunny in Paris');
    });
  });

  describe('Agents SDK with OpenAIChatCompletionsModel', () => {
    it('runs an agent with a function tool', async () => {
      const calls: string[] = [];
      const getWeather = tool({
        name: 'get_weather',
        description: 'Current weather for a city',
        parameters: z.object({ city: z.string() }),
        execute: async ({ city }) => {
          calls.push(city);
          return 'sunny';
        },
      });
      const agent = new Agent({
        name: 'assistant',
        instructions: 'Answer with the weather.',
        model: new OpenAIChatCompletionsModel(new OpenAI({ apiKey: h.key, baseURL: `${base}/v1` }), 'chat-agent'),
        tools: [getWeather],
      });
      const result = await new Runner().run(agent, WEATHER_SCRIPT);
      expect(calls).toEqual(['Paris']);
      expect(result.finalOutput).toBe('It is sunny in Paris');
    });
  });
});
