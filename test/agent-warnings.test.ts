/**
 * An agent may name a model whose provider has no API key here: it is saved (the key can come later), the
 * create and update answers carry a warning naming the variable, and its turns fail saying the same.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flows } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';

describe.each(dialects())('agent warnings (%s)', (dialect) => {
  let h: Harness;
  const flow = flows(() => h, { agentName: 'warned' });

  beforeAll(async () => {
    h = await createHarness(dialect, {
      ANTHROPIC_API_KEY: 'sk-ant-test',
      AGENTRY_PROVIDERS: '{"ollama":{"baseURL":"http://127.0.0.1:9/v1"}}',
    });
  });
  afterAll(() => h?.close());

  it('creates an agent whose provider has no key, with a warning naming the variable', async () => {
    const response = await h.request('POST', '/v1/agents', { body: { name: 'gpt', model: 'openai/gpt-5.4-mini' } });
    expect(response.status, response.text).toBe(201);
    const body = json(response);
    expect(body.agent.model).toBe('openai/gpt-5.4-mini');
    expect(body.warnings).toEqual([
      {
        code: 'model_not_configured',
        message:
          'openai models need an API key and OPENAI_API_KEY is not set: turns of this agent fail with model_not_configured until it is',
      },
    ]);
    // GET keeps the plain envelope.
    expect(Object.keys(json(await h.request('GET', `/v1/agents/${body.agent.id}`)))).toEqual(['agent']);
  });

  it.each([
    ['scripted', 'scripted'],
    ['a provider with its key', 'anthropic/claude-sonnet-5'],
    ['an AGENTRY_PROVIDERS provider (no key needed)', 'ollama/llama3.3'],
  ])('has no warnings for %s', async (_name, model) => {
    const response = await h.request('POST', '/v1/agents', { body: { name: 'ok', model } });
    expect(response.status, response.text).toBe(201);
    expect(json(response).warnings).toEqual([]);
  });

  it('warns on update too, and replays the same answer for the same Idempotency-Key', async () => {
    const agentId = await flow.createAgent();
    const updated = await h.request('PATCH', `/v1/agents/${agentId}`, { body: { model: 'openai/gpt-5.4' } });
    expect(updated.status, updated.text).toBe(200);
    expect(json(updated).warnings.map((warning: { code: string }) => warning.code)).toEqual(['model_not_configured']);
    const back = await h.request('PATCH', `/v1/agents/${agentId}`, { body: { model: 'scripted' } });
    expect(json(back).warnings).toEqual([]);

    const send = () =>
      h.request('POST', '/v1/agents', {
        body: { name: 'replayed', model: 'openai/gpt-5' },
        headers: { 'idempotency-key': `warn-${dialect}` },
      });
    const first = json(await send());
    const again = await send();
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(json(again)).toEqual(first);
  });

  it("fails the agent's turns saying which variable to set", async () => {
    const agentId = await flow.createAgent({ model: 'openai/gpt-5.4-mini' });
    const { message } = await flow.turn(agentId, 'Hello');
    expect(message.status).toBe('failed');
    expect(message.error).toEqual({
      code: 'model_not_configured',
      message: expect.stringContaining('set OPENAI_API_KEY'),
    });
  });
});
