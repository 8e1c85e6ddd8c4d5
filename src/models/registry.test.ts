import { describe, expect, it } from 'vitest';
import { createModelRegistry } from './registry.ts';
import { ModelError, type ModelEvent } from './types.ts';

const registry = createModelRegistry({
  providers: { ollama: { baseURL: 'http://127.0.0.1:9/v1' } },
  openaiApiKey: null,
  anthropicApiKey: null,
});

async function collect(modelId: string, text: string): Promise<ModelEvent[]> {
  const events: ModelEvent[] = [];
  const stream = registry.adapter(modelId).stream({
    model: modelId,
    instructions: '',
    context: [{ role: 'user', content: [{ type: 'text', text }] }],
    tools: [],
    signal: new AbortController().signal,
  });
  for await (const event of stream) events.push(event);
  return events;
}

describe('model registry', () => {
  it('knows the built-in and configured providers', () => {
    expect(registry.providers()).toEqual(['openai', 'anthropic', 'scripted', 'ollama']);
    for (const id of ['scripted', 'scripted/priced', 'openai/gpt-5', 'anthropic/claude-sonnet-5', 'ollama/llama3']) {
      expect(registry.problem(id), id).toBeNull();
    }
    expect(registry.problem('mystery/model')).toContain('unknown model provider "mystery"');
    expect(registry.problem('scripted/other')).toContain('unknown scripted model');
    expect(registry.problem('gpt-5')).toContain('provider/model');
  });

  it('creates adapters lazily and caches them per model id', () => {
    expect(registry.adapter('scripted')).toBe(registry.adapter('scripted'));
    expect(registry.adapter('scripted')).not.toBe(registry.adapter('scripted/priced'));
    expect(registry.adapter('ollama/llama3')).toBe(registry.adapter('ollama/llama3'));
  });

  it('runs the scripted models', async () => {
    const events = await collect('scripted/priced', 'hello there');
    expect(events.flatMap((e) => (e.type === 'text-delta' ? [e.text] : [])).join('')).toBe('hello there');
  });

  it('throws model_not_configured for ids it cannot run', () => {
    for (const id of ['mystery/model', 'scripted/other', 'no-slash', 'openai/']) {
      const attempt = () => registry.adapter(id);
      expect(attempt, id).toThrow(ModelError);
      try {
        attempt();
      } catch (error) {
        expect(error).toMatchObject({ code: 'model_not_configured' });
      }
    }
  });

  it('fails calls of a provider without its API key with model_not_configured naming the variable', async () => {
    await expect(collect('openai/gpt-5', 'hi')).rejects.toMatchObject({
      code: 'model_not_configured',
      message: expect.stringContaining('OPENAI_API_KEY'),
    });
    await expect(collect('anthropic/claude-sonnet-5', 'hi')).rejects.toMatchObject({
      code: 'model_not_configured',
      message: expect.stringContaining('ANTHROPIC_API_KEY'),
    });
  });
});
