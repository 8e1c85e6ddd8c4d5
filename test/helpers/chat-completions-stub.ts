/**
 * What a local OpenAI-compatible server answers `POST /chat/completions` with, for the tests that play one: stream
 * chunks, the usage chunk, SSE bodies, error statuses.
 */
import type { ServerResponse } from 'node:http';

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
