/**
 * Image and file parts of POST /v1/sessions/{id}/messages: the Message shows the attachments (also after the file
 * is deleted), the model reads them (the scripted model's echo, and the request a local OpenAI-compatible server
 * receives), every refusal is a 400 naming the field (404 for a file the organization does not have), and a retry
 * with the same Idempotency-Key answers the same message. Once per dialect.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Stub, startStub, textReply } from './helpers/chat-completions-stub.ts';
import { flows, type Json } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';

/** A real 1x1 PNG. */
const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==',
  'base64',
);
const NOTES = 'The quarterly numbers went up by four percent.';

describe.each(dialects())('session message attachments (%s)', (dialect) => {
  let h: Harness;
  let base: string;
  let stub: Stub;
  let other: { orgId: string; key: string };
  let scriptedAgent: string;
  let stubAgent: string;
  const flow = flows(() => h);

  beforeAll(async () => {
    stub = await startStub();
    h = await createHarness(dialect, { AGENTRY_PROVIDERS: JSON.stringify({ stub: { baseURL: stub.url } }) });
    base = await h.listen();
    scriptedAgent = await flow.createAgent({});
    stubAgent = await flow.createAgent({ model: 'stub/test-model' });
    other = await h.createOrg(`attachments-other-${randomUUID()}`);
  });
  afterAll(async () => {
    await h.close();
    await stub.close();
  });

  async function upload(data: Uint8Array | string, name: string, type: string, key = h.key): Promise<string> {
    const form = new FormData();
    form.append('file', new Blob([data], { type }), name);
    const response = await fetch(`${base}/v1/files`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}` },
      body: form,
    });
    const body = (await response.json()) as Json;
    expect(response.status, JSON.stringify(body)).toBe(201);
    return body.id;
  }

  const text = (value: string) => ({ type: 'text', text: value });
  const image = (fileId: string, extra: Json = {}) => ({ type: 'image', fileId, ...extra });
  const file = (fileId: string) => ({ type: 'file', fileId });

  /** Posts parts to a new session of the agent; expects `status` and returns the body. */
  async function post(parts: unknown[], status: number, agentId = scriptedAgent): Promise<Json> {
    const sessionId = await flow.createSession(agentId);
    const response = await flow.postMessage(sessionId, { parts });
    expect(response.status, response.text).toBe(status);
    return { sessionId, ...json(response) };
  }

  async function refused(parts: unknown[], param: string, status = 400, code = 'validation_error'): Promise<Json> {
    const body = await post(parts, status);
    expect(body.error).toMatchObject({ code, ...(param === '' ? {} : { param }) });
    return body.error;
  }

  it('shows the attachments in the Message, and the model reads the text file and the image (scripted)', async () => {
    const notesId = await upload(NOTES, 'notes.txt', 'text/plain');
    const imageId = await upload(PNG, 'pixel.png', 'image/png');
    const accepted = await post([text('summarise'), file(notesId), image(imageId, { detail: 'low' })], 202);
    const shown = [
      text('summarise'),
      { type: 'file', fileId: notesId, filename: 'notes.txt' },
      { type: 'image', fileId: imageId, filename: 'pixel.png', detail: 'low' },
    ];
    expect(accepted.parts).toEqual(shown);
    const done = await flow.waitForMessage(accepted.sessionId, accepted.id);
    expect(done.status).toBe('completed');
    // The scripted model echoes the text it read: the prompt, then the file's content under its name.
    expect(done.response.parts[0].text).toContain('summarise');
    expect(done.response.parts[0].text).toContain(`--- notes.txt ---\n${NOTES}`);
    const list = json(await h.request('GET', `/v1/sessions/${accepted.sessionId}/messages`));
    expect(list.data[0].parts).toEqual(shown);
  });

  it('gives a provider the image as an image part and the text file as text', async () => {
    const notesId = await upload(NOTES, 'notes.md', 'text/markdown');
    const imageId = await upload(PNG, 'chart.png', 'image/png');
    stub.bodies.length = 0;
    stub.responders.push(textReply(['I see a pixel']));
    const accepted = await post([text('what is this?'), image(imageId), file(notesId)], 202, stubAgent);
    const done = await flow.waitForMessage(accepted.sessionId, accepted.id);
    expect(done.status, JSON.stringify(done.error)).toBe('completed');
    expect(done.response.parts[0].text).toBe('I see a pixel');
    const messages = stub.bodies[0]?.messages as Json[];
    const user = messages.filter((message) => message.role === 'user').at(-1);
    expect(user?.content).toEqual([
      { type: 'text', text: 'what is this?' },
      { type: 'image_url', image_url: { url: `data:image/png;base64,${PNG.toString('base64')}` } },
      { type: 'text', text: `--- notes.md ---\n${NOTES}` },
    ]);
  });

  it("gives a provider the image's detail, as chat completions' image_url.detail", async () => {
    const imageId = await upload(PNG, 'detailed.png', 'image/png');
    stub.bodies.length = 0;
    stub.responders.push(textReply(['A pixel, closely']));
    const accepted = await post([text('look closely'), image(imageId, { detail: 'high' })], 202, stubAgent);
    const done = await flow.waitForMessage(accepted.sessionId, accepted.id);
    expect(done.status, JSON.stringify(done.error)).toBe('completed');
    const messages = stub.bodies[0]?.messages as Json[];
    const user = messages.filter((message) => message.role === 'user').at(-1);
    expect(user?.content).toEqual([
      { type: 'text', text: 'look closely' },
      { type: 'image_url', image_url: { url: `data:image/png;base64,${PNG.toString('base64')}`, detail: 'high' } },
    ]);
  });

  it('takes attachments without text; a file part holding an image is read as an image', async () => {
    const imageId = await upload(PNG, 'only.png', 'image/png');
    const accepted = await post([file(imageId.toUpperCase())], 202);
    expect(accepted.parts).toEqual([text(''), { type: 'image', fileId: imageId, filename: 'only.png' }]);
    expect((await flow.waitForMessage(accepted.sessionId, accepted.id)).status).toBe('completed');
  });

  it("previews the run of a message of files alone by the files' names", async () => {
    const imageId = await upload(PNG, 'diagram.png', 'image/png');
    const notesId = await upload(NOTES, 'minutes.txt', 'text/plain');
    const accepted = await post([image(imageId), file(notesId)], 202);
    const run = json(await h.request('GET', `/v1/runs/${accepted.runId}`));
    expect(run.input_preview).toBe('[image diagram.png] [file minutes.txt]');
    // The model call of its step is named the same way.
    expect((await flow.waitForMessage(accepted.sessionId, accepted.id)).status).toBe('completed');
    const trace = json(await h.request('GET', `/v1/runs/${accepted.runId}/trace`)).data;
    const modelCall = trace.find((span: Json) => span.kind === 'model_call');
    expect(modelCall?.input_preview).toBe('[image diagram.png] [file minutes.txt]');
    // With text, the preview is the text alone, as before.
    const withText = await post([text('read these'), image(imageId)], 202);
    expect(json(await h.request('GET', `/v1/runs/${withText.runId}`)).input_preview).toBe('read these');
  });

  it('refuses a file no model can read, and a text file in an image part, naming the part', async () => {
    const binary = await upload(new Uint8Array([0, 1, 2, 3]), 'blob.bin', 'application/octet-stream');
    const notes = await upload(NOTES, 'notes.txt', 'text/plain');
    const cannot = await refused([text('x'), file(binary)], 'parts[1].fileId');
    expect(cannot.message).toContain('cannot be given to a model');
    const notImage = await refused([text('x'), file(notes), image(notes)], 'parts[2].fileId');
    expect(notImage.message).toContain('needs an image file');
  });

  it("answers 404 for another organization's file, a deleted file and an unknown id", async () => {
    const theirs = await upload(PNG, 'theirs.png', 'image/png', other.key);
    await refused([image(theirs)], '', 404, 'not_found');
    const gone = await upload(PNG, 'gone.png', 'image/png');
    expect((await h.request('DELETE', `/v1/files/${gone}`)).status).toBe(200);
    await refused([image(gone)], '', 404, 'not_found');
    await refused([text('x'), file(randomUUID())], '', 404, 'not_found');
    // Nothing was accepted: the sessions of the refusals have no message.
    const sessionId = await flow.createSession(scriptedAgent);
    await flow.postMessage(sessionId, { parts: [image(theirs)] });
    expect(json(await h.request('GET', `/v1/sessions/${sessionId}/messages`)).total).toBe(0);
  });

  it('names the field of a malformed part', async () => {
    const id = randomUUID();
    await refused([{ type: 'video', fileId: id }], 'parts[0].type');
    await refused([{ fileId: id }], 'parts[0].type');
    await refused([text('x'), { type: 'image' }], 'parts[1].fileId');
    await refused([{ type: 'file', fileId: 'not-a-uuid' }], 'parts[0].fileId');
    await refused([{ type: 'file', fileId: 42 }], 'parts[0].fileId');
    await refused([image(id, { detail: 'ultra' })], 'parts[0].detail');
    await refused([{ type: 'file', fileId: id, detail: 'low' }], 'parts[0].detail');
    await refused([{ type: 'text', text: 'x', fileId: id }], 'parts[0].fileId');
    await refused([{ type: 'image', fileId: `${id}\u0000` }], 'parts[0].fileId');
    await refused([], 'parts');
    await refused(['image'], 'parts[0]');
  });

  it('takes at most 16 image and file parts', async () => {
    const imageId = await upload(PNG, 'many.png', 'image/png');
    const sixteen = Array.from({ length: 16 }, () => image(imageId));
    const accepted = await post([text('count them'), ...sixteen], 202);
    expect(accepted.parts).toHaveLength(17);
    const error = await refused([text('too many'), ...sixteen, file(imageId)], 'parts');
    expect(error.message).toContain('at most 16');
  });

  it('answers a retry with the same Idempotency-Key with the same message, and a changed one with 409', async () => {
    const first = await upload(PNG, 'first.png', 'image/png');
    const second = await upload(PNG, 'second.png', 'image/png');
    const sessionId = await flow.createSession(scriptedAgent);
    const idempotencyKey = randomUUID();
    const body = { parts: [text('look'), image(first)] };
    const sent = await flow.postMessage(sessionId, body, { idempotencyKey });
    expect(sent.status, sent.text).toBe(202);
    const again = await flow.postMessage(sessionId, body, { idempotencyKey });
    expect(again.status).toBe(202);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(json(again).id).toBe(json(sent).id);
    const changed = await flow.postMessage(sessionId, { parts: [text('look'), image(second)] }, { idempotencyKey });
    expect(changed.status).toBe(409);
  });

  it('keeps showing a deleted file in the transcript; later turns tell the model it is gone', async () => {
    const notesId = await upload(NOTES, 'brief.txt', 'text/plain');
    stub.bodies.length = 0;
    stub.responders.push(textReply(['read it']), textReply(['noted']));
    const accepted = await post([text('read this'), file(notesId)], 202, stubAgent);
    expect((await flow.waitForMessage(accepted.sessionId, accepted.id)).status).toBe('completed');
    expect((await h.request('DELETE', `/v1/files/${notesId}`)).status).toBe(200);

    const next = await flow.submit(accepted.sessionId, 'and now?');
    expect((await flow.waitForMessage(accepted.sessionId, next.id)).status).toBe('completed');
    const again = json(await h.request('GET', `/v1/sessions/${accepted.sessionId}/messages`));
    expect(again.data[0].parts).toEqual([text('read this'), { type: 'file', fileId: notesId, filename: 'brief.txt' }]);
    const sent = (stub.bodies[1]?.messages ?? []) as Json[];
    const firstUser = sent.find((message) => message.role === 'user');
    expect(JSON.stringify(firstUser?.content)).toContain(`[file ${notesId} is no longer available]`);
    expect(JSON.stringify(firstUser?.content)).not.toContain(NOTES);
  });
});
