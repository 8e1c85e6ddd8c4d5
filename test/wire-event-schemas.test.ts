/**
 * The event shapes the API sends outside JSON responses are components of the OpenAPI document
 * (`ResponseStreamEvent`, `SessionEvent`, `WebhookEvent`, and the legacy wires `TaskStreamEvent`, `TaskStreamDone`,
 * `TaskWebhookEvent`, `ToolRunStreamEvent`), and what the server actually sends matches them: every frame of
 * streamed Responses (text, an MCP call with progress, a client function call, an approval), every frame of the
 * session stream over the same turns (persisted events replayed and live ones), every webhook delivered for them
 * and by the test route for each type, and the webhook event history listing them; every frame of a Task's event
 * stream (and its content's events) and every legacy webhook of Tasks that succeed, fail and are canceled; every
 * frame of streamed tool runs that succeed, wait for a function result and fail. Validated with ajv against the
 * served document, once per dialect.
 */
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { busMessageParser } from '../src/bus/bus-messages.ts';
import { buildDispatcher, buildTaskNotifier } from '../src/deps.ts';
import { SESSION_EVENT_KINDS, WEBHOOK_EVENT_TYPES } from '../src/domain/outbox.ts';
import type { TaskNotifier } from '../src/domain/tasks/task-notifier.ts';
import { TASK_EVENT_TYPES } from '../src/domain/tasks/task-types.ts';
import type { WebhookDispatcher } from '../src/webhooks/dispatcher.ts';
import { flows, type Json, waitUntil, weatherTool } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';
import { type McpTestServer, startModernMcpServer } from './helpers/mcp-servers.ts';
import { type Receiver, startReceiver } from './helpers/webhook-receiver.ts';

const COMPONENTS = [
  'ResponseStreamEvent',
  'SessionEvent',
  'WebhookEvent',
  'TaskStreamEvent',
  'TaskStreamDone',
  'TaskWebhookEvent',
  'ToolRunStreamEvent',
] as const;
type Component = (typeof COMPONENTS)[number];
/** The events of a Task stream and of a tool-run stream, in the order their unions declare them. */
const TASK_STREAM_EVENTS = ['init', 'text', 'tool_use', 'tool_result', 'result'];
const TOOL_RUN_STREAM_EVENTS = ['run_status', 'tokens', 'block_execution', 'final'];

// ajv-formats is CommonJS; under Node's ESM loader the callable sits on `default`.
const addFormats: (ajv: Ajv2020) => Ajv2020 =
  typeof addFormatsModule === 'function' ? addFormatsModule : Reflect.get(addFormatsModule, 'default');

interface SseEvent {
  event: string | null;
  id: string | null;
  data: Json;
}

/** The JSON frames of an SSE body with their event names and ids (comments and `[DONE]` left out). */
function sseEvents(text: string): SseEvent[] {
  const events: SseEvent[] = [];
  for (const block of text.split('\n\n')) {
    const lines = block.split('\n');
    const field = (name: string) =>
      lines.filter((line) => line.startsWith(`${name}: `)).map((line) => line.slice(name.length + 2));
    const data = field('data').join('\n');
    if (data === '' || data === '[DONE]') continue;
    events.push({ event: field('event')[0] ?? null, id: field('id')[0] ?? null, data: JSON.parse(data) });
  }
  return events;
}

/** The JSON frames of an SSE body (comments and `[DONE]` left out). */
const sseFrames = (text: string): Json[] => sseEvents(text).map((frame) => frame.data);

/** The `const`/`enum` value of the discriminating property of each branch of a union component. */
const branchNames = (schema: Json, property: string): string[] =>
  (schema.anyOf as Json[]).flatMap((branch) => branch.properties[property].enum ?? [branch.properties[property].const]);

describe.each(dialects())('wire event schemas (%s)', (dialect) => {
  let h: Harness;
  let base: string;
  let mcp: McpTestServer;
  let receiver: Receiver;
  let dispatcher: WebhookDispatcher;
  let notifier: TaskNotifier;
  let document: Json;
  let agentId: string;
  let endpointId: string;
  const validators = new Map<Component, ValidateFunction>();
  /** Every live event published on the bus, as it would cross to another process (JSON). */
  const published: Json[] = [];
  const flow = flows(() => h, { agentName: 'wire' });

  beforeAll(async () => {
    [mcp, receiver] = await Promise.all([startModernMcpServer({ name: 'ops' }), startReceiver()]);
    h = await createHarness(dialect, { AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true' });
    base = await h.listen();
    dispatcher = buildDispatcher(h.deps);
    dispatcher.start();
    notifier = buildTaskNotifier(h.deps);
    notifier.start();
    h.deps.bus.subscribe('live', (message) => published.push(JSON.parse(JSON.stringify(message))));
    document = json(await h.request('GET', '/v1/openapi.json', { key: null }));
    const ajv = addFormats(new Ajv2020({ strict: false, allErrors: true }));
    // The whole document, so that a component's references to others (`#/components/schemas/…`) resolve.
    ajv.addSchema(document, 'openapi.json');
    for (const name of COMPONENTS) {
      validators.set(name, ajv.compile({ $ref: `openapi.json#/components/schemas/${name}` }));
    }
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
    await Promise.all([dispatcher?.stop(1000), notifier?.stop()]);
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
    expect(branchNames(schemas.TaskStreamEvent, 'eventType')).toEqual(TASK_STREAM_EVENTS);
    expect(branchNames(schemas.TaskWebhookEvent, 'event')).toEqual([...TASK_EVENT_TYPES]);
    expect(branchNames(schemas.ToolRunStreamEvent, 'type')).toEqual(TOOL_RUN_STREAM_EVENTS);
    // Its last event carries the run object as the `SdkRun` component, which the tool-run routes answer with too.
    expect(schemas.ToolRunStreamEvent.anyOf.at(-1).properties.content.$ref).toBe('#/components/schemas/SdkRun');
    expect(
      document.paths['/api/sdk/p/{project_id}/a/{agent_id}/r/{run_id}'].get.responses['200'].content['application/json']
        .schema.$ref,
    ).toBe('#/components/schemas/SdkRun');
    expect(validators.get('ToolRunStreamEvent')?.({ type: 'final', content: { run: { run_id: 'r' } } })).toBe(false);
    // JSON answers carrying the same shapes refer to the components.
    const items = (path: string, property: string) =>
      document.paths[path].get.responses['200'].content['application/json'].schema.properties[property].items;
    expect(items('/v1/webhook_endpoints/{id}/events', 'data').$ref).toBe('#/components/schemas/WebhookEvent');
    expect(items('/v1/tasks/{id}/content', 'prompts').properties.events.items.$ref).toBe(
      '#/components/schemas/TaskStreamEvent',
    );
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

    // What the bus carries between processes in cluster mode passes the check a receiving process makes.
    const parse = busMessageParser();
    const live = published.filter((message) => message.sessionId === sessionId);
    const liveKinds = new Set(
      live.map((message) => (message.event.kind === 'message.event' ? message.event.data.type : message.event.kind)),
    );
    for (const kind of ['session.status', 'message.status', 'message.delta', 'message.completed', 'tool_progress']) {
      expect(liveKinds, kind).toContain(kind);
    }
    for (const message of live) expect(parse('live', message), JSON.stringify(message)).not.toBeNull();
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

  it('validates the webhook event history against the events it lists', async () => {
    const listed: Json[] = [];
    let after: string | null = null;
    do {
      const query: string = after === null ? '' : `&after=${after}`;
      const page = json(await h.request('GET', `/v1/webhook_endpoints/${endpointId}/events?limit=100${query}`));
      listed.push(...page.data);
      after = page.has_more ? page.last_id : null;
    } while (after !== null);
    expectValid('WebhookEvent', listed);
    const types = new Set(listed.map((event) => event.type));
    for (const type of WEBHOOK_EVENT_TYPES) expect(types, type).toContain(type);
    expect(types).toContain('agent.session.turn.completed');
    // The delivered body and its entry in the history are the same JSON.
    const delivered = receiver.received
      .map((request) => JSON.parse(request.body))
      .find((body) => body.object === 'event' && body.data.id !== 'test_resource');
    expect(listed.find((event) => event.id === delivered?.id)).toEqual(delivered);
  });

  /** The frames of a Task's event stream, from the first until it ends. */
  const taskStream = async (taskId: string): Promise<SseEvent[]> => {
    const response = await fetch(`${base}/v1/tasks/${taskId}/events`, {
      headers: { authorization: `Bearer ${h.key}` },
    });
    const text = await response.text();
    expect(response.status, text).toBe(200);
    return sseEvents(text);
  };

  it('validates what a Task stream, its content and its legacy webhooks actually send', async () => {
    const hook = await h.request('POST', '/v1/webhooks', {
      body: { url: `${receiver.url}/legacy`, events: [...TASK_EVENT_TYPES] },
    });
    expect(hook.status, hook.text).toBe(201);
    const task = json(
      await h.request('POST', '/v1/tasks', {
        body: { agentId, prompt: 'Working on it.\ncall slow {"ms":10,"steps":1}\n---\nAll done.' },
      }),
    );
    const first = await taskStream(task.id);
    expect(first.at(-1)).toMatchObject({ event: 'done', data: { status: 'succeeded' } });
    // The notifier sends what it finds: the follow-up waits until the first ending was sent.
    await receiver.waitFor(
      (received) => received.some((request) => request.path === '/legacy' && request.body.includes('task.completed')),
      'task.completed',
    );
    // A follow-up prompt that fails: the stream replays both prompts' events and ends with the failure.
    await h.request('POST', `/v1/tasks/${task.id}/prompts`, { body: { prompt: 'fail the model broke' } });
    const both = await taskStream(task.id);
    const done = both.at(-1);
    expect(done).toMatchObject({ event: 'done', data: { status: 'failed' } });
    const events = both.filter((frame) => frame.event === null);
    expect(events.map((frame) => frame.id)).toEqual(events.map((frame) => String(frame.data.seq)));
    expect(done?.data.lastSeq).toBe(events.length);
    expectValid(
      'TaskStreamEvent',
      events.map((frame) => frame.data),
    );
    expectValid(
      'TaskStreamDone',
      [first, both].map((frames) => frames.at(-1)?.data ?? {}),
    );
    expect(new Set(events.map((frame) => frame.data.eventType))).toEqual(new Set(TASK_STREAM_EVENTS));
    const content = json(await h.request('GET', `/v1/tasks/${task.id}/content?include=events`));
    const contentEvents = content.prompts.flatMap((prompt: Json) => prompt.events);
    expect(contentEvents).toEqual(events.map((frame) => frame.data));
    expectValid('TaskStreamEvent', contentEvents);

    // A Task canceled while it runs.
    const slow = json(await h.request('POST', '/v1/tasks', { body: { agentId, prompt: 'sleep 30000' } }));
    await waitUntil(
      async () => (json(await h.request('GET', `/v1/tasks/${slow.id}`)).prompts[0].startedAt === null ? null : true),
      { what: 'the slow prompt to start' },
    );
    await h.request('POST', `/v1/tasks/${slow.id}/cancel`);
    const canceled = await taskStream(slow.id);
    expect(canceled.at(-1)).toMatchObject({ event: 'done', data: { status: 'canceled' } });
    expectValid(
      'TaskStreamEvent',
      canceled.filter((frame) => frame.event === null).map((frame) => frame.data),
    );

    const legacy = (
      await receiver.waitFor(
        (received) =>
          received
            .filter((request) => request.path === '/legacy')
            .map((request) => JSON.parse(request.body).event)
            .filter((event) => event === 'task.failed' || event === 'task.canceled').length === 2,
        'the legacy task webhooks',
      )
    ).filter((request) => request.path === '/legacy');
    const bodies = legacy.map((request) => JSON.parse(request.body));
    expectValid('TaskWebhookEvent', bodies);
    expect(new Set(bodies.map((body) => body.event))).toEqual(new Set(TASK_EVENT_TYPES));
    for (const request of legacy) expect(request.headers['x-webhook-event']).toBe(JSON.parse(request.body).event);
  });

  it('validates what streamed tool runs actually send', async () => {
    const projectId = json(await h.request('GET', '/v1/organization')).projectId;
    const run = async (input: string): Promise<Json[]> => {
      const response = await fetch(`${base}/api/sdk/p/${projectId}/a/${agentId}/r`, {
        method: 'POST',
        headers: { authorization: `Bearer ${h.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ inputs: [input], stream: true }),
      });
      const text = await response.text();
      expect(response.status, text).toBe(200);
      expect(text.trimEnd().endsWith('data: [DONE]'), text).toBe(true);
      return sseFrames(text);
    };
    const succeeded = await run('Streaming a reply\nin a few words.');
    const waiting = await run('call get_weather {"city":"Paris"}');
    const failed = await run('fail the model broke');
    const frames = [...succeeded, ...waiting, ...failed];
    expectValid('ToolRunStreamEvent', frames);
    expect(new Set(frames.map((frame) => frame.type))).toEqual(new Set(TOOL_RUN_STREAM_EVENTS));
    const outcome = (stream: Json[]) => stream.filter((frame) => frame.type === 'run_status').at(-1)?.content;
    expect(outcome(succeeded)?.status).toBe('succeeded');
    expect(outcome(waiting)).toMatchObject({ status: 'requires_action', required_actions: [{ name: 'get_weather' }] });
    expect(outcome(failed)?.status).toBe('errored');
  });
});
