/**
 * Clients other than the official OpenAI SDKs, at their defaults and with no Agentry header, against the real
 * server: they get OpenAI compatibility mode (src/http/client-mode.ts). The Vercel AI SDK (`ai` +
 * `@ai-sdk/openai`'s Responses model: generateText, streamText, function tools, an agent with an MCP server),
 * LangChain's ChatOpenAI on the Responses API (invoke, bindTools), plain fetch with only a JSON content type; and
 * the routes around a Response the `openai` package and the Agents SDK call: conversations.items.delete (the
 * session's popItem), models.retrieve, responses.inputTokens.count. `scripted` model, once per dialect.
 */
import { createOpenAI } from '@ai-sdk/openai';
import { ChatOpenAI } from '@langchain/openai';
import { OpenAIConversationsSession } from '@openai/agents';
import { generateText, stepCountIs, streamText, tool } from 'ai';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { flows, type Json, WEATHER_TOOL } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';
import { type McpTestServer, startModernMcpServer } from './helpers/mcp-servers.ts';

const weather = tool({
  description: 'The weather in a city',
  inputSchema: z.object({ city: z.string() }),
  execute: async ({ city }: { city: string }) => (city === 'Paris' ? 'sunny' : 'rainy'),
});

describe.each(dialects())('clients in compatibility mode by default (%s)', (dialect) => {
  let h: Harness;
  let mcp: McpTestServer;
  const flow = flows(() => h, { agentName: 'compat-clients' });
  let base: string;
  let agentId: string;
  let toolAgentId: string;
  let mcpAgentId: string;
  let client: OpenAI;

  beforeAll(async () => {
    mcp = await startModernMcpServer({ name: 'docs' });
    h = await createHarness(dialect, { AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true' });
    base = await h.listen();
    agentId = await flow.createAgent({});
    toolAgentId = await flow.createAgent({ clientTools: [WEATHER_TOOL] });
    mcpAgentId = await flow.createAgent({ mcpServers: [{ type: 'url', name: 'docs', url: mcp.url }] });
    client = new OpenAI({ apiKey: h.key, baseURL: `${base}/v1` });
  });
  afterAll(async () => {
    await h.close();
    await mcp.close();
  });

  const aiSdk = () => createOpenAI({ baseURL: `${base}/v1`, apiKey: h.key });

  describe('the Vercel AI SDK', () => {
    it('generates text with a system prompt and sampling settings', async () => {
      const result = await generateText({
        model: aiSdk().responses(agentId),
        system: 'Be brief.',
        prompt: 'Hello from the AI SDK',
        temperature: 0.3,
        maxOutputTokens: 200,
      });
      expect(result.text).toBe('Hello from the AI SDK');
      expect(result.finishReason).toBe('stop');
      expect(result.usage.inputTokens).toBeGreaterThan(0);
      const response = await client.responses.retrieve(String(result.response.id));
      expect(response).toMatchObject({ instructions: 'Be brief.', temperature: 0.3, max_output_tokens: 200 });
    });

    it('streams text with a system prompt', async () => {
      const result = streamText({
        model: aiSdk().responses(agentId),
        system: 'Count.',
        prompt: 'Count one two three',
      });
      let text = '';
      for await (const delta of result.textStream) text += delta;
      expect(text).toBe('Count one two three');
      expect(await result.finishReason).toBe('stop');
    });

    it('runs its own function tools over two requests, streamed and not, the vendor events ignored', async () => {
      const prompt = 'call get_weather {"city":"Paris"}\n---\nIt is sunny in Paris';
      const generated = await generateText({
        model: aiSdk().responses(agentId),
        tools: { get_weather: weather },
        stopWhen: stepCountIs(3),
        prompt,
      });
      expect(generated.steps[0]?.toolCalls.map((call) => [call.toolName, call.input])).toEqual([
        ['get_weather', { city: 'Paris' }],
      ]);
      expect(generated.steps[0]?.toolResults.map((result) => result.output)).toEqual(['sunny']);
      expect(generated.text).toBe('It is sunny in Paris');

      const streamed = streamText({
        model: aiSdk().responses(toolAgentId),
        tools: { get_weather: weather },
        stopWhen: stepCountIs(3),
        prompt,
      });
      let text = '';
      for await (const delta of streamed.textStream) text += delta;
      expect(text).toBe('It is sunny in Paris');
      expect((await streamed.steps).length).toBe(2);
    });

    it("reads an agent's MCP calls, mcp_list_tools included, streamed and not", async () => {
      const generated = await generateText({ model: aiSdk().responses(mcpAgentId), prompt: 'call add {"a":2,"b":3}' });
      expect(generated.text).toBe('add: 5');
      const streamed = streamText({ model: aiSdk().responses(mcpAgentId), prompt: 'call add {"a":4,"b":5}' });
      let text = '';
      for await (const delta of streamed.textStream) text += delta;
      expect(text).toBe('add: 9');
    });
  });

  describe("LangChain's ChatOpenAI on the Responses API", () => {
    let name: string;
    beforeAll(async () => {
      name = `langchain-${dialect}`;
      await flow.createAgent({ name });
    });
    // The agent named as `agent:<name>`: LangChain's model names are free text.
    const chat = () =>
      new ChatOpenAI({
        model: `agent:${name}`,
        apiKey: h.key,
        useResponsesApi: true,
        configuration: { baseURL: `${base}/v1` },
      });

    it('invokes the agent with a system message', async () => {
      const reply = await chat().invoke([
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Hello from LangChain' },
      ]);
      expect(reply.text).toBe('Hello from LangChain');
    });

    it("streams an agent's MCP calls, the vendor events of the default stream ignored", async () => {
      const mcpChat = new ChatOpenAI({
        model: mcpAgentId,
        apiKey: h.key,
        useResponsesApi: true,
        configuration: { baseURL: `${base}/v1` },
      });
      let text = '';
      for await (const chunk of await mcpChat.stream('call add {"a":20,"b":22}')) text += chunk.text;
      expect(text).toBe('add: 42');
    });

    it('returns the calls of bound tools', async () => {
      const bound = chat().bindTools([
        {
          type: 'function',
          function: {
            name: 'get_weather',
            description: 'The weather in a city',
            parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
          },
        },
      ]);
      const reply = await bound.invoke('call get_weather {"city":"Rome"}');
      expect(reply.tool_calls?.map((call) => [call.name, call.args])).toEqual([['get_weather', { city: 'Rome' }]]);
    });
  });

  it('takes what a plain fetch sends with nothing but a JSON content type and the key', async () => {
    const reply = await fetch(`${base}/v1/responses`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${h.key}` },
      body: JSON.stringify({
        model: agentId,
        input: [
          { role: 'system', content: 'Be brief.' },
          { role: 'assistant', content: 'Earlier answer.' },
          { role: 'user', content: 'From fetch' },
        ],
        tools: [{ type: 'function', name: 'noop', parameters: { type: 'object', properties: {} } }],
        temperature: 0.5,
      }),
    });
    const body = (await reply.json()) as Json;
    expect(reply.status, JSON.stringify(body)).toBe(200);
    expect(reply.headers.get('agentry-compat')).toBe('openai');
    expect(body).toMatchObject({ output_text: 'From fetch', instructions: 'Be brief.', temperature: 0.5 });
  });

  describe('tool call limits', () => {
    const TWO_THEN_ONE =
      'call add {"a":1,"b":2}\ncall add {"a":3,"b":4}\n---\nOne more\ncall add {"a":5,"b":6}\n---\nDone';
    const texts = (response: OpenAI.Responses.Response) =>
      response.output.flatMap((item) =>
        item.type === 'message' ? [item.content.map((part) => ('text' in part ? part.text : '')).join('')] : [],
      );
    const calls = (response: OpenAI.Responses.Response) =>
      response.output.flatMap((item) => (item.type === 'mcp_call' ? [[item.arguments, item.output]] : []));

    it('runs every call of a step by default', async () => {
      const response = await client.responses.create({ model: mcpAgentId, input: TWO_THEN_ONE });
      expect(calls(response)).toEqual([
        ['{"a":1,"b":2}', '3'],
        ['{"a":3,"b":4}', '7'],
        ['{"a":5,"b":6}', '11'],
      ]);
      expect(texts(response)).toEqual(['One more', 'Done']);
    });

    it('runs no call past max_tool_calls, the model then answering without tools', async () => {
      const response = await client.responses.create({ model: mcpAgentId, input: TWO_THEN_ONE, max_tool_calls: 1 });
      expect(calls(response)).toEqual([['{"a":1,"b":2}', '3']]);
      // The second step's call is dropped: the step's text is the answer.
      expect(response).toMatchObject({ status: 'completed', output_text: 'One more', max_tool_calls: 1 });
      const none = await client.responses.create({ model: mcpAgentId, input: TWO_THEN_ONE, max_tool_calls: 0 });
      expect(calls(none)).toEqual([]);
    });

    it('runs only the first call of a step with parallel_tool_calls: false', async () => {
      const response = await client.responses.create({
        model: mcpAgentId,
        input: TWO_THEN_ONE,
        parallel_tool_calls: false,
      });
      expect(calls(response)).toEqual([
        ['{"a":1,"b":2}', '3'],
        ['{"a":5,"b":6}', '11'],
      ]);
      expect(texts(response)).toEqual(['One more', 'Done']);
      expect(response.parallel_tool_calls).toBe(false);
    });
  });

  describe('the routes around a Response', () => {
    it('retrieves an agent as a model by id, name or agent:<name>, 404 otherwise', async () => {
      const name = `model-${dialect}`;
      const id = await flow.createAgent({ name });
      for (const ref of [id, name, `agent:${name}`]) {
        expect(await client.models.retrieve(ref)).toMatchObject({ id, object: 'model', kind: 'agent', name });
      }
      const missing = await client.models.retrieve('gpt-4o').catch((error: unknown) => error);
      expect(missing).toBeInstanceOf(OpenAI.NotFoundError);
      expect((missing as InstanceType<typeof OpenAI.NotFoundError>).message).toContain('GET /v1/models');
      // The name works as `model` too, in both modes.
      for (const mode of ['openai', 'strict']) {
        const response = await h.request('POST', '/v1/responses', {
          body: { model: `agent:${name}`, input: 'by name' },
          headers: { 'agentry-compat': mode },
        });
        expect(response.status, response.text).toBe(200);
        expect(json(response).model).toBe(id);
      }
    });

    it('counts the input tokens of a request, the conversation included', async () => {
      const small = await client.responses.inputTokens.count({ model: agentId, input: 'x'.repeat(400) });
      expect(small.object).toBe('response.input_tokens');
      expect(small.input_tokens).toBeGreaterThanOrEqual(100);
      const first = await client.responses.create({ model: agentId, input: 'y'.repeat(4000) });
      const more = await client.responses.inputTokens.count({
        model: agentId,
        input: 'x'.repeat(400),
        conversation: first.conversation?.id ?? '',
      });
      expect(more.input_tokens).toBeGreaterThanOrEqual(small.input_tokens + 2000);
      const bad = await client.responses.inputTokens.count({ model: 'gpt-4o', input: 'x' }).catch((e: unknown) => e);
      expect(bad).toBeInstanceOf(OpenAI.BadRequestError);
    });

    it('deletes a conversation item, which later Responses no longer see', async () => {
      const first = await client.responses.create({ model: agentId, input: 'remember apples' });
      const conversation = first.conversation?.id ?? '';
      const [answer] = first.output;
      const deleted = await client.conversations.items.delete(answer?.id ?? '', { conversation_id: conversation });
      expect(deleted).toMatchObject({ id: conversation, object: 'conversation' });
      const listed = await client.conversations.items.list(conversation, { order: 'asc' });
      expect(listed.data.map((item) => item.type)).toEqual(['message']);
      const missing = await client.conversations.items
        .delete(answer?.id ?? '', { conversation_id: conversation })
        .catch((error: unknown) => error);
      expect(missing).toBeInstanceOf(OpenAI.NotFoundError);
      const next = await client.responses.create({ model: agentId, input: 'and pears', conversation });
      expect(next.output_text).toBe('and pears');
      const items = await client.conversations.items.list(conversation, { order: 'asc' });
      expect(items.data.map((item) => (item.type === 'message' ? item.role : item.type))).toEqual([
        'user',
        'user',
        'assistant',
      ]);
    });

    it("pops the last item with the Agents SDK's conversation session", async () => {
      const session = new OpenAIConversationsSession({ client });
      await session.addItems([
        { type: 'message', role: 'user', content: 'first' },
        { type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'second' }] },
      ]);
      const popped = await session.popItem();
      expect(popped).toMatchObject({ role: 'assistant' });
      const left = await session.getItems();
      expect(left.map((item) => ('role' in item ? item.role : item.type))).toEqual(['user']);
    });
  });
});
