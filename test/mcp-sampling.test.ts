/**
 * Sampling requests of MCP servers served by the agent's model (docs/mcp.md "Sampling"): a connector entry that
 * allows it gets the model's answer, billed to the run (usage and cost) and traced as a model_call span marked
 * sampling; an entry that does not is refused, as is a request once the agent's budget is spent; the opt-in fields
 * are validated. The `scripted/priced` model (it echoes the request) and a real MCP server (v1 SDK, Streamable
 * HTTP) whose `summarise` tool samples, once per dialect.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flows, type Json } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';
import { type ElicitationServer, startElicitationServer } from './helpers/mcp-elicitation-server.ts';

const PRICED = 'scripted/priced';
const ASKED = 'summarise: the sky is blue';

describe.each(dialects())('MCP sampling (%s)', (dialect) => {
  let h: Harness;
  let mcp: ElicitationServer;
  let connectorId: string;
  const flow = flows(() => h);

  const agentWith = (name: string, entry: Json, fields: Json = {}) =>
    flow.createAgent({
      name,
      model: PRICED,
      mcpServers: [{ kind: 'custom', serverId: connectorId, name: 'asking', ...entry }],
      ...fields,
    });

  beforeAll(async () => {
    mcp = await startElicitationServer();
    h = await createHarness(dialect, { AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true', AGENTRY_POLL_MS: '100' });
    const created = await h.request('POST', '/v1/mcp_servers', { body: { name: 'asking', url: mcp.url } });
    expect(created.status, created.text).toBe(201);
    connectorId = json(created).id;
  });
  afterAll(async () => {
    await h.close();
    await mcp.close();
  });

  it('answers with the agent model when the entry allows it, billed to the run and traced', async () => {
    const agentId = await agentWith('sampler', { allowSampling: true, samplingMaxTokens: 64 });
    const stored = json(await h.request('GET', `/v1/agents/${agentId}`)).agent;
    expect(stored.mcpServers[0]).toMatchObject({ allowSampling: true, samplingMaxTokens: 64 });
    const { message } = await flow.turn(agentId, 'call summarise {}');
    expect(message.status, JSON.stringify(message)).toBe('completed');
    expect(mcp.answers.at(-1)).toEqual({ sampled: ASKED });
    const spans = json(await h.request('GET', `/v1/runs/${message.runId}/trace`)).data as Json[];
    const sampled = spans.filter((span) => span.kind === 'model_call' && span.attributes.sampling === true);
    expect(sampled).toHaveLength(1);
    const [span] = sampled as [Json];
    expect(span.attributes).toMatchObject({ server: 'asking', server_id: connectorId, max_tokens: 64 });
    expect(span.output_preview).toBe(ASKED);
    expect(spans.find((candidate) => candidate.id === span.parent_id)?.kind).toBe('tool_call');
    expect(span.cost_usd).toBeGreaterThan(0);
    // The run's usage is its steps' plus the sampling call's.
    const steps = spans.filter((candidate) => candidate.kind === 'model_call' && candidate !== span);
    expect(steps.length).toBeGreaterThan(0);
    const total = (key: string) =>
      [...steps, span].reduce((sum, candidate) => sum + (candidate.usage?.[key] ?? 0), 0) as number;
    const run = json(await h.request('GET', `/v1/runs/${message.runId}`));
    expect(run.usage.input_tokens).toBe(total('input_tokens'));
    expect(run.usage.output_tokens).toBe(total('output_tokens'));
    expect(run.cost_usd).toBeCloseTo(
      [...steps, span].reduce((sum, candidate) => sum + candidate.cost_usd, 0),
      9,
    );
  });

  it('keeps the opt-in of a URL entry stored as a connector entry', async () => {
    const agentId = await flow.createAgent({
      name: 'by-url',
      mcpServers: [{ type: 'url', name: 'asking', url: mcp.url, allowSampling: true, samplingMaxTokens: 32 }],
    });
    const stored = json(await h.request('GET', `/v1/agents/${agentId}`)).agent;
    expect(stored.mcpServers).toEqual([
      { kind: 'custom', serverId: connectorId, name: 'asking', allowSampling: true, samplingMaxTokens: 32 },
    ]);
  });

  it('round-trips the opt-in through export and apply', async () => {
    await agentWith('exported', { allowSampling: true, samplingMaxTokens: 48 });
    const exported = json(await h.request('GET', '/v1/export'));
    const document = exported.documents.find((doc: Json) => doc.kind === 'agent' && doc.name === 'exported');
    expect(document.mcpServers).toEqual([
      { kind: 'custom', server: 'asking', name: 'asking', allowSampling: true, samplingMaxTokens: 48 },
    ]);
    const applied = await h.request('POST', '/v1/apply', { body: { documents: [{ ...document, name: 'applied' }] } });
    expect(applied.status, applied.text).toBe(200);
    const agents = json(await h.request('GET', '/v1/agents')).data as Json[];
    const copy = agents.find((agent) => agent.name === 'applied');
    expect(copy?.mcpServers).toEqual([
      { kind: 'custom', serverId: connectorId, name: 'asking', allowSampling: true, samplingMaxTokens: 48 },
    ]);
  });

  it('refuses sampling when the entry does not allow it', async () => {
    const agentId = await agentWith('refuser', { allowSampling: false });
    const { message } = await flow.turn(agentId, 'call summarise {}');
    expect(message.status).toBe('completed');
    expect(mcp.answers.at(-1)).toEqual({ error: expect.stringContaining('sampling is not allowed for this agent') });
  });

  it('refuses sampling once the budget is spent', async () => {
    const agentId = await agentWith('spent', { allowSampling: true }, { budget: { limitUsd: 0.000001 } });
    const { message } = await flow.turn(agentId, 'call summarise {}');
    expect(mcp.answers.at(-1)).toEqual({ error: expect.stringMatching(/sampling refused: .*budget/i) });
    expect(message.status).toBe('failed');
    expect(message.error.code).toBe('budget_exceeded');
  });

  it('validates the opt-in fields, naming them', async () => {
    for (const [entry, field] of [
      [{ allowSampling: 'yes' }, 'mcpServers[0].allowSampling'],
      [{ samplingMaxTokens: 0 }, 'mcpServers[0].samplingMaxTokens'],
      [{ samplingMaxTokens: 1.5 }, 'mcpServers[0].samplingMaxTokens'],
    ] as const) {
      const res = await h.request('POST', '/v1/agents', {
        body: { name: 'bad', mcpServers: [{ kind: 'custom', serverId: connectorId, ...entry }] },
      });
      expect(res.status, res.text).toBe(400);
      expect(res.text).toContain(field);
    }
    const internal = await h.request('POST', '/v1/agents', {
      body: { name: 'bad', mcpServers: [{ kind: 'internal', name: 'web_search', allowSampling: true }] },
    });
    expect(internal.status, internal.text).toBe(400);
  });
});
