/**
 * The body of POST /v1/responses is declared once: the OpenAPI document shows exactly the schemas that validate it
 * (one per mode), strict mode refuses any field its schema does not declare, and docs/responses.md names every
 * field either mode declares.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { responseBodySchemas } from '../src/http/responses-body.ts';
import { ResponseCreateCompat, ResponseCreateStrict } from '../src/http/schemas/responses.ts';
import { flows, type Json } from './helpers/fixtures.ts';
import { createHarness, type Harness, json } from './helpers/harness.ts';

describe('the Responses body, declared once', () => {
  let h: Harness;
  let agentId: string;
  const flow = flows(() => h, { agentName: 'body' });
  beforeAll(async () => {
    h = await createHarness('sqlite');
    agentId = await flow.createAgent({});
  });
  afterAll(() => h?.close());

  const post = (body: Json, mode: 'strict' | 'openai') =>
    h.request('POST', '/v1/responses', { body, headers: { 'agentry-compat': mode } });

  it('is in the OpenAPI document exactly as validation uses it, one schema per mode', async () => {
    const document = json(await h.request('GET', '/v1/openapi.json', { key: null }));
    const body = document.paths['/v1/responses'].post.requestBody.content['application/json'].schema;
    // @fastify/swagger writes `const: x` as `enum: [x]`, which means the same.
    const asJson = (value: unknown) =>
      JSON.parse(JSON.stringify(value), (_key, entry) => {
        if (typeof entry !== 'object' || entry === null || !('const' in entry)) return entry;
        const { const: only, ...rest } = entry;
        return { ...rest, enum: [only] };
      });
    expect(body.anyOf).toEqual([asJson(responseBodySchemas.strict), asJson(responseBodySchemas.openai)]);
    expect(body.anyOf.map((schema: Json) => schema.title)).toEqual(['Strict mode', 'OpenAI compatibility mode']);
  });

  it('refuses in strict mode every field the strict schema does not declare, naming it', async () => {
    const declared = Object.keys(ResponseCreateStrict.properties);
    const others = [...Object.keys(ResponseCreateCompat.properties).filter((key) => !declared.includes(key)), 'colour'];
    expect(others.length).toBeGreaterThan(20);
    for (const field of others) {
      const response = await post({ model: agentId, input: 'hi', [field]: null }, 'strict');
      expect(response.status, field).toBe(400);
      expect(json(response).error, field).toMatchObject({ code: 'validation_error', param: field });
    }
    // What the strict schema declares is accepted, and compatibility mode takes the others.
    const strictBody = {
      model: agentId,
      input: 'hi',
      stream: false,
      conversation: null,
      store: true,
      background: false,
      agent_version: 1,
    };
    expect(Object.keys(strictBody).sort()).toEqual([...declared].sort());
    expect((await post(strictBody, 'strict')).status).toBe(200);
    expect((await post({ model: agentId, input: 'hi', temperature: null }, 'openai')).status).toBe(200);
    // Compatibility mode refuses what OpenAI does not know either, naming it.
    const unknown = await post({ model: agentId, input: 'hi', colour: 'blue' }, 'openai');
    expect(unknown.status).toBe(400);
    expect(json(unknown).error).toMatchObject({ param: 'colour', message: "Unknown parameter: 'colour'." });
  });

  it('is described field by field in docs/responses.md', () => {
    const docs = readFileSync(new URL('../docs/responses.md', import.meta.url), 'utf8');
    for (const field of Object.keys(ResponseCreateCompat.properties)) expect(docs, field).toContain(`\`${field}\``);
  });
});
