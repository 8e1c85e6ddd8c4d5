/**
 * A response format reaches the AI SDK providers' wire: OpenAI's Responses `text.format` (strict as asked) and
 * Anthropic's structured output. The adapters are real; the provider's HTTP endpoint is a fetch that records the
 * request and answers 400, so nothing leaves the machine.
 */
import { describe, expect, it } from 'vitest';
import { isJsonObject } from '../lib/guards.ts';
import { createAnthropicAdapter, createOpenAIAdapter } from './ai-sdk.ts';
import type { ModelAdapter, ModelRequest, ResponseFormat } from './types.ts';

const SCHEMA = {
  type: 'object',
  properties: { answer: { type: 'string' } },
  required: ['answer'],
  additionalProperties: false,
};

/** The JSON body the adapter sent for one call with `format`. */
async function sentBody(
  make: (fetch: typeof globalThis.fetch) => ModelAdapter,
  format: ResponseFormat,
): Promise<Record<string, unknown>> {
  const bodies: unknown[] = [];
  const fetch: typeof globalThis.fetch = async (_url, init) => {
    bodies.push(JSON.parse(String(init?.body)));
    return new Response(JSON.stringify({ error: { message: 'recorded', type: 'invalid_request_error' } }), {
      status: 400,
      headers: { 'content-type': 'application/json' },
    });
  };
  const request: ModelRequest = {
    model: 'x',
    instructions: '',
    context: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }],
    tools: [],
    responseFormat: format,
    signal: new AbortController().signal,
  };
  await expect(async () => {
    for await (const _event of make(fetch).stream(request)) {
      // nothing arrives: the endpoint answers 400
    }
  }).rejects.toMatchObject({ code: 'model_bad_request' });
  const [body] = bodies;
  if (!isJsonObject(body)) throw new Error('no request was sent');
  return body;
}

describe('response formats through the AI SDK', () => {
  it('OpenAI gets text.format json_schema, strict as asked', async () => {
    for (const strict of [true, false]) {
      const format: ResponseFormat = {
        type: 'json_schema',
        name: 'reply',
        description: 'A reply',
        schema: SCHEMA,
        strict,
      };
      const body = await sentBody((fetch) => createOpenAIAdapter('gpt-test', 'sk-test', { fetch }), format);
      expect(body.text).toEqual({
        format: { type: 'json_schema', name: 'reply', description: 'A reply', schema: SCHEMA, strict },
      });
    }
  });

  it('OpenAI gets json_object', async () => {
    const body = await sentBody((fetch) => createOpenAIAdapter('gpt-test', 'sk-test', { fetch }), {
      type: 'json_object',
    });
    expect(body.text).toEqual({ format: { type: 'json_object' } });
  });

  it('Anthropic gets the schema as its structured output', async () => {
    const format: ResponseFormat = { type: 'json_schema', name: 'reply', schema: SCHEMA, strict: true };
    const body = await sentBody((fetch) => createAnthropicAdapter('claude-test', 'sk-ant', { fetch }), format);
    expect(body.output_config).toEqual({ format: { type: 'json_schema', schema: SCHEMA } });
  });
});
