import { describe, expect, it } from 'vitest';
import { chunkText, createScriptedModel } from './scripted.ts';
import {
  type ContextMessage,
  ModelError,
  type ModelEvent,
  type ResponseFormat,
  type ToolCall,
  type ToolResult,
} from './types.ts';

const model = createScriptedModel({ priced: false });

const user = (text: string): ContextMessage => ({ role: 'user', content: [{ type: 'text', text }] });
const reply = (text: string, toolCalls: ToolCall[] = []): ContextMessage => ({ role: 'assistant', text, toolCalls });
const call = (name: string, args = '{}'): ToolCall => ({ callId: `call_${name}`, name, arguments: args });
const results = (...entries: Array<[name: string, output: string]>): ContextMessage => ({
  role: 'tool',
  results: entries.map(([name, output]): ToolResult => ({ callId: `call_${name}`, name, output })),
});

async function run(
  context: ContextMessage[],
  options: { instructions?: string; signal?: AbortSignal; responseFormat?: ResponseFormat } = {},
): Promise<ModelEvent[]> {
  const events: ModelEvent[] = [];
  const stream = model.stream({
    model: 'scripted',
    instructions: options.instructions ?? '',
    context,
    tools: [],
    signal: options.signal ?? new AbortController().signal,
    ...(options.responseFormat === undefined ? {} : { responseFormat: options.responseFormat }),
  });
  for await (const event of stream) events.push(event);
  return events;
}

const textOf = (events: ModelEvent[]) =>
  events.flatMap((event) => (event.type === 'text-delta' ? [event.text] : [])).join('');
const deltasOf = (events: ModelEvent[]) => events.filter((event) => event.type === 'text-delta');
const callsOf = (events: ModelEvent[]) => events.flatMap((event) => (event.type === 'tool-call' ? [event.call] : []));

function expectOneFinishLast(events: ModelEvent[]) {
  expect(events.filter((event) => event.type === 'finish')).toHaveLength(1);
  expect(events.at(-1)?.type).toBe('finish');
}

async function failure(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected a rejection');
}

describe('scripted model', () => {
  it('echoes a message without directives verbatim, streamed in several deltas', async () => {
    const text = 'Hello there,\n\n  how are you today?\n---\nstill echoed';
    const events = await run([user(text)]);
    expect(textOf(events)).toBe(text);
    expect(deltasOf(events).length).toBeGreaterThanOrEqual(2);
    expect(callsOf(events)).toEqual([]);
    expectOneFinishLast(events);
  });

  it('streams multi-word reply text in at least two deltas that concatenate exactly', async () => {
    const events = await run([user('call noop {}\n---\nThe answer is forty two')]);
    expect(callsOf(events)).toHaveLength(1);
    const second = await run([user('call noop {}\n---\nThe answer is forty two'), reply('', [call('noop')])]);
    expect(deltasOf(second).length).toBeGreaterThanOrEqual(2);
    expect(textOf(second)).toBe('The answer is forty two');
    expect(chunkText('one')).toEqual(['one']);
    const long = Array.from({ length: 500 }, (_, i) => `w${i}`).join(' ');
    expect(chunkText(long).join('')).toBe(long);
    expect(chunkText(long).length).toBeLessThanOrEqual(16);
  });

  it('plays the section after as many assistant entries as follow the newest user message', async () => {
    const script = 'call lookup {"q":"paris"}\n---\ncall weather {"city":"Paris"}\n---\nIt is sunny in Paris.';
    const first = await run([user('earlier turn'), reply('earlier reply'), user(script)]);
    expect(callsOf(first).map((c) => [c.name, c.arguments])).toEqual([['lookup', '{"q":"paris"}']]);
    expect(textOf(first)).toBe('');
    expectOneFinishLast(first);

    const afterOne = [user(script), reply('', [call('lookup')]), results(['lookup', 'found'])];
    const second = await run(afterOne);
    expect(callsOf(second).map((c) => [c.name, c.arguments])).toEqual([['weather', '{"city":"Paris"}']]);

    const afterTwo = [...afterOne, reply('', [call('weather')]), results(['weather', 'sunny'])];
    const third = await run(afterTwo);
    expect(textOf(third)).toBe('It is sunny in Paris.');
    expect(callsOf(third)).toEqual([]);

    // No sections left and the previous entry is not a tool result: an empty reply.
    const fourth = await run([...afterTwo, reply('It is sunny in Paris.')]);
    expect(deltasOf(fourth)).toEqual([]);
    expect(callsOf(fourth)).toEqual([]);
    expectOneFinishLast(fourth);
  });

  it('continues across turns: the turn a client tool output starts plays the next section', async () => {
    const script = 'call pick_color {}\n---\nYou picked it.';
    const events = await run([
      user(script),
      reply('Let me ask.', [call('pick_color')]),
      results(['pick_color', 'red']),
    ]);
    expect(textOf(events)).toBe('You picked it.');
  });

  it('makes several calls of one section in one step, with distinct call ids', async () => {
    const events = await run([user('call a {"n":1}\ncall b {"n":2}\ncall a {"n":3}')]);
    const calls = callsOf(events);
    expect(calls.map((c) => [c.name, c.arguments])).toEqual([
      ['a', '{"n":1}'],
      ['b', '{"n":2}'],
      ['a', '{"n":3}'],
    ]);
    for (const c of calls) expect(c.callId).toMatch(/^call_[0-9a-f]{8,}$/);
    expect(new Set(calls.map((c) => c.callId)).size).toBe(3);
    expectOneFinishLast(events);
  });

  it('turns `ask` into an ask_user_question call', async () => {
    const events = await run([user('ask What is your "favourite" colour?')]);
    const [question] = callsOf(events);
    expect(question?.name).toBe('ask_user_question');
    expect(JSON.parse(question?.arguments ?? '')).toEqual({ question: 'What is your "favourite" colour?' });
  });

  it('replies with `<tool>: <output>` per result when no sections are left after tool results', async () => {
    const context = [
      user('call alpha {}\ncall beta {}'),
      reply('', [call('alpha'), call('beta')]),
      results(['alpha', 'one'], ['beta', '{"x":2}']),
    ];
    const events = await run(context);
    expect(textOf(events)).toBe('alpha: one\nbeta: {"x":2}');
    expect(callsOf(events)).toEqual([]);
  });

  it('uses the fallback when the section after tool results has no text, after its other directives', async () => {
    const context = [user('call alpha {}\n---\nsleep 1'), reply('', [call('alpha')]), results(['alpha', 'done'])];
    expect(textOf(await run(context))).toBe('alpha: done');
  });

  it('replies with the section text, not the fallback, when the section after tool results has text', async () => {
    const context = [user('call alpha {}\n---\nAll done.'), reply('', [call('alpha')]), results(['alpha', 'x'])];
    expect(textOf(await run(context))).toBe('All done.');
  });

  it('joins the text lines of a section with newlines, in directive order', async () => {
    const events = await run([user('First line.\ncall t {}\nSecond line.')]);
    expect(events.map((event) => event.type).filter((type, i, all) => type !== all[i - 1])).toEqual([
      'text-delta',
      'tool-call',
      'text-delta',
      'finish',
    ]);
    expect(textOf(events)).toBe('First line.\nSecond line.');
  });

  it('sleeps before later directives', async () => {
    const started = performance.now();
    const events: Array<{ type: string; at: number }> = [];
    const stream = model.stream({
      model: 'scripted',
      instructions: '',
      context: [user('sleep 60\nafter the nap')],
      tools: [],
      signal: new AbortController().signal,
    });
    for await (const event of stream) events.push({ type: event.type, at: performance.now() - started });
    expect(events[0]?.type).toBe('text-delta');
    expect(events[0]?.at).toBeGreaterThanOrEqual(50);
  });

  it('aborts a sleep at once, rejecting with the signal reason', async () => {
    const controller = new AbortController();
    const reason = new Error('interrupted');
    const started = performance.now();
    setTimeout(() => controller.abort(reason), 30);
    const error = await failure(run([user('sleep 10000\nnever')], { signal: controller.signal }));
    expect(error).toBe(reason);
    // Long before the 10 s sleep would end (the bound is room for a busy machine).
    expect(performance.now() - started).toBeLessThan(5000);
  });

  it('rejects at once when the signal is already aborted', async () => {
    const controller = new AbortController();
    controller.abort(new Error('gone'));
    await expect(run([user('hello')], { signal: controller.signal })).rejects.toThrow('gone');
  });

  it('fails the model call with `fail <text>` after streaming what came before', async () => {
    const events: ModelEvent[] = [];
    const stream = model.stream({
      model: 'scripted',
      instructions: '',
      context: [user('partial answer\nfail upstream exploded')],
      tools: [],
      signal: new AbortController().signal,
    });
    const error = await failure(
      (async () => {
        for await (const event of stream) events.push(event);
      })(),
    );
    expect(error).toBeInstanceOf(ModelError);
    expect(error).toMatchObject({ code: 'model_error', message: 'upstream exploded', retriable: false });
    expect(textOf(events)).toBe('partial answer');
    expect(events.some((event) => event.type === 'finish')).toBe(false);
  });

  it('rejects a `call` whose arguments are not JSON with model_bad_request naming the line', async () => {
    const error = await failure(run([user('Looking it up.\ncall search {"q": oops}')]));
    expect(error).toBeInstanceOf(ModelError);
    expect(error).toMatchObject({ code: 'model_bad_request' });
    expect(String((error as ModelError).message)).toContain('line 2');
    expect(String((error as ModelError).message)).toContain('call search {"q": oops}');
  });

  it('counts usage as ceil(characters / 4) for input and output', async () => {
    const instructions = 'Be brief.';
    const script = 'call calc {"a":1}\n---\nDone!';
    const context = [user(script), reply('ok', [call('calc', '{"a":1}')]), results(['calc', '42'])];
    const events = await run(context, { instructions });
    const inputChars = instructions.length + script.length + 'ok'.length + '{"a":1}'.length + '42'.length;
    expect(inputChars).toBe(47);
    // Output "Done!" is 5 chars → 2 tokens.
    expect(events.at(-1)).toEqual({ type: 'finish', usage: { inputTokens: 12, outputTokens: 2 } });

    const calls = await run([user('call calc {"a":1}\ncall calc {"b":22}')]);
    // Output counts the call arguments: 7 + 8 = 15 chars → 4 tokens; input 36 chars → 9 tokens.
    expect(calls.at(-1)).toEqual({ type: 'finish', usage: { inputTokens: 9, outputTokens: 4 } });
  });

  it('behaves the same when priced', async () => {
    const priced = createScriptedModel({ priced: true });
    const events: ModelEvent[] = [];
    const stream = priced.stream({
      model: 'scripted/priced',
      instructions: '',
      context: [user('same words')],
      tools: [],
      signal: new AbortController().signal,
    });
    for await (const event of stream) events.push(event);
    expect(textOf(events)).toBe('same words');
    expect(events.at(-1)).toEqual({ type: 'finish', usage: { inputTokens: 3, outputTokens: 3 } });
  });
});

describe('structured output', () => {
  const responseFormat: ResponseFormat = {
    type: 'json_schema',
    name: 'answer',
    strict: true,
    schema: { type: 'object', properties: { answer: { type: 'string', minLength: 2 } }, required: ['answer'] },
  };

  it('answers a plain question with the smallest valid instance, and {} for json_object', async () => {
    expect(textOf(await run([user('What is it?')], { responseFormat }))).toBe('{"answer":"aa"}');
    expect(textOf(await run([user('What is it?')], { responseFormat: { type: 'json_object' } }))).toBe('{}');
  });

  it('plays a script with directives as written, and answers the instance after tool results', async () => {
    const script = 'call lookup {"q":1}\n---\nsleep 0\nnot json';
    const first = await run([user(script)], { responseFormat });
    expect(callsOf(first).map((c) => c.name)).toEqual(['lookup']);
    const afterTool = [user('call lookup {"q":1}'), reply('', [call('lookup')]), results(['lookup', 'found'])];
    expect(textOf(await run(afterTool, { responseFormat }))).toBe('{"answer":"aa"}');
    const second = [user(script), reply('', [call('lookup')]), results(['lookup', 'found'])];
    expect(textOf(await run(second, { responseFormat }))).toBe('not json');
  });
});
