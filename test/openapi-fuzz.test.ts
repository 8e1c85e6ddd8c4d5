/**
 * Property-based checks generated from GET /v1/openapi.json over every operation it lists: requests built from
 * each operation's parameter and body schemas (valid ones, with the ids of real fixtures mixed in, and broken
 * ones: hostile strings and numbers, wrong types, missing fields, malformed or deep JSON, no key), sent to a real
 * server on each dialect. Every answer must be a status the operation declares, never 500 or 503, with a body
 * that matches the declared schema for its media type. Seeds are fixed, so a run is repeatable. The session
 * stream never ends on its own, so it only gets ids that are not sessions (its error answers are checked).
 */
import { Ajv, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ASK_USER_QUESTION_SERVER, flows, WEATHER_TOOL } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';
import {
  type ArbitraryContext,
  hostileNumber,
  hostileString,
  invalidValue,
  type Schema,
  validValue,
} from './helpers/schema-arbitrary.ts';

/** Runs per operation; with about fifty operations a dialect takes some fifteen seconds. */
const RUNS = 100;
const SEED = 20_261_123;
const METHODS = ['get', 'post', 'put', 'patch', 'delete'] as const;
/** Operations whose 200 answer streams until the client leaves; they get only ids that are not theirs. */
const ENDLESS = new Set(['GET /v1/sessions/{id}/stream']);
const BOUNDARY = 'fuzzboundary';

type AddFormats = (ajv: Ajv) => Ajv;
const addFormats: AddFormats =
  typeof addFormatsModule === 'function' ? addFormatsModule : Reflect.get(addFormatsModule, 'default');

interface Operation {
  name: string;
  method: string;
  path: string;
  spec: Schema;
}

interface FuzzRequest {
  method: string;
  url: string;
  headers: Record<string, string>;
  payload?: string;
}

interface Parts {
  path: Record<string, unknown>;
  query: Record<string, unknown>;
  headers: Record<string, unknown>;
  body?: unknown;
  rawBody?: string;
  auth: boolean;
}

const text = (value: unknown): string => (typeof value === 'string' ? value : (JSON.stringify(value) ?? ''));
/** URLs and headers carry bytes: a lone surrogate cannot be encoded, so it is replaced the way a client would. */
const encode = (value: unknown) => encodeURIComponent(text(value).toWellFormed());
/**
 * A path parameter as one segment. `.` and `..` (also percent-encoded) are dot-segments, which URL parsers remove
 * (RFC 3986 5.2.4, WHATWG URL), so no client can send them as a value: they become `.x` and `..x`.
 */
const segment = (value: unknown) => {
  const encoded = encode(value);
  return encoded === '.' || encoded === '..' ? `${encoded}x` : encoded;
};
const headerSafe = (value: string) => value.replace(/[^\x20-\x7e]/g, '?');

/** Every operation of the document, deletions last (so the fixtures the others reach exist while they run). */
function operationsOf(document: Schema): Operation[] {
  const all = Object.entries(document.paths as Record<string, Schema>).flatMap(([path, item]) =>
    METHODS.filter((method) => item[method] !== undefined).map((method) => ({
      name: `${method.toUpperCase()} ${path}`,
      method: method.toUpperCase(),
      path,
      spec: item[method] as Schema,
    })),
  );
  return [...all.filter((op) => op.method !== 'DELETE'), ...all.filter((op) => op.method === 'DELETE')];
}

/** The document as a fresh server serves it, read once to name one test per operation. */
async function servedDocument(): Promise<Schema> {
  const h = await createHarness('sqlite');
  try {
    return json(await h.request('GET', '/v1/openapi.json', { key: null }));
  } finally {
    await h.close();
  }
}

const OPERATIONS = operationsOf(await servedDocument());

function multipartBody(body: unknown): string {
  const fields = typeof body === 'object' && body !== null && !Array.isArray(body) ? body : {};
  let out = '';
  for (const [name, value] of Object.entries(fields)) {
    const disposition = name === 'file' ? `form-data; name="file"; filename="fuzz.txt"` : `form-data; name="${name}"`;
    out += `--${BOUNDARY}\r\nContent-Disposition: ${disposition}\r\n\r\n${text(value)}\r\n`;
  }
  return `${out}--${BOUNDARY}--\r\n`;
}

describe.each(dialects())('property-based checks from the OpenAPI document (%s)', (dialect) => {
  let h: Harness;
  let document: Schema;
  let known: string[] = [];
  const flow = flows(() => h, { agentName: 'fuzz' });
  const ajv = new Ajv({ strict: false, allErrors: false, validateFormats: true });
  addFormats(ajv);
  const validators = new Map<string, ValidateFunction>();
  const matchers = new WeakMap<Schema, ValidateFunction>();

  const validatorFor = (key: string, schema: Schema): ValidateFunction => {
    let validate = validators.get(key);
    if (validate === undefined) {
      // References (#/components/…) resolve against the document's components, carried in the root.
      validate = ajv.compile({ components: document.components, allOf: [schema] });
      validators.set(key, validate);
    }
    return validate;
  };

  /** Fixture ids this schema accepts; offered for ids only (a uuid, or a pattern like `^we_…`), not for free text. */
  const knownFor = (schema: Schema): string[] => {
    const prefixedId = typeof schema.pattern === 'string' && /^\^[a-z]+_/.test(schema.pattern);
    if (schema.format !== 'uuid' && !prefixedId) return [];
    let matches = matchers.get(schema);
    if (matches === undefined) {
      matches = ajv.compile(schema);
      matchers.set(schema, matches);
    }
    const accepts = matches;
    return known.filter((value) => accepts(value));
  };

  beforeAll(async () => {
    // Destinations are the loopback address (see schema-arbitrary.ts): allowed, refused at once, no DNS involved.
    h = await createHarness(dialect, {
      AGENTRY_RESPONSES_SYNC_TIMEOUT_MS: '5000',
      AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true',
    });
    document = json(await h.request('GET', '/v1/openapi.json', { key: null }));
    const agentId = await flow.createAgent({ mcpServers: [ASK_USER_QUESTION_SERVER], clientTools: [WEATHER_TOOL] });
    const done = await flow.turn(agentId, 'Hello');
    const waiting = await flow.turn(agentId, 'ask Your name?', ['requires_action']);
    const items = json(await h.request('GET', `/v1/conversations/conv_${done.sessionId}/items`)).data;
    const endpoint = json(
      await h.request('POST', '/v1/webhook_endpoints', {
        body: { name: 'fuzz', url: 'https://127.0.0.1:1/in', event_types: ['agent.session.created'] },
      }),
    );
    await h.request('POST', `/v1/webhook_endpoints/${endpoint.id}/test`, {
      body: { event_type: 'agent.session.created' },
    });
    const events = json(await h.request('GET', `/v1/webhook_endpoints/${endpoint.id}/events`)).data;
    const boundary = 'fixture';
    const file = json(
      await h.request('POST', '/v1/files', {
        rawBody: `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\n\r\nhello\r\n--${boundary}--\r\n`,
        headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
      }),
    );
    known = [
      agentId,
      done.sessionId,
      done.message.id,
      done.message.runId,
      waiting.sessionId,
      waiting.message.id,
      `conv_${done.sessionId}`,
      `conv_${waiting.sessionId}`,
      `resp_${done.message.id}`,
      ...items.map((item: { id: string }) => item.id),
      endpoint.id,
      ...events.map((event: { id: string }) => event.id),
      file.id,
    ];
  });
  afterAll(() => h?.close());

  function requests(op: Operation): fc.Arbitrary<FuzzRequest> {
    const context: ArbitraryContext = { document, known: ENDLESS.has(op.name) ? () => [] : knownFor };
    const parameters: Schema[] = op.spec.parameters ?? [];
    const record = (where: string) => {
      const model: Record<string, fc.Arbitrary<unknown>> = {};
      const required: string[] = [];
      for (const parameter of parameters.filter((candidate) => candidate.in === where)) {
        model[parameter.name] = validValue(parameter.schema ?? {}, context);
        if (parameter.required === true) required.push(parameter.name);
      }
      return fc.record(model, { requiredKeys: required });
    };
    const content: Schema = op.spec.requestBody?.content ?? {};
    const mediaType = Object.keys(content)[0];
    const bodySchema: Schema | undefined = mediaType === undefined ? undefined : content[mediaType].schema;
    const valid: fc.Arbitrary<Parts> = fc.record({
      path: record('path'),
      query: record('query'),
      headers: record('header'),
      body: bodySchema === undefined ? fc.constant(undefined) : validValue(bodySchema, context),
      auth: fc.constant(true),
    });
    const broken: fc.Arbitrary<Parts>[] = [valid.map((parts) => ({ ...parts, auth: false }))];
    // One path or query parameter made hostile: every parameter gets its own chance.
    const hostileParam = fc.oneof(hostileString, hostileNumber.map(String), fc.string());
    for (const parameter of parameters.filter((p) => p.in === 'path' || p.in === 'query')) {
      const key = parameter.in === 'path' ? 'path' : 'query';
      // A path segment cannot be empty, `.` or `..`: clients resolve `/v1/agents/.` to another route.
      const value =
        key === 'path' ? hostileParam.filter((candidate) => !['', '.', '..'].includes(text(candidate))) : hostileParam;
      broken.push(
        fc.tuple(valid, value).map(([parts, bad]) => ({ ...parts, [key]: { ...parts[key], [parameter.name]: bad } })),
      );
    }
    if (bodySchema !== undefined) {
      const badBody = fc.tuple(valid, invalidValue(bodySchema, context)).map(([parts, body]) => ({ ...parts, body }));
      // A broken body is where most harm hides: it gets as many chances as the parameters together.
      const chances = Math.max(2, broken.length);
      for (let i = 0; i < chances; i++) broken.push(badBody);
      broken.push(
        fc
          .tuple(valid, fc.constantFrom('', '{', '[]', 'null', '"x"', `{"a":${'['.repeat(100)}${']'.repeat(100)}}`))
          .map(([parts, rawBody]) => ({ ...parts, rawBody })),
      );
    }
    // About half the requests are valid, half broken.
    return fc.oneof({ arbitrary: valid, weight: broken.length }, ...broken).map((parts) => build(op, mediaType, parts));
  }

  function build(op: Operation, mediaType: string | undefined, parts: Parts): FuzzRequest {
    const path = op.path.replace(/\{([^}]+)\}/g, (_match, name: string) => segment(parts.path[name] ?? 'x'));
    const query = Object.entries(parts.query)
      .flatMap(([name, value]) => (Array.isArray(value) ? value.map((entry) => [name, entry]) : [[name, value]]))
      .map(([name, value]) => `${encodeURIComponent(String(name))}=${encode(value)}`)
      .join('&');
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(parts.headers)) headers[name] = headerSafe(text(value));
    if (parts.auth) headers.authorization = `Bearer ${h.key}`;
    const request: FuzzRequest = { method: op.method, url: query === '' ? path : `${path}?${query}`, headers };
    if (parts.rawBody !== undefined) {
      headers['content-type'] = 'application/json';
      request.payload = parts.rawBody;
    } else if (parts.body !== undefined && mediaType === 'multipart/form-data') {
      headers['content-type'] = `multipart/form-data; boundary=${BOUNDARY}`;
      request.payload = multipartBody(parts.body);
    } else if (parts.body !== undefined) {
      headers['content-type'] = 'application/json';
      request.payload = JSON.stringify(parts.body);
    }
    return request;
  }

  /** Why the answer disagrees with the document, or null. */
  function mismatch(op: Operation, status: number, contentType: string, body: string): string | null {
    if (status === 500 || status === 503) return `server error ${status}`;
    const declared: Schema | undefined = op.spec.responses?.[String(status)];
    if (declared === undefined)
      return `status ${status} is not declared (${Object.keys(op.spec.responses).join(', ')})`;
    if (status === 204) return body === '' ? null : 'a 204 with a body';
    const content: Schema | undefined = declared.content;
    if (content === undefined) return null;
    const mediaType = contentType.split(';')[0]?.trim() ?? '';
    const entry: Schema | undefined = content[mediaType] ?? content['*/*'];
    if (entry === undefined) return `answered ${mediaType}, declared ${Object.keys(content).join(', ')}`;
    if (mediaType !== 'application/json' || entry.schema === undefined) return null;
    let parsed: unknown;
    try {
      parsed = JSON.parse(body);
    } catch {
      return 'a JSON answer that does not parse';
    }
    const validate = validatorFor(`${op.name} ${status} ${mediaType}`, entry.schema);
    return validate(parsed) ? null : `body does not match the schema: ${ajv.errorsText(validate.errors)}`;
  }

  it('serves the document the checks were generated from', () => {
    expect(operationsOf(document).map((op) => op.name)).toEqual(OPERATIONS.map((op) => op.name));
    expect(OPERATIONS.length).toBeGreaterThan(40);
  });

  it.each(OPERATIONS.map((op, index) => ({ name: op.name, index })))('$name', async ({ index }) => {
    const op = operationsOf(document)[index];
    if (op === undefined) throw new Error(`operation ${index} is missing from the served document`);
    const failures: string[] = [];
    await fc
      .assert(
        fc.asyncProperty(requests(op), async (request) => {
          const response = await h.app.inject({
            method: request.method as 'GET',
            url: request.url,
            headers: request.headers,
            ...(request.payload === undefined ? {} : { payload: request.payload }),
          });
          const problem = mismatch(
            op,
            response.statusCode,
            String(response.headers['content-type'] ?? ''),
            response.body,
          );
          if (problem !== null) {
            failures.push(
              `${op.name}: ${request.method} ${request.url.slice(0, 200)} → ${problem}\n${response.body.slice(0, 300)}`,
            );
          }
          return problem === null;
        }),
        { seed: SEED + index, numRuns: RUNS, endOnFailure: true },
      )
      .catch((error: unknown) => {
        throw new Error(`${failures.join('\n')}\n${String(error).slice(0, 2000)}`);
      });
  });
});
