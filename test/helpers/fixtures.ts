/**
 * Fixtures and helpers shared by the integration tests: the `get_weather` client tool, the internal question
 * server, the terminal message statuses, a generic poller, a fetch client for real server processes, and the
 * agent → session → message → wait flow over a harness.
 */
import { randomUUID } from 'node:crypto';
import { expect } from 'vitest';
import { WAIT_MS } from './deadlines.ts';
import { type Harness, json } from './harness.ts';

export type Json = Record<string, any>;

/** The statuses a message does not leave. */
export const TERMINAL_STATUSES: readonly string[] = ['completed', 'failed', 'cancelled'];

/** The internal MCP server entry that lets an agent ask the user a question. */
export const ASK_USER_QUESTION_SERVER = { kind: 'internal', name: 'ask_user_question' };

export interface CityParametersOptions {
  /** `required: ['city']`; on unless false. */
  required?: boolean;
  /** `additionalProperties: false`; on unless false. */
  closed?: boolean;
}

/** JSON Schema of the `get_weather` arguments: `{ city: string }`. */
export function cityParameters({ required = true, closed = true }: CityParametersOptions = {}): Json {
  return {
    type: 'object',
    properties: { city: { type: 'string' } },
    ...(required ? { required: ['city'] } : {}),
    ...(closed ? { additionalProperties: false } : {}),
  };
}

export interface WeatherToolOptions extends CityParametersOptions {
  description?: string;
  strict?: boolean;
}

/** `get_weather` as a model sees a tool: name, description, parameters, strict (no `type`). */
export function weatherFunction({
  description = 'Current weather for a city',
  strict = true,
  ...schema
}: WeatherToolOptions = {}) {
  return { name: 'get_weather', description, parameters: cityParameters(schema), strict };
}

/** `get_weather` as an agent's client tool (`clientTools` entry, OpenAI function tool shape). */
export function weatherTool(options: WeatherToolOptions = {}) {
  return { type: 'function', ...weatherFunction(options) };
}

/** The usual `get_weather` client tool: strict, the city required, nothing else allowed. */
export const WEATHER_TOOL = weatherTool();

export interface WaitUntilOptions {
  /** What is awaited, for the timeout error. */
  what: string;
  /** Gives up after this long; WAIT_MS unless given. */
  timeoutMs?: number;
  /** Pause between probes; 50 ms unless given. */
  everyMs?: number;
}

/** Calls `probe` until it returns something other than null or undefined, and returns that. */
export async function waitUntil<T>(
  probe: () => Promise<T | null | undefined>,
  { what, timeoutMs = WAIT_MS, everyMs = 50 }: WaitUntilOptions,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== null && value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}

/** A JSON client for a server at `url` (a real process), authenticated with `key`. */
export function httpClient(url: string, key: string) {
  return async <T = Json>(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
    const response = await fetch(`${url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${key}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...headers,
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    return { status: response.status, body: (text === '' ? null : JSON.parse(text)) as T };
  };
}

/** A message body with one text part per string. */
export const textParts = (...texts: string[]) => ({ parts: texts.map((text) => ({ type: 'text', text })) });

export interface MessageOptions {
  /** API key; the harness admin key unless given. */
  key?: string;
  /** The Idempotency-Key header: a fresh UUID unless given, none when null. */
  idempotencyKey?: string | null;
}

export interface FlowOptions {
  /** The `name` of the agents `createAgent` makes, unless its fields name one; `agent` unless given. */
  agentName?: string;
}

export type Flows = ReturnType<typeof flows>;

/**
 * Agent, session and message helpers over a harness, each asserting the status a success answers with. Takes the
 * harness, or a function returning it for a harness a `beforeAll` creates later.
 */
export function flows(harness: Harness | (() => Harness), { agentName = 'agent' }: FlowOptions = {}) {
  const h = typeof harness === 'function' ? harness : () => harness;
  const keyOf = (key: string | undefined) => (key === undefined ? {} : { key });

  /** Creates an agent (expects 201) and returns its id. */
  async function createAgent(fields: Json = {}, key?: string): Promise<string> {
    const response = await h().request('POST', '/v1/agents', { body: { name: agentName, ...fields }, ...keyOf(key) });
    expect(response.status, response.text).toBe(201);
    return json(response).agent.id;
  }

  /** Creates a session of the agent (expects 201) and returns its id. */
  async function createSession(agentId: string, key?: string): Promise<string> {
    const response = await h().request('POST', '/v1/sessions', { body: { agentId }, ...keyOf(key) });
    expect(response.status, response.text).toBe(201);
    return json(response).session.id;
  }

  /** POSTs a message body as is and returns the response, whatever its status. */
  function postMessage(sessionId: string, body: unknown, { key, idempotencyKey = randomUUID() }: MessageOptions = {}) {
    const headers: Record<string, string> = idempotencyKey === null ? {} : { 'idempotency-key': idempotencyKey };
    return h().request('POST', `/v1/sessions/${sessionId}/messages`, { body, headers, ...keyOf(key) });
  }

  /** Submits the text as one part (an array: one part per string), expects 202, returns the AcceptedMessage. */
  async function submit(sessionId: string, text: string | string[], options: MessageOptions = {}): Promise<Json> {
    const response = await postMessage(sessionId, textParts(...(Array.isArray(text) ? text : [text])), options);
    expect(response.status, response.text).toBe(202);
    return json(response);
  }

  /** The message now (expects 200). */
  async function getMessage(sessionId: string, messageId: string, key?: string): Promise<Json> {
    const response = await h().request('GET', `/v1/sessions/${sessionId}/messages/${messageId}`, keyOf(key));
    expect(response.status, response.text).toBe(200);
    return json(response).message;
  }

  /** Polls the message every 25 ms (up to 10 s) until its status is one of `statuses`. */
  async function waitForMessage(
    sessionId: string,
    messageId: string,
    statuses: readonly string[] = TERMINAL_STATUSES,
    key?: string,
  ): Promise<Json> {
    const deadline = Date.now() + WAIT_MS;
    let last: Json | undefined;
    while (Date.now() < deadline) {
      last = await getMessage(sessionId, messageId, key);
      if (statuses.includes(last.status)) return last;
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    throw new Error(`message ${messageId} never reached ${statuses.join('|')}; last: ${JSON.stringify(last)}`);
  }

  /** A new session of the agent with one message, waited for until its status is one of `statuses`. */
  async function turn(agentId: string, text: string, statuses: readonly string[] = TERMINAL_STATUSES) {
    const sessionId = await createSession(agentId);
    const accepted = await submit(sessionId, text);
    return { sessionId, accepted, message: await waitForMessage(sessionId, accepted.id, statuses) };
  }

  return { createAgent, createSession, postMessage, submit, getMessage, waitForMessage, turn };
}
