/**
 * Observability end to end: OpenTelemetry spans exported over OTLP/HTTP to a local receiver (the span tree and
 * GenAI attributes of a turn with a model call and an MCP tool call, the parent taken from an incoming
 * `traceparent`, a turn run later by another engine, errors, trace context on the model provider request, the MCP
 * `_meta` and webhook deliveries; nothing exported without an endpoint), and Prometheus metrics scraped from
 * GET /metrics over HTTP and parsed with a Prometheus text parser. Once per dialect.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import parsePrometheusTextFormat, { type PromFamily } from 'parse-prometheus-text-format';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { buildDeps, buildDispatcher, buildEngine } from '../src/deps.ts';
import { bootstrap } from '../src/domain/orgs/org-service.ts';
import type { Engine } from '../src/engine/engine.ts';
import { createLogger } from '../src/logger.ts';
import type { WebhookDispatcher } from '../src/webhooks/dispatcher.ts';
import { flows, type Json, waitUntil } from './helpers/fixtures.ts';
import {
  createHarness,
  type DialectName,
  dialects,
  type Harness,
  json,
  testEnvironment,
  testKey,
} from './helpers/harness.ts';
import { type McpTestServer, startModernMcpServer } from './helpers/mcp-servers.ts';
import { type ServerProcess, startServerProcess, startsTimeout } from './helpers/server-process.ts';
import { type Receiver, startReceiver } from './helpers/webhook-receiver.ts';

interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  startTimeUnixNano: string | number;
  endTimeUnixNano: string | number;
  attributes: { key: string; value: Record<string, unknown> }[];
  status?: { code?: number; message?: string };
}

/** Every span a receiver got (OTLP/HTTP JSON), with its attributes flattened and its resource's service name. */
function spansOf(receiver: Receiver): (OtlpSpan & { attrs: Record<string, unknown>; service: unknown })[] {
  const out: (OtlpSpan & { attrs: Record<string, unknown>; service: unknown })[] = [];
  for (const request of receiver.received) {
    if (request.path !== '/v1/traces') continue;
    const body = JSON.parse(request.body) as Json;
    for (const resource of body.resourceSpans ?? []) {
      const service = attrsOf(resource.resource?.attributes ?? [])['service.name'];
      for (const scope of resource.scopeSpans ?? []) {
        for (const span of scope.spans ?? []) out.push({ ...span, attrs: attrsOf(span.attributes ?? []), service });
      }
    }
  }
  return out;
}

function attrsOf(list: { key: string; value: Record<string, unknown> }[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const { key, value } of list) {
    if ('stringValue' in value) out[key] = value.stringValue;
    else if ('intValue' in value) out[key] = Number(value.intValue);
    else if ('doubleValue' in value) out[key] = Number(value.doubleValue);
    else if ('boolValue' in value) out[key] = value.boolValue;
    else if ('arrayValue' in value)
      out[key] = ((value.arrayValue as Json).values ?? []).map((entry: Json) => entry.stringValue);
  }
  return out;
}

const hex = (bytes: number) => randomBytes(bytes).toString('hex');

/** A minimal OpenAI-compatible provider: one streamed text answer per request; records the request headers. */
async function startModelStub(): Promise<{ server: Server; baseURL: string; headers: IncomingHttpHeaders[] }> {
  const headers: IncomingHttpHeaders[] = [];
  const server = createServer((request, response) => {
    request.resume();
    request.on('end', () => {
      headers.push(request.headers);
      const chunk = (delta: Json, finish: string | null = null) =>
        `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'stub-model', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      response.write(chunk({ role: 'assistant', content: 'from the stub' }));
      response.write(chunk({}, 'stop'));
      response.write(
        `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'stub-model', choices: [], usage: { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 } })}\n\n`,
      );
      response.end('data: [DONE]\n\n');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, headers };
}

function traceEnv(otlp: Receiver, stubURL: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    OTEL_BSP_SCHEDULE_DELAY: '50',
    OTEL_SERVICE_NAME: 'agentry-under-test',
    AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true',
    AGENTRY_PROVIDERS: JSON.stringify({ stub: { baseURL: stubURL, apiKey: 'stub-key' } }),
    ...extra,
  };
}

describe.each(dialects())('OpenTelemetry traces (%s)', (dialect: DialectName) => {
  let h: Harness;
  let otlp: Receiver;
  let hooks: Receiver;
  let mcp: McpTestServer;
  let stub: Awaited<ReturnType<typeof startModelStub>>;
  let dispatcher: WebhookDispatcher;
  /** The engine that replaces the harness's own in the test of a turn run later by another engine. */
  let replacement: Engine | null = null;
  const flow = flows(() => h);

  beforeAll(async () => {
    [otlp, hooks, mcp, stub] = await Promise.all([
      startReceiver(),
      startReceiver(),
      startModernMcpServer({ name: 'tools' }),
      startModelStub(),
    ]);
    h = await createHarness(dialect, traceEnv(otlp, stub.baseURL));
    dispatcher = buildDispatcher(h.deps);
    dispatcher.start();
  });
  afterAll(async () => {
    await dispatcher?.stop(1000);
    await replacement?.stop(5000);
    await h?.close();
    await Promise.all([otlp?.close(), hooks?.close(), mcp?.close()]);
    stub?.server.closeAllConnections();
    await new Promise((resolve) => stub?.server.close(resolve));
  });

  /** Submits with a caller's traceparent and waits for the turn to end. */
  async function tracedTurn(agentId: string, text: string, traceparent?: string) {
    const sessionId = await flow.createSession(agentId);
    const response = await h.request('POST', `/v1/sessions/${sessionId}/messages`, {
      body: { parts: [{ type: 'text', text }] },
      headers: { 'idempotency-key': hex(8), ...(traceparent === undefined ? {} : { traceparent }) },
    });
    expect(response.status, response.text).toBe(202);
    const message = await flow.waitForMessage(sessionId, json(response).id);
    return { sessionId, message };
  }

  /** Waits until the run's invoke_agent span and `children` child spans arrived. */
  async function runSpans(runId: string, children: number) {
    return waitUntil(
      async () => {
        const all = spansOf(otlp);
        const invoke = all.find(
          (span) => span.attrs['agentry.run.id'] === runId && span.name.startsWith('invoke_agent'),
        );
        if (invoke === undefined) return null;
        const kids = all.filter((span) => span.parentSpanId === invoke.spanId);
        return kids.length >= children ? { all, invoke, kids } : null;
      },
      { what: `the spans of run ${runId}` },
    );
  }

  it('exports a turn as invoke_agent > chat + execute_tool under the caller trace, with the GenAI attributes', async () => {
    const agentId = await flow.createAgent({
      name: 'Support bot',
      mcpServers: [{ type: 'url', name: 'tools', url: mcp.url }],
    });
    const traceId = hex(16);
    const callerSpan = hex(8);
    const { sessionId, message } = await tracedTurn(
      agentId,
      'call echo {"text":"hi there"}',
      `00-${traceId}-${callerSpan}-01`,
    );
    expect(message.status).toBe('completed');
    const { all, invoke, kids } = await runSpans(message.runId, 3);

    // The API request's server span is a child of the caller's span; the turn is a child of that request.
    const server = all.find((span) => span.spanId === invoke.parentSpanId);
    expect(server?.name).toBe('POST /v1/sessions/:id/messages');
    expect(server?.kind).toBe(2); // SERVER
    expect(server?.traceId).toBe(traceId);
    expect(server?.parentSpanId).toBe(callerSpan);
    expect(server?.attrs['http.route']).toBe('/v1/sessions/:id/messages');
    expect(server?.attrs['http.response.status_code']).toBe(202);
    expect(server?.service).toBe('agentry-under-test');

    expect(invoke.traceId).toBe(traceId);
    expect(invoke.name).toBe('invoke_agent Support bot');
    expect(invoke.attrs).toMatchObject({
      'gen_ai.operation.name': 'invoke_agent',
      'gen_ai.provider.name': 'agentry',
      'gen_ai.request.model': 'scripted',
      'gen_ai.agent.id': agentId,
      'gen_ai.agent.name': 'Support bot',
      'gen_ai.conversation.id': `conv_${sessionId}`,
      'agentry.run.id': message.runId,
      'agentry.message.id': message.id,
      'agentry.source': 'sessions',
    });
    expect(invoke.attrs['gen_ai.usage.input_tokens']).toBe(message.usage.inputTokens);
    expect(invoke.attrs['gen_ai.usage.output_tokens']).toBe(message.usage.outputTokens);

    const chats = kids.filter((span) => span.attrs['gen_ai.operation.name'] === 'chat');
    const tools = kids.filter((span) => span.attrs['gen_ai.operation.name'] === 'execute_tool');
    expect(chats).toHaveLength(2);
    expect(tools).toHaveLength(1);
    for (const chat of chats) {
      expect(chat.name).toBe('chat scripted');
      expect(chat.kind).toBe(3); // CLIENT
      expect(chat.attrs).toMatchObject({
        'gen_ai.provider.name': 'agentry',
        'gen_ai.request.model': 'scripted',
        'gen_ai.response.model': 'scripted',
        'agentry.run.id': message.runId,
      });
      expect(chat.attrs['gen_ai.usage.input_tokens']).toBeGreaterThan(0);
    }
    expect(chats.map((chat) => chat.attrs['gen_ai.response.finish_reasons'])).toEqual([['tool_calls'], ['stop']]);
    const [tool] = tools;
    expect(tool?.name).toBe('execute_tool echo');
    expect(tool?.attrs['gen_ai.tool.name']).toBe('echo');
    expect(tool?.attrs['agentry.tool.server']).toBe('tools');
    const callId = tool?.attrs['gen_ai.tool.call.id'];
    expect(typeof callId).toBe('string');
    // Message content is opt-in.
    for (const span of [invoke, ...kids]) {
      expect(span.attrs['gen_ai.input.messages']).toBeUndefined();
      expect(span.attrs['gen_ai.tool.call.arguments']).toBeUndefined();
    }
    // The tool call ran after the first model call and before the second.
    const [first, second] = chats;
    expect(Number(tool?.startTimeUnixNano)).toBeGreaterThanOrEqual(Number(first?.endTimeUnixNano));
    expect(Number(second?.startTimeUnixNano)).toBeGreaterThanOrEqual(Number(tool?.endTimeUnixNano));

    // The MCP server got the execute_tool span's context in `_meta.traceparent`.
    const call = mcp.calls.find((entry) => entry.meta['agentry/run_id'] === message.runId);
    expect(call?.meta.traceparent).toBe(`00-${traceId}-${tool?.spanId}-01`);

    // The Runs API and the export agree on the run.
    const trace = json(await h.request('GET', `/v1/runs/${message.runId}/trace`)).data as Json[];
    expect(trace.filter((span) => span.kind === 'tool_call').map((span) => span.attributes.call_id)).toEqual([callId]);
  });

  it('starts a trace of its own without an incoming traceparent, and exports each run once', async () => {
    const agentId = await flow.createAgent();
    const { message } = await tracedTurn(agentId, 'plain hello');
    const { all, invoke, kids } = await runSpans(message.runId, 1);
    const server = all.find((span) => span.spanId === invoke.parentSpanId);
    expect(server?.parentSpanId ?? '').toBe('');
    expect(kids).toHaveLength(1);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const again = spansOf(otlp).filter((span) => span.attrs['agentry.run.id'] === message.runId);
    expect(again.filter((span) => span.name.startsWith('invoke_agent'))).toHaveLength(1);
  });

  it('marks a failed model call and turn as errors', async () => {
    const agentId = await flow.createAgent();
    const { message } = await tracedTurn(agentId, 'fail the provider is down');
    expect(message.status).toBe('failed');
    const { invoke, kids } = await runSpans(message.runId, 1);
    expect(invoke.status?.code).toBe(2); // ERROR
    expect(invoke.attrs['error.type']).toBe(message.error.code);
    const [chat] = kids;
    expect(chat?.status?.code).toBe(2);
    expect(chat?.attrs['error.type']).toBe(message.error.code);
  });

  it("sends the chat span's traceparent to the model provider", async () => {
    const agentId = await flow.createAgent({ model: 'stub/stub-model' });
    const traceId = hex(16);
    const before = stub.headers.length;
    const { message } = await tracedTurn(agentId, 'hello stub', `00-${traceId}-${hex(8)}-01`);
    expect(message.status).toBe('completed');
    const { kids } = await runSpans(message.runId, 1);
    const [chat] = kids;
    expect(chat?.attrs['gen_ai.provider.name']).toBe('stub');
    expect(chat?.attrs['gen_ai.request.model']).toBe('stub-model');
    expect(chat?.attrs['gen_ai.usage.input_tokens']).toBe(7);
    expect(chat?.attrs['gen_ai.usage.output_tokens']).toBe(3);
    expect(stub.headers.slice(before).map((headers) => headers.traceparent)).toEqual([
      `00-${traceId}-${chat?.spanId}-01`,
    ]);
  });

  it('keeps the caller as parent when the turn runs later on another engine, and traces its webhooks', async () => {
    const agentId = await flow.createAgent();
    const endpoint = await h.request('POST', '/v1/webhook_endpoints', {
      body: { name: 'traced', url: `${hooks.url}/hook`, event_types: ['agent.session.turn.completed'] },
    });
    expect(endpoint.status, endpoint.text).toBe(200);
    await h.engine.stop(5000);
    const traceId = hex(16);
    const sessionId = await flow.createSession(agentId);
    const accepted = await h.request('POST', `/v1/sessions/${sessionId}/messages`, {
      body: { parts: [{ type: 'text', text: 'later' }] },
      headers: { 'idempotency-key': hex(8), traceparent: `00-${traceId}-${hex(8)}-01` },
    });
    expect(accepted.status).toBe(202);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect((await flow.getMessage(sessionId, json(accepted).id)).status).toBe('queued');
    replacement = buildEngine(h.deps);
    replacement.start();
    const message = await flow.waitForMessage(sessionId, json(accepted).id);
    const { all, invoke } = await runSpans(message.runId, 1);
    const server = all.find((span) => span.spanId === invoke.parentSpanId);
    expect(server?.name).toBe('POST /v1/sessions/:id/messages');
    expect(invoke.traceId).toBe(traceId);
    const [delivery] = await hooks
      .waitFor((received) => received.some((entry) => entry.body.includes(message.id)), 'the turn.completed webhook')
      .then((received) => received.filter((entry) => entry.body.includes(message.id)));
    expect(delivery?.headers.traceparent).toBe(`00-${traceId}-${invoke.spanId}-01`);
  });

  it('parents a /v1/responses turn on its request span', async () => {
    const agentId = await flow.createAgent();
    const traceId = hex(16);
    const response = await h.request('POST', '/v1/responses', {
      body: { model: agentId, input: 'through responses' },
      headers: { traceparent: `00-${traceId}-${hex(8)}-01` },
    });
    expect(response.status, response.text).toBe(200);
    const runId = await waitUntil(
      async () =>
        spansOf(otlp).find(
          (span) =>
            span.traceId === traceId &&
            span.name.startsWith('invoke_agent') &&
            span.attrs['agentry.source'] === 'responses',
        )?.attrs['agentry.run.id'] as string | undefined,
      { what: 'the responses turn exported' },
    );
    const { all, invoke } = await runSpans(runId, 1);
    expect(all.find((span) => span.spanId === invoke.parentSpanId)?.name).toBe('POST /v1/responses');
  });

  it('exports OTLP protobuf by default', async () => {
    const bodies: { type: string | undefined; path: string | undefined; body: Buffer }[] = [];
    const sink = createServer((request, reply) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        bodies.push({ type: request.headers['content-type'], path: request.url, body: Buffer.concat(chunks) });
        reply.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
      });
    });
    await new Promise<void>((resolve) => sink.listen(0, '127.0.0.1', resolve));
    const proto = await createHarness(dialect, {
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${(sink.address() as AddressInfo).port}/`,
      OTEL_BSP_SCHEDULE_DELAY: '50',
    });
    try {
      const protoFlow = flows(proto);
      const traceId = hex(16);
      const sessionId = await protoFlow.createSession(await protoFlow.createAgent());
      const accepted = await proto.request('POST', `/v1/sessions/${sessionId}/messages`, {
        body: { parts: [{ type: 'text', text: 'protobuf' }] },
        headers: { 'idempotency-key': hex(8), traceparent: `00-${traceId}-${hex(8)}-01` },
      });
      const message = await protoFlow.waitForMessage(sessionId, json(accepted).id);
      const traceBytes = Buffer.from(traceId, 'hex');
      const runBytes = Buffer.from(message.runId);
      await waitUntil(async () => (bodies.some((entry) => entry.body.includes(runBytes)) ? true : null), {
        what: 'a protobuf export naming the run',
      });
      for (const entry of bodies) {
        expect(entry.path).toBe('/v1/traces');
        expect(entry.type).toBe('application/x-protobuf');
      }
      expect(bodies.some((entry) => entry.body.includes(traceBytes))).toBe(true);
    } finally {
      await proto.close();
      await new Promise((resolve) => sink.close(resolve));
    }
  });

  it('exports nothing and sends no trace context when no OTLP endpoint is set', async () => {
    const quiet = await startReceiver();
    const plain = await createHarness(dialect, {
      AGENTRY_PROVIDERS: JSON.stringify({ stub: { baseURL: stub.baseURL, apiKey: 'stub-key' } }),
    });
    try {
      expect(plain.deps.tracing).toBeNull();
      const plainFlow = flows(plain);
      const agentId = await plainFlow.createAgent({ model: 'stub/stub-model' });
      const before = stub.headers.length;
      const { message } = await plainFlow.turn(agentId, 'untraced');
      expect(message.status).toBe('completed');
      expect(stub.headers.slice(before).map((headers) => headers.traceparent)).toEqual([undefined]);
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(quiet.received).toHaveLength(0);
      expect(spansOf(otlp).some((span) => span.attrs['agentry.run.id'] === message.runId)).toBe(false);
      // An incoming traceparent is still kept and passed on unchanged.
      const traceparent = `00-${hex(16)}-${hex(8)}-01`;
      const sessionId = await plainFlow.createSession(agentId);
      const response = await plain.request('POST', `/v1/sessions/${sessionId}/messages`, {
        body: { parts: [{ type: 'text', text: 'passed on' }] },
        headers: { 'idempotency-key': hex(8), traceparent },
      });
      await plainFlow.waitForMessage(sessionId, json(response).id);
      expect(stub.headers.at(-1)?.traceparent).toBe(traceparent);
    } finally {
      await plain.close();
      await quiet.close();
    }
  });
});

function family(families: PromFamily[], name: string): PromFamily | undefined {
  return families.find((entry) => entry.name === name);
}

type Scraped = PromFamily[] & { text: string };

/**
 * A counter or gauge sample (from the parsed families), or a histogram's observation count. The parser keeps one
 * bucket set per histogram and drops its labels, so a histogram's count is read from its `_count` line.
 */
function sample(families: Scraped, name: string, labels: Record<string, string>): number {
  const parsed = family(families, name);
  if (parsed?.type === 'HISTOGRAM') {
    for (const line of families.text.split('\n')) {
      const match = /^(\w+)_count(?:\{(.*)\})? (\S+)$/.exec(line);
      if (match?.[1] !== name) continue;
      const pairs = Object.fromEntries([...(match[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
      if (Object.entries(labels).every(([key, value]) => pairs[key] === value)) return Number(match[3]);
    }
    return 0;
  }
  const found = (parsed?.metrics ?? []).find((metric) =>
    Object.entries(labels).every(([key, value]) => metric.labels?.[key] === value),
  );
  return Number(found?.value ?? 0);
}

describe.each(dialects())('Prometheus metrics (%s)', (dialect: DialectName) => {
  let h: Harness;
  let base: string;
  let mcp: McpTestServer;
  const flow = flows(() => h);
  const TOKEN = 'scrape-token-1234';

  beforeAll(async () => {
    mcp = await startModernMcpServer({ name: 'tools' });
    h = await createHarness(dialect, {
      AGENTRY_METRICS: 'true',
      AGENTRY_METRICS_TOKEN: TOKEN,
      AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true',
      AGENTRY_WEBHOOK_RETRY_BASE_MS: '50',
    });
    base = await h.listen();
  });
  afterAll(async () => {
    await h?.close();
    await mcp?.close();
  });

  async function scrape(): Promise<Scraped> {
    const response = await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('text/plain');
    const text = await response.text();
    return Object.assign(parsePrometheusTextFormat(text), { text });
  }

  it('needs the token when one is configured', async () => {
    const none = await fetch(`${base}/metrics`);
    expect(none.status).toBe(401);
    expect(((await none.json()) as Json).error.code).toBe('invalid_metrics_token');
    const wrong = await fetch(`${base}/metrics`, { headers: { authorization: 'Bearer nope' } });
    expect(wrong.status).toBe(401);
  });

  it('parses as Prometheus text and its counters move with a turn', async () => {
    const agentId = await flow.createAgent({ mcpServers: [{ type: 'url', name: 'tools', url: mcp.url }] });
    const before = await scrape();
    const labels = { agent: agentId, source: 'sessions' };
    expect(sample(before, 'agentry_turns_started_total', labels)).toBe(0);
    const { message } = await flow.turn(agentId, 'call echo {"text":"counted"}');
    expect(message.status).toBe('completed');
    const after = await waitUntil(
      async () => {
        const families = await scrape();
        return sample(families, 'agentry_turns_completed_total', labels) === 1 ? families : null;
      },
      { what: 'the completed turn counted' },
    );
    expect(sample(after, 'agentry_turns_started_total', labels)).toBe(1);
    expect(sample(after, 'agentry_turns_failed_total', labels)).toBe(0);
    expect(family(after, 'agentry_turn_duration_seconds')?.type).toBe('HISTOGRAM');
    expect(sample(after, 'agentry_turn_duration_seconds', { ...labels, outcome: 'completed' })).toBe(1);
    expect(sample(after, 'agentry_turn_queue_wait_seconds', labels)).toBe(1);
    expect(sample(after, 'agentry_model_call_duration_seconds', { model: 'scripted', outcome: 'completed' })).toBe(
      sample(before, 'agentry_model_call_duration_seconds', { model: 'scripted', outcome: 'completed' }) + 2,
    );
    const tokens = (families: Scraped) =>
      sample(families, 'agentry_model_tokens_total', { model: 'scripted', direction: 'output' });
    expect(tokens(after) - tokens(before)).toBe(message.usage.outputTokens);
    expect(sample(after, 'agentry_tool_call_duration_seconds', { tool: 'echo', outcome: 'completed' })).toBe(1);
    expect(
      sample(after, 'agentry_http_request_duration_seconds', {
        method: 'POST',
        route: '/v1/sessions/:id/messages',
        status: '202',
      }),
    ).toBeGreaterThanOrEqual(1);
    for (const name of [
      'agentry_sse_streams_active',
      'agentry_webhook_backlog',
      'agentry_lease_takeovers_total',
      'agentry_webhook_deliveries_total',
      'agentry_model_cost_usd_total',
    ]) {
      expect(family(after, name), name).toBeDefined();
    }
  });

  it('counts webhook deliveries by outcome', async () => {
    const receiver = await startReceiver();
    const dispatcher = buildDispatcher(h.deps);
    dispatcher.start();
    try {
      receiver.answer = (_request, index) => (index === 0 ? 500 : 200);
      const created = await h.request('POST', '/v1/webhook_endpoints', {
        body: { name: 'counted', url: `${receiver.url}/hook`, event_types: ['agent.session.turn.completed'] },
      });
      expect(created.status, created.text).toBe(200);
      const before = await scrape();
      const outcome = (families: Scraped, name: string) =>
        sample(families, 'agentry_webhook_deliveries_total', { outcome: name });
      const { message } = await flow.turn(await flow.createAgent(), 'hooked');
      expect(message.status).toBe('completed');
      const after = await waitUntil(
        async () => {
          const families = await scrape();
          return outcome(families, 'delivered') > outcome(before, 'delivered') ? families : null;
        },
        { what: 'the delivery counted' },
      );
      expect(outcome(after, 'retry') - outcome(before, 'retry')).toBe(1);
      expect(sample(after, 'agentry_webhook_attempt_duration_seconds', {})).toBeGreaterThanOrEqual(2);
      expect(sample(after, 'agentry_webhook_backlog', {})).toBe(0);
    } finally {
      await dispatcher.stop(1000);
      await receiver.close();
    }
  });

  it('counts open SSE streams', async () => {
    const agentId = await flow.createAgent();
    const sessionId = await flow.createSession(agentId);
    const controller = new AbortController();
    const stream = await fetch(`${base}/v1/sessions/${sessionId}/stream`, {
      headers: { authorization: `Bearer ${h.key}` },
      signal: controller.signal,
    });
    expect(stream.status).toBe(200);
    const open = (families: Scraped) => sample(families, 'agentry_sse_streams_active', { surface: 'sessions' });
    expect(open(await scrape())).toBe(1);
    controller.abort();
    await waitUntil(async () => (open(await scrape()) === 0 ? true : null), { what: 'the stream counted closed' });
  });

  it('is not served when metrics are off', async () => {
    const off = await createHarness(dialect);
    try {
      expect((await off.request('GET', '/metrics', { key: null })).status).toBe(404);
    } finally {
      await off.close();
    }
  });
});

describe('turn log lines', () => {
  it('carry the run id and trace id', async () => {
    const lines: Json[] = [];
    const destination = new Writable({
      write(chunk: Buffer, _encoding, done) {
        for (const line of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(line));
        done();
      },
    });
    const environment = testEnvironment('sqlite');
    const mcp = await startModernMcpServer({ name: 'flaky' });
    const config = loadConfig({
      ...environment.env,
      LOG_LEVEL: 'info',
      AGENTRY_LOG_FORMAT: 'json',
      AGENTRY_POLL_MS: '200',
      AGENTRY_BOOTSTRAP_KEY: testKey(),
      AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true',
      AGENTRY_MCP_TOOLS_TTL_MS: '1000',
    });
    const deps = await buildDeps(config, createLogger(config, destination));
    await bootstrap(deps.orgs, config.bootstrapKey);
    const { app } = await buildApp(deps);
    const engine = buildEngine(deps);
    engine.start();
    const key = config.bootstrapKey ?? '';
    const call = async (method: string, url: string, body?: unknown) => {
      const response = await app.inject({
        method: method as 'GET',
        url,
        headers: { authorization: `Bearer ${key}`, 'idempotency-key': hex(8) },
        ...(body === undefined ? {} : { payload: body as Record<string, unknown> }),
      });
      return JSON.parse(response.body) as Json;
    };
    try {
      const agent = await call('POST', '/v1/agents', {
        name: 'logged',
        mcpServers: [{ type: 'url', name: 'flaky', url: mcp.url }],
      });
      // The server goes away and its cached tool list expires: the turn logs that it cannot reach it.
      await mcp.close();
      await new Promise((resolve) => setTimeout(resolve, 1200));
      const session = await call('POST', '/v1/sessions', { agentId: agent.agent.id });
      const accepted = await call('POST', `/v1/sessions/${session.session.id}/messages`, {
        parts: [{ type: 'text', text: 'hello' }],
      });
      const message = await waitUntil(
        async () => {
          const got = await call('GET', `/v1/sessions/${session.session.id}/messages/${accepted.id}`);
          return ['completed', 'failed'].includes(got.message.status) ? got.message : null;
        },
        { what: 'the turn to end' },
      );
      const ofTurn = lines.filter((line) => line.runId === message.runId);
      expect(ofTurn.length).toBeGreaterThan(0);
      // Written by the MCP client layer, not the engine: the run and trace still come along.
      expect(ofTurn.some((line) => line.err?.type === 'McpError')).toBe(true);
      for (const line of ofTurn) expect(line.traceId).toMatch(/^[0-9a-f]{32}$/);
      // Every warning or error written while the turn ran names it.
      const warnings = lines.filter((line) => line.level >= 40 && line.reqId === undefined);
      expect(warnings.length).toBeGreaterThan(0);
      for (const line of warnings) expect(line.runId, JSON.stringify(line)).toBe(message.runId);
      // Lines outside turns (requests) carry neither.
      expect(lines.some((line) => line.reqId !== undefined && line.runId === undefined)).toBe(true);
    } finally {
      await engine.stop(5000);
      await app.close();
      await deps.close();
      await deps.storage.close();
      await environment.cleanup();
    }
  });
});

describe.each(dialects())('a traced turn across kill -9 (%s)', (dialect: DialectName) => {
  it(
    'is finished by the next process under the original request span, and counted as a takeover',
    async () => {
      const otlp = await startReceiver();
      const environment = testEnvironment(dialect);
      const key = testKey();
      const env = {
        ...environment.env,
        AGENTRY_BOOTSTRAP_KEY: key,
        // A lease of an hour: the second process takes the turn over through the process registry, once, and no
        // lease can lapse on a busy machine (a lapse would be counted as another takeover).
        AGENTRY_LEASE_MS: '3600000',
        AGENTRY_POLL_MS: '200',
        LOG_LEVEL: 'warn',
        OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_BSP_SCHEDULE_DELAY: '50',
        AGENTRY_METRICS: 'true',
      };
      let server: ServerProcess | null = null;
      try {
        server = await startServerProcess(env);
        const first = server;
        const api = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
          const response = await fetch(`${(server ?? first).url}${path}`, {
            method,
            headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
            ...(body === undefined ? {} : { body: JSON.stringify(body) }),
          });
          return { status: response.status, body: (await response.json()) as Json };
        };
        const agent = await api('POST', '/v1/agents', { name: 'durable' });
        const session = await api('POST', '/v1/sessions', { agentId: agent.body.agent.id });
        const traceId = hex(16);
        const callerSpan = hex(8);
        const accepted = await api(
          'POST',
          `/v1/sessions/${session.body.session.id}/messages`,
          { parts: [{ type: 'text', text: 'sleep 3000\nsurvived' }] },
          { 'idempotency-key': hex(8), traceparent: `00-${traceId}-${callerSpan}-01` },
        );
        expect(accepted.status).toBe(202);
        const messagePath = `/v1/sessions/${session.body.session.id}/messages/${accepted.body.id}`;
        await waitUntil(async () => ((await api('GET', messagePath)).body.message.status === 'running' ? true : null), {
          what: 'the turn running',
        });
        // The request span was exported before the crash; the turn's spans cannot have been.
        const request = await waitUntil(
          async () => spansOf(otlp).find((span) => span.traceId === traceId && span.kind === 2),
          { what: 'the request span exported' },
        );
        expect(request.parentSpanId).toBe(callerSpan);
        first.child.kill('SIGKILL');
        await first.stop();
        server = await startServerProcess(env);
        const message = await waitUntil(
          async () => {
            const got = (await api('GET', messagePath)).body.message;
            return got.status === 'completed' ? got : null;
          },
          { what: 'the turn finished by the second process' },
        );
        const invoke = await waitUntil(
          async () =>
            spansOf(otlp).find(
              (span) => span.attrs['agentry.run.id'] === message.runId && span.name.startsWith('invoke_agent'),
            ),
          { what: 'the invoke_agent span' },
        );
        expect(invoke.traceId).toBe(traceId);
        expect(invoke.parentSpanId).toBe(request.spanId);
        // Started by the first process, before the second one existed: the span keeps that time.
        expect(Number(BigInt(invoke.startTimeUnixNano) / 1_000_000n)).toBe(Date.parse(message.startedAt));
        expect(Number(BigInt(invoke.endTimeUnixNano) / 1_000_000n)).toBe(Date.parse(message.completedAt));
        const metrics = await fetch(`${server.url}/metrics`).then((response) => response.text());
        expect(metrics).toMatch(/^agentry_lease_takeovers_total 1$/m);
      } finally {
        await server?.stop();
        await otlp.close();
        await environment.cleanup();
      }
    },
    startsTimeout(2),
  );
});
