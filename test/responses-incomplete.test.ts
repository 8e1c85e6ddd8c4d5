/**
 * Replies cut short: a model that stops at its output token limit (`max_output_tokens`, `max_tokens`) or at a
 * content filter. The Response is `incomplete` with `incomplete_details.reason`, its message item `incomplete`, its
 * stream ends with `response.incomplete`; a chat completion ends with finish_reason `length` or `content_filter`.
 * The `scripted` model cuts its reply at the limit (four characters a token); a local OpenAI-compatible stub answers
 * with the finish reasons a provider sends. The official `openai` client at its defaults, once per dialect.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chunk, type Stub, sse, startStub, usageChunk } from './helpers/chat-completions-stub.ts';
import { flows } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness } from './helpers/harness.ts';

const LONG = `${'The quick brown fox jumps over the lazy dog. '.repeat(6)}The end.`;

describe.each(dialects())('replies cut short (%s)', (dialect) => {
  let h: Harness;
  const flow = flows(() => h, { agentName: 'cut-agent' });
  let client: OpenAI;
  let stub: Stub;

  beforeAll(async () => {
    stub = await startStub();
    h = await createHarness(dialect, {
      AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true',
      AGENTRY_PROVIDERS: JSON.stringify({ stub: { baseURL: stub.url } }),
    });
    client = new OpenAI({ apiKey: h.key, baseURL: `${await h.listen()}/v1` });
    await flow.createAgent({});
    await flow.createAgent({ name: 'cut-stub', model: 'stub/test-model' });
  });
  afterAll(async () => {
    await h.close();
    await stub.close();
  });

  it('answers an incomplete Response at max_output_tokens, as retrieve does, and goes on from it', async () => {
    const response = await client.responses.create({ model: 'cut-agent', input: LONG, max_output_tokens: 16 });
    expect(response.status).toBe('incomplete');
    expect(response.incomplete_details).toEqual({ reason: 'max_output_tokens' });
    expect(response.output).toHaveLength(1);
    expect(response.output[0]).toMatchObject({ type: 'message', role: 'assistant', status: 'incomplete' });
    expect(response.output_text).toBe(LONG.slice(0, 64));
    expect(response.usage?.output_tokens).toBe(16);
    expect(response.max_output_tokens).toBe(16);
    expect(response.completed_at).toBeNull();

    const retrieved = await client.responses.retrieve(response.id);
    expect(retrieved).toMatchObject({
      status: 'incomplete',
      incomplete_details: { reason: 'max_output_tokens' },
      output: [{ status: 'incomplete' }],
    });

    // The conversation goes on: the next turn reads the cut reply as it was and completes.
    const next = await client.responses.create({
      model: 'cut-agent',
      input: 'short',
      previous_response_id: response.id,
    });
    expect(next).toMatchObject({ status: 'completed', incomplete_details: null, output_text: 'short' });
    expect(next.output[0]).toMatchObject({ status: 'completed' });
  });

  it('is complete when the reply fits its limit', async () => {
    const response = await client.responses.create({ model: 'cut-agent', input: 'fits', max_output_tokens: 16 });
    expect(response).toMatchObject({ status: 'completed', incomplete_details: null, output_text: 'fits' });
  });

  it('ends the stream with response.incomplete; the stream helper gives the incomplete Response', async () => {
    const stream = client.responses.stream({ model: 'cut-agent', input: LONG, max_output_tokens: 8 });
    const types: string[] = [];
    const done: unknown[] = [];
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === 'response.output_item.done') done.push(event.item);
    }
    expect(types.at(-1)).toBe('response.incomplete');
    expect(types).not.toContain('response.completed');
    expect(done).toEqual([expect.objectContaining({ type: 'message', status: 'incomplete' })]);
    const final = await stream.finalResponse();
    expect(final).toMatchObject({ status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } });
    expect(final.output_text).toBe(LONG.slice(0, 32));
  });

  it('ends a chat completion with finish_reason length, streamed or not', async () => {
    const completion = await client.chat.completions.create({
      model: 'cut-agent',
      messages: [{ role: 'user', content: LONG }],
      max_tokens: 4,
    });
    expect(completion.choices[0]).toMatchObject({
      finish_reason: 'length',
      message: { role: 'assistant', content: LONG.slice(0, 16) },
    });
    const stream = await client.chat.completions.create({
      model: 'cut-agent',
      messages: [{ role: 'user', content: LONG }],
      max_completion_tokens: 4,
      stream: true,
    });
    const reasons: (string | null)[] = [];
    let text = '';
    for await (const part of stream) {
      for (const choice of part.choices) {
        reasons.push(choice.finish_reason);
        text += choice.delta.content ?? '';
      }
    }
    expect(reasons.filter((reason) => reason !== null)).toEqual(['length']);
    expect(text).toBe(LONG.slice(0, 16));
  });

  it("takes a provider's finish reasons: length is max_output_tokens, content_filter is content_filter", async () => {
    stub.responders.push(
      sse([chunk({ role: 'assistant', content: 'Once upon a' }), chunk({}, 'length'), usageChunk(9, 3)]),
      sse([chunk({ role: 'assistant', content: 'I cannot' }), chunk({}, 'content_filter'), usageChunk(9, 2)]),
      sse([chunk({ role: 'assistant', content: 'Once upon a' }), chunk({}, 'length'), usageChunk(9, 3)]),
    );
    const cut = await client.responses.create({ model: 'cut-stub', input: 'Tell a story', max_output_tokens: 3 });
    expect(cut).toMatchObject({
      status: 'incomplete',
      incomplete_details: { reason: 'max_output_tokens' },
      output_text: 'Once upon a',
    });
    expect(stub.bodies.at(-1)).toMatchObject({ max_tokens: 3 });
    const filtered = await client.responses.create({ model: 'cut-stub', input: 'Something else' });
    expect(filtered).toMatchObject({ status: 'incomplete', incomplete_details: { reason: 'content_filter' } });
    const chat = await client.chat.completions.create({
      model: 'cut-stub',
      messages: [{ role: 'user', content: 'Tell a story' }],
    });
    expect(chat.choices[0]?.finish_reason).toBe('length');
  });
});
