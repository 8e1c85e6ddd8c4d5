/**
 * The direct chat-completions client (`src/models/chat-completions.ts`) against a real local HTTP server playing
 * an OpenAI-compatible provider: bodies written in slices cut at awkward bytes, fragmented tool calls, error
 * statuses and retries, timeouts, aborts and connection reuse, and the exact request it sends. The server is the
 * paid edge we fake; the client, its SSE parser, the retry policy and the conversions are real.
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { ProviderConfig } from '../src/config.ts';
import { createOpenAICompatibleAdapter, providerConnections } from '../src/models/chat-completions.ts';
import type { ModelAdapterOptions } from '../src/models/retrying-stream.ts';
import { type ContextMessage, ModelError, type ModelEvent, type ModelRequest } from '../src/models/types.ts';
import { chunk, type Responder, sse, sseText, status, textReply, usageChunk } from './helpers/chat-completions-stub.ts';

interface Received {
  url: string;
  raw: string;
  body: Record<string, any>;
  headers: IncomingHttpHeaders;
  socket: Socket;
  /** Resolves when the connection the request came on is closed (not when the response ends). */
  closed: Promise<void>;
}

let server: Server;
let origin: string;
let responders: Responder[] = [];
let received: Received[] = [];
const socketClosed = new WeakMap<Socket, Promise<void>>();

beforeAll(async () => {
  server = createServer((request, response) => {
    let raw = '';
    request.setEncoding('utf8');
    request.on('data', (data: string) => {
      raw += data;
    });
    request.on('end', () => {
      const { socket } = request;
      received.push({
        url: request.url ?? '',
        raw,
        body: JSON.parse(raw),
        headers: request.headers,
        socket,
        closed: socketClosed.get(socket) ?? Promise.resolve(),
      });
      const responder = responders.length > 1 ? responders.shift() : responders[0];
      void (responder ?? status(500))(response);
    });
  });
  server.on('connection', (socket: Socket) => {
    socketClosed.set(socket, new Promise((resolve) => socket.once('close', () => resolve())));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

beforeEach(() => {
  responders = [];
  received = [];
});

/** Writes `text` in pieces cut at the given byte offsets, a few milliseconds apart so that each arrives alone. */
function slices(text: string, cutsOf: (bytes: Buffer) => number[]): Responder {
  return async (response) => {
    const bytes = Buffer.from(text, 'utf8');
    const cuts = [...new Set(cutsOf(bytes))].filter((cut) => cut > 0 && cut < bytes.length).sort((a, b) => a - b);
    response.writeHead(200, { 'content-type': 'text/event-stream' });
    let start = 0;
    for (const cut of [...cuts, bytes.length]) {
      response.write(bytes.subarray(start, cut));
      start = cut;
      await delay(5);
    }
    response.end();
  };
}

/** Records the delays the retry policy asks for and returns at once. */
function recordingSleep() {
  const delays: number[] = [];
  return {
    delays,
    sleep: async (ms: number, signal?: AbortSignal) => {
      delays.push(ms);
      signal?.throwIfAborted();
    },
  };
}

function adapter(config: Partial<ProviderConfig> = {}, options: ModelAdapterOptions = {}) {
  return createOpenAICompatibleAdapter(
    'stub',
    'test-model',
    { baseURL: `${origin}/v1`, ...config },
    providerConnections(),
    { retry: { baseDelayMs: 5, maxDelayMs: 50 }, ...options },
  );
}

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

async function collect(
  overrides: Partial<ModelRequest> = {},
  using = adapter(),
): Promise<{ events: ModelEvent[]; error: unknown }> {
  const events: ModelEvent[] = [];
  try {
    for await (const event of using.stream(request(overrides))) events.push(event);
    return { events, error: null };
  } catch (error) {
    return { events, error };
  }
}

const deltas = (events: ModelEvent[]) => events.flatMap((e) => (e.type === 'text-delta' ? [e.text] : []));
const finishes = (events: ModelEvent[]) => events.filter((e) => e.type === 'finish');

describe('chat-completions client: streamed replies', () => {
  it('streams text cut at awkward byte boundaries: CRLF split, multi-byte characters split, split field names', async () => {
    const text = sseText(
      [
        chunk({ role: 'assistant', content: '' }),
        chunk({ content: 'Grüß' }),
        chunk({ content: ' 🎉 ' }),
        chunk({ content: 'dich' }),
        chunk({}, 'stop'),
        usageChunk(7, 3),
      ],
      { newline: '\r\n' },
    );
    responders = [
      slices(text, (bytes) => [
        bytes.indexOf('ü') + 1, // between the two bytes of ü
        bytes.indexOf('🎉') + 1,
        bytes.indexOf('🎉') + 3, // inside the four bytes of the emoji, twice
        bytes.indexOf('\r\n') + 1, // between CR and LF
        bytes.indexOf('data:', 10) + 2, // inside a field name
        bytes.indexOf('"content":"dich"') + 5,
      ]),
    ];
    const { events, error } = await collect();
    expect(error).toBeNull();
    expect(deltas(events)).toEqual(['Grüß', ' 🎉 ', 'dich']);
    expect(events.at(-1)).toEqual({ type: 'finish', usage: { inputTokens: 7, outputTokens: 3 } });
    expect(finishes(events)).toHaveLength(1);
  });

  it('assembles two parallel tool calls whose fragments interleave across chunks', async () => {
    const text = sseText([
      chunk({
        role: 'assistant',
        tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'get_weather', arguments: '' } }],
      }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: '{"city": ' } }] }),
      chunk({
        tool_calls: [
          { index: 1, id: 'call_b', type: 'function', function: { name: 'get_time', arguments: '{"tz"' } },
          { index: 0, function: { arguments: '"Zürich"' } },
        ],
      }),
      chunk({ tool_calls: [{ index: 1, function: { arguments: ': "CET"}' } }] }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: '}' } }] }),
      chunk({}, 'tool_calls'),
      usageChunk(30, 20),
    ]);
    responders = [slices(text, (bytes) => [bytes.indexOf('Zürich') + 2, bytes.indexOf('CET') + 1, 300, 600])];
    const tools = [
      { name: 'get_weather', description: 'Weather', parameters: { type: 'object', properties: {} }, strict: false },
      { name: 'get_time', description: 'Time', parameters: { type: 'object', properties: {} }, strict: false },
    ];
    const { events, error } = await collect({ tools });
    expect(error).toBeNull();
    expect(events).toEqual([
      { type: 'tool-call', call: { callId: 'call_a', name: 'get_weather', arguments: '{"city":"Zürich"}' } },
      { type: 'tool-call', call: { callId: 'call_b', name: 'get_time', arguments: '{"tz":"CET"}' } },
      { type: 'finish', usage: { inputTokens: 30, outputTokens: 20 } },
    ]);
  });

  it('reports zero usage when the provider sends no usage chunk', async () => {
    responders = [sse([chunk({ role: 'assistant', content: 'Hi' }), chunk({}, 'stop')])];
    const { events } = await collect();
    expect(events).toEqual([
      { type: 'text-delta', text: 'Hi' },
      { type: 'finish', usage: { inputTokens: 0, outputTokens: 0 } },
    ]);
  });

  it('finishes when the body ends without [DONE]', async () => {
    responders = [sse([chunk({ content: 'Hi' }), chunk({}, 'stop'), usageChunk(2, 1)], { done: false })];
    const { events, error } = await collect();
    expect(error).toBeNull();
    expect(events.at(-1)).toEqual({ type: 'finish', usage: { inputTokens: 2, outputTokens: 1 } });
  });

  it('fails a stream that is not chunk JSON with model_error, without retrying', async () => {
    responders = [
      (response) => {
        response.writeHead(200, { 'content-type': 'text/event-stream' });
        response.end('data: {not json\n\n');
      },
    ];
    const { error } = await collect();
    expect(error).toBeInstanceOf(ModelError);
    expect(error).toMatchObject({ code: 'model_error', retriable: false });
    expect(received).toHaveLength(1);
  });
});

describe('chat-completions client: failures and retries', () => {
  it('retries a 429 after the Retry-After delay it names, then streams the reply once', async () => {
    const { delays, sleep } = recordingSleep();
    responders = [status(429, { 'retry-after': '3' }), textReply(['Only ', 'once'])];
    const { events, error } = await collect({}, adapter({}, { retry: { sleep } }));
    expect(error).toBeNull();
    expect(delays).toEqual([3000]);
    expect(received).toHaveLength(2);
    expect(deltas(events)).toEqual(['Only ', 'once']);
    expect(finishes(events)).toHaveLength(1);
  });

  it('retries a 500 and streams the second reply', async () => {
    responders = [status(500), textReply(['fine'])];
    const { events, error } = await collect();
    expect(error).toBeNull();
    expect(received).toHaveLength(2);
    expect(deltas(events)).toEqual(['fine']);
  });

  it('gives up on a persistent 503 after four attempts with model_unavailable', async () => {
    responders = [status(503)];
    const { error } = await collect();
    expect(error).toMatchObject({ code: 'model_unavailable', status: 503, retriable: true });
    expect(received).toHaveLength(4);
  });

  it("fails a 401 with model_auth_failed and the provider's message, without retrying", async () => {
    responders = [status(401)];
    const { error } = await collect();
    expect(error).toBeInstanceOf(ModelError);
    expect(error).toMatchObject({
      code: 'model_auth_failed',
      status: 401,
      retriable: false,
      message: 'stub returned HTTP 401: stub says 401',
    });
    expect(received).toHaveLength(1);
  });

  it('maps 400/404/422 to model_bad_request, taking the message from the error body when it has one', async () => {
    const cases = [
      [400, '{"error":{"message":"bad thing"}}', 'bad thing'],
      [404, '{"error":"model \\"x\\" not found"}', 'model "x" not found'],
      [422, '<html>unprocessable</html>', 'Unprocessable Entity'],
    ] as const;
    for (const [code, body, detail] of cases) {
      received = [];
      responders = [(response) => void response.writeHead(code, { 'content-type': 'application/json' }).end(body)];
      const { error } = await collect();
      expect(error, String(code)).toMatchObject({
        code: 'model_bad_request',
        status: code,
        message: `stub returned HTTP ${code}: ${detail}`,
      });
      expect(received).toHaveLength(1);
    }
  });

  it('does not retry once text has been streamed: an error chunk after it ends the call', async () => {
    responders = [
      async (response) => {
        response.writeHead(200, { 'content-type': 'text/event-stream' });
        response.write(`data: ${JSON.stringify(chunk({ role: 'assistant', content: 'half' }))}\n\n`);
        await delay(20);
        // Alone, this error would be retried (overloaded = 503).
        response.end(`data: ${JSON.stringify({ error: { message: 'overloaded', type: 'server_error' } })}\n\n`);
      },
      textReply(['never']),
    ];
    const { events, error } = await collect();
    expect(deltas(events)).toEqual(['half']);
    expect(error).toBeInstanceOf(ModelError);
    expect(error).toMatchObject({ code: 'model_unavailable', message: 'stub returned HTTP 503: overloaded' });
    expect(finishes(events)).toHaveLength(0);
    expect(received).toHaveLength(1);
  });

  it('delivers the text of a read before the broken chunk that follows it in the same read', async () => {
    responders = [
      (response) => {
        response.writeHead(200, { 'content-type': 'text/event-stream' });
        response.end(`data: ${JSON.stringify(chunk({ content: 'kept' }))}\n\ndata: {"error":{"message":"boom"}}\n\n`);
      },
    ];
    const { events, error } = await collect();
    expect(deltas(events)).toEqual(['kept']);
    expect(error).toMatchObject({ code: 'model_error', message: 'stub: boom' });
  });

  it('fails a refused connection with model_unavailable after retrying it', async () => {
    const closedPort = createServer();
    await new Promise<void>((resolve) => closedPort.listen(0, '127.0.0.1', resolve));
    const { port } = closedPort.address() as AddressInfo;
    await new Promise((resolve) => closedPort.close(resolve));
    const { delays, sleep } = recordingSleep();
    const { error } = await collect(
      {},
      adapter({ baseURL: `http://127.0.0.1:${port}/v1` }, { retry: { maxAttempts: 2, sleep } }),
    );
    expect(error).toBeInstanceOf(ModelError);
    expect(error).toMatchObject({ code: 'model_unavailable', retriable: true });
    expect((error as Error).message).toContain('ECONNREFUSED');
    expect(delays).toHaveLength(1);
  });

  it('fails what chat completions cannot express before sending anything', async () => {
    responders = [textReply(['unused'])];
    const zip = await collect({
      context: [
        {
          role: 'user',
          content: [{ type: 'file', mediaType: 'application/zip', filename: 'a.zip', data: new Uint8Array([1]) }],
        },
      ],
    });
    expect(zip.error).toMatchObject({ code: 'model_bad_request' });
    const unanswered = await collect({
      context: [...hello, { role: 'assistant', text: '', toolCalls: [{ callId: 'c1', name: 'f', arguments: '{}' }] }],
    });
    expect(unanswered.error).toMatchObject({
      code: 'model_error',
      message: 'stub: Tool result is missing for tool call c1.',
    });
    expect(received).toHaveLength(0);
  });
});

describe('chat-completions client: timeouts, aborts and connections', () => {
  it('times out a provider that sends nothing with a retriable model_timeout, and hangs up each attempt', async () => {
    responders = [(response) => void response.writeHead(200, { 'content-type': 'text/event-stream' }).flushHeaders()];
    const started = performance.now();
    const { events, error } = await collect(
      {},
      adapter({}, { retry: { maxAttempts: 2, baseDelayMs: 1 }, idleTimeoutMs: 100 }),
    );
    expect(error).toBeInstanceOf(ModelError);
    expect(error).toMatchObject({ code: 'model_timeout', retriable: true, message: 'stub sent nothing for 0.1 s' });
    expect(events).toEqual([]);
    expect(received).toHaveLength(2);
    // Two attempts ended by the 0.1 s idle timeout, not the default 120 s one (the bound is room for a busy machine).
    expect(performance.now() - started).toBeLessThan(30_000);
    await Promise.all(received.map((entry) => entry.closed));
  });

  it('times out a provider that never answers the request at all', async () => {
    responders = [() => undefined];
    const { error } = await collect({}, adapter({}, { retry: { maxAttempts: 1 }, idleTimeoutMs: 100 }));
    expect(error).toMatchObject({ code: 'model_timeout' });
    await received[0]?.closed;
  });

  it('does not time out while the consumer, not the provider, is slow', async () => {
    // Sent at once in three pieces: the client reads each one only after the consumer took its time.
    const text = sseText([
      chunk({ content: 'a' }),
      chunk({ content: 'b' }),
      chunk({ content: 'c' }),
      chunk({}, 'stop'),
    ]);
    responders = [slices(text, (bytes) => [bytes.indexOf('"b"'), bytes.indexOf('"c"')])];
    const slow = adapter({}, { idleTimeoutMs: 50 });
    const events: ModelEvent[] = [];
    for await (const event of slow.stream(request())) {
      events.push(event);
      await delay(120);
    }
    expect(deltas(events)).toEqual(['a', 'b', 'c']);
    expect(finishes(events)).toHaveLength(1);
  });

  it('rejects promptly with the abort reason when aborted mid-stream, and drops the connection', async () => {
    responders = [sse([chunk({ role: 'assistant', content: 'partial' })], { done: false, end: false })];
    const controller = new AbortController();
    const reason = new Error('interrupted by user');
    const events: ModelEvent[] = [];
    let abortedAt = 0;
    let error: unknown = null;
    try {
      for await (const event of adapter().stream(request({ signal: controller.signal }))) {
        events.push(event);
        abortedAt = performance.now();
        controller.abort(reason);
      }
    } catch (thrown) {
      error = thrown;
    }
    expect(error).toBe(reason);
    // The stream stays open: only the abort ends it, well before the 120 s idle timeout (room for a busy machine).
    expect(performance.now() - abortedAt).toBeLessThan(30_000);
    expect(deltas(events)).toEqual(['partial']);
    await received[0]?.closed;
  });

  it('rejects with the abort reason while waiting for the response head', async () => {
    responders = [() => undefined];
    const controller = new AbortController();
    const reason = new Error('cancelled');
    setTimeout(() => controller.abort(reason), 50);
    const { error } = await collect({ signal: controller.signal });
    expect(error).toBe(reason);
    await received[0]?.closed;
  });

  it('drops the connection when the consumer stops early', async () => {
    responders = [sse([chunk({ content: 'one' }), chunk({ content: 'two' })], { done: false, end: false })];
    for await (const event of adapter().stream(request())) {
      expect(event).toEqual({ type: 'text-delta', text: 'one' });
      break;
    }
    await received[0]?.closed;
  });

  it('keeps its connections alive across calls that end cleanly, the end of the body arriving after [DONE]', async () => {
    const reused = adapter();
    responders = [
      async (response) => {
        response.writeHead(200, { 'content-type': 'text/event-stream' });
        response.write(sseText([chunk({ content: 'again' }), chunk({}, 'stop')]));
        await delay(10);
        response.end();
      },
    ];
    for (let call = 0; call < 5; call++) expect(deltas((await collect({}, reused)).events)).toEqual(['again']);
    expect(received).toHaveLength(5);
    // undici may open a second connection while the first is being released, but never one per call.
    const sockets = new Set(received.map((entry) => entry.socket));
    expect(sockets.size).toBeLessThanOrEqual(2);
    for (const socket of sockets) expect(socket.destroyed).toBe(false);
  });
});

describe('chat-completions client: the request', () => {
  it('sends exactly the body the AI SDK sent for the same input', async () => {
    responders = [
      sse([
        chunk({
          tool_calls: [
            { index: 0, id: 'call_3', type: 'function', function: { name: 'get_weather', arguments: '{}' } },
          ],
        }),
        chunk({}, 'tool_calls'),
      ]),
    ];
    const png = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
    const { error } = await collect({
      instructions: 'You are a weather bot.',
      context: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'Weather here?' },
            { type: 'text', text: '' },
            { type: 'image', mediaType: 'image/png', data: png },
            {
              type: 'file',
              mediaType: 'application/pdf',
              filename: 'forecast.pdf',
              data: new TextEncoder().encode('%PDF-1.7'),
            },
            {
              type: 'file',
              mediaType: 'text/plain',
              filename: 'notes.txt',
              data: new TextEncoder().encode('notes: ünïcode'),
            },
          ],
        },
        {
          role: 'assistant',
          text: '',
          toolCalls: [
            { callId: 'call_1', name: 'get_weather', arguments: '{ "city": "Paris" }' },
            { callId: 'call_2', name: 'get_time', arguments: 'not json' },
          ],
        },
        {
          role: 'tool',
          results: [
            { callId: 'call_1', name: 'get_weather', output: 'sunny' },
            { callId: 'call_2', name: 'get_time', output: 'invalid arguments', isError: true },
          ],
        },
        { role: 'assistant', text: 'Sunny in Paris.', toolCalls: [] },
        { role: 'user', content: [{ type: 'text', text: 'And Rome?' }] },
      ],
      tools: [
        {
          name: 'get_weather',
          description: 'Weather for a city',
          parameters: {
            type: 'object',
            properties: { city: { type: 'string' } },
            required: ['city'],
            additionalProperties: false,
          },
          strict: true,
        },
        { name: 'get_time', description: '', parameters: { type: 'object', properties: {} }, strict: false },
      ],
      settings: { temperature: 0.2, topP: 0.9, maxOutputTokens: 256, toolChoice: { name: 'get_weather' } },
    });
    expect(error).toBeNull();
    expect(received[0]?.url).toBe('/v1/chat/completions');
    // Captured from @ai-sdk/openai-compatible 3.0.92 (streamText, includeUsage) for this very input.
    expect(received[0]?.raw).toBe(
      '{"model":"test-model","max_tokens":256,"temperature":0.2,"top_p":0.9,"messages":[{"role":"system","content":"You are a weather bot."},{"role":"user","content":[{"type":"text","text":"Weather here?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}},{"type":"file","file":{"filename":"forecast.pdf","file_data":"data:application/pdf;base64,JVBERi0xLjc="}},{"type":"text","text":"notes: ünïcode"}]},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\\"city\\":\\"Paris\\"}"}},{"id":"call_2","type":"function","function":{"name":"get_time","arguments":"{}"}}]},{"role":"tool","tool_call_id":"call_1","content":"sunny"},{"role":"tool","tool_call_id":"call_2","content":"invalid arguments"},{"role":"assistant","content":"Sunny in Paris."},{"role":"user","content":"And Rome?"}],"tools":[{"type":"function","function":{"name":"get_weather","description":"Weather for a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false},"strict":true}},{"type":"function","function":{"name":"get_time","description":"","parameters":{"type":"object","properties":{}},"strict":false}}],"tool_choice":{"type":"function","function":{"name":"get_weather"}},"stream":true,"stream_options":{"include_usage":true}}',
    );
  });

  it('sends tool_choice auto with tools, none of the tool fields without, and only the settings that are set', async () => {
    const tool = { name: 'f', description: 'd', parameters: { type: 'object', properties: {} }, strict: false };
    responders = [textReply(['x'])];
    await collect({ tools: [tool] });
    await collect({ settings: { toolChoice: 'required', temperature: 0 } });
    await collect({ tools: [tool], settings: { toolChoice: 'none' } });
    // One tool call per step, and the penalties: parallel_tool_calls only with tools (OpenAI refuses it without).
    const oneCall = { parallelToolCalls: false, presencePenalty: 0.5, frequencyPenalty: -0.5 };
    await collect({ tools: [tool], settings: oneCall });
    await collect({ settings: oneCall });
    expect(received.map((entry) => entry.raw)).toEqual([
      '{"model":"test-model","messages":[{"role":"user","content":"Hello"}],"tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object","properties":{}},"strict":false}}],"tool_choice":"auto","stream":true,"stream_options":{"include_usage":true}}',
      '{"model":"test-model","temperature":0,"messages":[{"role":"user","content":"Hello"}],"stream":true,"stream_options":{"include_usage":true}}',
      '{"model":"test-model","messages":[{"role":"user","content":"Hello"}],"tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object","properties":{}},"strict":false}}],"tool_choice":"none","stream":true,"stream_options":{"include_usage":true}}',
      '{"model":"test-model","frequency_penalty":-0.5,"presence_penalty":0.5,"messages":[{"role":"user","content":"Hello"}],"tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object","properties":{}},"strict":false}}],"tool_choice":"auto","parallel_tool_calls":false,"stream":true,"stream_options":{"include_usage":true}}',
      '{"model":"test-model","frequency_penalty":-0.5,"presence_penalty":0.5,"messages":[{"role":"user","content":"Hello"}],"stream":true,"stream_options":{"include_usage":true}}',
    ]);
  });

  it('sends a response format as response_format, where and as the AI SDK writes it', async () => {
    const schema = { type: 'object', properties: { a: { type: 'string' } }, required: ['a'] };
    responders = [textReply(['{}'])];
    await collect({
      settings: { temperature: 0 },
      responseFormat: { type: 'json_schema', name: 'reply', description: 'A reply', schema, strict: true },
    });
    await collect({ responseFormat: { type: 'json_object' } });
    expect(received.map((entry) => entry.raw)).toEqual([
      '{"model":"test-model","temperature":0,"response_format":{"type":"json_schema","json_schema":{"schema":{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]},"strict":true,"name":"reply","description":"A reply"}},"messages":[{"role":"user","content":"Hello"}],"stream":true,"stream_options":{"include_usage":true}}',
      '{"model":"test-model","response_format":{"type":"json_object"},"messages":[{"role":"user","content":"Hello"}],"stream":true,"stream_options":{"include_usage":true}}',
    ]);
  });

  it('sends Authorization only when an API key is configured, and passes the traceparent through', async () => {
    const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    responders = [textReply(['x'])];
    await collect({ headers: { traceparent } }, adapter({ apiKey: 'sk-test', baseURL: `${origin}/v1/` }));
    await collect();
    const [keyed, open] = received;
    expect(keyed?.url).toBe('/v1/chat/completions');
    expect(keyed?.headers).toMatchObject({
      authorization: 'Bearer sk-test',
      traceparent,
      'content-type': 'application/json',
      'user-agent': 'Agentry',
    });
    expect(open?.headers.authorization).toBeUndefined();
    expect(open?.headers.traceparent).toBeUndefined();
  });
});
