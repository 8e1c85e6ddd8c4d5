import { afterEach, describe, expect, it, vi } from 'vitest';
import { createAnthropicAdapter, createOpenAIAdapter } from './ai-sdk.ts';
import type { ModelAdapter, ModelSettings } from './types.ts';

const TOOL = { name: 'f', description: 'd', parameters: { type: 'object', properties: {} }, strict: false };

/** The JSON body the adapter's provider sends for one call (answered 400, so the call ends at once). */
async function sentBody(
  adapter: ModelAdapter,
  settings: ModelSettings,
  tools = [TOOL],
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
    context: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }],
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
