/**
 * MCP elicitations on the Responses surface, driven by the official `openai` client: a tool call of a real MCP
 * server (v1 SDK, Streamable HTTP) that asks for a form ends the Response with an `mcp_elicitation_request` item; an
 * `mcp_elicitation_response` input item answers it (checked against the requested schema, single use), the turn
 * resumes, the server gets the answer and the Response completes. Non-streamed (strict mode, `conversation`) and
 * with the stream helper (compatibility mode, `previous_response_id`). Once per dialect.
 */
import OpenAI from 'openai';
import type { Response as OpenAIResponse, ResponseInputItem } from 'openai/resources/responses/responses';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flows } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness } from './helpers/harness.ts';
import { type ElicitationServer, startElicitationServer } from './helpers/mcp-elicitation-server.ts';

interface ElicitationRequest {
  id: string;
  type: 'mcp_elicitation_request';
  server_label: string;
  message: string;
  mode: string;
  requested_schema: Record<string, unknown> | null;
  url: string | null;
}

/** The `mcp_elicitation_request` items of a Response: an item type the client passes through as it is. */
const elicitationsOf = (response: OpenAIResponse): ElicitationRequest[] =>
  (response.output as unknown as { type: string }[]).filter(
    (item): item is ElicitationRequest => item.type === 'mcp_elicitation_request',
  );

const answerItem = (id: string, action: string, content?: Record<string, unknown>) =>
  ({
    type: 'mcp_elicitation_response',
    elicitation_request_id: id,
    action,
    ...(content === undefined ? {} : { content }),
  }) as unknown as ResponseInputItem;

describe.each(dialects())('MCP elicitations on Responses (%s)', (dialect) => {
  let h: Harness;
  let mcp: ElicitationServer;
  let client: OpenAI;
  let compat: OpenAI;
  let agentId: string;
  const flow = flows(() => h, { agentName: 'responses-asker' });

  beforeAll(async () => {
    mcp = await startElicitationServer();
    h = await createHarness(dialect, { AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true', AGENTRY_POLL_MS: '100' });
    const base = await h.listen();
    client = new OpenAI({ apiKey: h.key, baseURL: `${base}/v1`, maxRetries: 0 });
    compat = new OpenAI({
      apiKey: h.key,
      baseURL: `${base}/v1`,
      maxRetries: 0,
      defaultHeaders: { 'Agentry-Compat': 'openai' },
    });
    agentId = await flow.createAgent({ mcpServers: [{ type: 'url', name: 'asking', url: mcp.url }] });
  }, 120_000);
  afterAll(async () => {
    await h.close();
    await mcp.close();
  });

  it('ends the Response with the request; the answer is checked, resumes the turn and reaches the server', async () => {
    const runsBefore = mcp.runs.book_table ?? 0;
    const first = await client.responses.create({ model: agentId, input: 'call book_table {}' });
    expect(first.status).toBe('completed');
    const [asked] = elicitationsOf(first);
    expect(asked).toMatchObject({
      id: expect.stringMatching(/^elic_/),
      server_label: 'asking',
      message: 'Who is the table for?',
      mode: 'form',
      requested_schema: { type: 'object', required: ['name', 'guests'] },
      url: null,
    });
    const id = asked?.id ?? '';
    const conversation = first.conversation?.id ?? '';
    const send = (input: ResponseInputItem[]) => client.responses.create({ model: agentId, conversation, input });

    // Content that does not fit the requested schema: 400 naming the field; the request still waits.
    await expect(send([answerItem(id, 'accept', { name: 'Ada', guests: 'four' })])).rejects.toMatchObject({
      status: 400,
      param: 'input[0].content.guests',
    });
    await expect(send([answerItem(id, 'accept', { guests: 2 })])).rejects.toMatchObject({
      status: 400,
      param: 'input[0].content.name',
    });
    await expect(send([answerItem('elic_unknown', 'decline')])).rejects.toMatchObject({
      status: 400,
      param: 'input[0].elicitation_request_id',
    });
    await expect(send([answerItem(id, 'maybe')])).rejects.toMatchObject({ status: 400 });
    await expect(
      send([answerItem(id, 'decline'), { role: 'user', content: 'and then?' } as ResponseInputItem]),
    ).rejects.toMatchObject({ status: 400 });
    expect(mcp.runs.book_table ?? 0).toBe(runsBefore + 1);

    const answered = await send([answerItem(id, 'accept', { name: 'Ada', guests: 4 })]);
    // The turn that asked goes on: the same Response, now completed with the call's result.
    expect(answered.id).toBe(first.id);
    expect(answered.status).toBe('completed');
    expect(answered.output_text).toBe('book_table: booked for Ada, 4 guests');
    expect(answered.output.find((item) => item.type === 'mcp_call')).toMatchObject({
      name: 'book_table',
      status: 'completed',
      output: 'booked for Ada, 4 guests',
    });
    expect(mcp.answers.at(-1)).toEqual({ action: 'accept', content: { name: 'Ada', guests: 4 } });
    expect(mcp.runs.book_table ?? 0).toBe(runsBefore + 2);

    // Single use: the request no longer waits.
    await expect(send([answerItem(id, 'decline')])).rejects.toMatchObject({ status: 409, code: 'action_not_waiting' });
    expect(mcp.runs.book_table ?? 0).toBe(runsBefore + 2);
  });

  it('streams the request as an output item and the answered turn to its end (previous_response_id)', async () => {
    const stream = compat.responses.stream({ model: agentId, input: 'call book_table {}' });
    const added: unknown[] = [];
    const done: unknown[] = [];
    stream.on('response.output_item.added', (event) => added.push(event.item));
    stream.on('response.output_item.done', (event) => done.push(event.item));
    const first = await stream.finalResponse();
    const [asked] = elicitationsOf(first);
    expect(asked?.mode).toBe('form');
    expect(added).toContainEqual(expect.objectContaining({ type: 'mcp_elicitation_request', id: asked?.id }));
    expect(done).toContainEqual(
      expect.objectContaining({ type: 'mcp_elicitation_request', id: asked?.id, requested_schema: expect.any(Object) }),
    );

    const answering = compat.responses.stream({
      model: agentId,
      previous_response_id: first.id,
      input: [answerItem(asked?.id ?? '', 'accept', { name: 'Grace', guests: 2 })],
    });
    const final = await answering.finalResponse();
    expect(final.status).toBe('completed');
    expect(final.output_text).toBe('book_table: booked for Grace, 2 guests');
    expect(mcp.answers.at(-1)).toEqual({ action: 'accept', content: { name: 'Grace', guests: 2 } });

    const retrieved = await client.responses.retrieve(first.id);
    expect(retrieved.output_text).toBe('book_table: booked for Grace, 2 guests');
    expect(elicitationsOf(retrieved).map((item) => item.id)).toEqual([asked?.id]);
  });
});
