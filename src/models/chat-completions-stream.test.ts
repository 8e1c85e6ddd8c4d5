import { describe, expect, it } from 'vitest';
import { type ChatStreamOptions, ChatStreamReader } from './chat-completions-stream.ts';
import { ModelError, type ModelEvent, type ToolCall } from './types.ts';

const TOOLS = new Set(['get_weather', 'get_time']);

function reader(overrides: Partial<ChatStreamOptions> = {}) {
  return new ChatStreamReader({
    label: 'stub',
    isKnownTool: (name) => TOOLS.has(name),
    toolChoice: undefined,
    ...overrides,
  });
}

const chunk = (delta: unknown, finish: string | null = null) =>
  JSON.stringify({ choices: [{ index: 0, delta, finish_reason: finish }] });

/** Reads `chunks` as one stream; returns its events and the error it ends with (if any). */
function read(chunks: string[], options: Partial<ChatStreamOptions> = {}) {
  const stream = reader(options);
  const events: ModelEvent[] = [];
  try {
    for (const data of chunks) stream.chunk(data, events);
    const end = stream.end();
    events.push(...end.events);
    return { events, error: end.error };
  } catch (error) {
    return { events, error };
  }
}

const calls = (events: ModelEvent[]): ToolCall[] => events.flatMap((e) => (e.type === 'tool-call' ? [e.call] : []));

describe('ChatStreamReader', () => {
  it('emits text, refusals and text parts, skipping empty text and reasoning', () => {
    const { events, error } = read([
      chunk({ role: 'assistant', content: '' }),
      chunk({ content: 'a' }),
      chunk({ reasoning_content: 'thinking' }),
      chunk({
        content: [
          { type: 'text', text: 'b' },
          { type: 'thinking', thinking: [] },
          { type: 'text', text: '' },
        ],
      }),
      chunk({ refusal: 'c' }),
      chunk({}, 'stop'),
    ]);
    expect(error).toBeNull();
    expect(events).toEqual([
      { type: 'text-delta', text: 'a' },
      { type: 'text-delta', text: 'b' },
      { type: 'text-delta', text: 'c' },
      { type: 'finish', usage: { inputTokens: 0, outputTokens: 0 } },
    ]);
  });

  it('takes the usage of the last usage chunk, null counts as zero', () => {
    const { events } = read([
      chunk({ content: 'a' }, 'stop'),
      JSON.stringify({ choices: [], usage: { prompt_tokens: 1, completion_tokens: 1 } }),
      JSON.stringify({ choices: [], usage: { prompt_tokens: null, completion_tokens: 4 } }),
    ]);
    expect(events.at(-1)).toEqual({ type: 'finish', usage: { inputTokens: 0, outputTokens: 4 } });
  });

  it('takes the cached input tokens of prompt_tokens_details, and refuses a malformed one', () => {
    const usage = { prompt_tokens: 10, completion_tokens: 2, prompt_tokens_details: { cached_tokens: 6 } };
    const { events } = read([chunk({ content: 'a' }, 'stop'), JSON.stringify({ choices: [], usage })]);
    expect(events.at(-1)).toEqual({
      type: 'finish',
      usage: { inputTokens: 10, cachedInputTokens: 6, outputTokens: 2 },
    });
    const nulls = { prompt_tokens: 10, completion_tokens: 2, prompt_tokens_details: { cached_tokens: null } };
    const plain = read([chunk({ content: 'a' }, 'stop'), JSON.stringify({ choices: [], usage: nulls })]);
    expect(plain.events.at(-1)).toEqual({ type: 'finish', usage: { inputTokens: 10, outputTokens: 2 } });
    const bad = { prompt_tokens: 10, completion_tokens: 2, prompt_tokens_details: { cached_tokens: 'six' } };
    expect(read([JSON.stringify({ choices: [], usage: bad })]).error).not.toBeNull();
  });

  it('assembles calls by index, in index order, normalizing their arguments', () => {
    const { events } = read([
      chunk({ tool_calls: [{ index: 1, id: 'b', type: 'function', function: { name: 'get_time', arguments: '' } }] }),
      chunk({
        tool_calls: [{ index: 0, id: 'a', type: 'function', function: { name: 'get_weather', arguments: '{ ' } }],
      }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: '"city": "Paris" }' } }] }),
      chunk({ tool_calls: [{ index: 2, id: 'c', function: { name: 'unknown_tool', arguments: '' } }] }),
      chunk({ tool_calls: [{ index: 3, id: 'd', function: { name: 'get_time', arguments: '{"tz":' } }] }),
      chunk({}, 'tool_calls'),
    ]);
    expect(calls(events)).toEqual([
      { callId: 'a', name: 'get_weather', arguments: '{"city":"Paris"}' },
      { callId: 'b', name: 'get_time', arguments: '{}' },
      { callId: 'c', name: 'unknown_tool', arguments: '' },
      { callId: 'd', name: 'get_time', arguments: '{"tz":' },
    ]);
  });

  it('tells calls apart by id where providers reuse or omit the index, and names them late', () => {
    const { events } = read([
      chunk({ tool_calls: [{ index: 0, id: 'a', function: { name: 'get_time', arguments: '{"a":1}' } }] }),
      chunk({ tool_calls: [{ index: 0, id: 'b', function: { name: 'get_weather', arguments: '{"b":2}' } }] }),
      chunk({ tool_calls: [{ id: 'c', function: { name: 'get_time', arguments: '{"c":' } }] }),
      chunk({ tool_calls: [{ function: { arguments: '3}' } }] }),
      chunk({ tool_calls: [{ index: 5, id: 'd', function: { arguments: '{"d"' } }] }),
      chunk({ tool_calls: [{ index: 5, function: { name: 'get_weather', arguments: ':4}' } }] }),
      chunk({}, 'tool_calls'),
    ]);
    // Not every call has an index, so they come in the order they started.
    expect(calls(events)).toEqual([
      { callId: 'a', name: 'get_time', arguments: '{"a":1}' },
      { callId: 'b', name: 'get_weather', arguments: '{"b":2}' },
      { callId: 'c', name: 'get_time', arguments: '{"c":3}' },
      { callId: 'd', name: 'get_weather', arguments: '{"d":4}' },
    ]);
  });

  it('starts a new call at the same index when a named fragment follows a complete one', () => {
    const { events } = read([
      chunk({ tool_calls: [{ index: 0, function: { name: 'get_time', arguments: '{}' } }] }),
      chunk({ tool_calls: [{ index: 0, function: { name: 'get_time', arguments: '{"x":1}' } }] }),
      chunk({}, 'tool_calls'),
    ]);
    expect(calls(events).map((call) => call.arguments)).toEqual(['{}', '{"x":1}']);
  });

  it('generates unique ids for calls without one or with a repeated one', () => {
    const { events } = read([
      chunk({ tool_calls: [{ index: 0, id: 'same', function: { name: 'get_time', arguments: '{}' } }] }),
      chunk({ tool_calls: [{ index: 1, id: 'same', function: { name: 'get_time', arguments: '{}' } }] }),
      chunk({ tool_calls: [{ index: 2, id: ' ', function: { name: 'get_time', arguments: '{}' } }] }),
      chunk({}, 'tool_calls'),
    ]);
    const ids = calls(events).map((call) => call.callId);
    expect(ids[0]).toBe('same');
    expect(ids[1]).toMatch(/^[A-Za-z0-9]{16}$/);
    expect(ids[2]).toMatch(/^[A-Za-z0-9]{16}$/);
    expect(new Set(ids).size).toBe(3);
  });

  it('fails on a call that never gets a name, and on a stream without a finish reason (after its calls)', () => {
    expect(
      read([chunk({ tool_calls: [{ index: 0, id: 'a', function: { arguments: '{}' } }] }), chunk({}, 'stop')]).error,
    ).toMatchObject({ code: 'model_error', message: expect.stringContaining('no function name') });
    const unfinished = read([
      chunk({ content: 'a' }),
      chunk({ tool_calls: [{ index: 0, id: 'a', function: { name: 'get_time', arguments: '{}' } }] }),
    ]);
    expect(calls(unfinished.events)).toHaveLength(1);
    expect(unfinished.events.some((e) => e.type === 'finish')).toBe(false);
    expect(unfinished.error).toMatchObject({ code: 'model_error', message: expect.stringContaining('finish reason') });
  });

  it('maps error chunks like HTTP statuses when they carry one, else to model_error', () => {
    expect(read([JSON.stringify({ error: { message: 'slow down', code: '429' } })]).error).toMatchObject({
      code: 'model_rate_limited',
      retriable: true,
      status: 429,
    });
    expect(read([JSON.stringify({ error: { message: 'Overloaded' } })]).error).toMatchObject({
      code: 'model_unavailable',
      retriable: true,
    });
    expect(read([JSON.stringify({ error: { message: 'boom', code: 'weird' } })]).error).toMatchObject({
      code: 'model_error',
      retriable: false,
      message: 'stub: boom',
    });
    expect(read([JSON.stringify({ error: 'plain' })]).error).toMatchObject({ code: 'model_error' });
  });

  it('fails on chunks that are not JSON or not chunks', () => {
    for (const data of ['{nope', '[]', '{"id":"x"}', chunk({ content: 5 }), chunk({ tool_calls: [{ index: 'a' }] })]) {
      const { error } = read([data]);
      expect(error, data).toBeInstanceOf(ModelError);
      expect(error, data).toMatchObject({ code: 'model_error', retriable: false });
    }
  });

  it('enforces a tool choice other than auto as the AI SDK did', () => {
    const toolCall = chunk({ tool_calls: [{ index: 0, id: 'a', function: { name: 'get_time', arguments: '{}' } }] });
    const text = chunk({ content: 'no tools' });
    expect(read([toolCall, chunk({}, 'tool_calls')], { toolChoice: 'none' })).toMatchObject({
      events: [],
      error: { code: 'model_error', message: expect.stringContaining('tool choice was none') },
    });
    expect(read([text, chunk({}, 'stop')], { toolChoice: 'required' }).error).toMatchObject({
      message: expect.stringContaining('tool choice was required'),
    });
    const wrong = read([toolCall, chunk({}, 'tool_calls')], { toolChoice: { name: 'get_weather' } });
    expect(calls(wrong.events)).toHaveLength(1);
    expect(wrong.error).toMatchObject({ message: expect.stringContaining("required tool 'get_weather'") });
    expect(read([toolCall, chunk({}, 'tool_calls')], { toolChoice: { name: 'get_time' } }).error).toBeNull();
    expect(read([text, chunk({}, 'stop')], { toolChoice: 'auto' }).error).toBeNull();
  });
});
