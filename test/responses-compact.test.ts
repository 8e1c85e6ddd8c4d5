/**
 * POST /v1/responses/compact through the official `openai` client (`client.responses.compact`), against a local
 * OpenAI-compatible model: the compacted window of a stateful conversation (previous_response_id) and of a
 * stateless one (input only), the window sent back as the next Response's input (its turn reads the summary, not
 * what precedes it), a conversation longer than the model's window summarised in chunks, credits charged,
 * and the refusals: nothing to compact, an unknown response, a model that fails, a bad compaction item.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type Responder,
  type Stub,
  startStub,
  status,
  textReply,
  usageChunk,
  windowed,
} from './helpers/chat-completions-stub.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';

type Body = Record<string, unknown>;
type Message = { role: string; content: unknown };

const textOf = (body: Body) => JSON.stringify(body.messages);
const isSummary = (body: Body) => textOf(body).includes('working memory of an AI agent');
/** The secret words ("word-N") a request's conversation names. */
const wordsIn = (body: Body) => [...new Set(textOf(body).match(/word-\d+/g) ?? [])].sort();

/** Summaries list the words they read; an agent turn answers with the words of its whole context. */
function answering(body: Body): Responder {
  if (isSummary(body)) return textReply([`Summary of ${wordsIn(body).join(' ')}`], usageChunk(100, 10));
  const last = (body.messages as Message[]).at(-1);
  return textReply([`Seen: ${wordsIn(body).join(' ')} | last: ${JSON.stringify(last?.content)}`], usageChunk(50, 5));
}

const WINDOW = 2_000;
const PRICES = { input: 1, cached_input: 0.1, output: 2 };

describe.each(dialects())('POST /v1/responses/compact (%s)', (dialect) => {
  const model = windowed(WINDOW, answering);
  let stub: Stub;
  let failing: Stub;
  let h: Harness;
  let client: OpenAI;
  let agentId: string;
  beforeAll(async () => {
    stub = await startStub(model);
    failing = await startStub((body) => (isSummary(body) ? status(500) : answering(body)));
    h = await createHarness(dialect, {
      AGENTRY_PROVIDERS: JSON.stringify({
        stub: { baseURL: stub.url, apiKey: 'k', prices: PRICES },
        failing: { baseURL: failing.url, apiKey: 'k', prices: PRICES },
      }),
      AGENTRY_CONTEXT_WINDOW: String(WINDOW),
    });
    client = new OpenAI({ apiKey: h.key, baseURL: `${await h.listen()}/v1`, maxRetries: 0 });
    const created = await h.request('POST', '/v1/agents', { body: { name: 'compactor', model: 'stub/m' } });
    expect(created.status, created.text).toBe(201);
    agentId = json(created).agent.id;
  });
  afterAll(async () => {
    await h.close();
    await Promise.all([stub.close(), failing.close()]);
  });

  it('compacts a stored conversation: its user messages, then one compaction item, with usage', async () => {
    const first = await client.responses.create({ model: agentId, input: 'remember word-1' });
    const second = await client.responses.create({
      model: agentId,
      input: 'and word-2',
      previous_response_id: first.id,
    });
    const summaries = stub.bodies.filter(isSummary).length;
    const compacted = await client.responses.compact({ model: agentId, previous_response_id: second.id });
    expect(compacted.object).toBe('response.compaction');
    expect(compacted.id).toMatch(/^resp_/);
    expect(stub.bodies.filter(isSummary)).toHaveLength(summaries + 1);
    const users = compacted.output.filter((item) => item.type === 'message');
    expect(users.map((item) => JSON.stringify(item))).toEqual([
      expect.stringContaining('remember word-1'),
      expect.stringContaining('and word-2'),
    ]);
    const last = compacted.output.at(-1) as unknown as Record<string, unknown>;
    expect(last).toMatchObject({ type: 'compaction', created_by: 'agentry' });
    expect(last.id).toMatch(/^cmp_/);
    expect(last.encrypted_content).toBe('Summary of word-1 word-2');
    expect(compacted.usage).toMatchObject({ input_tokens: 100, output_tokens: 10, total_tokens: 110 });
    // Nothing was stored: the conversation goes on from the second Response as before.
    const items = json(await h.request('GET', `/v1/responses/${second.id}/input_items`)).data as Body[];
    expect(items.some((item) => item.type === 'compaction')).toBe(false);
  });

  it('takes the compacted window back as input: the next turn reads the summary, not what precedes it', async () => {
    const compacted = await client.responses.compact({
      model: agentId,
      input: [
        { role: 'user', content: 'the code is word-7' },
        { role: 'assistant', content: 'Noted word-7.' },
        { role: 'user', content: 'and word-8 too' },
      ],
    });
    expect(compacted.output.at(-1)).toMatchObject({
      type: 'compaction',
      encrypted_content: 'Summary of word-7 word-8',
    });
    const next = await client.responses.create({
      model: agentId,
      input: [...(compacted.output as OpenAI.Responses.ResponseInputItem[]), { role: 'user', content: 'what now?' }],
    });
    expect(next.status).toBe('completed');
    const turn = stub.bodies.at(-1) as Body;
    expect(isSummary(turn)).toBe(false);
    const messages = turn.messages as Message[];
    // The summary (a user entry opening the context), then the new input.
    const context = messages.filter((message) => message.role !== 'system');
    expect(context.map((message) => message.role)).toEqual(['user', 'user']);
    expect(JSON.stringify(context[0]?.content)).toContain('Summary of word-7 word-8');
    expect(JSON.stringify(context[1]?.content)).toContain('what now?');
    // The compaction is an item of the new conversation, as OpenAI lists it.
    const items = json(await h.request('GET', `/v1/responses/${next.id}/input_items?order=asc`)).data as Body[];
    expect(items.find((item) => item.type === 'compaction')).toMatchObject({
      encrypted_content: 'Summary of word-7 word-8',
    });
    // Compacting the compacted window again summarises from its summary on, keeping the users after it.
    const again = await client.responses.compact({
      model: agentId,
      input: [...(compacted.output as OpenAI.Responses.ResponseInputItem[]), { role: 'user', content: 'word-9' }],
    });
    expect(again.output.filter((item) => item.type === 'message')).toHaveLength(1);
    expect(again.output.at(-1)).toMatchObject({ encrypted_content: 'Summary of word-7 word-8 word-9' });
  });

  it('summarises a conversation longer than the window in chunks, and charges the credits', async () => {
    const orgId = json(await h.request('GET', '/v1/organization')).id as string;
    await h.deps.orgs.setCredits(orgId, 50);
    const input = Array.from({ length: 12 }, (_, index) => ({
      role: 'user' as const,
      content: `word-${100 + index} ${'x'.repeat(1_500)}`,
    }));
    const before = stub.bodies.filter(isSummary).length;
    const compacted = await client.responses.compact({ model: agentId, input });
    const calls = stub.bodies.filter(isSummary).slice(before);
    expect(calls.length).toBeGreaterThan(1);
    // Each call fitted the window (the stub refuses any request longer than it).
    expect(model.refused).toBe(0);
    const last = compacted.output.at(-1) as unknown as Record<string, string>;
    for (let index = 0; index < 12; index++) expect(last.encrypted_content).toContain(`word-${100 + index}`);
    expect(compacted.usage.input_tokens).toBe(100 * calls.length);
    // 100 input and 10 output tokens per call at $1 / $2 per million.
    const balance = json(await h.request('GET', '/v1/organization')).credit_balance_usd as number;
    expect(50 - balance).toBeCloseTo((calls.length * (100 * 1 + 10 * 2)) / 1_000_000, 9);
    await h.deps.orgs.setCredits(orgId, 0);
    const spent = await h.request('POST', '/v1/responses/compact', {
      body: { model: agentId, input: 'word-1' },
      headers: { 'agentry-compat': 'openai' },
    });
    expect(spent.status).toBe(402);
    await h.deps.orgs.setCredits(orgId, null);
  });

  it('refuses what it cannot compact, naming the field', async () => {
    const nothing = await h.request('POST', '/v1/responses/compact', {
      body: { model: agentId, input: [{ type: 'reasoning', id: 'rs_1', summary: [] }] },
      headers: { 'agentry-compat': 'openai' },
    });
    expect(nothing.status).toBe(400);
    expect(json(nothing).error).toMatchObject({ code: 'validation_error', param: 'input' });
    const unknown = await h.request('POST', '/v1/responses/compact', {
      body: { model: agentId, previous_response_id: 'resp_01900000-0000-7000-8000-000000000000' },
      headers: { 'agentry-compat': 'openai' },
    });
    expect(unknown.status).toBe(404);
    const badItem = await h.request('POST', '/v1/responses/compact', {
      body: { model: agentId, input: [{ type: 'compaction', encrypted_content: '' }] },
      headers: { 'agentry-compat': 'openai' },
    });
    expect(badItem.status).toBe(400);
    expect(json(badItem).error.param).toMatch(/^input\[0\]/);
    const noModel = await h.request('POST', '/v1/responses/compact', {
      body: { model: 'no-such-agent', input: 'hello' },
      headers: { 'agentry-compat': 'openai' },
    });
    expect(noModel.status).toBe(400);
    expect(json(noModel).error.param).toBe('model');
  });

  it('answers 502 compaction_failed when the model cannot write the summary', async () => {
    const created = await h.request('POST', '/v1/agents', { body: { name: 'broken', model: 'failing/m' } });
    const broken = json(created).agent.id;
    const failed = await h.request('POST', '/v1/responses/compact', {
      body: { model: broken, input: 'word-1' },
      headers: { 'agentry-compat': 'openai' },
    });
    expect(failed.status).toBe(502);
    expect(json(failed).error).toMatchObject({ code: 'compaction_failed' });
    expect(json(failed).error.message).toContain('failing/m');
  });
});
