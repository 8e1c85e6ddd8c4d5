/**
 * Background Responses, resumable Response streams and `store: false`, through the real `openai` client (and
 * raw HTTP for what the client cannot send) against the real server, once per dialect: a background Response
 * polled to its end and one cancelled mid-turn; `retrieve(id, {stream: true, starting_after})` of a finished
 * streamed Response and of one in flight, equal to the original stream from N+1 on; a stream broken mid-turn
 * and resumed with the last sequence number seen; `store: false` answered and then not found.
 */
import OpenAI from 'openai';
import type { ResponseStreamEvent } from 'openai/resources/responses/responses';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flows, WEATHER_TOOL, waitUntil } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';

/** One step of text in many deltas with a pause in the middle, then a client tool call. */
const SLOW_TEXT =
  'The first half of a long answer, in several words\nsleep 1500\nand the second half of it, also in words\ncall get_weather {"city":"Paris"}';

async function collect(stream: AsyncIterable<ResponseStreamEvent>): Promise<ResponseStreamEvent[]> {
  const events: ResponseStreamEvent[] = [];
  for await (const event of stream) events.push(event);
  return events;
}

const text = (events: ResponseStreamEvent[]) =>
  events.map((event) => (event.type === 'response.output_text.delta' ? event.delta : '')).join('');

describe.each(dialects())('background and resumable Responses (%s)', (dialect) => {
  let h: Harness;
  const flow = flows(() => h, { agentName: 'background' });
  let client: OpenAI;
  let agentId: string;
  let toolAgentId: string;

  beforeAll(async () => {
    h = await createHarness(dialect);
    client = new OpenAI({ apiKey: h.key, baseURL: `${await h.listen()}/v1` });
    agentId = await flow.createAgent({});
    toolAgentId = await flow.createAgent({ clientTools: [WEATHER_TOOL] });
  });
  afterAll(() => h.close());

  it('answers a background Response at once and polls it to its end', async () => {
    const queued = await client.responses.create({ model: agentId, input: 'sleep 300\nlater', background: true });
    expect(queued).toMatchObject({ background: true, store: true, output: [] });
    expect(['queued', 'in_progress']).toContain(queued.status);
    const done = await waitUntil(
      async () => {
        const polled = await client.responses.retrieve(queued.id);
        return polled.status === 'completed' ? polled : null;
      },
      { what: 'the background Response to complete' },
    );
    expect(done).toMatchObject({ id: queued.id, background: true, output_text: 'later' });
  });

  it('cancels a background Response mid-turn', async () => {
    const queued = await client.responses.create({ model: agentId, input: 'sleep 5000\nlate', background: true });
    await waitUntil(async () => ((await client.responses.retrieve(queued.id)).status === 'in_progress' ? true : null), {
      what: 'the turn to start',
    });
    const cancelled = await client.responses.cancel(queued.id);
    expect(cancelled).toMatchObject({ status: 'cancelled', background: true });
    expect((await client.responses.retrieve(queued.id)).status).toBe('cancelled');
  });

  it('streams a background Response, and its events again with retrieve', async () => {
    const events = await collect(
      await client.responses.create({
        model: agentId,
        input: 'streamed in the background',
        background: true,
        stream: true,
      }),
    );
    const last = events.at(-1);
    expect(last?.type).toBe('response.completed');
    const id = last?.type === 'response.completed' ? last.response.id : '';
    expect(await collect(await client.responses.retrieve(id, { stream: true }))).toEqual(events);
  });

  it('replays a finished streamed Response from any sequence number, and to a retried request', async () => {
    const body = { model: toolAgentId, input: SLOW_TEXT.replace('sleep 1500\n', ''), stream: true } as const;
    const headers = { 'idempotency-key': crypto.randomUUID() };
    const original = await collect(await client.responses.create(body, { headers }));
    expect(await collect(await client.responses.create(body, { headers }))).toEqual(original);
    expect(original.map((event) => event.sequence_number)).toEqual(original.map((_, index) => index));
    expect(original.some((event) => event.type === 'response.function_call_arguments.done')).toBe(true);
    const id = original[0]?.type === 'response.created' ? original[0].response.id : '';
    expect(await collect(await client.responses.retrieve(id, { stream: true }))).toEqual(original);
    for (const after of [0, 3, original.length - 2]) {
      const resumed = await collect(await client.responses.retrieve(id, { stream: true, starting_after: after }));
      expect(resumed).toEqual(original.slice(after + 1));
    }
  });

  it('resumes a Response in flight: the same events as its own stream, and a broken stream made whole', async () => {
    const stream = await client.responses.create({ model: toolAgentId, input: SLOW_TEXT, stream: true });
    const original: ResponseStreamEvent[] = [];
    let id = '';
    let resumed: Promise<ResponseStreamEvent[]> | null = null;
    let broken: ResponseStreamEvent[] = [];
    for await (const event of stream) {
      original.push(event);
      if (event.type === 'response.created') id = event.response.id;
      if (resumed === null && event.type === 'response.output_text.delta') {
        // Mid-step, while the model sleeps: one retrieval from here, one that breaks off after three events.
        const after = event.sequence_number;
        resumed = client.responses
          .retrieve(id, { stream: true, starting_after: after })
          .then((events) => collect(events));
        broken = await breakOff(await client.responses.retrieve(id, { stream: true }), after + 3);
      }
    }
    expect(original.at(-1)?.type).toBe('response.completed');
    const from = original.findIndex((event) => event.type === 'response.output_text.delta');
    expect(await resumed).toEqual(original.slice(from + 1));
    const lastSeen = broken.at(-1)?.sequence_number ?? -1;
    const rest = await collect(await client.responses.retrieve(id, { stream: true, starting_after: lastSeen }));
    expect([...broken, ...rest]).toEqual(original);
    expect(text(original)).toContain('second half');
  });

  it('answers a Response with store: false and keeps nothing of it', async () => {
    const answered = await client.responses.create({ model: agentId, input: 'not kept', store: false });
    expect(answered).toMatchObject({ status: 'completed', store: false, output_text: 'not kept' });
    await expect(client.responses.retrieve(answered.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    const conversation = answered.conversation?.id ?? '';
    await waitUntil(
      async () => ((await h.request('GET', `/v1/conversations/${conversation}`)).status === 404 ? true : null),
      { what: 'the conversation of the unstored Response to go' },
    );
    // Its run stays, for usage, without content.
    const runs = json(await h.request('GET', `/v1/runs?conversation_id=${conversation}`)).data;
    expect(runs).toEqual([expect.objectContaining({ status: 'completed', input_preview: '', output_preview: null })]);
    expect(runs[0].usage.total_tokens).toBeGreaterThan(0);
    const spans = json(await h.request('GET', `/v1/runs/${runs[0].id}/trace`)).data;
    expect(spans.length).toBeGreaterThan(0);
    for (const span of spans) expect(span).toMatchObject({ input_preview: null, output_preview: null });

    const events = await collect(
      await client.responses.create({ model: agentId, input: 'streamed, not kept', store: false, stream: true }),
    );
    const last = events.at(-1);
    expect(last?.type === 'response.completed' && last.response.output_text).toBe('streamed, not kept');
    const id = last?.type === 'response.completed' ? last.response.id : '';
    await expect(client.responses.retrieve(id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    await expect(client.responses.retrieve(id, { stream: true })).rejects.toBeInstanceOf(OpenAI.NotFoundError);
  });

  it('goes on with a stored turn whose stream was dropped, and stops one with store: false', async () => {
    const input = 'Some words before a pause\nsleep 400\nthe end';
    const dropped = async (extra: { background?: boolean; store?: boolean }) => {
      const stream = await client.responses.create({ model: agentId, input, stream: true, ...extra });
      let conversation = '';
      for await (const event of stream) {
        if (event.type === 'response.created') conversation = event.response.conversation?.id ?? '';
        if (event.type === 'response.output_text.delta') break;
      }
      return conversation;
    };
    for (const background of [false, true]) {
      const conversation = await dropped({ background });
      const items = await waitUntil(
        async () => {
          const page = json(await h.request('GET', `/v1/conversations/${conversation}/items?order=asc`)).data;
          return page.length === 2 ? page : null;
        },
        { what: 'the dropped stream’s turn to complete' },
      );
      expect(items[1].content[0].text).toBe('Some words before a pause\nthe end');
    }
    const conversation = await dropped({ store: false });
    await waitUntil(
      async () => ((await h.request('GET', `/v1/conversations/${conversation}`)).status === 404 ? true : null),
      { what: 'the conversation of the dropped unstored Response to go' },
    );
    const runs = json(await h.request('GET', `/v1/runs?conversation_id=${conversation}`)).data;
    expect(runs).toEqual([expect.objectContaining({ status: 'cancelled', input_preview: '', output_preview: null })]);
  });

  it('says which field is wrong, and finds no stream for a message that is not a Response', async () => {
    const done = await client.responses.create({ model: agentId, input: 'x' });
    const bad: [string, string][] = [
      [`/v1/responses/${done.id}?stream=true&starting_after=-1`, 'starting_after'],
      [`/v1/responses/${done.id}?stream=true&starting_after=abc`, 'starting_after'],
      [`/v1/responses/${done.id}?starting_after=2`, 'starting_after'],
      [`/v1/responses/${done.id}?stream=maybe`, 'stream'],
      [`/v1/responses/${done.id}?stream=true&after=3`, 'after'],
    ];
    for (const [path, param] of bad) {
      const response = await h.request('GET', path);
      expect(response.status, response.text).toBe(400);
      expect(json(response).error.param).toBe(param);
    }
    const included = await h.request('GET', `/v1/responses/${done.id}?include=message.output_text.logprobs`);
    expect(included.status, included.text).toBe(200);
    const conversation = done.conversation?.id ?? '';
    for (const [body, param] of [
      [{ background: true, store: false }, 'background'],
      [{ store: false, conversation }, 'store'],
      [{ store: false, previous_response_id: done.id }, 'store'],
    ] as const) {
      const response = await h.request('POST', '/v1/responses', {
        body: { model: agentId, input: 'x', ...body },
        headers: { 'agentry-compat': 'openai' },
      });
      expect(response.status, response.text).toBe(400);
      expect(json(response).error.param).toBe(param);
    }
    const { message } = await flow.turn(agentId, 'a session message');
    const retrieved = await h.request('GET', `/v1/responses/resp_${message.id}?stream=true`);
    expect(retrieved.status, retrieved.text).toBe(404);
  });
});

/** The events of `stream` up to the one numbered `last`, then the connection is dropped. */
async function breakOff(stream: AsyncIterable<ResponseStreamEvent>, last: number): Promise<ResponseStreamEvent[]> {
  const events: ResponseStreamEvent[] = [];
  for await (const event of stream) {
    events.push(event);
    if (event.sequence_number >= last) break;
  }
  return events;
}
