/**
 * What a local OpenAI-compatible server answers `POST /chat/completions` with, for the tests that play one: stream
 * chunks, the usage chunk, SSE bodies, error statuses.
 */
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export type Responder = (response: ServerResponse) => void | Promise<void>;

export const chunk = (delta: Record<string, unknown>, finishReason: string | null = null) => ({
  id: 'chatcmpl-stub',
  object: 'chat.completion.chunk',
  created: 1_700_000_000,
  model: 'test-model',
  choices: [{ index: 0, delta, finish_reason: finishReason }],
});

/** The usage chunk; `cached` (of `prompt`) adds `prompt_tokens_details.cached_tokens`, as OpenAI reports it. */
export const usageChunk = (prompt: number, completion: number, cached?: number) => ({
  id: 'chatcmpl-stub',
  object: 'chat.completion.chunk',
  created: 1_700_000_000,
  model: 'test-model',
  choices: [],
  usage: {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
    ...(cached === undefined ? {} : { prompt_tokens_details: { cached_tokens: cached } }),
  },
});

/** An SSE body of `chunks`, with `[DONE]` unless told otherwise. */
export function sseText(chunks: unknown[], { done = true, newline = '\n' } = {}): string {
  const events = chunks.map((data) => `data: ${JSON.stringify(data)}${newline}${newline}`);
  return events.join('') + (done ? `data: [DONE]${newline}${newline}` : '');
}

/** Streams `chunks`; `end: false` leaves the response open (a provider that stalls). */
export function sse(chunks: unknown[], options: { done?: boolean; end?: boolean } = {}): Responder {
  return (response) => {
    response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    response.write(sseText(chunks, options));
    if (options.end ?? true) response.end();
  };
}

/** An error status with an OpenAI-style error body. */
export function status(code: number, headers: Record<string, string> = {}): Responder {
  return (response) => {
    response.writeHead(code, { 'content-type': 'application/json', ...headers });
    response.end(JSON.stringify({ error: { message: `stub says ${code}`, type: 'stub_error', code: String(code) } }));
  };
}

/** A streamed text answer in `parts`, then `stop` and the usage chunk. */
export const textReply = (parts: string[], usage = usageChunk(12, 5)) =>
  sse([
    chunk({ role: 'assistant', content: '' }),
    ...parts.map((content) => chunk({ content })),
    chunk({}, 'stop'),
    usage,
  ]);

/** The tokens a request counts as on a stub with a small window: the characters of its messages and tools / 4. */
export function stubTokens(body: { messages?: unknown; tools?: unknown }, charsPerToken = 4): number {
  const characters = JSON.stringify(body.messages ?? []).length + JSON.stringify(body.tools ?? []).length;
  return Math.ceil(characters / charsPerToken);
}

/** OpenAI's answer to a request longer than the model's context window, word for word (HTTP 400). */
export function contextLengthExceeded(window: number, tokens: number): Responder {
  return (response) => {
    response.writeHead(400, { 'content-type': 'application/json' });
    response.end(
      JSON.stringify({
        error: {
          message: `This model's maximum context length is ${window} tokens. However, your messages resulted in ${tokens} tokens. Please reduce the length of the messages.`,
          type: 'invalid_request_error',
          param: 'messages',
          code: 'context_length_exceeded',
        },
      }),
    );
  };
}

/**
 * A model with a context window of `window` tokens (counted as `stubTokens`, `charsPerToken` characters a token):
 * a request longer than that gets OpenAI's context_length_exceeded refusal (counted in `refused`), any other the
 * answer of `reply`.
 */
export function windowed(window: number, reply: (body: Record<string, unknown>) => Responder, charsPerToken = 4) {
  const answer = (body: Record<string, unknown>): Responder => {
    const tokens = stubTokens(body, charsPerToken);
    if (tokens <= window) return reply(body);
    answer.refused += 1;
    return contextLengthExceeded(window, tokens);
  };
  answer.refused = 0;
  return answer;
}

/** A local OpenAI-compatible server: the bodies it was sent, and its answers in turn (a text reply "{}" when none). */
export interface Stub {
  server: Server;
  /** Its base URL, for AGENTRY_PROVIDERS. */
  url: string;
  bodies: Record<string, unknown>[];
  responders: Responder[];
  close(): Promise<void>;
}

/** `answer`, when given, answers every request from its body (in place of `responders`). */
export async function startStub(answer?: (body: Record<string, unknown>) => Responder): Promise<Stub> {
  const server = createServer();
  const stub: Stub = {
    server,
    url: '',
    bodies: [],
    responders: [],
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
  server.on('request', (request, response) => {
    let text = '';
    request.setEncoding('utf8');
    request.on('data', (data: string) => {
      text += data;
    });
    request.on('end', () => {
      stub.bodies.push(JSON.parse(text));
      void (answer?.(stub.bodies.at(-1) ?? {}) ?? stub.responders.shift() ?? textReply(['{}']))(response);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  stub.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  return stub;
}
