/**
 * The compaction policy (docs/context.md) against a local OpenAI-compatible model with a small window that refuses,
 * as OpenAI does, any request longer than it: a long session with large tool outputs under compaction (and the same
 * under truncation), the compaction spans with their usage and cost in the trace, a compaction that fails falling
 * back to truncation, the provider's refusal recovered by compacting, a kill -9 during compaction (one summary,
 * nothing lost), and Responses `context_management` through the official `openai` client.
 */
import type { ServerResponse } from 'node:http';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type Responder,
  type Stub,
  startStub,
  status,
  stubTokens,
  textReply,
  usageChunk,
  windowed,
} from './helpers/chat-completions-stub.ts';
import { httpClient, TERMINAL_STATUSES, waitUntil } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json, testEnvironment, testKey } from './helpers/harness.ts';
import { CRASH_TEST_ENV, type ServerProcess, startServerProcess, startsTimeout } from './helpers/server-process.ts';
import { agentLoop, LOOKUP, windowedSessions } from './helpers/windowed-sessions.ts';

type Body = Record<string, unknown>;
type Message = { role: string; content: unknown };

const messagesOf = (body: Body) => body.messages as Message[];
const textOf = (body: Body) => JSON.stringify(body.messages);
/** A summarising request (engine/compaction.ts's instructions). */
const isSummary = (body: Body) => textOf(body).includes('working memory of an AI agent');

/** The question numbers a text names: "question N", and the ranges "questions A to B" of earlier summaries. */
function questionsIn(text: string): number[] {
  const numbers = [...text.matchAll(/question (\d+)/g)].map((match) => Number(match[1]));
  for (const match of text.matchAll(/questions (\d+) to (\d+)/g)) numbers.push(Number(match[1]), Number(match[2]));
  return numbers;
}

/** The stub's summary: the range of question numbers it read (in the summary so far and the conversation). */
function summaryReply(body: Body): Responder {
  const numbers = questionsIn(String(messagesOf(body).at(-1)?.content));
  const text =
    numbers.length === 0
      ? 'Summary: nothing was asked yet.'
      : `Summary: questions ${Math.min(...numbers)} to ${Math.max(...numbers)} were asked and answered.`;
  return textReply([text], usageChunk(stubTokens(body), 20));
}

/** The agent's side: a call of `lookup` to a user input, a short text to the call's output. */
const agentReply = agentLoop();

const answering = (body: Body): Responder => (isSummary(body) ? summaryReply(body) : agentReply(body));
/** Summaries fail (HTTP 500): compaction falls back to truncation. */
const failingSummaries = (body: Body): Responder => (isSummary(body) ? status(500) : agentReply(body));

/** The stub's window, in its own count (characters / 4); Agentry is told the same. */
const WINDOW = 16_000;
/** A model whose window is smaller than the one Agentry is told: its refusals are recovered from. */
const TIGHT = 4_000;
/** Priced per 1M tokens: a compaction's cost shows in the trace. */
const PRICES = { input: 1, cached_input: 0.1, output: 2 };

describe.each(dialects())('compaction against a model with a small window (%s)', (dialect) => {
  const models = { stub: windowed(WINDOW, answering), broken: windowed(WINDOW, failingSummaries) };
  const tightModel = windowed(TIGHT, answering);
  let stub: Stub;
  let broken: Stub;
  let tight: Stub;
  let h: Harness;
  let client: OpenAI;
  beforeAll(async () => {
    stub = await startStub(models.stub);
    broken = await startStub(models.broken);
    tight = await startStub(tightModel);
    const provider = (server: Stub) => ({ baseURL: server.url, apiKey: 'k', prices: PRICES });
    h = await createHarness(dialect, {
      AGENTRY_PROVIDERS: JSON.stringify({ stub: provider(stub), broken: provider(broken), tight: provider(tight) }),
      AGENTRY_CONTEXT_WINDOW: String(WINDOW),
    });
    client = new OpenAI({ apiKey: h.key, baseURL: `${await h.listen()}/v1` });
  });
  afterAll(async () => {
    await h.close();
    await Promise.all([stub.close(), broken.close(), tight.close()]);
  });

  const { createAgent, respond, exchange } = windowedSessions(() => h);

  /** The reasons of the compactions in the run traces of a Response's conversation so far. */
  async function compactionReasons(responseId: string): Promise<string[]> {
    const spans = json(await h.request('GET', `/v1/responses/${responseId}/trace`)).data as Record<string, any>[];
    return spans.filter((span) => span.kind === 'compaction').map((span) => span.attributes.reason);
  }

  /** Uploads a text file of the organization; its id. */
  async function uploadText(name: string, text: string): Promise<string> {
    const form = new FormData();
    form.append('file', new Blob([text], { type: 'text/plain' }), name);
    const response = await fetch(`${await h.listen()}/v1/files`, {
      method: 'POST',
      headers: { authorization: `Bearer ${h.key}` },
      body: form,
    });
    const body = (await response.json()) as { id: string };
    expect(response.status, JSON.stringify(body)).toBe(201);
    return body.id;
  }

  /** Exchanges in one conversation; every `files.every`th input carries the file `files.id`. */
  async function session(agentId: string, exchanges: number, extra = {}, files?: { id: string; every: number }) {
    let previous: string | null = null;
    let failed = 0;
    const responses: Record<string, unknown>[] = [];
    for (let index = 0; index < exchanges; index++) {
      const attach = files !== undefined && index % files.every === files.every - 1 ? files.id : undefined;
      const result = await exchange(agentId, previous, index, extra, attach);
      failed += result.failed;
      previous = result.last.id;
      responses.push(result.last);
    }
    return { failed, last: responses.at(-1) as Record<string, unknown>, responses };
  }

  it('defaults to compaction on a real model, truncation on scripted; compactThreshold is validated', async () => {
    const real = json(await h.request('GET', `/v1/agents/${await createAgent()}`)).agent;
    expect(real).toMatchObject({ contextPolicy: 'compaction', compactThreshold: null });
    const scripted = await createAgent({ model: 'scripted' });
    expect(json(await h.request('GET', `/v1/agents/${scripted}`)).agent.contextPolicy).toBe('truncation');
    const patched = await h.request('PATCH', `/v1/agents/${scripted}`, { body: { compactThreshold: 5_000 } });
    expect(json(patched).agent).toMatchObject({ compactThreshold: 5_000, version: 2 });
    const low = await h.request('POST', '/v1/agents', { body: { name: 'a', compactThreshold: 10 } });
    expect(low.status).toBe(400);
    expect(json(low).error).toMatchObject({ code: 'validation_error', param: 'compactThreshold' });
  });

  it('runs a 500-turn session with 20k-character tool outputs, files, and no failed turn, under compaction then truncation', async () => {
    const agentId = await createAgent();
    const before = stub.bodies.length;
    // Every 10th input carries a 6,000-character text file (the model reads it inline, 1,500 tokens).
    const notes = `FILE-NOTES ${'f'.repeat(6_000)}`;
    const files = { id: await uploadText('notes.txt', notes), every: 10 };
    const exchanges = 250;
    const compacted = await session(agentId, exchanges, {}, files);
    expect(compacted.failed).toBe(0);
    expect(models.stub.refused).toBe(0);
    const bodies = stub.bodies.slice(before);
    // The files reached the model with the inputs that carried them, and were summarised like the rest.
    const withFile = bodies.filter((body) => !isSummary(body) && textOf(body).includes(notes));
    expect(withFile.length).toBeGreaterThanOrEqual(exchanges / files.every);
    const summaryBodies = bodies.filter(isSummary);
    expect(summaryBodies.some((body) => textOf(body).includes('--- notes.txt ---\\nFILE-NOTES'))).toBe(true);
    expect(summaryBodies.some((body) => textOf(body).includes('is no longer available'))).toBe(false);
    const summaries = bodies.filter(isSummary);
    expect(bodies.length - summaries.length).toBe(2 * exchanges);
    expect(summaries.length).toBeGreaterThan(10);
    for (const body of bodies) expect(stubTokens(body)).toBeLessThanOrEqual(WINDOW);
    // The last step read the latest summary (naming the first question) and the newest exchange whole.
    const last = bodies.filter((body) => !isSummary(body)).at(-1) as Body;
    const first = messagesOf(last).find((message) => message.role === 'user');
    expect(String(first?.content)).toMatch(/^\[Summary of the earlier conversation.*\]\nSummary: questions 0 to \d+/);
    expect(textOf(last)).toContain(`${exchanges - 1}:${'y'.repeat(20_000)}`);

    // The compaction items are in the log: the Response's input items show them, summary readable.
    const items = json(await h.request('GET', `/v1/responses/${compacted.last.id}/input_items?limit=100`)).data;
    const compaction = items.find((item: { type: string }) => item.type === 'compaction');
    expect(compaction).toMatchObject({
      created_by: 'agentry',
      summary: expect.stringMatching(/^Summary: questions 0 to/),
    });
    expect(compaction.encrypted_content).toBe(compaction.summary);

    // A long session under truncation: no failed turn either.
    const truncating = await createAgent({ contextPolicy: 'truncation' });
    const truncated = await session(truncating, exchanges / 2, {}, files);
    expect(truncated.failed).toBe(0);
    expect(models.stub.refused).toBe(0);
  }, 480_000);

  it('shows each compaction in the trace, with its tokens, usage and cost billed to the run', async () => {
    const agentId = await createAgent({ compactThreshold: 8_000 });
    const { failed, responses } = await session(agentId, 4);
    expect(failed).toBe(0);
    let span: Record<string, any> | undefined;
    let runCost = 0;
    for (const response of responses) {
      const spans = json(await h.request('GET', `/v1/responses/${response.id}/trace`)).data as Record<string, any>[];
      const compaction = spans.find((candidate) => candidate.kind === 'compaction');
      if (compaction === undefined) continue;
      span = compaction;
      // The run is billed the compaction's cost on top of its steps'.
      runCost = spans.reduce((sum, candidate) => sum + (candidate.kind === 'agent_step' ? 0 : candidate.cost_usd), 0);
      const run = json(await h.request('GET', `/v1/runs/${compaction.run_id}`));
      expect(run.cost_usd ?? run.run?.cost_usd).toBeCloseTo(runCost, 6);
      // Before the step it precedes.
      expect(spans.indexOf(compaction)).toBeLessThan(
        spans.findLastIndex((candidate) => candidate.kind === 'agent_step'),
      );
    }
    expect(span, 'a compaction span').toBeDefined();
    const found = span as Record<string, any>;
    expect(found).toMatchObject({ status: 'completed', name: 'compaction (threshold)' });
    expect(found.attributes).toMatchObject({ reason: 'threshold', model: 'stub/m', model_calls: 1 });
    expect(found.attributes.tokens_before).toBeGreaterThan(found.attributes.tokens_after);
    expect(found.usage.input_tokens).toBeGreaterThan(0);
    expect(found.cost_usd).toBeGreaterThan(0);
    expect(found.output_preview).toMatch(/^Summary: questions 0 to/);
    expect(runCost).toBeGreaterThan(found.cost_usd);
    // The session's channel told its listeners when and why, naming the compaction item.
    const conversation = responses[0]?.conversation as { id: string } | undefined;
    const sessionId = String(conversation?.id).replace(/^conv_/, '');
    const rows = await h.deps.storage.db
      .selectFrom('session_events')
      .select(['kind', 'data'])
      .where('session_id', '=', sessionId)
      .orderBy('seq')
      .execute();
    const events = rows.map((row) => ({ kind: row.kind, data: JSON.parse(row.data) as Record<string, unknown> }));
    const compactions = events.filter((event) => event.kind === 'message.event' && event.data.type === 'compaction');
    expect(compactions.length).toBeGreaterThan(0);
    const event = compactions.at(-1)?.data ?? {};
    expect(event).toMatchObject({ sourceType: 'context', reason: 'threshold', itemId: expect.stringMatching(/^cmp_/) });
    expect(event.tokensBefore).toBeGreaterThan(event.tokensAfter as number);
    const items = json(await h.request('GET', `/v1/conversations/conv_${sessionId}/items?limit=100`)).data;
    expect(items.some((item: { id: string }) => item.id === event.itemId)).toBe(true);
  });

  it('falls back to truncation for the step when the summary fails, failing no turn', async () => {
    const agentId = await createAgent({ model: 'broken/m', compactThreshold: 6_000 });
    const { failed, last } = await session(agentId, 5);
    expect(failed).toBe(0);
    expect(models.broken.refused).toBe(0);
    const items = json(await h.request('GET', `/v1/responses/${last.id}/input_items?limit=100`)).data;
    expect(items.some((item: { type: string }) => item.type === 'compaction')).toBe(false);
    expect(broken.bodies.filter(isSummary).length).toBeGreaterThan(0);
  });

  it('compacts and retries once when the provider refuses the context as too long, running no tool twice', async () => {
    const agentId = await createAgent({ model: 'tight/m' });
    const { failed, last, responses } = await session(agentId, 3);
    expect(failed).toBe(0);
    expect(tightModel.refused).toBeGreaterThan(0);
    // The refused step's retry read its call's output, cut to fit beside the summary: it answered it.
    expect(last.output).toMatchObject([{ type: 'message', content: [{ text: 'noted' }] }]);
    const reasons = (await Promise.all(responses.map((response) => compactionReasons(response.id as string)))).flat();
    expect(reasons).toContain('overflow');
    // Each refusal was followed by exactly one retry: six agent steps answered, plus one refused request per refusal.
    expect(tight.bodies.filter((body) => !isSummary(body))).toHaveLength(6 + tightModel.refused);
  });

  it('takes Responses context_management [{type: "compaction", compact_threshold}] through the openai client', async () => {
    const agentId = await createAgent({ contextPolicy: 'truncation' });
    let previous: string | undefined;
    let lastId = '';
    for (let index = 0; index < 3; index++) {
      const asked = await client.responses.create({
        model: agentId,
        input: `question ${index}`,
        tools: [{ ...LOOKUP, strict: false } as OpenAI.Responses.FunctionTool],
        context_management: [{ type: 'compaction', compact_threshold: 4_000 }],
        ...(previous === undefined ? {} : { previous_response_id: previous }),
      } as OpenAI.Responses.ResponseCreateParamsNonStreaming);
      const call = asked.output.find((item) => item.type === 'function_call');
      expect(call).toBeDefined();
      const answered = await client.responses.create({
        model: agentId,
        previous_response_id: asked.id,
        input: [
          {
            type: 'function_call_output',
            call_id: call?.type === 'function_call' ? call.call_id : '',
            output: 'z'.repeat(12_000),
          },
        ],
        context_management: [{ type: 'compaction', compact_threshold: 4_000 }],
      } as OpenAI.Responses.ResponseCreateParamsNonStreaming);
      expect(answered.status).toBe('completed');
      previous = answered.id;
      lastId = answered.id;
    }
    const items = await client.responses.inputItems.list(lastId, { limit: 100 });
    expect(items.data.some((item) => (item as { type: string }).type === 'compaction')).toBe(true);

    for (const [value, param] of [
      [[{ type: 'summary' }], 'context_management[0].type'],
      [[{ type: 'compaction', compact_threshold: 5 }], 'context_management[0].compact_threshold'],
      [[{ type: 'compaction', keep: 1 }], 'context_management[0].keep'],
    ] as const) {
      const refused = await respond({ model: agentId, input: 'hi', context_management: value });
      expect(refused.status, refused.text).toBe(400);
      expect(json(refused).error).toMatchObject({ code: 'validation_error', param });
    }
  });
});

describe.each(dialects())('a process killed during a compaction (%s)', (dialect) => {
  const environment = testEnvironment(dialect);
  const key = testKey();
  let server: ServerProcess | null = null;
  let stub: Stub;
  /** The first summarising request is held open, and the server killed while it waits. */
  const held: { response: ServerResponse; arrived: () => void }[] = [];
  let arrived: Promise<void>;
  let summaries = 0;
  beforeAll(async () => {
    let signal = () => {};
    arrived = new Promise((resolve) => {
      signal = resolve;
    });
    stub = await startStub((body) => {
      if (!isSummary(body)) return textReply(['noted'], usageChunk(stubTokens(body), 5));
      summaries += 1;
      if (summaries > 1) return summaryReply(body);
      return (response) => {
        held.push({ response, arrived: signal });
        signal();
      };
    });
  });
  afterAll(async () => {
    await server?.stop('SIGKILL');
    for (const { response } of held) response.destroy();
    await stub.close();
    await environment.cleanup();
  });

  it(
    'resumes the turn and writes exactly one summary, losing no message',
    async () => {
      const env = {
        ...environment.env,
        ...CRASH_TEST_ENV,
        AGENTRY_BOOTSTRAP_KEY: key,
        AGENTRY_PROVIDERS: JSON.stringify({ stub: { baseURL: stub.url, apiKey: 'k' } }),
      };
      server = await startServerProcess(env);
      let api = httpClient(server.url, key);
      const agent = (await api('POST', '/v1/agents', { name: 'compacting', model: 'stub/m', compactThreshold: 4_000 }))
        .body?.agent;
      expect(agent?.contextPolicy).toBe('compaction');
      const sessionId = (await api('POST', '/v1/sessions', { agentId: agent.id })).body?.session.id;
      const send = async (index: number) => {
        const text = `question ${index} ${'x'.repeat(8_000)}`;
        const sent = await api(
          'POST',
          `/v1/sessions/${sessionId}/messages`,
          { parts: [{ type: 'text', text }] },
          { 'Idempotency-Key': `compaction-${index}` },
        );
        expect(sent.status, JSON.stringify(sent.body)).toBe(202);
        return sent.body?.id as string;
      };
      const finished = (messageId: string) =>
        waitUntil(
          async () => {
            const state = (await api('GET', `/v1/sessions/${sessionId}/messages/${messageId}`)).body?.message;
            return TERMINAL_STATUSES.includes(state?.status) ? state : null;
          },
          { what: `message ${messageId}`, everyMs: 50, timeoutMs: 60_000 },
        );
      const ids = [await send(0)];
      expect((await finished(ids[0] as string)).status).toBe('completed');
      ids.push(await send(1));
      // The second turn's context (two inputs of 2,000 tokens) passes the threshold: its summary is held.
      await arrived;
      await server.stop('SIGKILL');

      server = await startServerProcess(env);
      api = httpClient(server.url, key);
      for (const id of ids) expect((await finished(id)).status).toBe('completed');
      expect(summaries).toBe(2);
      const last = stub.bodies.filter((body) => !isSummary(body)).at(-1) as Body;
      expect(String(messagesOf(last).find((message) => message.role === 'user')?.content)).toMatch(
        /^\[Summary of the earlier conversation.*\]\nSummary: questions 0 to 0/,
      );
      await server.stop('SIGTERM');
      const inspect = await import('./helpers/inspect.ts');
      const db = await inspect.openInspector(environment.env);
      try {
        expect(await db.count("select count(*) as n from items where type = 'compaction'")).toBe(1);
        expect(await db.count("select count(*) as n from spans where kind = 'compaction'")).toBe(1);
        expect(await db.count("select count(*) as n from items where type = 'user_message'")).toBe(2);
        expect(await db.count("select count(*) as n from messages where status = 'completed'")).toBe(2);
      } finally {
        await db.close();
      }
    },
    startsTimeout(2),
  );
});
