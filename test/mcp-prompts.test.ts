/**
 * MCP prompts as message templates (docs/mcp-auth.md "Prompts"): listing a connector's prompts, and an
 * `mcp_prompt` part of POST /v1/sessions/{id}/messages expanded with `prompts/get` of the session's agent's server
 * (the scripted model echoes what it read). A retried submission replays without asking the server again; every
 * error names the field or is a 502 from the catalog; hostile answers are bounded and made storable; the end
 * user's credential is used. Real MCP servers on loopback (the v1 SDK, and the v2 SDK for one case), once per
 * dialect.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flows, type Json } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';
import { HUGE_CHARS, type PromptServer, SECOND_CURSOR, startPromptServer } from './helpers/mcp-prompt-server.ts';
import { type ResourceServer, startResourceServer } from './helpers/mcp-resource-server.ts';

const REQUEST_TIMEOUT_MS = 2000;

describe.each(dialects())('MCP prompts as message parts (%s)', (dialect) => {
  let h: Harness;
  let server: PromptServer;
  let v2: ResourceServer;
  let connectorId: string;
  let agentId: string;
  let sessionId: string;
  const flow = flows(() => h);

  const prompt = (name: string, args?: Record<string, string>, label = 'kb') => ({
    type: 'mcp_prompt',
    server: label,
    name,
    ...(args === undefined ? {} : { arguments: args }),
  });
  const post = (parts: Json[], options: { session?: string; key?: string; idempotencyKey?: string } = {}) =>
    flow.postMessage(
      options.session ?? sessionId,
      { parts },
      {
        ...(options.key === undefined ? {} : { key: options.key }),
        idempotencyKey: options.idempotencyKey ?? randomUUID(),
      },
    );
  const gets = () => server.methods.filter((method) => method === 'prompts/get').length;
  const expectError = (res: { status: number; text: string }, status: number, param?: string) => {
    expect(res.status, res.text).toBe(status);
    if (param !== undefined) expect(json(res as never).error.param, res.text).toBe(param);
    return json(res as never).error as Json;
  };

  beforeAll(async () => {
    server = await startPromptServer({ slowMs: 8000, accept: ['Bearer conn', 'Bearer alice-token'] });
    v2 = await startResourceServer();
    h = await createHarness(dialect, {
      AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true',
      AGENTRY_MCP_REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
    });
    const created = await h.request('POST', '/v1/mcp_servers', {
      body: { name: 'knowledge', url: server.url, headers: { Authorization: 'Bearer conn' } },
    });
    expect(created.status, created.text).toBe(201);
    connectorId = json(created).id;
    const library = await h.request('POST', '/v1/mcp_servers', { body: { name: 'library', url: v2.url } });
    expect(library.status, library.text).toBe(201);
    agentId = await flow.createAgent({
      model: 'scripted',
      mcpServers: [
        { kind: 'custom', serverId: connectorId, name: 'kb' },
        { kind: 'custom', serverId: json(library).id },
      ],
    });
    sessionId = await flow.createSession(agentId);
  });
  afterAll(async () => {
    await h.close();
    await server.close();
    await v2.close();
  });

  it("lists a connector's prompts with their arguments, organization-isolated", async () => {
    const res = await h.request('GET', `/v1/mcp_servers/${connectorId}/prompts`);
    expect(res.status, res.text).toBe(200);
    const summarize = json(res).data.find((item: Json) => item.name === 'summarize');
    expect(summarize).toEqual({
      name: 'summarize',
      description: 'Summarizes a topic',
      arguments: [
        { name: 'topic', description: 'What to summarize', required: true },
        { name: 'style', description: 'How', required: false },
      ],
    });
    expect(json(res)).toMatchObject({ has_more: true, next_cursor: SECOND_CURSOR });
    const next = await h.request('GET', `/v1/mcp_servers/${connectorId}/prompts?cursor=${SECOND_CURSOR}`);
    expect(next.status, next.text).toBe(200);
    expect(json(next)).toMatchObject({ data: [{ name: 'later', arguments: [] }], has_more: false, next_cursor: null });
    // Lists are asked one page at a time (resources too), never walked whole.
    const resources = await h.request('GET', `/v1/mcp_servers/${connectorId}/resources`);
    expect(json(resources)).toMatchObject({ data: [{ uri: 'docs://a' }], has_more: true, next_cursor: SECOND_CURSOR });
    const other = await h.createOrg('prompt-lister');
    expect((await h.request('GET', `/v1/mcp_servers/${connectorId}/prompts`, { key: other.key })).status).toBe(404);
  });

  it('expands a prompt with arguments into the text the model reads, and keeps the part as sent', async () => {
    const res = await post([
      { type: 'text', text: 'Please:' },
      prompt('summarize', { topic: 'tides', style: 'terse' }),
    ]);
    expect(res.status, res.text).toBe(202);
    const expanded = 'Summarize tides in a terse style.';
    const part = { type: 'mcp_prompt', server: 'kb', name: 'summarize', arguments: { topic: 'tides', style: 'terse' } };
    expect(json(res).parts).toEqual([
      { type: 'text', text: 'Please:' },
      { ...part, text: expanded },
    ]);
    const done = await flow.waitForMessage(sessionId, json(res).id);
    expect(done.status).toBe('completed');
    // The scripted model answers a script without directives with the text it read.
    expect(done.response.parts[0].text).toBe(`Please:\n${expanded}`);
    const listed = await h.request('GET', `/v1/sessions/${sessionId}/messages`);
    const shown = json(listed).data.find((message: Json) => message.id === json(res).id);
    expect(shown.parts[1]).toEqual({ ...part, text: expanded });
  });

  it('takes a prompt part beside text and file parts, each refusal named by the index it was sent at', async () => {
    const form = new FormData();
    form.append('file', new Blob(['Tides follow the moon.'], { type: 'text/plain' }), 'tides.txt');
    const uploaded = await fetch(`${await h.listen()}/v1/files`, {
      method: 'POST',
      headers: { authorization: `Bearer ${h.key}` },
      body: form,
    });
    expect(uploaded.status).toBe(201);
    const fileId = ((await uploaded.json()) as Json).id as string;
    const res = await post([
      { type: 'file', fileId },
      { type: 'text', text: 'Please:' },
      prompt('summarize', { topic: 'tides' }),
    ]);
    expect(res.status, res.text).toBe(202);
    const expanded = 'Summarize tides.';
    expect(json(res).parts).toEqual([
      { type: 'text', text: 'Please:' },
      { type: 'mcp_prompt', server: 'kb', name: 'summarize', arguments: { topic: 'tides' }, text: expanded },
      { type: 'file', fileId, filename: 'tides.txt' },
    ]);
    const done = await flow.waitForMessage(sessionId, json(res).id);
    expect(done.status).toBe('completed');
    expect(done.response.parts[0].text).toContain(`Please:\n${expanded}`);
    // The file reached the model too (text files are read as text).
    expect(done.response.parts[0].text).toContain('Tides follow the moon.');
    // A file part after a prompt part is named by its own index; an unknown prompt by its.
    expectError(await post([prompt('summarize', { topic: 'x' }), { type: 'file', fileId: randomUUID() }]), 404);
    expectError(await post([{ type: 'file', fileId }, prompt('nope')]), 400, 'parts[1].name');
  });

  it('finds a prompt listed on a later page', async () => {
    const res = await post([prompt('later')]);
    expect(res.status, res.text).toBe(202);
    expect(json(res).parts[0].text).toBe('From the second page.');
  });

  it('replays a retried submission without asking the server again', async () => {
    const key = randomUUID();
    const parts = [prompt('summarize', { topic: 'waves' })];
    const first = await post(parts, { idempotencyKey: key });
    expect(first.status, first.text).toBe(202);
    const asked = gets();
    const again = await post(parts, { idempotencyKey: key });
    expect(again.status, again.text).toBe(202);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(json(again).id).toBe(json(first).id);
    expect(gets()).toBe(asked);
    // The same key with other arguments is a conflict, found before the server is asked.
    expectError(await post([prompt('summarize', { topic: 'storms' })], { idempotencyKey: key }), 409);
    expect(gets()).toBe(asked);
    await flow.waitForMessage(sessionId, json(first).id);
  });

  it('names the field of an unknown server, prompt or argument', async () => {
    const asked = gets();
    expectError(
      await post([{ type: 'text', text: 'x' }, prompt('summarize', { topic: 'a' }, 'nope')]),
      400,
      'parts[1].server',
    );
    expectError(await post([prompt('missing')]), 400, 'parts[0].name');
    expectError(await post([prompt('summarize')]), 400, 'parts[0].arguments.topic');
    expectError(await post([prompt('summarize', { topic: 'a', tone: 'b' })]), 400, 'parts[0].arguments.tone');
    expectError(await post([prompt('summarize', { topic: 1 } as never)]), 400);
    expectError(await post([{ type: 'mcp_prompt', server: 'kb' }]), 400);
    expect(gets()).toBe(asked);
  });

  it('refuses what a message cannot carry, naming the part', async () => {
    const assistant = expectError(await post([prompt('dialogue')]), 400, 'parts[0]');
    expect(assistant.message).toContain('assistant message');
    const audio = expectError(await post([prompt('audio')]), 400, 'parts[0]');
    expect(audio.message).toContain('audio content');
    const huge = expectError(await post([prompt('huge')]), 400, 'parts[0]');
    expect(huge.message).toContain(`${HUGE_CHARS} characters`);
    expect(expectError(await post([prompt('empty')]), 400, 'parts[0]').message).toContain('no content');
    expect(expectError(await post([prompt('gallery')]), 400, 'parts[0]').message).toContain('9 images');
    const broken = expectError(await post([prompt('broken')]), 400, 'parts[0]');
    expect(broken.message).toContain('refused prompt "broken"');
  });

  it('stores NUL and lone surrogates as U+FFFD, embedded text resources as text, images as files', async () => {
    const hostile = await post([prompt('hostile')]);
    expect(hostile.status, hostile.text).toBe(202);
    expect(json(hostile).parts[0].text).toBe('a\uFFFDb\uFFFDc');
    const embedded = await post([prompt('embedded')]);
    expect(embedded.status, embedded.text).toBe(202);
    expect(json(embedded).parts[0].text).toBe('The FAQ text.');
    const picture = await post([prompt('picture')]);
    expect(picture.status, picture.text).toBe(202);
    const part = json(picture).parts[0];
    expect(part.text).toBe('Describe this picture.');
    expect(part.fileIds).toHaveLength(1);
    const file = await h.request('GET', `/v1/files/${part.fileIds[0]}`);
    expect(file.status, file.text).toBe(200);
    expect(json(file).purpose).toBe('vision');
    expect((await flow.waitForMessage(sessionId, json(picture).id)).status).toBe('completed');
    // The user input the model reads carries the image as an attachment.
    const items = await h.deps.storage.db
      .selectFrom('items')
      .select('content')
      .where('message_id', '=', json(picture).id)
      .execute();
    const input = items.map((item) => JSON.parse(item.content)).find((content) => content.type === 'user_message');
    expect(input).toEqual({
      type: 'user_message',
      text: 'Describe this picture.',
      attachments: [{ kind: 'image', fileId: part.fileIds[0] }],
    });
    // A message refused after its prompt's image was stored (a file part naming no file) keeps no file of it.
    const files = async () => json(await h.request('GET', '/v1/files?limit=100')).data.length;
    const before = await files();
    const refused = await post([prompt('picture'), { type: 'image', fileId: randomUUID() }]);
    expect(refused.status, refused.text).toBeGreaterThanOrEqual(400);
    expect(refused.status, refused.text).toBeLessThan(500);
    expect(await files()).toBe(before);
    // Nor does a retry that an earlier request with its key answers.
    const key = randomUUID();
    const first = await post([prompt('picture')], { idempotencyKey: key });
    expect(first.status, first.text).toBe(202);
    const retried = await post([prompt('picture')], { idempotencyKey: key });
    expect(json(retried).id).toBe(json(first).id);
    expect(await files()).toBe(before + 1);
  });

  it("uses the end user's credential, else the organization's, and reports a refused one as 502", async () => {
    const put = (body: Json) => h.request('PUT', `/v1/mcp_servers/${connectorId}/credentials`, { body });
    expect((await put({ user: 'alice', bearer_token: 'alice-token' })).status).toBe(200);
    const created = await h.request('POST', '/v1/sessions', { body: { agentId, endUser: 'alice' } });
    expect(created.status, created.text).toBe(201);
    const alice = await post([prompt('whoami')], { session: json(created).session.id });
    expect(alice.status, alice.text).toBe(202);
    expect(json(alice).parts[0].text).toBe('token=Bearer alice-token');
    // Without an end user the organization's credential applies; one the server refuses is a 502, not a 500.
    expect((await put({ bearer_token: 'org-wrong' })).status).toBe(200);
    try {
      const refused = expectError(await post([prompt('whoami')]), 502);
      expect(refused.code).toBe('mcp_server_unreachable');
      expect(refused.message).toContain('authorization_required');
    } finally {
      await h.request('DELETE', `/v1/mcp_servers/${connectorId}/credentials`);
    }
    const org = await post([prompt('whoami')]);
    expect(org.status, org.text).toBe(202);
    expect(json(org).parts[0].text).toBe('token=Bearer conn');
  });

  it('bounds a slow server in time and reports an unreachable one as 502', async () => {
    const started = Date.now();
    const slow = expectError(await post([prompt('slow')]), 502);
    expect(slow.code).toBe('mcp_server_unreachable');
    expect(Date.now() - started).toBeLessThan(3 * REQUEST_TIMEOUT_MS + 2000);
    const gone = await startPromptServer();
    const created = await h.request('POST', '/v1/mcp_servers', { body: { name: 'gone', url: gone.url } });
    expect(created.status, created.text).toBe(201);
    const agent = await flow.createAgent({
      name: 'gone-agent',
      model: 'scripted',
      mcpServers: [{ kind: 'custom', serverId: json(created).id, name: 'gone' }],
    });
    const session = await flow.createSession(agent);
    await gone.close();
    const unreachable = expectError(await post([prompt('summarize', { topic: 'x' }, 'gone')], { session }), 502);
    expect(unreachable.code).toBe('mcp_server_unreachable');
  });

  it('uses a prompt of a v2 SDK server, labelled by its connector name', async () => {
    const res = await post([prompt('greet', { name: 'Ada' }, 'library')]);
    expect(res.status, res.text).toBe(202);
    expect(json(res).parts[0].text).toBe('Say hello to Ada.');
    const done = await flow.waitForMessage(sessionId, json(res).id);
    expect(done.response.parts[0].text).toBe('Say hello to Ada.');
  });

  it("is a 404 for another organization's session", async () => {
    const other = await h.createOrg('prompt-user');
    const asked = gets();
    expectError(await post([prompt('summarize', { topic: 'a' })], { key: other.key }), 404);
    expect(gets()).toBe(asked);
  });
});
