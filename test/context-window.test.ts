/**
 * A turn never sends more than fits the model's context window (docs/context.md). The fitting itself (units kept
 * whole, the pending call, the latest input, oversize outputs cut), the provider's context-length refusal mapped to
 * model_context_exceeded by both clients, and sessions against a local OpenAI-compatible model with a small window
 * that refuses, as OpenAI does, any request longer than it: a long session with large tool outputs under the
 * truncation policy, the retry when the provider's count is larger than Agentry's estimate, and Responses
 * `truncation: "disabled"`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { contextTokens, fitContext, messageTokens } from '../src/models/context-fit.ts';
import { createModelRegistry } from '../src/models/registry.ts';
import type { ContextMessage, ModelError } from '../src/models/types.ts';
import { contextLengthExceeded, type Stub, startStub, stubTokens, windowed } from './helpers/chat-completions-stub.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';
import { agentLoop, windowedSessions } from './helpers/windowed-sessions.ts';

const user = (text: string): ContextMessage => ({ role: 'user', content: [{ type: 'text', text }] });
const calls = (...ids: string[]): ContextMessage => ({
  role: 'assistant',
  text: '',
  toolCalls: ids.map((callId) => ({ callId, name: 'lookup', arguments: '{}' })),
});
const outputs = (size: number, ...ids: string[]): ContextMessage => ({
  role: 'tool',
  results: ids.map((callId) => ({ callId, name: 'lookup', output: 'x'.repeat(size) })),
});
const answer = (text: string): ContextMessage => ({ role: 'assistant', text, toolCalls: [] });

/** Every tool message follows the assistant step whose calls it answers, and every call there is answered. */
function pairsWhole(context: ContextMessage[]): void {
  context.forEach((message, index) => {
    if (message.role !== 'tool') return;
    const before = context[index - 1];
    expect(before?.role).toBe('assistant');
    const asked = before?.role === 'assistant' ? before.toolCalls.map((call) => call.callId) : [];
    expect(message.results.map((result) => result.callId)).toEqual(asked);
  });
}

describe('fitting a context to the window', () => {
  const history = [
    user('first'),
    calls('a', 'b'),
    outputs(2_000, 'a', 'b'),
    answer('one'),
    user('second'),
    calls('c'),
    outputs(2_000, 'c'),
    answer('two'),
    user('third'),
    calls('d', 'e'),
    outputs(400, 'd', 'e'),
  ];

  it('sends everything when it fits, and drops the oldest whole units when not', () => {
    expect(fitContext(history, 100_000)).toMatchObject({ context: history, dropped: 0 });
    // A context that fits whole is sent as it is, not copied (the common case costs no allocation), and counted whole.
    expect(fitContext(history, 100_000).context).toBe(history);
    expect(fitContext(history, contextTokens(history)).tokens).toBe(contextTokens(history));
    // One token short, it is fitted: the oldest unit goes.
    expect(fitContext(history, contextTokens(history) - 1).dropped).toBeGreaterThan(0);
    const newest = fitContext(history, contextTokens(history.slice(4)) - 1);
    expect(newest.tokens).toBe(contextTokens(history.slice(8)));
    expect(newest).toMatchObject({ context: history.slice(8), dropped: 8 });
    const middle = fitContext(history, contextTokens(history.slice(4)));
    expect(middle).toMatchObject({ context: history.slice(4), dropped: 4 });
    // An assistant step is never the first message sent: the leftover step before the first input goes too.
    expect(fitContext(history, contextTokens(history.slice(3))).context).toEqual(history.slice(4));
  });

  it('never splits a step from its outputs, at any budget', () => {
    for (let budget = 1; budget < contextTokens(history) + 10; budget += 37) {
      const fitted = fitContext(history, budget);
      pairsWhole(fitted.context);
      const shape = (message: ContextMessage) =>
        message.role === 'tool' ? message.results.map((result) => result.callId).join() : message;
      expect(fitted.context.map(shape)).toEqual(history.slice(-fitted.context.length).map(shape));
      expect(fitted.context[0]?.role).toBe('user');
    }
  });

  it('keeps a pending call with its step, and the latest user input in front of what fits', () => {
    const pending = [user('old'), answer('ok'), user('do the big task'), calls('f'), outputs(8_000, 'f'), calls('g')];
    const fitted = fitContext(pending, 100);
    expect(fitted.context).toEqual([pending[2], pending[5]]);
    const roomier = fitContext(pending, 2_065);
    expect(roomier.context).toEqual(pending.slice(2));
  });

  it('cuts a tool output larger than half the room, saying so', () => {
    const huge = [user('read the file'), calls('h'), outputs(400_000, 'h')];
    const fitted = fitContext(huge, 10_000);
    expect(fitted.tokens).toBeLessThanOrEqual(10_000);
    const result = fitted.context[2]?.role === 'tool' ? fitted.context[2].results[0] : undefined;
    expect(result?.output).toMatch(
      /\[output truncated to fit the model's context window: \d+ of 400000 characters kept]$/,
    );
    expect(result?.output.length).toBeLessThan(20_001);
    // The stored message is left as it was.
    expect(huge[2]).toEqual(outputs(400_000, 'h'));
  });

  it('estimates characters / 4 plus a fixed overhead, images at a fixed cost', () => {
    expect(messageTokens(user('x'.repeat(400)))).toBe(108);
    const image: ContextMessage = {
      role: 'user',
      content: [{ type: 'image', mediaType: 'image/png', data: new Uint8Array(5_000_000) }],
    };
    expect(messageTokens(image)).toBe(1_008);
    // At low detail a provider reads an image at one small fixed size.
    const low: ContextMessage = {
      role: 'user',
      content: [{ type: 'image', mediaType: 'image/png', data: new Uint8Array(5_000_000), detail: 'low' }],
    };
    expect(messageTokens(low)).toBe(93);
  });
});

describe("a provider's context-length refusal", () => {
  let stub: Stub;
  beforeAll(async () => {
    stub = await startStub(() => contextLengthExceeded(8_192, 9_000));
  });
  afterAll(() => stub.close());
  const request = (model: string) => ({
    model,
    instructions: '',
    context: [user('hello')],
    tools: [],
    signal: new AbortController().signal,
  });
  async function failure(model: string, fetch?: typeof globalThis.fetch): Promise<ModelError> {
    const registry = createModelRegistry(
      { providers: { stub: { baseURL: stub.url } }, openaiApiKey: 'sk-test', anthropicApiKey: null },
      fetch === undefined ? {} : { fetch },
    );
    try {
      for await (const _event of registry.adapter(model).stream(request(model))) {
        // nothing arrives
      }
    } catch (error) {
      return error as ModelError;
    }
    throw new Error('expected a failure');
  }

  it('is model_context_exceeded from the chat-completions client', async () => {
    const error = await failure('stub/small');
    expect(error).toMatchObject({ code: 'model_context_exceeded', status: 400, retriable: false });
    expect(error.message).toContain("This model's maximum context length is 8192 tokens");
  });

  it('is model_context_exceeded from the AI SDK (APICallError)', async () => {
    // OpenAI's own Responses endpoint, played by the stub: the same body comes back.
    const fetch: typeof globalThis.fetch = (_url, init) => globalThis.fetch(`${stub.url}/chat/completions`, init);
    const error = await failure('openai/gpt-4o', fetch);
    expect(error).toMatchObject({ code: 'model_context_exceeded', status: 400 });
  });
});

/** The stub's window, in its own count (characters / 4). */
const WINDOW = 16_000;

/** Models whose windows are smaller than the one Agentry is told (WINDOW): its estimate fits more than they take. */
const TIGHT = 4_000;
const TINY = 30;

describe.each(dialects())('sessions against a model with a small window (%s)', (dialect) => {
  const models = {
    stub: windowed(WINDOW, agentLoop()),
    tight: windowed(TIGHT, agentLoop()),
    tiny: windowed(TINY, agentLoop()),
    // Counts a token per 2 characters: twice what Agentry estimates.
    dense: windowed(WINDOW, agentLoop(2), 2),
  };
  const servers: Record<string, Stub> = {};
  let stub: Stub;
  let tight: Stub;
  let tiny: Stub;
  let h: Harness;
  beforeAll(async () => {
    for (const [name, answer] of Object.entries(models)) servers[name] = await startStub(answer);
    ({ stub, tight, tiny } = servers as Record<'stub' | 'tight' | 'tiny', Stub>);
    const providers = Object.fromEntries(
      Object.entries(servers).map(([name, server]) => [name, { baseURL: server.url, apiKey: 'k' }]),
    );
    h = await createHarness(dialect, {
      AGENTRY_PROVIDERS: JSON.stringify(providers),
      AGENTRY_CONTEXT_WINDOW: String(WINDOW),
    });
  });
  afterAll(async () => {
    await h.close();
    await Promise.all(Object.values(servers).map((server) => server.close()));
  });

  const { createAgent, respond, exchange } = windowedSessions(() => h);

  it('runs 200 turns with 20k-character tool outputs and no failed turn under truncation', async () => {
    const agentId = await createAgent({ contextPolicy: 'truncation' });
    let previous: string | null = null;
    let failed = 0;
    const before = stub.bodies.length;
    for (let index = 0; index < 100; index++) {
      const result = await exchange(agentId, previous, index);
      failed += result.failed;
      previous = result.last.id;
    }
    expect(failed).toBe(0);
    expect(models.stub.refused).toBe(0);
    expect(stub.bodies.length - before).toBe(200);
    // What the last step sent: the newest exchanges only, within the window, the newest input and output whole.
    const last = stub.bodies.at(-1) as { messages: { role: string; content: unknown }[] };
    expect(stubTokens(last)).toBeLessThanOrEqual(WINDOW);
    expect(JSON.stringify(last.messages)).toContain('question 99');
    expect(JSON.stringify(last.messages)).toContain(`99:${'y'.repeat(20_000)}`);
    expect(JSON.stringify(last.messages)).not.toContain('question 0"');
    expect(last.messages.filter((message) => message.role === 'tool').length).toBeGreaterThan(0);
  });

  it('fits a refused context smaller and calls once more, running no tool twice', async () => {
    const agentId = await createAgent({ model: 'tight/m', contextPolicy: 'truncation' });
    const first = await exchange(agentId, null, 1);
    expect(first.failed).toBe(0);
    // The call's output took the context past the model's window (not Agentry's): refused once, then sent cut.
    const [asked, refusedBody, retried] = tight.bodies as { messages: { role: string; content: string }[] }[];
    expect(tight.bodies).toHaveLength(3);
    expect(stubTokens(asked as object)).toBeLessThanOrEqual(TIGHT);
    expect(stubTokens(refusedBody as object)).toBeGreaterThan(TIGHT);
    expect(stubTokens(retried as object)).toBeLessThanOrEqual(TIGHT);
    expect(retried?.messages.at(-1)?.content).toMatch(/^1:y+\n\[output truncated to fit the model's context window/);
    expect(first.last.output.at(-1)).toMatchObject({ type: 'message', content: [{ text: 'noted' }] });
    expect(models.tight.refused).toBe(1);
    // The window the refusal stated is kept for the session's next steps: no refusal again.
    let previous = first.last.id;
    for (let index = 2; index <= 4; index++) {
      const next = await exchange(agentId, previous, index);
      expect(next.failed).toBe(0);
      previous = next.last.id;
    }
    expect(models.tight.refused).toBe(1);
    expect(tight.bodies).toHaveLength(9);
  });

  it("fits later steps to the provider's reported count when it counts more tokens than estimated", async () => {
    const agentId = await createAgent({ model: 'dense/m', contextPolicy: 'truncation' });
    let previous: string | null = null;
    for (let index = 0; index < 6; index++) {
      const result = await exchange(agentId, previous, index);
      expect(result.failed).toBe(0);
      previous = result.last.id;
    }
    // The first step's usage (twice the estimate) taught the scale before any request came near the window.
    expect(models.dense.refused).toBe(0);
    expect(servers.dense?.bodies).toHaveLength(12);
  });

  it('fails the turn with model_context_exceeded when the retry is refused too', async () => {
    const agentId = await createAgent({ model: 'tiny/m', contextPolicy: 'truncation' });
    const failed = json(await respond({ model: agentId, input: 'hello there' }));
    expect(failed).toMatchObject({ status: 'failed', error: { code: 'model_context_exceeded' } });
    expect(failed.error.message).toContain(`This model's maximum context length is ${TINY} tokens`);
    expect(tiny.bodies).toHaveLength(2);
  });

  it('sends the whole conversation with truncation "disabled", failing as the provider does once it is too long', async () => {
    const agentId = await createAgent();
    let previous: string | null = null;
    let last: Record<string, unknown> = {};
    const before = models.stub.refused;
    for (let index = 0; index < 4 && last.status !== 'failed'; index++) {
      const result = await exchange(agentId, previous, index, { truncation: 'disabled' });
      last = result.last;
      previous = result.last.id;
    }
    expect(last).toMatchObject({ status: 'failed', truncation: 'disabled', error: { code: 'model_context_exceeded' } });
    expect(String((last.error as { message: string }).message)).toContain(
      `This model's maximum context length is ${WINDOW} tokens. However, your messages resulted in`,
    );
    // Not fitted, so not retried: the one refusal of the step failed it.
    expect(models.stub.refused - before).toBe(1);
    // The agent's policy says none: the same, without asking per request.
    const whole = await createAgent({ contextPolicy: 'none' });
    expect(json(await h.request('GET', `/v1/agents/${whole}`)).agent.contextPolicy).toBe('none');
    const unfitted = json(await respond({ model: whole, input: 'x'.repeat(4 * WINDOW) }));
    expect(unfitted).toMatchObject({
      status: 'failed',
      truncation: 'disabled',
      error: { code: 'model_context_exceeded' },
    });
    const fitted = json(await respond({ model: whole, input: 'x'.repeat(4 * WINDOW), truncation: 'auto' }));
    expect(fitted).toMatchObject({ truncation: 'auto' });
  });

  it('refuses an unknown contextPolicy naming the field', async () => {
    const response = await h.request('POST', '/v1/agents', { body: { name: 'a', contextPolicy: 'summary' } });
    expect(response.status).toBe(400);
    expect(json(response).error).toMatchObject({ code: 'validation_error', param: 'contextPolicy' });
  });
});
