/**
 * The model catalogue through the server: an AGENTRY_PROVIDERS provider (the local chat-completions stub) priced
 * by the operator's catalogue file, cached input tokens the stub reports carried into the Response, chat
 * completion and run usage and priced at the cached price, and the catalogue fields of GET /v1/models.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { textReply, usageChunk } from './helpers/chat-completions-stub.ts';
import { flows } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';

/** Answers every call with "Hello." and 1,000 prompt tokens, 800 of them cached, and 100 completion tokens. */
async function startStub(): Promise<{ server: Server; url: string }> {
  const server = createServer((request, response) => {
    request.resume();
    request.on('end', () => void textReply(['Hel', 'lo.'], usageChunk(1000, 100, 800))(response));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1` };
}

// $2 per 1M input tokens, $0.5 cached, $10 output: 200 × 2 + 800 × 0.5 + 100 × 10 = 1,800 micro-USD per call.
const CALL_COST_USD = 0.0018;

describe.each(dialects())('model catalogue through the server (%s)', (dialect) => {
  let h: Harness;
  let stub: { server: Server; url: string };
  let client: OpenAI;
  let agentId: string;
  const dir = mkdtempSync(join(tmpdir(), 'agentry-catalogue-'));
  const flow = flows(() => h, { agentName: 'cached' });

  beforeAll(async () => {
    stub = await startStub();
    const catalog = join(dir, 'models.yaml');
    writeFileSync(
      catalog,
      [
        'models:',
        '  stub/test-model:',
        '    context_window: 32000',
        '    prices: { input: 2, cached_input: 0.5, output: 10 }',
        'providers:',
        '  stub:',
        '    max_output_tokens: 2000',
      ].join('\n'),
    );
    const providers = { stub: { baseURL: stub.url, capabilities: { images: false } } };
    h = await createHarness(dialect, { AGENTRY_PROVIDERS: JSON.stringify(providers), AGENTRY_MODEL_CATALOG: catalog });
    client = new OpenAI({ apiKey: h.key, baseURL: `${await h.listen()}/v1` });
    agentId = await flow.createAgent({ model: 'stub/test-model' });
  });

  afterAll(async () => {
    await h.close();
    stub.server.closeAllConnections();
    await new Promise((resolve) => stub.server.close(resolve));
    rmSync(dir, { recursive: true, force: true });
  });

  it('shows cached input tokens in the Response and run usage, and prices them at the cached price', async () => {
    const response = await client.responses.create({ model: agentId, input: 'Hi' });
    expect(response.output_text).toBe('Hello.');
    expect(response.usage).toMatchObject({
      input_tokens: 1000,
      input_tokens_details: { cached_tokens: 800 },
      output_tokens: 100,
      total_tokens: 1100,
    });
    const runs = json(await h.request('GET', `/v1/runs?agent_id=${agentId}`)).data;
    const run = runs.find((candidate: { response_id: string }) => candidate.response_id === response.id);
    expect(run.usage).toEqual({
      input_tokens: 1000,
      input_tokens_details: { cached_tokens: 800 },
      output_tokens: 100,
      total_tokens: 1100,
    });
    expect(run.cost_usd).toBe(CALL_COST_USD);
    const fetched = json(await h.request('GET', `/v1/runs/${run.id}`));
    expect(fetched.usage.input_tokens_details).toEqual({ cached_tokens: 800 });
  });

  it('shows cached input tokens in the chat completion usage', async () => {
    const completion = await client.chat.completions.create({
      model: agentId,
      messages: [{ role: 'user', content: 'Hi' }],
    });
    expect(completion.choices[0]?.message.content).toBe('Hello.');
    expect(completion.usage).toMatchObject({
      prompt_tokens: 1000,
      completion_tokens: 100,
      prompt_tokens_details: { cached_tokens: 800 },
    });
  });

  it('lists each model with its window, output limit, prices and capabilities', async () => {
    const models = await client.models.list();
    const byId = new Map(models.data.map((model) => [model.id, model as unknown as Record<string, unknown>]));
    const stubModel = {
      context_window: 32_000,
      max_output_tokens: 2_000,
      pricing: { input: 2, cached_input: 0.5, output: 10 },
      capabilities: { tools: true, images: false, structured_output: true },
      catalogue_source: 'operator',
    };
    expect(byId.get(agentId)).toMatchObject({ object: 'model', kind: 'agent', model: 'stub/test-model', ...stubModel });
    // The provider entry: its own fields for models not named, and the named ones listed.
    expect(byId.get('stub/*')).toMatchObject({
      object: 'model',
      owned_by: 'stub',
      kind: 'provider',
      context_window: 128_000,
      max_output_tokens: 2_000,
      pricing: { input: 0, cached_input: 0, output: 0 },
      capabilities: { images: false },
      catalogue_source: 'operator',
      models: [{ id: 'stub/test-model', ...stubModel }],
    });
    expect(byId.get('scripted')).toMatchObject({
      context_window: 128_000,
      max_output_tokens: 4_096,
      pricing: { input: 0, cached_input: 0, output: 0 },
      catalogue_source: 'builtin',
    });
    const one = json(await h.request('GET', `/v1/models/${agentId}`));
    expect(one).toMatchObject({ id: agentId, model: 'stub/test-model', ...stubModel });
  });
});
