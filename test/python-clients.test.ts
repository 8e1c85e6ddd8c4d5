/**
 * The Python clients' requests, replayed byte for byte over real HTTP (the packages cannot be installed here):
 * `openai` 3.x (`AsyncOpenAI`, its User-Agent and `X-Stainless-*` headers) and `openai-agents` 0.22, whose
 * Responses model overrides the User-Agent with `Agents/Python 0.22.0` and sends, for `Runner.run`, the agent's
 * instructions, the input as `{content, role}` messages, `include: []` and its function tools; the second call
 * replays the whole history (the function_call as the SDK dumps it, then its output). `OpenAIConversationsSession`
 * creates a conversation with `{"items": []}`, reads it with `order=asc`, runs statelessly and stores the turn's
 * items with their ids stripped. Sources: openai-python `_base_client.py` (default and platform headers),
 * openai-agents-python `models/openai_responses.py` (`_build_response_create_kwargs`) and
 * `memory/openai_conversations_session.py`, `run_internal/session_persistence.py`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flows, type Json } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness } from './helpers/harness.ts';

/** What `AsyncOpenAI` sends on every request (openai-python 3.3.1 on Linux x86-64, CPython 3.12). */
function pythonHeaders(key: string, userAgent = 'AsyncOpenAI/Python 3.3.1'): Record<string, string> {
  return {
    Accept: 'application/json',
    'Content-Type': 'application/json',
    'User-Agent': userAgent,
    'X-Stainless-Lang': 'python',
    'X-Stainless-Package-Version': '3.3.1',
    'X-Stainless-OS': 'Linux',
    'X-Stainless-Arch': 'x64',
    'X-Stainless-Runtime': 'CPython',
    'X-Stainless-Runtime-Version': '3.12.3',
    'X-Stainless-Async': 'async:asyncio',
    'X-Stainless-Retry-Count': '0',
    'X-Stainless-Read-Timeout': '600',
    Authorization: `Bearer ${key}`,
  };
}

/** The function tool of `@function_tool def get_weather(city: str) -> str` as the Agents SDK converts it. */
const GET_WEATHER = {
  name: 'get_weather',
  parameters: {
    properties: { city: { title: 'City', type: 'string' } },
    required: ['city'],
    title: 'get_weather_args',
    type: 'object',
    additionalProperties: false,
  },
  strict: true,
  type: 'function',
  description: 'Current weather for a city.',
};

const SCRIPT = 'call get_weather {"city":"Paris"}\n---\nIt is sunny in Paris.';

describe.each(dialects())('Python clients, replayed (%s)', (dialect) => {
  let h: Harness;
  const flow = flows(() => h, { agentName: 'python' });
  let base: string;
  let agentId: string;

  beforeAll(async () => {
    h = await createHarness(dialect);
    base = await h.listen();
    agentId = await flow.createAgent({});
  });
  afterAll(() => h.close());

  async function send(method: string, path: string, body?: unknown, userAgent?: string) {
    const reply = await fetch(`${base}${path}`, {
      method,
      headers: pythonHeaders(h.key, userAgent),
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await reply.text();
    return { status: reply.status, headers: reply.headers, body: text === '' ? {} : (JSON.parse(text) as Json) };
  }

  /** Runner.run's Responses calls: the first, then after running the tool locally the whole history again. */
  async function runAgent(input: Json[]): Promise<{ output: string; newItems: Json[] }> {
    const agentUA = 'Agents/Python 0.22.0';
    const request = (items: Json[]) => ({
      instructions: 'You are a weather bot.',
      model: agentId,
      input: items,
      include: [],
      tools: [GET_WEATHER],
    });
    const first = await send('POST', '/v1/responses', request(input), agentUA);
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    expect(first.headers.get('agentry-compat')).toBe('openai');
    const call = first.body.output[0];
    expect(call).toMatchObject({ type: 'function_call', name: 'get_weather', arguments: '{"city":"Paris"}' });
    // ResponseFunctionToolCall.model_dump(exclude_unset=True), then the tool's output.
    const dumped = {
      arguments: call.arguments,
      call_id: call.call_id,
      name: call.name,
      type: 'function_call',
      id: call.id,
      status: 'completed',
    };
    const output = { call_id: call.call_id, output: 'sunny', type: 'function_call_output' };
    const second = await send('POST', '/v1/responses', request([...input, dumped, output]), agentUA);
    expect(second.status, JSON.stringify(second.body)).toBe(200);
    expect(second.body.status).toBe('completed');
    const message = second.body.output[0];
    return { output: second.body.output_text, newItems: [dumped, output, message] };
  }

  it('answers Runner.run without any extra header (compatibility mode by User-Agent)', async () => {
    const { output } = await runAgent([{ content: SCRIPT, role: 'user' }]);
    expect(output).toBe('It is sunny in Paris.');
  });

  it('keeps the history of an OpenAIConversationsSession, and refuses the same body in strict mode', async () => {
    const created = await send('POST', '/v1/conversations', { items: [] });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const conversation = created.body.id as string;
    const empty = await send('GET', `/v1/conversations/${conversation}/items?order=asc`);
    expect(empty.body.data).toEqual([]);

    const user = { content: SCRIPT, role: 'user' };
    const { newItems } = await runAgent([user]);
    // save_result_to_session: the input and the new items, ids stripped (_sanitize_openai_conversation_item).
    const [call, output, message] = newItems as [Json, Json, Json];
    const { id: _callId, ...callWithoutId } = call;
    const { id: _messageId, ...messageWithoutId } = message;
    const stored = await send('POST', `/v1/conversations/${conversation}/items`, {
      items: [user, callWithoutId, output, messageWithoutId],
    });
    expect(stored.status, JSON.stringify(stored.body)).toBe(200);
    expect(stored.body.data.map((item: Json) => item.type)).toEqual([
      'message',
      'function_call',
      'function_call_output',
      'message',
    ]);

    // The next Runner.run reads the history back and replays it with the new input.
    const history = (await send('GET', `/v1/conversations/${conversation}/items?order=asc`)).body.data as Json[];
    expect(history.map((item) => item.type)).toEqual(['message', 'function_call', 'function_call_output', 'message']);
    expect(history[3]?.content[0].text).toBe('It is sunny in Paris.');
    const next = await send(
      'POST',
      '/v1/responses',
      {
        instructions: 'You are a weather bot.',
        model: agentId,
        input: [...history, { content: 'Thanks!', role: 'user' }],
        include: [],
        tools: [GET_WEATHER],
      },
      'Agents/Python 0.22.0',
    );
    expect(next.status, JSON.stringify(next.body)).toBe(200);
    expect(next.body.output_text).toBe('Thanks!');

    // The same items asked for in strict mode get the spec's rules.
    const plain = await fetch(`${base}/v1/conversations/${conversation}/items`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${h.key}`, 'agentry-compat': 'strict' },
      body: JSON.stringify({ items: [user] }),
    });
    expect(plain.status).toBe(400);
    expect(((await plain.json()) as Json).error.message).toContain('Agentry-Compat: openai');

    const deleted = await send('DELETE', `/v1/conversations/${conversation}`);
    expect(deleted.body).toEqual({ id: conversation, object: 'conversation.deleted', deleted: true });
  });

  it('cancels and deletes a response: bodiless calls that still carry Content-Type: application/json', async () => {
    const created = await send('POST', '/v1/responses', { model: agentId, input: 'to be removed' });
    const id = created.body.id as string;
    const cancelled = await send('POST', `/v1/responses/${id}/cancel`);
    expect(cancelled.status, JSON.stringify(cancelled.body)).toBe(200);
    expect(cancelled.body).toMatchObject({ id, status: 'completed' });
    const deleted = await send('DELETE', `/v1/responses/${id}`);
    expect(deleted.body).toEqual({ id, object: 'response', deleted: true });
    expect((await send('GET', `/v1/responses/${id}`)).status).toBe(404);
  });

  it('streams to the Python stream helper with the vendor events (it ignores event types it does not know)', async () => {
    const reply = await fetch(`${base}/v1/responses`, {
      method: 'POST',
      headers: pythonHeaders(h.key),
      body: JSON.stringify({ model: agentId, input: 'call nothing {}\n---\nrecovered', stream: true }),
    });
    const text = await reply.text();
    expect(reply.status).toBe(200);
    expect(text).toContain('event: response.agentry_tool_call.failed');
    expect(text).toContain('event: response.completed');
  });
});
