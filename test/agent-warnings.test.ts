/**
 * An agent may name a model whose provider has no API key here: it is saved (the key can come later), the
 * create and update answers carry a warning naming the variable, and its turns fail saying the same. Tools it
 * configures that this deployment cannot run (the sandbox without bubblewrap, internal servers self-hosted Agentry
 * does not have, skills without a source) are warned about on create, update and get, in the very words an
 * accepted message of the agent carries.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flows } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';

const internal = (name: string) => ({ kind: 'internal', name });
const UNSUPPORTED = ['coding_agent', 'company', 'app_builder_contract', 'github', 'sound_studio', 'speech_generator'];

describe.each(dialects())('agent warnings (%s)', (dialect) => {
  let h: Harness;
  const flow = flows(() => h, { agentName: 'warned' });

  beforeAll(async () => {
    h = await createHarness(dialect, {
      ANTHROPIC_API_KEY: 'sk-ant-test',
      AGENTRY_PROVIDERS: '{"ollama":{"baseURL":"http://127.0.0.1:9/v1"}}',
      AGENTRY_SANDBOX_BWRAP: '/nonexistent/bwrap',
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
    // GET says the same.
    expect(json(await h.request('GET', `/v1/agents/${body.agent.id}`))).toEqual(body);
  });

  it.each([
    ['scripted', 'scripted'],
    ['a provider with its key', 'anthropic/claude-sonnet-5'],
    ['an AGENTRY_PROVIDERS provider (no key needed)', 'ollama/llama3.3'],
  ])('has no warnings for %s', async (_name, model) => {
    const response = await h.request('POST', '/v1/agents', { body: { name: 'ok', model } });
    expect(response.status, response.text).toBe(201);
    expect(json(response).warnings).toEqual([]);
    expect(json(await h.request('GET', `/v1/agents/${json(response).agent.id}`)).warnings).toEqual([]);
  });

  it('warns on create, get and update about tools that cannot run here, as an accepted message does', async () => {
    const mcpServers = [internal('sandbox'), ...UNSUPPORTED.map(internal), internal('report_builder')];
    const skills = [{ repo: 'acme/skills', path: 'deploy' }];
    const created = await h.request('POST', '/v1/agents', {
      body: { name: 'first hour', model: 'openai/gpt-5.4-mini', mcpServers, skills },
    });
    expect(created.status, created.text).toBe(201);
    const { agent, warnings } = json(created);
    const { accepted, message } = await flow.turn(agent.id, 'hello');
    const expected = [
      {
        code: 'tool_unavailable',
        message: expect.stringMatching(
          /^internal tool "sandbox" is configured on the agent but this deployment cannot sandbox commands \(bubblewrap \(bwrap\) is not installed\), so sandbox_run, .* are not offered; the operator can fix it: install bubblewrap/,
        ),
      },
      {
        code: 'skill_unavailable',
        message: expect.stringContaining('acme/skills'),
      },
      ...UNSUPPORTED.map((name) => ({
        code: 'tool_unavailable',
        message: `internal tool "${name}" is configured on the agent but this deployment cannot run it; the turn runs without it`,
      })),
    ];
    expect(accepted.warnings).toEqual(expect.arrayContaining(expected));
    expect(accepted.warnings).toHaveLength(expected.length);
    // The message keeps the warnings of its acceptance, and its run carries them too.
    expect(message.warnings).toEqual(accepted.warnings);
    expect(json(await h.request('GET', `/v1/runs/${message.runId}`)).warnings).toEqual(accepted.warnings);
    expect(warnings).toEqual([
      { code: 'model_not_configured', message: expect.stringContaining('OPENAI_API_KEY is not set') },
      ...accepted.warnings,
    ]);
    expect(json(await h.request('GET', `/v1/agents/${agent.id}`))).toEqual({ agent, warnings });

    // Take the sandbox away and the rest stays; take the model and tools away and only the skill is left (skills
    // cannot change once the first turn has provisioned the workspace).
    const fewer = await h.request('PATCH', `/v1/agents/${agent.id}`, { body: { mcpServers: mcpServers.slice(1) } });
    expect(fewer.status, fewer.text).toBe(200);
    const sandbox = (warning: { message: string }) => warning.message.startsWith('internal tool "sandbox"');
    expect(json(fewer).warnings).toEqual(warnings.filter((warning: { message: string }) => !sandbox(warning)));
    expect(json(fewer).warnings).toHaveLength(warnings.length - 1);
    const fixed = await h.request('PATCH', `/v1/agents/${agent.id}`, {
      body: { model: 'scripted', mcpServers: [internal('report_builder')] },
    });
    expect(fixed.status, fixed.text).toBe(200);
    const left = warnings.filter((warning: { code: string }) => warning.code === 'skill_unavailable');
    expect(left).toHaveLength(1);
    expect(json(fixed).warnings).toEqual(left);
    expect(json(await h.request('GET', `/v1/agents/${agent.id}`))).toEqual(json(fixed));
    expect((await flow.turn(agent.id, 'hello')).accepted.warnings).toEqual(left);
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
