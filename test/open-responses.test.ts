/**
 * The Open Responses compliance suite's seven HTTP tests (basic response, assistant phase, streaming, system
 * prompt, tool calling, image input, multi-turn), reproduced with their requests and structural checks: every
 * body and every stream event must validate against the specification (test/helpers/open-responses.ts), the
 * Response must be `completed` with output, and tool calling must produce a `function_call`. Requests go out as
 * the suite sends them: plain fetch, JSON, a Bearer key, no SDK headers. The `scripted` model stands in for a
 * real one, so the tool-calling prompt carries its `call` directive.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flows, type Json } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness } from './helpers/harness.ts';
import { openResponsesValidators } from './helpers/open-responses.ts';

const validators = openResponsesValidators();
const STRICT = { 'Agentry-Compat': 'strict' };

/** A 32×32 PNG (a red heart on white), as the suite's image test sends it. */
const HEART =
  'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAACAAAAAgCAIAAAD8GO2jAAABmklEQVR42tyWAaTyUBzFew/eG4AHz+MBSAHKBiJRGFKwIgQQJKLUIioBIhCAiCAAEizAQIAECaASqFFJq84nudjnaqvuPnxzgP9xfrq5938csPn7PwHTKSoViCIEAYEAMhmoKsU2mUCWEQqB5xEMIp/HaGQG2G6RSuH9HQ7H34rFrtPbdz4jl6PbwmEsl3QA1mt4vcRKk8dz9eg6IpF7tt9fzGY0gCgafFRFo5Blc5vLhf3eCOj1yNhM5GRMVK0aATxPZoz09YXjkQDmczJgquGQAPp9WwCNBgG027YACgUC6HRsAZRKBDAY2AJoNv/ZnwzA6WScznG3p4UAymXGAEkyXrTFAh8fLAGqagQAyGaZpYsi7bHTNPz8MEj//LxuFPo+UBS8vb0KaLXubrRa7aX0RMLCykwmn0z3+XA4WACcTpCkh9MFAZpmuVXo+mO/w+/HZvNgbblcUCxaSo/Hyck80Yu6XXDcvfVZr79cvMZjuN2U9O9vKAqjZrfbIZ0mV4TUi9Xqz6jddNy//7+e3n8Fhf/Llo2kxi8AQyGRoDkmAhAAAAAASUVORK5CYII=';

const WEATHER = {
  type: 'function',
  name: 'get_weather',
  description: 'Get the current weather for a location',
  parameters: {
    type: 'object',
    properties: { location: { type: 'string', description: 'The city and state, e.g. San Francisco, CA' } },
    required: ['location'],
  },
};

const AGENT_WEATHER = {
  ...WEATHER,
  description: 'Weather',
  parameters: { ...WEATHER.parameters, additionalProperties: false },
  strict: false,
};

interface Compliance {
  id: string;
  input: unknown;
  tools?: unknown[];
  stream?: boolean;
  /** The output item type the test looks for besides any output. */
  outputType?: string;
}

const SUITE: Compliance[] = [
  { id: 'basic-response', input: [{ type: 'message', role: 'user', content: 'Say hello in exactly 3 words.' }] },
  {
    id: 'assistant-phase',
    input: [
      { type: 'message', role: 'assistant', phase: 'commentary', content: 'I should answer with the saved number.' },
      { type: 'message', role: 'assistant', phase: 'final_answer', content: 'The number is four.' },
      { type: 'message', role: 'user', content: 'Repeat only the number.' },
    ],
  },
  { id: 'streaming-response', stream: true, input: [{ type: 'message', role: 'user', content: 'Count from 1 to 5.' }] },
  {
    id: 'system-prompt',
    input: [
      { type: 'message', role: 'system', content: 'You are a pirate. Always respond in pirate speak.' },
      { type: 'message', role: 'user', content: 'Say hello.' },
    ],
  },
  {
    id: 'tool-calling',
    input: [
      {
        type: 'message',
        role: 'user',
        content: 'call get_weather {"location":"San Francisco, CA"}\n---\nSunny.',
      },
    ],
    tools: [WEATHER],
    outputType: 'function_call',
  },
  {
    id: 'image-input',
    input: [
      {
        type: 'message',
        role: 'user',
        content: [
          { type: 'input_text', text: 'What do you see in this image? Answer in one sentence.' },
          { type: 'input_image', image_url: HEART },
        ],
      },
    ],
  },
  {
    id: 'multi-turn',
    input: [
      { type: 'message', role: 'user', content: 'My name is Alice.' },
      { type: 'message', role: 'assistant', content: 'Hello Alice! Nice to meet you. How can I help you today?' },
      { type: 'message', role: 'user', content: 'What is my name?' },
    ],
  },
];

/** The suite's SSE reading: `event:`/`data:` frames, [DONE] skipped, the terminal event's response kept. */
function parseEvents(text: string): Json[] {
  const events: Json[] = [];
  for (const block of text.split('\n\n')) {
    const data = block
      .split('\n')
      .filter((line) => line.startsWith('data:'))
      .map((line) => line.slice(5).trim())
      .join('\n');
    if (data === '' || data === '[DONE]') continue;
    events.push(JSON.parse(data));
  }
  return events;
}

interface Outcome {
  status: number;
  response: Json | null;
  events: Json[];
  errors: string[];
}

async function runCompliance(
  base: string,
  key: string,
  model: string,
  test: Compliance,
  headers: Record<string, string> = {},
): Promise<Outcome> {
  const body = { model, input: test.input, ...(test.tools === undefined ? {} : { tools: test.tools }) };
  const reply = await fetch(`${base}/v1/responses`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${key}`, ...headers },
    body: JSON.stringify({ ...body, stream: test.stream === true }),
  });
  const text = await reply.text();
  if (reply.status !== 200) return { status: reply.status, response: null, events: [], errors: [text] };
  const errors: string[] = [];
  let response: Json | null;
  let events: Json[] = [];
  if (test.stream === true) {
    events = parseEvents(text);
    for (const event of events) errors.push(...validators.event(event).map((error) => `${event.type}: ${error}`));
    const terminal = events.findLast(
      (event) => event.type === 'response.completed' || event.type === 'response.failed',
    );
    response = terminal?.response ?? null;
    if (events.length === 0) errors.push('No streaming events received');
  } else {
    response = JSON.parse(text);
  }
  errors.push(...validators.response(response).map((error) => `response ${error}`));
  if (!Array.isArray(response?.output) || response.output.length === 0) errors.push('Response has no output items');
  if (test.outputType === undefined && response?.status !== 'completed') {
    errors.push(`Expected status "completed" but got "${response?.status}"`);
  }
  if (test.outputType !== undefined && !response?.output?.some((item: Json) => item.type === test.outputType)) {
    errors.push(`Expected output item of type "${test.outputType}" but none found`);
  }
  return { status: reply.status, response, events, errors };
}

describe.each(dialects())(`Open Responses compliance, ${validators.source} schema (%s)`, (dialect) => {
  let h: Harness;
  const flow = flows(() => h, { agentName: 'open-responses' });
  let base: string;
  let agentId: string;

  beforeAll(async () => {
    // The deployment settings for Open Responses clients: compatibility mode, standard events only.
    h = await createHarness(dialect, {
      AGENTRY_RESPONSES_COMPAT: 'openai',
      AGENTRY_RESPONSES_STREAM_EVENTS: 'standard',
    });
    base = await h.listen();
    agentId = await flow.createAgent({});
  });
  afterAll(() => h.close());

  it.each(SUITE.map((test) => [test.id, test] as const))('passes %s', async (_id, test) => {
    const outcome = await runCompliance(base, h.key, agentId, test);
    expect(outcome.status, outcome.errors.join('\n')).toBe(200);
    expect(outcome.errors).toEqual([]);
  });

  it('streams the lifecycle in order: created, in_progress, items, completed', async () => {
    const outcome = await runCompliance(base, h.key, agentId, { ...SUITE[2], stream: true } as Compliance);
    const types = outcome.events.map((event) => event.type);
    expect(types.slice(0, 2)).toEqual(['response.created', 'response.in_progress']);
    expect(types.at(-1)).toBe('response.completed');
    expect(outcome.events.map((event) => event.sequence_number)).toEqual(outcome.events.map((_, index) => index));
    expect(outcome.response?.output_text ?? outcome.response?.output[0].content[0].text).toBe('Count from 1 to 5.');
  });

  it('streams a function call as item added, argument delta and done, item done, then completed', async () => {
    const toolCall = SUITE.find((test) => test.id === 'tool-calling');
    const outcome = await runCompliance(base, h.key, agentId, { ...(toolCall as Compliance), stream: true });
    expect(outcome.errors).toEqual([]);
    expect(outcome.events.map((event) => event.type)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.done',
      'response.output_item.done',
      'response.completed',
    ]);
    const call = outcome.response?.output[0];
    expect(call).toMatchObject({
      type: 'function_call',
      name: 'get_weather',
      arguments: '{"location":"San Francisco, CA"}',
    });
    expect(outcome.response?.tools).toEqual([{ ...WEATHER, strict: false }]);
  });

  it('puts the system message into the instructions, not into the conversation', async () => {
    const system = SUITE.find((test) => test.id === 'system-prompt') as Compliance;
    const outcome = await runCompliance(base, h.key, agentId, system);
    expect(outcome.response?.instructions).toBe('You are a pirate. Always respond in pirate speak.');
    expect(outcome.response?.output_text).toBe('Say hello.');
    const items = await h.request('GET', `/v1/conversations/${outcome.response?.conversation.id}/items?order=asc`);
    expect((items.body as Json).data.map((item: Json) => [item.role, item.content[0].text])).toEqual([
      ['user', 'Say hello.'],
      ['assistant', 'Say hello.'],
    ]);
  });
});

describe.each(dialects())('Open Responses with the default settings (%s)', (dialect) => {
  let h: Harness;
  const flow = flows(() => h, { agentName: 'open-responses-default' });
  let base: string;
  let toolAgentId: string;
  let agentId: string;

  beforeAll(async () => {
    h = await createHarness(dialect);
    base = await h.listen();
    agentId = await flow.createAgent({});
    toolAgentId = await flow.createAgent({ clientTools: [AGENT_WEATHER] });
  });
  afterAll(() => h.close());

  it('passes every non-streaming test as is: compatibility mode is the default for a plain client', async () => {
    for (const test of SUITE.filter((each) => each.stream !== true)) {
      const outcome = await runCompliance(base, h.key, agentId, test);
      expect(outcome.errors, test.id).toEqual([]);
      expect(outcome.status, test.id).toBe(200);
    }
  });

  it('passes the basic and streaming tests in strict mode, the spec body being enough for them', async () => {
    for (const id of ['basic-response', 'streaming-response']) {
      const test = SUITE.find((each) => each.id === id) as Compliance;
      const outcome = await runCompliance(base, h.key, agentId, test, STRICT);
      expect(outcome.errors, id).toEqual([]);
    }
  });

  it('lists the agent tools in the Response, and keeps the vendor events unless the deployment turns them off', async () => {
    const outcome = await runCompliance(base, h.key, toolAgentId, {
      id: 'agent-tool',
      stream: true,
      input: [{ type: 'message', role: 'user', content: 'call get_weather {"location":"Oslo"}' }],
    });
    expect(outcome.response?.tools).toEqual([AGENT_WEATHER]);
    expect(outcome.events.map((event) => event.type)).toContain('response.agentry_tool_call.action_required');
    expect(outcome.errors).toEqual([
      'response.agentry_tool_call.action_required: response.agentry_tool_call.action_required matches no Open Responses streaming event',
    ]);
  });

  it('refuses the compatibility-only inputs in strict mode, saying that Agentry-Compat: openai accepts them', async () => {
    for (const id of ['system-prompt', 'tool-calling', 'image-input', 'multi-turn', 'assistant-phase']) {
      const test = SUITE.find((each) => each.id === id) as Compliance;
      const outcome = await runCompliance(base, h.key, agentId, test, STRICT);
      expect(outcome.status, id).toBe(400);
      expect(outcome.errors[0], id).toContain('Agentry-Compat: openai');
    }
  });
});
