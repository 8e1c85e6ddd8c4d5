import { afterEach, describe, expect, it, vi } from 'vitest';
import { createAnthropicAdapter, createOpenAIAdapter } from './ai-sdk.ts';
import type { ContextMessage, ModelAdapter, ModelSettings } from './types.ts';

const TOOL = { name: 'f', description: 'd', parameters: { type: 'object', properties: {} }, strict: false };

/** The JSON body the adapter's provider sends for one call (answered 400, so the call ends at once). */
async function sentBody(
  adapter: ModelAdapter,
  settings: ModelSettings,
  tools = [TOOL],
  context: ContextMessage[] = [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }],
): Promise<Record<string, unknown>> {
  const bodies: string[] = [];
  vi.spyOn(globalThis, 'fetch').mockImplementation(async (_url, init) => {
    bodies.push(String(init?.body));
    return new Response(JSON.stringify({ error: { message: 'stop here', type: 'invalid_request_error' } }), {
      status: 400,
      headers: { 'content-type': 'application/json' },
    });
  });
  const stream = adapter.stream({
    model: 'm',
    instructions: '',
    context,
    tools,
    settings,
    signal: new AbortController().signal,
  });
  await expect(stream[Symbol.asyncIterator]().next()).rejects.toThrow();
  return JSON.parse(bodies[0] ?? '{}') as Record<string, unknown>;
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe('one tool call per step (parallelToolCalls: false) on the AI SDK providers', () => {
  it('sends OpenAI parallel_tool_calls: false with tools only', async () => {
    const openai = createOpenAIAdapter('gpt-test', 'sk-test', { retry: { maxAttempts: 1 } });
    const body = await sentBody(openai, { parallelToolCalls: false });
    expect(body).toMatchObject({ parallel_tool_calls: false, store: false });
    expect(await sentBody(openai, { parallelToolCalls: false }, [])).not.toHaveProperty('parallel_tool_calls');
    expect(await sentBody(openai, {})).not.toHaveProperty('parallel_tool_calls');
  });

  it("sends Anthropic's disable_parallel_tool_use", async () => {
    const anthropic = createAnthropicAdapter('claude-test', 'sk-test', { retry: { maxAttempts: 1 } });
    const body = await sentBody(anthropic, { parallelToolCalls: false });
    expect(body.tool_choice).toMatchObject({ disable_parallel_tool_use: true });
    expect((await sentBody(anthropic, {})).tool_choice).not.toHaveProperty('disable_parallel_tool_use');
  });
});

describe("an image's detail on the AI SDK providers", () => {
  const png = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  const withImage = (detail?: string): ContextMessage[] => [
    {
      role: 'user',
      content: [
        { type: 'text', text: 'what is this?' },
        { type: 'image', mediaType: 'image/png', data: png, ...(detail === undefined ? {} : { detail }) },
      ],
    },
  ];

  it("sends OpenAI the image's detail, and none when the image has none", async () => {
    const openai = createOpenAIAdapter('gpt-test', 'sk-test', { retry: { maxAttempts: 1 } });
    const image = { type: 'input_image', image_url: 'data:image/png;base64,iVBORw0KGgo=' };
    const body = await sentBody(openai, {}, [], withImage('high'));
    expect(body.input).toEqual([
      {
        role: 'user',
        content: [
          { type: 'input_text', text: 'what is this?' },
          { ...image, detail: 'high' },
        ],
      },
    ]);
    const plain = await sentBody(openai, {}, [], withImage());
    expect(plain.input).toEqual([{ role: 'user', content: [{ type: 'input_text', text: 'what is this?' }, image] }]);
  });

  it('sends Anthropic the image alone (its Messages API has no detail)', async () => {
    const anthropic = createAnthropicAdapter('claude-test', 'sk-test', { retry: { maxAttempts: 1 } });
    const body = await sentBody(anthropic, {}, [], withImage('low'));
    expect(JSON.stringify(body.messages)).not.toContain('detail');
    expect(body.messages).toMatchObject([{ role: 'user', content: [{ type: 'text' }, { type: 'image' }] }]);
  });
});

/** A fetch that answers every call with these server-sent events. */
function sseFetch(events: Record<string, unknown>[]): typeof globalThis.fetch {
  const body = events.map((event) => `event: ${String(event.type)}\ndata: ${JSON.stringify(event)}\n\n`).join('');
  return async () => new Response(body, { status: 200, headers: { 'content-type': 'text/event-stream' } });
}

async function finishUsage(adapter: ModelAdapter): Promise<unknown> {
  const events = [];
  for await (const event of adapter.stream({
    model: 'm',
    instructions: '',
    context: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }],
    tools: [],
    signal: new AbortController().signal,
  })) {
    events.push(event);
  }
  return events.at(-1);
}

describe('cached input tokens on the AI SDK providers', () => {
  it("reads OpenAI's input_tokens_details.cached_tokens", async () => {
    const message = { type: 'message', id: 'msg_1', role: 'assistant', status: 'completed' };
    const fetch = sseFetch([
      { type: 'response.created', response: { id: 'resp_1', created_at: 1, model: 'gpt-test', service_tier: null } },
      { type: 'response.output_item.added', output_index: 0, item: { ...message, status: 'in_progress', content: [] } },
      {
        type: 'response.output_text.delta',
        item_id: 'msg_1',
        output_index: 0,
        content_index: 0,
        delta: 'Hi',
        logprobs: [],
      },
      {
        type: 'response.output_item.done',
        output_index: 0,
        item: { ...message, content: [{ type: 'output_text', text: 'Hi', annotations: [] }] },
      },
      {
        type: 'response.completed',
        response: {
          id: 'resp_1',
          created_at: 1,
          model: 'gpt-test',
          status: 'completed',
          service_tier: null,
          incomplete_details: null,
          usage: {
            input_tokens: 1000,
            input_tokens_details: { cached_tokens: 800 },
            output_tokens: 5,
            output_tokens_details: { reasoning_tokens: 0 },
          },
        },
      },
    ]);
    const openai = createOpenAIAdapter('gpt-test', 'sk-test', { retry: { maxAttempts: 1 }, fetch });
    expect(await finishUsage(openai)).toEqual({
      type: 'finish',
      usage: { inputTokens: 1000, cachedInputTokens: 800, outputTokens: 5 },
    });
  });

  it("reads Anthropic's cache reads, counted in the input tokens", async () => {
    const usage = { input_tokens: 200, cache_read_input_tokens: 800, cache_creation_input_tokens: 0, output_tokens: 1 };
    const fetch = sseFetch([
      {
        type: 'message_start',
        message: {
          id: 'msg_1',
          type: 'message',
          role: 'assistant',
          model: 'claude-test',
          content: [],
          stop_reason: null,
          stop_sequence: null,
          usage,
        },
      },
      { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
      { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hi' } },
      { type: 'content_block_stop', index: 0 },
      { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 5 } },
      { type: 'message_stop' },
    ]);
    const anthropic = createAnthropicAdapter('claude-test', 'sk-test', { retry: { maxAttempts: 1 }, fetch });
    expect(await finishUsage(anthropic)).toEqual({
      type: 'finish',
      usage: { inputTokens: 1000, cachedInputTokens: 800, outputTokens: 5 },
    });
  });
});
