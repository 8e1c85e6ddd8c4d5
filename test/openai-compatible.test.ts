/**
 * The OpenAI-compatible adapter (the direct chat-completions client) against a local OpenAI-compatible server
 * (`POST /v1/chat/completions`, SSE), driven through the model registry exactly as AGENTRY_PROVIDERS configures it.
 * The stub is the paid edge we fake; everything of ours (registry, adapter, retry policy, conversion) is real. The
 * client's finer points (split bytes, timeouts, connections, the exact body) are in chat-completions.test.ts.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createModelRegistry } from '../src/models/registry.ts';
import { type ContextMessage, ModelError, type ModelEvent, type ModelRequest } from '../src/models/types.ts';
import { chunk, type Responder, sse, status, textReply, usageChunk } from './helpers/chat-completions-stub.ts';
import { cityParameters, weatherFunction } from './helpers/fixtures.ts';

interface Received {
  body: Record<string, unknown>;
  closed: Promise<void>;
  /** The client's port: the same for calls on one kept-alive connection. */
  clientPort: number | undefined;
}

let server: Server;
let baseURL: string;
let responders: Responder[] = [];
let received: Received[] = [];

beforeAll(async () => {
  server = createServer((request, response) => {
    if (request.method !== 'POST' || request.url !== '/v1/chat/completions') {
      response.writeHead(404).end();
      return;
    }
    let text = '';
    request.setEncoding('utf8');
    request.on('data', (data: string) => {
      text += data;
    });
    request.on('end', () => {
      const closed = new Promise<void>((resolve) => response.on('close', () => resolve()));
      received.push({ body: JSON.parse(text), closed, clientPort: request.socket.remotePort });
      const responder = responders.length > 1 ? responders.shift() : responders[0];
      void (responder ?? status(500))(response);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

beforeEach(() => {
  responders = [];
  received = [];
});

/** The registry as configured by AGENTRY_PROVIDERS; retry delays shortened so the 5xx case stays fast. */
const adapter = () =>
  createModelRegistry(
    { providers: { stub: { baseURL } }, openaiApiKey: null, anthropicApiKey: null },
    { retry: { baseDelayMs: 5, maxDelayMs: 50 } },
  ).adapter('stub/test-model');

const hello: ContextMessage[] = [{ role: 'user', content: [{ type: 'text', text: 'Hello' }] }];

function request(overrides: Partial<ModelRequest> = {}): ModelRequest {
  return {
    model: 'stub/test-model',
    instructions: '',
    context: hello,
    tools: [],
    signal: new AbortController().signal,
    ...overrides,
  };
}

async function collect(overrides: Partial<ModelRequest> = {}): Promise<ModelEvent[]> {
  const events: ModelEvent[] = [];
  for await (const event of adapter().stream(request(overrides))) events.push(event);
  return events;
}

async function failure(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected a rejection');
}

const deltas = (events: ModelEvent[]) => events.flatMap((e) => (e.type === 'text-delta' ? [e.text] : []));

describe('OpenAI-compatible provider through the model registry', () => {
  it('streams a text reply in several deltas and reports usage', async () => {
    responders = [textReply(['Hel', 'lo ', 'world'])];
    const events = await collect();
    expect(deltas(events)).toEqual(['Hel', 'lo ', 'world']);
    expect(events.at(-1)).toEqual({ type: 'finish', usage: { inputTokens: 12, outputTokens: 5 } });
    expect(events.filter((e) => e.type === 'finish')).toHaveLength(1);
    expect(received).toHaveLength(1);
    expect(received[0]?.body).toMatchObject({
      model: 'test-model',
      stream: true,
      stream_options: { include_usage: true },
    });
  });

  it("shares one provider's connections between its models", async () => {
    const registry = createModelRegistry(
      { providers: { stub: { baseURL } }, openaiApiKey: null, anthropicApiKey: null },
      {},
    );
    responders = [textReply(['hi'])];
    const models = ['stub/model-a', 'stub/model-b', 'stub/model-a', 'stub/model-b'];
    for (const model of models) {
      for await (const _event of registry.adapter(model).stream(request({ model }))) {
        // Read to the end: the connection goes back to the pool.
      }
      // Time for the connection to be released before the next call asks for one.
      await delay(20);
    }
    expect(received.map((call) => call.body.model)).toEqual(['model-a', 'model-b', 'model-a', 'model-b']);
    // One kept-alive connection for both models (a pool per model would hold two).
    expect(new Set(received.map((call) => call.clientPort)).size).toBe(1);
  });

  it('reports zero usage when the server sends none', async () => {
    responders = [sse([chunk({ role: 'assistant', content: 'Hi' }), chunk({}, 'stop')])];
    const events = await collect();
    expect(events.at(-1)).toEqual({ type: 'finish', usage: { inputTokens: 0, outputTokens: 0 } });
  });

  it('assembles parallel tool calls streamed in pieces into complete calls with JSON-text arguments', async () => {
    responders = [
      sse([
        chunk({
          role: 'assistant',
          tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'get_weather', arguments: '' } }],
        }),
        chunk({ tool_calls: [{ index: 0, function: { arguments: '{"city":' } }] }),
        chunk({ tool_calls: [{ index: 0, function: { arguments: '"Paris"}' } }] }),
        chunk({
          tool_calls: [
            { index: 1, id: 'call_b', type: 'function', function: { name: 'get_time', arguments: '{"tz"' } },
          ],
        }),
        chunk({ tool_calls: [{ index: 1, function: { arguments: ':"CET"}' } }] }),
        chunk({}, 'tool_calls'),
        usageChunk(30, 20),
      ]),
    ];
    const tools = [
      weatherFunction({ description: 'Weather for a city', strict: false, closed: false }),
      {
        name: 'get_time',
        description: 'Time in a zone',
        parameters: { type: 'object', properties: {} },
        strict: false,
      },
    ];
    const events = await collect({ tools });
    const calls = events.flatMap((e) => (e.type === 'tool-call' ? [e.call] : []));
    expect(calls).toEqual([
      { callId: 'call_a', name: 'get_weather', arguments: '{"city":"Paris"}' },
      { callId: 'call_b', name: 'get_time', arguments: '{"tz":"CET"}' },
    ]);
    expect(events.at(-1)).toEqual({ type: 'finish', usage: { inputTokens: 30, outputTokens: 20 } });
  });

  it('sends tools as function definitions and converts a multi-step context, with settings', async () => {
    responders = [
      sse([
        chunk({
          role: 'assistant',
          tool_calls: [
            { index: 0, id: 'call_3', type: 'function', function: { name: 'get_weather', arguments: '{}' } },
          ],
        }),
        chunk({}, 'tool_calls'),
      ]),
    ];
    const context: ContextMessage[] = [
      { role: 'user', content: [{ type: 'text', text: 'Weather in Paris and Rome?' }] },
      {
        role: 'assistant',
        text: 'Let me check.',
        toolCalls: [
          { callId: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' },
          { callId: 'call_2', name: 'get_weather', arguments: '{"city":"Rome"}' },
        ],
      },
      {
        role: 'tool',
        results: [
          { callId: 'call_1', name: 'get_weather', output: 'sunny' },
          { callId: 'call_2', name: 'get_weather', output: 'no such city', isError: true },
        ],
      },
    ];
    const parameters = cityParameters({ closed: false });
    await collect({
      instructions: 'You are a weather bot.',
      context,
      tools: [weatherFunction({ description: 'Weather for a city', strict: false, closed: false })],
      settings: { temperature: 0.2, topP: 0.9, maxOutputTokens: 256, toolChoice: { name: 'get_weather' } },
    });
    const body = received[0]?.body;
    expect(body?.tools).toEqual([
      {
        type: 'function',
        function: { name: 'get_weather', description: 'Weather for a city', parameters, strict: false },
      },
    ]);
    expect(body).toMatchObject({
      temperature: 0.2,
      top_p: 0.9,
      max_tokens: 256,
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
    });
    expect(body?.messages).toEqual([
      { role: 'system', content: 'You are a weather bot.' },
      { role: 'user', content: 'Weather in Paris and Rome?' },
      {
        role: 'assistant',
        content: 'Let me check.',
        tool_calls: [
          { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
          { id: 'call_2', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Rome"}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'call_1', content: 'sunny' },
      { role: 'tool', tool_call_id: 'call_2', content: 'no such city' },
    ]);
  });

  it('retries a 429 with Retry-After: 0 once and streams one clean reply', async () => {
    responders = [status(429, { 'retry-after': '0' }), textReply(['Only ', 'once'])];
    const events = await collect();
    expect(received).toHaveLength(2);
    expect(deltas(events)).toEqual(['Only ', 'once']);
    expect(events.filter((e) => e.type === 'finish')).toHaveLength(1);
  });

  it('gives up on a persistent 500 after four attempts with model_unavailable', async () => {
    responders = [status(500)];
    const error = await failure(collect());
    expect(error).toBeInstanceOf(ModelError);
    expect(error).toMatchObject({ code: 'model_unavailable', status: 500, retriable: true });
    expect(received).toHaveLength(4);
  });

  it('fails a 401 with model_auth_failed without retrying', async () => {
    responders = [status(401)];
    const error = await failure(collect());
    expect(error).toBeInstanceOf(ModelError);
    expect(error).toMatchObject({ code: 'model_auth_failed', status: 401, retriable: false });
    expect(received).toHaveLength(1);
  });

  it('fails a 400 with model_bad_request without retrying', async () => {
    responders = [status(400)];
    await expect(collect()).rejects.toMatchObject({ code: 'model_bad_request', status: 400 });
    expect(received).toHaveLength(1);
  });

  it('rejects promptly with the abort reason when aborted mid-stream, and drops the connection', async () => {
    // One delta, then the server holds the stream open.
    responders = [sse([chunk({ role: 'assistant', content: 'partial' })], { done: false, end: false })];
    const controller = new AbortController();
    const reason = new Error('interrupted by user');
    const events: ModelEvent[] = [];
    let abortedAt = 0;
    const error = await failure(
      (async () => {
        for await (const event of adapter().stream(request({ signal: controller.signal }))) {
          events.push(event);
          abortedAt = performance.now();
          controller.abort(reason);
        }
      })(),
    );
    expect(error).toBe(reason);
    // The stream stays open: only the abort ends it, well before the 120 s idle timeout (room for a busy machine).
    expect(performance.now() - abortedAt).toBeLessThan(30_000);
    expect(deltas(events)).toEqual(['partial']);
    await received[0]?.closed;
  });

  it('times out a call that sends nothing with model_timeout, retried like other transient failures', async () => {
    responders = [
      (response) => {
        response.writeHead(200, { 'content-type': 'text/event-stream' });
      },
    ];
    const registry = createModelRegistry(
      { providers: { stub: { baseURL } }, openaiApiKey: null, anthropicApiKey: null },
      { retry: { maxAttempts: 2, baseDelayMs: 1 }, idleTimeoutMs: 100 },
    );
    const started = performance.now();
    const events: ModelEvent[] = [];
    const error = await failure(
      (async () => {
        for await (const event of registry.adapter('stub/test-model').stream(request())) events.push(event);
      })(),
    );
    expect(error).toBeInstanceOf(ModelError);
    expect(error).toMatchObject({ code: 'model_timeout', retriable: true });
    expect(received).toHaveLength(2);
    expect(events).toEqual([]);
    // Two attempts ended by the 0.1 s idle timeout, not the default 120 s one (the bound is room for a busy machine).
    expect(performance.now() - started).toBeLessThan(30_000);
    // Each timed-out attempt hung up its connection.
    await Promise.all(received.map((entry) => entry.closed));
  });

  it('does not retry once output has been streamed', async () => {
    // A provider error after the first delta must not replay the call (the delta is already out).
    responders = [
      (response) => {
        response.writeHead(200, { 'content-type': 'text/event-stream' });
        response.write(`data: ${JSON.stringify(chunk({ role: 'assistant', content: 'half' }))}\n\n`);
        setTimeout(() => response.destroy(), 20);
      },
      textReply(['never']),
    ];
    const events: ModelEvent[] = [];
    const error = await failure(
      (async () => {
        for await (const event of adapter().stream(request())) events.push(event);
      })(),
    );
    expect(error).toBeInstanceOf(ModelError);
    expect(error).toMatchObject({ code: 'model_unavailable' });
    expect(deltas(events)).toEqual(['half']);
    expect(received).toHaveLength(1);
  });
});
