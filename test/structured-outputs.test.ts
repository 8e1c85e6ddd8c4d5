/**
 * Structured outputs end to end: `text.format` on POST /v1/responses, an agent's `outputFormat`, a Sessions
 * message's `outputFormat`. The real clients' structured helpers (openai `responses.parse`, the Agents SDK's
 * `outputType`, the AI SDK's `Output.object`, LangChain's `withStructuredOutput`) against the `scripted` model,
 * which answers the smallest valid instance; a local OpenAI-compatible stub (AGENTRY_PROVIDERS) shows that the
 * format reaches a provider as `response_format` and that a reply not matching it fails the turn with
 * `invalid_output`. Once per dialect.
 */
import { createOpenAI } from '@ai-sdk/openai';
import { ChatOpenAI } from '@langchain/openai';
import {
  Agent,
  OpenAIProvider,
  Runner,
  setDefaultOpenAIClient,
  setOpenAIAPI,
  setTracingDisabled,
} from '@openai/agents';
import { generateText, Output } from 'ai';
import OpenAI from 'openai';
import { zodTextFormat } from 'openai/helpers/zod';
import type { ResponseStreamEvent } from 'openai/resources/responses/responses';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type Stub, startStub, textReply } from './helpers/chat-completions-stub.ts';
import { flows } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';

const Person = z.object({
  name: z.string(),
  age: z.number().int(),
  role: z.enum(['admin', 'user']),
  tags: z.array(z.string()),
  address: z.object({ city: z.string(), zip: z.string().nullable() }),
});
/** What the scripted model answers for Person: required fields, first enum value, empty arrays, nulls. */
const SMALLEST_PERSON = { name: '', age: 0, role: 'admin', tags: [], address: { city: '', zip: '' } };

const PERSON_SCHEMA = {
  type: 'object',
  properties: { name: { type: 'string' }, age: { type: 'integer', minimum: 18 } },
  required: ['name', 'age'],
  additionalProperties: false,
};
const PERSON_FORMAT = { type: 'json_schema', name: 'person', schema: PERSON_SCHEMA, strict: true };

describe.each(dialects())('structured outputs (%s)', (dialect) => {
  let h: Harness;
  let stub: Stub;
  let base: string;
  let client: OpenAI;
  let agentId: string;
  let stubAgentId: string;
  const flow = flows(() => h, { agentName: 'structured' });

  beforeAll(async () => {
    stub = await startStub();
    h = await createHarness(dialect, { AGENTRY_PROVIDERS: JSON.stringify({ stub: { baseURL: stub.url } }) });
    base = await h.listen();
    client = new OpenAI({ apiKey: h.key, baseURL: `${base}/v1` });
    agentId = await flow.createAgent({});
    stubAgentId = await flow.createAgent({ model: 'stub/test-model' });
  });
  afterAll(async () => {
    await h.close();
    await stub.close();
  });
  beforeEach(() => {
    stub.bodies.length = 0;
    stub.responders.length = 0;
  });

  const respond = (body: Record<string, unknown>) =>
    h.request('POST', '/v1/responses', { body: { model: agentId, ...body } });

  describe('the official clients, with the scripted model', () => {
    it('openai responses.parse with zodTextFormat gets the parsed object, and the format echoed', async () => {
      const format = zodTextFormat(Person, 'person');
      const response = await client.responses.parse({ model: agentId, input: 'Who is it?', text: { format } });
      expect(response.status).toBe('completed');
      expect(response.output_parsed).toEqual(SMALLEST_PERSON);
      expect(response.text?.format).toMatchObject({ type: 'json_schema', name: 'person', strict: true });
      const retrieved = await client.responses.retrieve(response.id);
      expect(retrieved.text?.format).toEqual(response.text?.format);
      expect(retrieved.text?.format).toMatchObject({ schema: format.schema });
    });

    it("echoes the format in the stream's response objects", async () => {
      const stream = await client.responses.create({
        model: agentId,
        input: 'stream it',
        stream: true,
        text: { format: { type: 'json_object' } },
      });
      const events: ResponseStreamEvent[] = [];
      for await (const event of stream) events.push(event);
      const withResponse = events.flatMap((event) => ('response' in event ? [event.response] : []));
      expect(withResponse.map((response) => response.text?.format)).toEqual(
        withResponse.map(() => ({ type: 'json_object' })),
      );
      expect(withResponse.at(-1)).toMatchObject({ status: 'completed', output_text: '{}' });
    });

    it('the Agents SDK runs an agent with a zod outputType', async () => {
      setTracingDisabled(true);
      setOpenAIAPI('responses');
      setDefaultOpenAIClient(new OpenAI({ apiKey: h.key, baseURL: `${base}/v1` }));
      const runner = new Runner({ modelProvider: new OpenAIProvider() });
      const agent = new Agent({ name: 'extractor', model: agentId, outputType: Person });
      const result = await runner.run(agent, 'Extract the person');
      expect(result.finalOutput).toEqual(SMALLEST_PERSON);
    });

    it("the AI SDK's generateText with Output.object", async () => {
      const openai = createOpenAI({ apiKey: h.key, baseURL: `${base}/v1` });
      const { output } = await generateText({
        model: openai.responses(agentId),
        prompt: 'Extract the person',
        output: Output.object({ schema: Person }),
      });
      expect(output).toEqual(SMALLEST_PERSON);
    });

    it("the AI SDK's chat model with Output.object, over Chat Completions", async () => {
      const openai = createOpenAI({ apiKey: h.key, baseURL: `${base}/v1` });
      const { output } = await generateText({
        model: openai.chat(agentId),
        prompt: 'Extract the person',
        output: Output.object({ schema: Person }),
      });
      expect(output).toEqual(SMALLEST_PERSON);
    });

    it("LangChain's default ChatOpenAI (Chat Completions) withStructuredOutput", async () => {
      const model = new ChatOpenAI({ model: agentId, apiKey: h.key, configuration: { baseURL: `${base}/v1` } });
      const person = await model.withStructuredOutput(Person, { name: 'person' }).invoke('Extract the person');
      expect(person).toEqual(SMALLEST_PERSON);
    });

    it("LangChain's withStructuredOutput over the Responses API", async () => {
      const model = new ChatOpenAI({
        model: agentId,
        apiKey: h.key,
        useResponsesApi: true,
        configuration: { baseURL: `${base}/v1` },
      });
      const person = await model.withStructuredOutput(Person, { name: 'person' }).invoke('Extract the person');
      expect(person).toEqual(SMALLEST_PERSON);
    });
  });

  describe('validation of text.format', () => {
    it.each([
      [{ type: 'json_schema', schema: PERSON_SCHEMA }, 'text.format.name'],
      [{ type: 'json_schema', name: 'p' }, 'text.format.schema'],
      [{ type: 'json_schema', name: 'bad name', schema: PERSON_SCHEMA }, 'text.format.name'],
      [{ type: 'json_schema', name: 'p', schema: { type: 'array' } }, 'text.format.schema'],
      [
        { type: 'json_schema', name: 'p', schema: { type: 'object', properties: { a: { type: 'nope' } } } },
        'text.format.schema',
      ],
      [
        { type: 'json_schema', name: 'p', schema: { type: 'object', $ref: 'https://example.com/s.json' } },
        'text.format.schema',
      ],
      [{ type: 'yaml' }, 'text.format.type'],
    ])('answers 400 for %j naming %s', async (format, param) => {
      const response = await respond({ input: 'x', text: { format } });
      expect(response.status, response.text).toBe(400);
      expect(json(response).error).toMatchObject({ code: 'validation_error', param });
    });

    it('refuses a schema larger than the bound', async () => {
      const properties = Object.fromEntries(
        Array.from({ length: 3000 }, (_, i) => [`field_${i}`, { type: 'string', description: 'x'.repeat(30) }]),
      );
      const schema = { type: 'object', properties };
      const response = await respond({ input: 'x', text: { format: { type: 'json_schema', name: 'big', schema } } });
      expect(response.status).toBe(400);
      expect(json(response).error.message).toMatch(/^text\.format\.schema is \d+ characters of JSON; at most 100000/);
    });

    it('echoes free text when no format is given, and accepts {type: "text"}', async () => {
      for (const text of [undefined, { format: { type: 'text' } }]) {
        const response = await respond({ input: 'plain', ...(text === undefined ? {} : { text }) });
        expect(json(response)).toMatchObject({
          status: 'completed',
          output_text: 'plain',
          text: { format: { type: 'text' } },
        });
      }
    });
  });

  describe('the final reply is checked', () => {
    it('fails the Response with invalid_output when a script replies with what does not match', async () => {
      const response = await respond({
        input: 'sleep 0\n{"name": "Ann", "age": 12}',
        text: { format: PERSON_FORMAT },
      });
      expect(json(response)).toMatchObject({
        status: 'failed',
        output_text: '{"name": "Ann", "age": 12}',
        error: { code: 'invalid_output', message: 'the reply at /age must be >= 18 (output format person)' },
      });
    });

    it('sends the format to an AGENTRY_PROVIDERS provider as response_format and fails a reply that is not JSON', async () => {
      stub.responders.push(textReply(['Sure! Here ', 'is the person']));
      const response = await h.request('POST', '/v1/responses', {
        body: { model: stubAgentId, input: 'Who?', text: { format: { ...PERSON_FORMAT, description: 'A person' } } },
      });
      expect(stub.bodies[0]?.response_format).toEqual({
        type: 'json_schema',
        json_schema: { schema: PERSON_SCHEMA, strict: true, name: 'person', description: 'A person' },
      });
      expect(json(response)).toMatchObject({
        status: 'failed',
        error: { code: 'invalid_output', message: 'the reply is not valid JSON (output format person)' },
        output_text: 'Sure! Here is the person',
      });
      const stored = await h.request('GET', `/v1/responses/${json(response).id}`);
      expect(json(stored).error.code).toBe('invalid_output');
    });

    it('ends a stream with response.failed carrying invalid_output', async () => {
      stub.responders.push(textReply(['{"name":', '"Ann"}']));
      const stream = await client.responses.create({
        model: stubAgentId,
        input: 'Who?',
        stream: true,
        text: { format: { type: 'json_schema', name: 'person', schema: PERSON_SCHEMA, strict: true } },
      });
      const events: ResponseStreamEvent[] = [];
      for await (const event of stream) events.push(event);
      const last = events.at(-1);
      expect(last?.type).toBe('response.failed');
      expect(last && 'response' in last ? last.response : null).toMatchObject({
        status: 'failed',
        error: {
          code: 'invalid_output',
          message: "the reply must have required property 'age' (output format person)",
        },
        text: { format: { type: 'json_schema', name: 'person', schema: PERSON_SCHEMA, strict: true } },
      });
    });

    it('completes when the provider reply matches, and sends json_object as such', async () => {
      stub.responders.push(textReply(['{"name":"Ann",', '"age":30}']), textReply(['[1]']));
      const ok = await h.request('POST', '/v1/responses', {
        body: { model: stubAgentId, input: 'Who?', text: { format: PERSON_FORMAT } },
      });
      expect(json(ok)).toMatchObject({ status: 'completed', output_text: '{"name":"Ann","age":30}' });
      const array = await h.request('POST', '/v1/responses', {
        body: { model: stubAgentId, input: 'Numbers?', text: { format: { type: 'json_object' } } },
      });
      expect(stub.bodies[1]?.response_format).toEqual({ type: 'json_object' });
      expect(json(array)).toMatchObject({
        status: 'failed',
        error: { code: 'invalid_output', message: 'the reply is not a JSON object (output format json_object)' },
      });
    });

    it('sends no response_format without a format', async () => {
      stub.responders.push(textReply(['hi']));
      const response = await h.request('POST', '/v1/responses', {
        body: { model: stubAgentId, input: 'hi' },
      });
      expect(json(response).status).toBe('completed');
      expect(stub.bodies[0]).not.toHaveProperty('response_format');
    });
  });

  describe("an agent's output format", () => {
    it('is versioned, answers messages that ask for none, and a request overrides it', async () => {
      const created = await h.request('POST', '/v1/agents', {
        body: { name: 'with format', outputFormat: PERSON_FORMAT },
      });
      expect(created.status, created.text).toBe(201);
      const agent = json(created).agent;
      expect(agent.outputFormat).toEqual(PERSON_FORMAT);

      const { message } = await flow.turn(agent.id, 'Who?');
      expect(message).toMatchObject({ status: 'completed', response: { parts: [{ text: '{"name":"","age":18}' }] } });

      const viaResponses = await respond({ model: agent.id, input: 'Who?' });
      expect(json(viaResponses)).toMatchObject({
        status: 'completed',
        output_text: '{"name":"","age":18}',
        text: { format: PERSON_FORMAT },
      });
      const freeText = await respond({ model: agent.id, input: 'just text', text: { format: { type: 'text' } } });
      expect(json(freeText)).toMatchObject({ output_text: 'just text', text: { format: { type: 'text' } } });

      const updated = await h.request('PATCH', `/v1/agents/${agent.id}`, { body: { outputFormat: null } });
      expect(updated.status, updated.text).toBe(200);
      expect(json(updated).agent).toMatchObject({ outputFormat: null, version: 2 });
      expect((await flow.turn(agent.id, 'plain again')).message.response.parts[0].text).toBe('plain again');
    });

    it('answers 400 naming outputFormat.schema for a schema that does not compile', async () => {
      const response = await h.request('POST', '/v1/agents', {
        body: {
          name: 'bad',
          outputFormat: { type: 'json_schema', name: 'x', schema: { type: 'object', required: 3 } },
        },
      });
      expect(response.status).toBe(400);
      expect(json(response).error).toMatchObject({ code: 'validation_error', param: 'outputFormat.schema' });
    });
  });

  describe('a Sessions message with outputFormat', () => {
    it('gets the structured reply, or a 400 naming the field', async () => {
      const sessionId = await flow.createSession(agentId);
      const accepted = await flow.postMessage(sessionId, {
        parts: [{ type: 'text', text: 'Who?' }],
        outputFormat: {
          type: 'json_schema',
          name: 'tags',
          schema: {
            type: 'object',
            properties: { tags: { type: 'array', items: { const: 'x' }, minItems: 2 } },
            required: ['tags'],
          },
        },
      });
      expect(accepted.status, accepted.text).toBe(202);
      const message = await flow.waitForMessage(sessionId, json(accepted).id);
      expect(message).toMatchObject({ status: 'completed', response: { parts: [{ text: '{"tags":["x","x"]}' }] } });

      const bad = await flow.postMessage(sessionId, {
        parts: [{ type: 'text', text: 'Who?' }],
        outputFormat: {
          type: 'json_schema',
          name: 'p',
          schema: { type: 'object', properties: { a: { type: 'nope' } } },
        },
      });
      expect(bad.status).toBe(400);
      expect(json(bad).error).toMatchObject({ code: 'validation_error', param: 'outputFormat.schema' });
    });

    it('fails the message with invalid_output when the reply does not match', async () => {
      const sessionId = await flow.createSession(agentId);
      const accepted = await flow.postMessage(sessionId, {
        parts: [{ type: 'text', text: 'sleep 0\nnot json at all' }],
        outputFormat: { type: 'json_object' },
      });
      const message = await flow.waitForMessage(sessionId, json(accepted).id);
      expect(message).toMatchObject({
        status: 'failed',
        error: { code: 'invalid_output', message: 'the reply is not valid JSON (output format json_object)' },
        response: { parts: [{ text: 'not json at all' }] },
      });
    });
  });
});
