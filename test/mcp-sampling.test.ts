/**
 * Sampling requests of MCP servers served by the agent's model (docs/mcp-auth.md "Sampling"): a connector entry
 * that allows it gets the model's answer, billed to the run (usage and cost) and traced as a model_call span marked
 * sampling; the capability is declared only on connections of agents that allow it (the server reads its client's
 * capabilities), and two agents on one server at once each get their own connection; images and audio reach the
 * model's request (a local OpenAI-compatible stub records it), a request past the media bound is refused; a request
 * is refused once the agent's budget is spent, and by a call that does not serve it; the opt-in fields are
 * validated. The `scripted/priced` model (it echoes the request), that stub, and a real MCP server (v1 SDK,
 * Streamable HTTP) whose `summarise` and `describe_media` tools sample, once per dialect.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectMcp } from '../src/tools/mcp/client.ts';
import {
  chunk,
  type Responder,
  type Stub,
  sse,
  startStub,
  textReply,
  usageChunk,
} from './helpers/chat-completions-stub.ts';
import { flows, type Json } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';
import {
  type ElicitationServer,
  RED_PIXEL_PNG,
  startElicitationServer,
  WAV_CLIP,
} from './helpers/mcp-elicitation-server.ts';

const PRICED = 'scripted/priced';
const ASKED = 'summarise: the sky is blue';
const DESCRIBED = 'a red pixel';

interface ChatBody {
  messages: { role: string; content: unknown }[];
  tools?: { function: { name: string } }[];
}

/**
 * The stub model: with tools, it calls `describe_media` with the kind its user message names (then says "done"
 * once the tool answered); without tools (a sampling call), it describes.
 */
function mediaModel(raw: Record<string, unknown>): Responder {
  const body = raw as unknown as ChatBody;
  if (body.messages.at(-1)?.role === 'tool') return textReply(['done']);
  const tool = body.tools?.find((candidate) => candidate.function.name.endsWith('describe_media'))?.function.name;
  if (tool === undefined) return textReply([DESCRIBED]);
  const kind = String(body.messages.at(-1)?.content)
    .replace(/^.*describe /s, '')
    .trim();
  return sse([
    chunk({ role: 'assistant', content: null }),
    chunk({
      tool_calls: [
        { index: 0, id: 'call_media', type: 'function', function: { name: tool, arguments: JSON.stringify({ kind }) } },
      ],
    }),
    chunk({}, 'tool_calls'),
    usageChunk(10, 5),
  ]);
}

describe.each(dialects())('MCP sampling (%s)', (dialect) => {
  let h: Harness;
  let mcp: ElicitationServer;
  let connectorId: string;
  let stub: Stub;
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
    stub = await startStub(mediaModel);
    h = await createHarness(dialect, {
      AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true',
      AGENTRY_POLL_MS: '100',
      AGENTRY_PROVIDERS: JSON.stringify({ stub: { baseURL: stub.url, apiKey: 'k' } }),
    });
    const created = await h.request('POST', '/v1/mcp_servers', { body: { name: 'asking', url: mcp.url } });
    expect(created.status, created.text).toBe(201);
    connectorId = json(created).id;
  });
  afterAll(async () => {
    await h.close();
    await mcp.close();
    await stub.close();
  });

  it('answers with the agent model when the entry allows it, billed to the run and traced', async () => {
    const agentId = await agentWith('sampler', { allowSampling: true, samplingMaxTokens: 64 });
    const stored = json(await h.request('GET', `/v1/agents/${agentId}`)).agent;
    expect(stored.mcpServers[0]).toMatchObject({ allowSampling: true, samplingMaxTokens: 64 });
    const { message } = await flow.turn(agentId, 'call summarise {}');
    expect(message.status, JSON.stringify(message)).toBe('completed');
    expect(mcp.answers.at(-1)).toEqual({ sampled: ASKED, declared: true });
    const spans = json(await h.request('GET', `/v1/runs/${message.runId}/trace`)).data as Json[];
    const sampled = spans.filter((span) => span.kind === 'model_call' && span.attributes.sampling === true);
    expect(sampled).toHaveLength(1);
    const [span] = sampled as [Json];
    expect(span.attributes).toMatchObject({
      server: 'asking',
      server_id: connectorId,
      max_tokens: 64,
      images: 0,
      audio: 0,
    });
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

  it('does not declare sampling to the server for an agent that does not allow it', async () => {
    const agentId = await agentWith('refuser', { allowSampling: false });
    const { message } = await flow.turn(agentId, 'call summarise {}');
    expect(message.status).toBe('completed');
    // The server saw no `sampling` capability; one that asks anyway gets JSON-RPC "method not found".
    expect(mcp.answers.at(-1)).toEqual({ declared: false, error: expect.stringMatching(/method not found/i) });
  });

  it('serves two agents on the same server at the same time, declaring sampling only for the one allowing it', async () => {
    const allowing = await agentWith('both-allowing', { allowSampling: true });
    const refusing = await agentWith('both-refusing', {});
    const before = mcp.answers.length;
    const turns = await Promise.all(
      [allowing, refusing, allowing, refusing].map((agentId) => flow.turn(agentId, 'call summarise {}')),
    );
    for (const { message } of turns) expect(message.status, JSON.stringify(message)).toBe('completed');
    const seen = mcp.answers.slice(before);
    expect(seen).toHaveLength(4);
    expect(seen.filter((answer) => (answer as Json).declared === true)).toEqual([
      { sampled: ASKED, declared: true },
      { sampled: ASKED, declared: true },
    ]);
    expect(seen.filter((answer) => (answer as Json).declared === false)).toEqual([
      { error: expect.stringMatching(/method not found/i), declared: false },
      { error: expect.stringMatching(/method not found/i), declared: false },
    ]);
  });

  it('passes a sampled image to the model as an image, and records it in the trace without its bytes', async () => {
    const agentId = await agentWith('looker', { allowSampling: true }, { model: 'stub/m' });
    stub.bodies.length = 0;
    const { message } = await flow.turn(agentId, 'describe image');
    expect(message.status, JSON.stringify(message)).toBe('completed');
    expect(mcp.answers.at(-1)).toEqual({ sampled: DESCRIBED, declared: true });
    const sampling = stub.bodies.find((body) => (body as unknown as ChatBody).tools === undefined) as
      | ChatBody
      | undefined;
    expect(sampling, JSON.stringify(stub.bodies)).toBeDefined();
    expect(JSON.stringify(sampling?.messages)).toContain(`data:image/png;base64,${RED_PIXEL_PNG}`);
    expect(JSON.stringify(sampling?.messages)).toContain('describe this image');
    const spans = json(await h.request('GET', `/v1/runs/${message.runId}/trace`)).data as Json[];
    const span = spans.find((candidate) => candidate.attributes?.sampling === true);
    expect(span?.attributes).toMatchObject({ images: 1, audio: 0 });
    expect(JSON.stringify(span)).not.toContain(RED_PIXEL_PNG);
    expect(span?.input_preview).toMatch(/\[image image\/png, \d+ bytes\]/);
  });

  it('serves a request with an image on the scripted model too (it reads the text)', async () => {
    const agentId = await agentWith('scripted-looker', { allowSampling: true });
    const { message } = await flow.turn(agentId, 'call describe_media {"kind":"image"}');
    expect(message.status, JSON.stringify(message)).toBe('completed');
    expect(mcp.answers.at(-1)).toEqual({ sampled: expect.stringContaining('describe this image'), declared: true });
    const spans = json(await h.request('GET', `/v1/runs/${message.runId}/trace`)).data as Json[];
    expect(spans.find((span) => span.attributes?.sampling === true)?.attributes).toMatchObject({ images: 1 });
  });

  it('passes sampled audio to the model as audio input', async () => {
    const agentId = await agentWith('listener', { allowSampling: true }, { model: 'stub/m' });
    stub.bodies.length = 0;
    const { message } = await flow.turn(agentId, 'describe audio');
    expect(message.status, JSON.stringify(message)).toBe('completed');
    expect(mcp.answers.at(-1)).toEqual({ sampled: DESCRIBED, declared: true });
    const sampling = stub.bodies.find((body) => (body as unknown as ChatBody).tools === undefined);
    expect(JSON.stringify(sampling)).toContain(JSON.stringify({ data: WAV_CLIP, format: 'wav' }));
  });

  it('refuses a sampling request whose media exceed the bound, with a JSON-RPC error and no model call', async () => {
    const agentId = await agentWith('overloaded', { allowSampling: true }, { model: 'stub/m' });
    stub.bodies.length = 0;
    const { message } = await flow.turn(agentId, 'describe huge');
    expect(message.status, JSON.stringify(message)).toBe('completed');
    expect(mcp.answers.at(-1)).toEqual({
      declared: true,
      error: expect.stringMatching(/sampling refused: .*base64 characters, at most 4194304/),
    });
    // The agent's two steps, and no sampling call between them.
    expect(stub.bodies.map((body) => (body as unknown as ChatBody).tools === undefined)).toEqual([false, false]);
  });

  it('refuses sampling once the budget is spent', async () => {
    const agentId = await agentWith('spent', { allowSampling: true }, { budget: { limitUsd: 0.000001 } });
    const { message } = await flow.turn(agentId, 'call summarise {}');
    expect(mcp.answers.at(-1)).toEqual({ declared: true, error: expect.stringMatching(/sampling refused: .*budget/i) });
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

describe('MCP sampling: the per-call refusal', () => {
  it('refuses, on a connection that declares sampling, a request of a call that does not serve it', async () => {
    const mcp = await startElicitationServer();
    const connection = await connectMcp(
      { url: mcp.url, headers: {}, sampling: true },
      { fetch, requestTimeoutMs: 5000 },
    );
    try {
      const result = await connection.callTool(
        'summarise',
        {},
        { signal: new AbortController().signal, timeoutMs: 5000 },
      );
      expect(result.isError).toBe(true);
      expect(mcp.answers).toEqual([
        { declared: true, error: expect.stringContaining('sampling is not allowed for this agent') },
      ]);
    } finally {
      await connection.close();
      await mcp.close();
    }
  });
});
