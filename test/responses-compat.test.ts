/**
 * How /v1/responses picks its rules and its stream events per client (src/http/client-mode.ts): the official
 * SDKs' headers, the Agentry-Compat header, the API key's setting (and `agentry keys create --compat`), the
 * deployment's AGENTRY_RESPONSES_COMPAT and AGENTRY_RESPONSES_STREAM_EVENTS; strict-mode refusals that name the
 * header; the Response's tools and numeric defaults; images by URL under the egress guard; and Conversations
 * created without an agent as they appear on the Sessions routes.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ASK_USER_QUESTION_SERVER, flows, type Json, WEATHER_TOOL } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';
import { runCli } from './helpers/server-process.ts';

/** A real 1x1 PNG. */
const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==',
  'base64',
);
const NODE_SDK = {
  'user-agent': 'OpenAI/JS 7.57.0',
  'x-stainless-lang': 'js',
  'x-stainless-package-version': '7.57.0',
};
const PY_AGENTS = { 'user-agent': 'Agents/Python 0.22.0', 'x-stainless-lang': 'python' };
const STRICT = { 'agentry-compat': 'strict' };
const OPENAI_FIELDS = { instructions: 'Be brief.', include: [], temperature: 0.2 };

let images: Server;
let imageBase: string;

beforeAll(async () => {
  images = createServer((request, response) => {
    if (request.url === '/pixel.png') response.writeHead(200, { 'content-type': 'image/png' }).end(PNG);
    else if (request.url === '/page.html') response.writeHead(200, { 'content-type': 'text/html' }).end('<p>hi</p>');
    else response.writeHead(404).end();
  });
  await new Promise<void>((resolve) => images.listen(0, '127.0.0.1', resolve));
  imageBase = `http://127.0.0.1:${(images.address() as AddressInfo).port}`;
});
afterAll(() => new Promise((resolve) => images.close(resolve)));

const imageInput = (url: string) => [
  {
    role: 'user',
    content: [
      { type: 'input_text', text: 'describe' },
      { type: 'input_image', image_url: url },
    ],
  },
];

describe.each(dialects())('responses compatibility (%s)', (dialect) => {
  let h: Harness;
  const flow = flows(() => h, { agentName: 'compat' });
  let agentId: string;
  let orgId: string;

  beforeAll(async () => {
    h = await createHarness(dialect);
    agentId = await flow.createAgent({});
    orgId = (await h.deps.orgs.requireByName('default')).id;
  });
  afterAll(() => h.close());

  const post = (body: Json, headers: Record<string, string> = {}, key = h.key) =>
    h.request('POST', '/v1/responses', { body: { model: agentId, input: 'hi', ...body }, headers, key });

  it('gives every client compatibility mode by default, Agentry-Compat: strict the spec body', async () => {
    const clients = [NODE_SDK, PY_AGENTS, { 'user-agent': 'curl/8.5.0' }, { 'user-agent': 'ai-sdk/openai/4.0.0' }, {}];
    for (const headers of clients) {
      const response = await post(OPENAI_FIELDS, headers);
      expect(response.status, response.text).toBe(200);
      expect(response.headers['agentry-compat']).toBe('openai');
      expect(json(response)).toMatchObject({ instructions: 'Be brief.', temperature: 0.2 });
    }
    const strict = await post(OPENAI_FIELDS, { 'user-agent': 'curl/8.5.0', ...STRICT });
    expect(strict.status).toBe(400);
    expect(strict.headers['agentry-compat']).toBe('strict');
    expect(json(strict).error).toMatchObject({ code: 'validation_error', param: 'instructions' });
    expect(json(strict).error.message).toContain('`Agentry-Compat: openai`');
    expect((await post(OPENAI_FIELDS, { ...NODE_SDK, ...STRICT })).status).toBe(400);
    expect((await post(OPENAI_FIELDS, { 'agentry-compat': 'openai' })).status).toBe(200);
  });

  it('names the header in every strict refusal of something OpenAI accepts, and not for unknown fields', async () => {
    const hinted: [Json, string][] = [
      [{ previous_response_id: 'resp_x' }, 'previous_response_id'],
      [{ tools: [] }, 'tools'],
      [{ include: [] }, 'include'],
      [
        {
          input: [
            { role: 'system', content: 'x' },
            { role: 'user', content: 'y' },
          ],
        },
        'input[0].role',
      ],
      [{ input: [{ type: 'function_call', call_id: 'c', name: 'n', arguments: '{}' }] }, 'input[0].type'],
      [{ input: imageInput('data:image/png;base64,AAAA') }, 'input[0].content[1].image_url'],
      [{ input: [{ role: 'user', content: 'x', id: 'msg_1' }] }, 'input[0].id'],
    ];
    for (const [body, param] of hinted) {
      const response = await post(body, STRICT);
      expect(json(response).error, JSON.stringify(body)).toMatchObject({ code: 'validation_error', param });
      expect(json(response).error.message).toContain('Agentry-Compat: openai');
    }
    const unknown = await post({ colour: 'blue' }, STRICT);
    expect(json(unknown).error).toMatchObject({ param: 'colour', message: 'colour is not a recognised field' });
  });

  it('applies or refuses, naming it, every field it cannot honour with the value sent', async () => {
    const refused: [Json, string, string][] = [
      [{ prompt: { id: 'pmpt_1' } }, 'prompt', 'instructions'],
      [{ service_tier: 'flex' }, 'service_tier', 'one tier'],
      [{ top_logprobs: 2 }, 'top_logprobs', 'logprobs'],
      [{ reasoning: { effort: 'high' } }, 'reasoning', "agent's model"],
      [{ context_management: [{ type: 'summary' }] }, 'context_management[0].type', 'compaction'],
      [{ context_management: { type: 'compaction' } }, 'context_management', 'array'],
      [{ include: ['reasoning.encrypted_content', 'message.output_text.logprobs'] }, 'include[1]', 'logprobs'],
      [{ include: ['message.input_image.image_url'] }, 'include[0]', 'not supported'],
      [{ parallel_tool_calls: 'no' }, 'parallel_tool_calls', 'boolean'],
      [{ max_tool_calls: 1.5 }, 'max_tool_calls', 'integer'],
    ];
    for (const [fields, param, words] of refused) {
      const response = await post(fields);
      expect(response.status, JSON.stringify(fields)).toBe(400);
      expect(json(response).error, JSON.stringify(fields)).toMatchObject({ code: 'validation_error', param });
      expect(json(response).error.message).toContain(words);
    }
    const accepted: Json[] = [
      { truncation: 'disabled', service_tier: 'auto', top_logprobs: 0, reasoning: { effort: null }, prompt: null },
      { include: ['reasoning.encrypted_content', 'web_search_call.action.sources'], stream_options: {} },
      { prompt_cache_retention: '24h', context_management: null, parallel_tool_calls: false, max_tool_calls: 3 },
    ];
    for (const fields of accepted) {
      const response = await post(fields);
      expect(response.status, response.text).toBe(200);
    }
    // truncation is honoured and echoed; absent, the agent's context policy (truncation: "auto") is echoed.
    expect(json(await post({ truncation: 'auto' }))).toMatchObject({ status: 'completed', truncation: 'auto' });
    expect(json(await post({ truncation: 'disabled' }))).toMatchObject({ status: 'completed', truncation: 'disabled' });
    expect(json(await post({})).truncation).toBe('auto');
  });

  it('lets an API key fix the mode, for SDKs and other clients alike', async () => {
    const strictKey = await h.deps.orgs.createKey(orgId, undefined, undefined, 'strict');
    const openaiKey = await h.deps.orgs.createKey(orgId, undefined, undefined, 'openai');
    const autoKey = await h.deps.orgs.createKey(orgId, undefined, undefined, 'auto');
    expect((await post(OPENAI_FIELDS, NODE_SDK, strictKey)).status).toBe(400);
    expect((await post(OPENAI_FIELDS, {}, openaiKey)).status).toBe(200);
    expect((await post(OPENAI_FIELDS, NODE_SDK, autoKey)).status).toBe(200);
    expect((await post(OPENAI_FIELDS, {}, autoKey)).status).toBe(200);
    expect((await post(OPENAI_FIELDS, {}, strictKey)).status).toBe(400);
    expect((await post(OPENAI_FIELDS, { 'agentry-compat': 'openai' }, strictKey)).status).toBe(200);
  });

  it('answers with the numbers Open Responses requires, and the tools of the agent', async () => {
    const response = json(await post({}));
    expect(response).toMatchObject({
      temperature: 1,
      top_p: 1,
      presence_penalty: 0,
      frequency_penalty: 0,
      top_logprobs: 0,
      max_output_tokens: null,
      max_tool_calls: null,
      reasoning: { effort: null, summary: null },
      service_tier: 'default',
      safety_identifier: null,
      prompt_cache_key: null,
      tools: [],
    });
    const tooled = await flow.createAgent({
      clientTools: [WEATHER_TOOL],
      mcpServers: [ASK_USER_QUESTION_SERVER, { kind: 'internal', name: 'sandbox' }],
    });
    const withTools = json(await h.request('POST', '/v1/responses', { body: { model: tooled, input: 'hi' } }));
    expect(withTools.tools).toEqual([
      { ...WEATHER_TOOL, description: 'Current weather for a city' },
      expect.objectContaining({ type: 'function', name: 'ask_user_question', strict: false }),
      { type: 'mcp', server_label: 'agentry', allowed_tools: ['sandbox'], require_approval: 'never' },
    ]);
    expect(json(await h.request('GET', `/v1/responses/${withTools.id}`)).tools).toEqual(withTools.tools);
    const compat = json(await post({ max_output_tokens: 50, top_p: 0.5, metadata: { a: 'b' } }, NODE_SDK));
    expect(compat).toMatchObject({ max_output_tokens: 50, top_p: 0.5, temperature: 1, metadata: { a: 'b' } });
  });

  it('drops the vendor events for SDK stream helpers and when asked, and keeps them otherwise', async () => {
    const base = await h.listen();
    const ask = await flow.createAgent({ mcpServers: [ASK_USER_QUESTION_SERVER] });
    const stream = async (headers: Record<string, string>) => {
      const reply = await fetch(`${base}/v1/responses`, {
        method: 'POST',
        headers: { authorization: `Bearer ${h.key}`, 'content-type': 'application/json', ...headers },
        body: JSON.stringify({ model: ask, input: 'ask Why?', stream: true }),
      });
      return (await reply.text()).includes('response.agentry_tool_call.action_required');
    };
    expect(await stream({})).toBe(true);
    expect(await stream(NODE_SDK)).toBe(true);
    expect(await stream({ ...NODE_SDK, 'x-stainless-helper-method': 'stream' })).toBe(false);
    expect(await stream({ 'agentry-stream-events': 'standard' })).toBe(false);
    expect(await stream({ 'x-stainless-helper-method': 'stream', 'agentry-stream-events': 'all' })).toBe(true);
  });

  it('takes an image as a data: URL, and refuses a URL the egress guard blocks or data that is no image', async () => {
    const dataUrl = `data:image/png;base64,${PNG.toString('base64')}`;
    const read = await post({ input: imageInput(dataUrl) }, NODE_SDK);
    expect(read.status, read.text).toBe(200);
    expect(json(read).output_text).toBe('describe');
    const files = json(await h.request('GET', '/v1/files')).data;
    expect(files[0]).toMatchObject({ purpose: 'vision', filename: 'image.png', bytes: PNG.length });
    // A retry with the same Idempotency-Key is the same request: the image of the retry is not kept as a file.
    const visionFiles = async () =>
      json(await h.request('GET', '/v1/files?limit=100')).data.filter((file: Json) => file.purpose === 'vision').length;
    const before = await visionFiles();
    const retried = { ...NODE_SDK, 'idempotency-key': `image-${dialect}` };
    const once = await post({ input: imageInput(dataUrl) }, retried);
    const again = await post({ input: imageInput(dataUrl) }, retried);
    expect(again.status, again.text).toBe(200);
    expect(json(again).id).toBe(json(once).id);
    expect(await visionFiles()).toBe(before + 1);
    // A request refused after its image was stored leaves no file behind.
    const refusedLate = await post({ input: imageInput(dataUrl), conversation: 'conv_missing' }, NODE_SDK);
    expect(refusedLate.status, refusedLate.text).toBeGreaterThanOrEqual(400);
    expect(await visionFiles()).toBe(before + 1);
    const refused: [string, RegExp][] = [
      [`${imageBase}/pixel.png`, /could not fetch the image/],
      ['data:text/plain;base64,aGk=', /PNG, JPEG, GIF or WebP/],
      ['ftp://example.com/x.png', /data: URL or an https URL/],
    ];
    for (const [url, message] of refused) {
      const response = await post({ input: imageInput(url) }, NODE_SDK);
      expect(json(response).error, url).toMatchObject({ param: 'input[0].content[1].image_url' });
      expect(json(response).error.message).toMatch(message);
    }
  });

  it('lists as models the agents of the key’s organization only, then the configured providers', async () => {
    const other = await h.createOrg(`models-other-${dialect}`);
    const theirs = await flows(h).createAgent({ name: 'theirs' }, other.key);
    const mine = json(await h.request('GET', '/v1/models'));
    expect(mine.object).toBe('list');
    expect(mine.data.map((model: Json) => model.id)).toContain(agentId);
    expect(mine.data.map((model: Json) => model.id)).not.toContain(theirs);
    expect(mine.data.at(-1)).toMatchObject({ id: 'scripted', object: 'model', kind: 'provider' });
    const listed = json(await h.request('GET', '/v1/models', { key: other.key })).data.map((model: Json) => model.id);
    expect(listed).toContain(theirs);
    expect(listed).not.toContain(agentId);
  });

  it('shows a conversation created without an agent as a session with agentId null until a response fixes it', async () => {
    const created = json(await h.request('POST', '/v1/conversations', { body: { metadata: { k: 'v' } } }));
    const sessionId = created.id.slice('conv_'.length);
    const listed = json(await h.request('GET', '/v1/sessions?limit=100')).data;
    expect(listed.find((session: Json) => session.id === sessionId)).toMatchObject({ agentId: null, status: 'idle' });
    const message = await h.request('POST', `/v1/sessions/${sessionId}/messages`, {
      body: { parts: [{ type: 'text', text: 'hi' }] },
      headers: { 'idempotency-key': `k-${sessionId}` },
    });
    expect(message.status).toBe(409);
    expect(json(message).error.code).toBe('agent_required');
    const bound = json(await post({ conversation: created.id }));
    expect(bound.conversation.id).toBe(created.id);
    expect(json(await h.request('GET', `/v1/sessions/${sessionId}`)).session.agentId).toBe(agentId);
    const withAgent = json(await h.request('POST', '/v1/conversations', { body: { agent: agentId } }));
    expect(json(await h.request('GET', `/v1/sessions/${withAgent.id.slice(5)}`)).session.agentId).toBe(agentId);
  });
});

describe.each(dialects())('responses deployment settings (%s)', (dialect) => {
  let h: Harness;
  let agentId: string;

  beforeAll(async () => {
    h = await createHarness(dialect, {
      AGENTRY_RESPONSES_COMPAT: 'strict',
      AGENTRY_RESPONSES_STREAM_EVENTS: 'standard',
      AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true',
    });
    agentId = await flows(h).createAgent({ mcpServers: [ASK_USER_QUESTION_SERVER] });
  });
  afterAll(() => h.close());

  it('makes every client strict with AGENTRY_RESPONSES_COMPAT=strict, the header still choosing', async () => {
    const body = { model: agentId, input: 'hi', instructions: 'x' };
    expect((await h.request('POST', '/v1/responses', { body, headers: NODE_SDK })).status).toBe(400);
    const asked = await h.request('POST', '/v1/responses', { body, headers: { 'agentry-compat': 'openai' } });
    expect(asked.status).toBe(200);
  });

  it('leaves the vendor events out with AGENTRY_RESPONSES_STREAM_EVENTS=standard unless a request asks for them', async () => {
    const base = await h.listen();
    const stream = async (headers: Record<string, string>) => {
      const reply = await fetch(`${base}/v1/responses`, {
        method: 'POST',
        headers: { authorization: `Bearer ${h.key}`, 'content-type': 'application/json', ...headers },
        body: JSON.stringify({ model: agentId, input: 'ask Why?', stream: true }),
      });
      return (await reply.text()).includes('response.agentry_tool_call.');
    };
    expect(await stream({})).toBe(false);
    expect(await stream({ 'agentry-stream-events': 'all' })).toBe(true);
  });

  it('fetches an image by URL once, through the egress guard (insecure destinations allowed here)', async () => {
    const body = { model: agentId, input: imageInput(`${imageBase}/pixel.png`) };
    const response = await h.request('POST', '/v1/responses', { body, headers: { 'agentry-compat': 'openai' } });
    expect(response.status, response.text).toBe(200);
    const files = json(await h.request('GET', '/v1/files')).data;
    expect(files[0]).toMatchObject({ purpose: 'vision', media_type: 'image/png', bytes: PNG.length });
    const html = { model: agentId, input: imageInput(`${imageBase}/page.html`) };
    const refused = await h.request('POST', '/v1/responses', { body: html, headers: { 'agentry-compat': 'openai' } });
    expect(json(refused).error.message).toMatch(/not text\/html/);
  });
});

describe('agentry keys create --compat', () => {
  it('creates a key whose requests get the mode it names, and refuses an unknown mode', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'agentry-compat-cli-'));
    const h = await createHarness('sqlite', { AGENTRY_DATA_DIR: dir });
    try {
      const agentId = await flows(h).createAgent({});
      const created = runCli(['keys', 'create', '--org', 'default', '--compat', 'strict'], { AGENTRY_DATA_DIR: dir });
      expect(created.status, created.stderr).toBe(0);
      const key = created.stdout.trim();
      const body = { model: agentId, input: 'hi', instructions: 'Be brief.' };
      const response = await h.request('POST', '/v1/responses', { body, key });
      expect(response.status, response.text).toBe(400);
      expect(response.headers['agentry-compat']).toBe('strict');
      expect((await h.request('POST', '/v1/responses', { body })).status).toBe(200);
      const bad = runCli(['keys', 'create', '--org', 'default', '--compat', 'loose'], { AGENTRY_DATA_DIR: dir });
      expect(bad.status).not.toBe(0);
      expect(bad.stderr).toContain('--compat must be one of auto, strict, openai');
    } finally {
      await h.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
