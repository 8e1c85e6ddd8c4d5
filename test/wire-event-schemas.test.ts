/**
 * The event shapes the API sends outside JSON responses are components of the OpenAPI document
 * (`ResponseStreamEvent`, `SessionEvent`, `WebhookEvent`), and what the server actually sends matches them: every
 * frame of streamed Responses (text, an MCP call with progress, a client function call, an approval), every frame
 * of the session stream over the same turns (persisted events replayed and live ones), and every webhook delivered
 * for them and by the test route for each type. Validated with ajv against the served document, once per dialect.
 */
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDispatcher } from '../src/deps.ts';
import { SESSION_EVENT_KINDS, WEBHOOK_EVENT_TYPES } from '../src/domain/outbox.ts';
import type { WebhookDispatcher } from '../src/webhooks/dispatcher.ts';
import { flows, type Json, waitUntil, weatherTool } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';
import { type McpTestServer, startModernMcpServer } from './helpers/mcp-servers.ts';
import { type Receiver, startReceiver } from './helpers/webhook-receiver.ts';

const COMPONENTS = ['ResponseStreamEvent', 'SessionEvent', 'WebhookEvent'] as const;
type Component = (typeof COMPONENTS)[number];

/** The JSON frames of an SSE body (comments and `[DONE]` left out). */
function sseFrames(text: string): Json[] {
  const frames: Json[] = [];
  for (const block of text.split('\n\n')) {
    const data = block
      .split('\n')
      .filter((line) => line.startsWith('data: '))
      .map((line) => line.slice('data: '.length))
      .join('\n');
    if (data !== '' && data !== '[DONE]') frames.push(JSON.parse(data));
  }
  return frames;
}

/** The `const`/`enum` value of the discriminating property of each branch of a union component. */
const branchNames = (schema: Json, property: string): string[] =>
  (schema.anyOf as Json[]).flatMap((branch) => branch.properties[property].enum ?? [branch.properties[property].const]);

describe.each(dialects())('wire event schemas (%s)', (dialect) => {
  let h: Harness;
  let base: string;
  let mcp: McpTestServer;
  let receiver: Receiver;
  let dispatcher: WebhookDispatcher;
  let document: Json;
  let agentId: string;
  let endpointId: string;
  const validators = new Map<Component, ValidateFunction>();
  const flow = flows(() => h, { agentName: 'wire' });

  beforeAll(async () => {
    [mcp, receiver] = await Promise.all([startModernMcpServer({ name: 'ops' }), startReceiver()]);
    h = await createHarness(dialect, { AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true' });
    base = await h.listen();
    dispatcher = buildDispatcher(h.deps);
    dispatcher.start();
    document = json(await h.request('GET', '/v1/openapi.json', { key: null }));
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    for (const name of COMPONENTS) validators.set(name, ajv.compile(document.components.schemas[name]));
    agentId = await flow.createAgent({
      mcpServers: [{ type: 'url', name: 'ops', url: mcp.url }],
      clientTools: [weatherTool({ description: 'Weather' })],
      toolApprovals: { default: 'auto', overrides: { count: 'always_ask' } },
    });
    const endpoint = await h.request('POST', '/v1/webhook_endpoints', {
      body: { name: 'wire', url: receiver.url, event_types: [...WEBHOOK_EVENT_TYPES] },
    });
    expect(endpoint.status, endpoint.text).toBe(200);
    endpointId = json(endpoint).id;
  });
  afterAll(async () => {
    await dispatcher?.stop(1000);
    await h?.close();
    await Promise.all([mcp?.close(), receiver?.close()]);
  });

  /** Asserts that every value is valid against the component, naming the first that is not. */
  function expectValid(name: Component, values: readonly Json[]): void {
    const validate = validators.get(name);
    if (validate === undefined) throw new Error(`no validator for ${name}`);
    for (const value of values) {
      const valid = validate(value);
      expect(valid, `${name} ${JSON.stringify(value)}: ${JSON.stringify(validate.errors?.slice(0, 3))}`).toBe(true);
    }
  }

  const streamResponse = async (body: Json): Promise<Json[]> => {
    const response = await fetch(`${base}/v1/responses`, {
      method: 'POST',
      // OpenAI compatibility mode: approvals are decided with mcp_approval_response items.
      headers: { authorization: `Bearer ${h.key}`, 'content-type': 'application/json', 'agentry-compat': 'openai' },
      body: JSON.stringify({ model: agentId, stream: true, ...body }),
    });
    const text = await response.text();
    expect(response.status, text).toBe(200);
    return sseFrames(text);
  };

  it('documents the Responses stream events, session events and webhook events as components', () => {
    const schemas = document.components.schemas;
    expect(branchNames(schemas.SessionEvent, 'kind').sort()).toEqual([...SESSION_EVENT_KINDS].sort());
    expect(branchNames(schemas.WebhookEvent, 'type')).toEqual([...WEBHOOK_EVENT_TYPES]);
    expect(branchNames(schemas.ResponseStreamEvent, 'type')).toEqual(
      expect.arrayContaining([
        'response.created',
        'response.output_text.delta',
        'response.function_call_arguments.done',
        'response.mcp_call.completed',
        'response.agentry_tool_call.progress',
        'response.completed',
        'response.failed',
      ]),
    );
  });

  it('validates what a Response stream, its session stream and its webhooks actually send', async () => {
    const first = await streamResponse({
      input:
        'Looking it up.\ncall get_weather {"city":"Paris"}\n---\ncall count {"key":"wire"}\n---\ncall slow {"ms":100,"steps":2}\n---\nAll done.',
    });
    const created = first[0]?.response;
    const conversation: string = created.conversation.id;
    const sessionId = conversation.slice('conv_'.length);

    // The session stream from its first event: turn one replayed from the database, the next turns live (with
    // the live-only deltas and progress reports).
    const controller = new AbortController();
    const sessionFrames: Json[] = [];
    const stream = await fetch(`${base}/v1/sessions/${sessionId}/stream`, {
      headers: { authorization: `Bearer ${h.key}`, 'last-event-id': '0' },
      signal: controller.signal,
    });
    expect(stream.status).toBe(200);
    const reading = (async () => {
      const reader = stream.body?.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = '';
      for (;;) {
        const next = await reader?.read().catch(() => ({ done: true, value: undefined }));
        if (next === undefined || next.done === true) return;
        buffer += next.value;
        const end = buffer.lastIndexOf('\n\n');
        if (end === -1) continue;
        sessionFrames.push(...sseFrames(buffer.slice(0, end)));
        buffer = buffer.slice(end + 2);
      }
    })();

    const call = first.find(
      (frame) => frame.type === 'response.output_item.done' && frame.item.type === 'function_call',
    );
    const second = await streamResponse({
      conversation,
      input: [{ type: 'function_call_output', call_id: call?.item.call_id, output: 'Sunny' }],
    });
    const request = second.find(
      (frame) => frame.type === 'response.output_item.done' && frame.item.type === 'mcp_approval_request',
    );
    const third = await streamResponse({
      conversation,
      input: [{ type: 'mcp_approval_response', approval_request_id: request?.item.id, approve: true }],
    });
    const responses = [...first, ...second, ...third];
    expectValid('ResponseStreamEvent', responses);
    const types = new Set(responses.map((frame) => frame.type));
    for (const type of [
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.output_item.done',
      'response.content_part.added',
      'response.content_part.done',
      'response.output_text.delta',
      'response.output_text.done',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.done',
      'response.mcp_call.in_progress',
      'response.mcp_call_arguments.delta',
      'response.mcp_call_arguments.done',
      'response.mcp_call.completed',
      'response.agentry_tool_call.started',
      'response.agentry_tool_call.progress',
      'response.agentry_tool_call.action_required',
      'response.completed',
    ]) {
      expect(types, type).toContain(type);
    }

    const lastTurn = String(third.at(-1)?.response.id).slice('resp_'.length);
    await waitUntil(
      async () =>
        sessionFrames.find((frame) => frame.kind === 'message.completed' && frame.message_id === lastTurn) ?? null,
      { what: 'the last turn on the session stream' },
    );
    controller.abort();
    await reading;
    expectValid('SessionEvent', sessionFrames);
    const kinds = new Set(
      sessionFrames.map((frame) => (frame.kind === 'message.event' ? frame.data.type : frame.kind)),
    );
    for (const kind of ['session.status', 'message.created', 'message.status', 'message.delta', 'message.completed']) {
      expect(kinds, kind).toContain(kind);
    }
    for (const type of ['tool_call', 'tool_progress', 'tool_result', 'tool_approval', 'approved']) {
      expect(kinds, type).toContain(type);
    }

    const delivered = await receiver.waitFor(
      (received) =>
        received.some((request) => JSON.parse(request.body).type === 'agent.session.turn.completed') &&
        received.some((request) => JSON.parse(request.body).type === 'agent.session.action_required'),
      'the turn webhooks',
    );
    expectValid(
      'WebhookEvent',
      delivered.map((request) => JSON.parse(request.body)),
    );
  });

  it('validates the test event of every webhook type', async () => {
    const before = receiver.received.length;
    for (const type of WEBHOOK_EVENT_TYPES) {
      const response = await h.request('POST', `/v1/webhook_endpoints/${endpointId}/test`, {
        body: { event_type: type },
      });
      expect(response.status, response.text).toBe(200);
    }
    const bodies = receiver.received
      .slice(before)
      .map((request) => JSON.parse(request.body))
      .filter((body) => body.data.id === 'test_resource');
    expect(bodies.map((body) => body.type)).toEqual([...WEBHOOK_EVENT_TYPES]);
    expectValid('WebhookEvent', bodies);
  });
});
