/**
 * The v1 Files API over real HTTP (multipart bodies sent by fetch): upload, metadata, newest-first pagination,
 * byte-exact content, deletion, organization isolation, scopes and the upload limits (streamed: an oversized
 * upload leaves nothing on disk). Also the model-facing helpers: classifyForModel and createFileReader.
 * Once per dialect.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { classifyForModel, createFileReader, resolveMediaType } from '../src/domain/files/file-service.ts';
import { contentDisposition } from '../src/http/routes/files.ts';
import { waitUntil } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';

type Json = Record<string, any>;

const MAX_UPLOAD = 4096;
/** A real 1x1 PNG. */
const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==',
  'base64',
);
const sha256 = (data: Uint8Array | string) => createHash('sha256').update(data).digest('hex');
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe('classifyForModel', () => {
  it.each([
    ['image/png', 'image'],
    ['image/jpeg', 'image'],
    ['IMAGE/JPEG; q=1', 'image'],
    ['image/gif', 'image'],
    ['image/webp', 'image'],
    ['text/plain', 'text'],
    ['text/markdown; charset=utf-8', 'text'],
    ['text/csv', 'text'],
    ['application/json', 'text'],
    ['application/ld+json', 'text'],
    ['application/xml', 'text'],
    ['application/x-yaml', 'text'],
    ['application/yaml', 'text'],
    ['application/csv', 'text'],
    ['image/svg+xml', null],
    ['image/bmp', null],
    ['application/pdf', null],
    ['application/zip', null],
    ['application/octet-stream', null],
    ['not a type', null],
    ['', null],
  ])('%s → %s', (mediaType, expected) => {
    expect(classifyForModel(mediaType)).toBe(expected);
  });
});

describe('resolveMediaType', () => {
  it.each([
    ['image/png', 'x.bin', 'image/png'],
    ['application/octet-stream', 'photo.JPG', 'image/jpeg'],
    [undefined, 'data.json', 'application/json'],
    ['', 'notes.md', 'text/markdown'],
    ['text/plain', 'pixel.png', 'image/png'],
    ['text/plain', 'notes.md', 'text/plain'],
    ['Text/HTML; charset=UTF-8', 'page', 'text/html'],
    ['application/octet-stream', 'blob', 'application/octet-stream'],
    ['image/jpg', 'a', 'image/jpeg'],
  ])('%s + %s → %s', (declared, filename, expected) => {
    expect(resolveMediaType(declared, filename)).toBe(expected);
  });
});

describe('contentDisposition', () => {
  it('gives the UTF-8 filename and an ASCII fallback', () => {
    expect(contentDisposition('résumé €(1).txt')).toBe(
      `attachment; filename="r_sum_ _(1).txt"; filename*=UTF-8''r%C3%A9sum%C3%A9%20%E2%82%AC%281%29.txt`,
    );
    expect(contentDisposition('a"b\\c%.txt')).toBe(
      `attachment; filename="a_b_c_.txt"; filename*=UTF-8''a%22b%5Cc%25.txt`,
    );
  });
});

describe.each(dialects())('files API (%s)', (dialect) => {
  let h: Harness;
  let base: string;
  let dataDir: string;
  let orgId: string;

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'agentry-files-'));
    h = await createHarness(dialect, {
      AGENTRY_DATA_DIR: dataDir,
      AGENTRY_MAX_UPLOAD_BYTES: String(MAX_UPLOAD),
      // Smaller than some uploads below: the JSON body limit must not apply to them.
      AGENTRY_BODY_LIMIT_BYTES: '1024',
    });
    base = await h.listen();
    const principal = await h.deps.auth.authenticate(h.key, Date.now());
    if (principal === null) throw new Error('harness key does not authenticate');
    orgId = principal.orgId;
  });
  afterAll(async () => {
    await h.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  function form(
    file: { data: Uint8Array | string; name: string; type?: string } | null,
    fields: Record<string, string> = {},
  ): FormData {
    const body = new FormData();
    for (const [name, value] of Object.entries(fields)) body.append(name, value);
    if (file !== null) {
      const blob = new Blob([file.data], file.type === undefined ? {} : { type: file.type });
      body.append('file', blob, file.name);
    }
    return body;
  }

  async function send(
    method: string,
    path: string,
    options: { body?: FormData | string; key?: string; headers?: Record<string, string> } = {},
  ): Promise<{ status: number; headers: Headers; body: Json; bytes: Uint8Array }> {
    const response = await fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Bearer ${options.key ?? h.key}`, ...options.headers },
      ...(options.body === undefined ? {} : { body: options.body }),
    });
    const bytes = new Uint8Array(await response.arrayBuffer());
    const type = response.headers.get('content-type') ?? '';
    const body = type.includes('application/json') ? JSON.parse(Buffer.from(bytes).toString('utf8')) : {};
    return { status: response.status, headers: response.headers, body, bytes };
  }

  const upload = (body: FormData, key?: string) =>
    send('POST', '/v1/files', key === undefined ? { body } : { body, key });

  async function uploadOk(file: { data: Uint8Array | string; name: string; type?: string }, key?: string) {
    const response = await upload(form(file), key);
    expect(response.status, JSON.stringify(response.body)).toBe(201);
    return response.body;
  }

  /** Every entry under the org's files directory (temporary .part files included). */
  const onDisk = (org: string): string[] => {
    const dir = join(dataDir, 'files', org);
    return existsSync(dir) ? readdirSync(dir) : [];
  };

  it('uploads a text file and returns its metadata', async () => {
    const text = 'hello, files\nsecond line\n';
    const before = Math.floor(Date.now() / 1000);
    const response = await upload(
      form({ data: text, name: 'notes.txt', type: 'text/plain' }, { purpose: 'assistants' }),
    );
    expect(response.status).toBe(201);
    const file = response.body;
    expect(Object.keys(file).sort()).toEqual(
      ['bytes', 'created_at', 'filename', 'id', 'media_type', 'object', 'purpose', 'sha256'].sort(),
    );
    expect(file).toMatchObject({
      object: 'file',
      filename: 'notes.txt',
      bytes: Buffer.byteLength(text),
      media_type: 'text/plain',
      purpose: 'assistants',
      sha256: sha256(text),
    });
    expect(file.id).toMatch(UUID);
    expect(file.created_at).toBeGreaterThanOrEqual(before);
    expect(file.created_at).toBeLessThanOrEqual(Math.floor(Date.now() / 1000) + 1);
    expect(onDisk(orgId)).toContain(file.id);

    const got = await h.request('GET', `/v1/files/${file.id}`);
    expect(got.status).toBe(200);
    expect(json(got)).toEqual(file);
    expect((await h.request('GET', `/v1/files/${file.id.toUpperCase()}`)).status).toBe(200);
  });

  it('uploads a PNG (media type from the part, or from the extension) and serves it back byte for byte', async () => {
    const declared = await uploadOk({ data: PNG, name: 'declared.png', type: 'image/png' });
    // No type on the Blob: the part says application/octet-stream, so the extension decides.
    const guessed = await uploadOk({ data: PNG, name: 'pixel.png' });
    for (const file of [declared, guessed]) {
      expect(file).toMatchObject({
        media_type: 'image/png',
        bytes: PNG.length,
        sha256: sha256(PNG),
        purpose: 'user_data',
      });
      const content = await send('GET', `/v1/files/${file.id}/content`);
      expect(content.status).toBe(200);
      expect(content.headers.get('content-type')).toBe('image/png');
      expect(content.headers.get('content-length')).toBe(String(PNG.length));
      expect(content.headers.get('content-disposition')).toBe(
        `attachment; filename="${file.filename}"; filename*=UTF-8''${file.filename}`,
      );
      expect(content.headers.get('x-content-type-options')).toBe('nosniff');
      expect(Buffer.from(content.bytes).equals(PNG)).toBe(true);
      const head = await send('HEAD', `/v1/files/${file.id}/content`);
      expect(head.status).toBe(200);
      expect(head.headers.get('content-type')).toBe('image/png');
    }
  });

  it('takes uploads larger than the JSON body limit, up to exactly the upload limit', async () => {
    const data = new Uint8Array(MAX_UPLOAD).map((_, index) => (index * 7) % 256);
    const file = await uploadOk({ data, name: 'résumé €.bin' });
    expect(file).toMatchObject({
      bytes: MAX_UPLOAD,
      sha256: sha256(data),
      filename: 'résumé €.bin',
      media_type: 'application/octet-stream',
    });
    const content = await send('GET', `/v1/files/${file.id}/content`);
    expect(content.headers.get('content-type')).toBe('application/octet-stream');
    expect(content.headers.get('content-disposition')).toContain(`filename*=UTF-8''r%C3%A9sum%C3%A9%20%E2%82%AC.bin`);
    expect(Buffer.from(content.bytes).equals(Buffer.from(data))).toBe(true);
  });

  it('lists files newest first, paginated with after', async () => {
    const other = await h.createOrg(`files-list-${dialect}`);
    const uploaded: string[] = [];
    for (let index = 0; index < 5; index++) {
      uploaded.push((await uploadOk({ data: `file ${index}`, name: `f${index}.txt` }, other.key)).id);
    }
    const all = json(await h.request('GET', '/v1/files?limit=100', { key: other.key }));
    expect(all).toMatchObject({ object: 'list', has_more: false });
    expect(all.data.map((file: Json) => file.id).sort()).toEqual([...uploaded].sort());
    const times = all.data.map((file: Json) => file.created_at);
    expect(times).toEqual([...times].sort((a, b) => b - a));
    expect(all.first_id).toBe(all.data[0].id);
    expect(all.last_id).toBe(all.data[4].id);

    const seen: string[] = [];
    let after: string | null = null;
    let pages = 0;
    do {
      const page = json(
        await h.request('GET', `/v1/files?limit=2${after === null ? '' : `&after=${after}`}`, { key: other.key }),
      );
      pages++;
      expect(page.data.length).toBeLessThanOrEqual(2);
      seen.push(...page.data.map((file: Json) => file.id));
      expect(page.has_more).toBe(seen.length < 5);
      after = page.has_more ? page.last_id : null;
    } while (after !== null);
    expect(pages).toBe(3);
    expect(seen).toEqual(all.data.map((file: Json) => file.id));

    // The default page size is 20; a file deleted while paging still marks its place.
    const defaultPage = json(await h.request('GET', '/v1/files', { key: other.key }));
    expect(defaultPage.data).toHaveLength(5);
    const [first, second] = all.data;
    expect((await h.request('DELETE', `/v1/files/${first.id}`, { key: other.key })).status).toBe(200);
    const rest = json(await h.request('GET', `/v1/files?after=${first.id}&limit=1`, { key: other.key }));
    expect(rest.data.map((file: Json) => file.id)).toEqual([second.id]);

    // Bad cursors and limits are 400s.
    for (const query of ['limit=0', 'limit=101', 'after=nope', `after=${crypto.randomUUID()}`, 'colour=red']) {
      const response = await h.request('GET', `/v1/files?${query}`, { key: other.key });
      expect(response.status, query).toBe(400);
      expect(json(response).error.code).toBe('validation_error');
    }
    // Another organization's file is no cursor here.
    const mine = await uploadOk({ data: 'mine', name: 'mine.txt' });
    expect((await h.request('GET', `/v1/files?after=${mine.id}`, { key: other.key })).status).toBe(400);
  });

  it('deletes a file: 404 afterwards everywhere, and the bytes are gone', async () => {
    const file = await uploadOk({ data: 'short-lived', name: 'gone.txt' });
    expect(onDisk(orgId)).toContain(file.id);
    const deleted = await h.request('DELETE', `/v1/files/${file.id}`);
    expect(deleted.status).toBe(200);
    expect(json(deleted)).toEqual({ id: file.id, object: 'file', deleted: true });
    expect(onDisk(orgId)).not.toContain(file.id);
    for (const [method, path] of [
      ['GET', `/v1/files/${file.id}`],
      ['GET', `/v1/files/${file.id}/content`],
      ['DELETE', `/v1/files/${file.id}`],
    ] as const) {
      const response = await h.request(method, path);
      expect(response.status, `${method} ${path}`).toBe(404);
      expect(json(response).error.code).toBe('not_found');
    }
    const list = json(await h.request('GET', '/v1/files?limit=100'));
    expect(list.data.map((item: Json) => item.id)).not.toContain(file.id);
  });

  it("answers 404 for another organization's file, and leaves it alone", async () => {
    const other = await h.createOrg(`files-other-${dialect}`);
    const theirs = await uploadOk({ data: 'private', name: 'private.txt' }, other.key);
    for (const [method, path] of [
      ['GET', `/v1/files/${theirs.id}`],
      ['GET', `/v1/files/${theirs.id}/content`],
      ['DELETE', `/v1/files/${theirs.id}`],
    ] as const) {
      const response = await h.request(method, path);
      expect(response.status, `${method} ${path}`).toBe(404);
      expect(json(response).error.code).toBe('not_found');
    }
    const mine = json(await h.request('GET', '/v1/files?limit=100'));
    expect(mine.data.map((item: Json) => item.id)).not.toContain(theirs.id);
    const content = await send('GET', `/v1/files/${theirs.id}/content`, { key: other.key });
    expect(Buffer.from(content.bytes).toString()).toBe('private');
  });

  it('requires files:read to read and files:write to upload or delete', async () => {
    const file = await uploadOk({ data: 'scoped', name: 'scoped.txt' });
    const tasksOnly = await h.deps.orgs.createKey(orgId, ['tasks:read']);
    const readOnly = await h.deps.orgs.createKey(orgId, ['files:read']);
    for (const [method, path] of [
      ['GET', '/v1/files'],
      ['GET', `/v1/files/${file.id}`],
      ['GET', `/v1/files/${file.id}/content`],
      ['DELETE', `/v1/files/${file.id}`],
    ] as const) {
      const response = await h.request(method, path, { key: tasksOnly });
      expect(response.status, `${method} ${path}`).toBe(403);
      expect(json(response).error.code).toBe('insufficient_scopes');
    }
    const denied = await upload(form({ data: 'x', name: 'x.txt' }), tasksOnly);
    expect(denied.status).toBe(403);
    expect(denied.body.error.code).toBe('insufficient_scopes');
    expect((await upload(form({ data: 'x', name: 'x.txt' }), readOnly)).status).toBe(403);
    expect((await h.request('DELETE', `/v1/files/${file.id}`, { key: readOnly })).status).toBe(403);
    expect((await h.request('GET', `/v1/files/${file.id}`, { key: readOnly })).status).toBe(200);
    expect((await h.request('GET', '/v1/files', { key: null })).status).toBe(401);
  });

  describe('rejected uploads leave nothing behind', () => {
    let rejectOrg: { orgId: string; key: string };
    beforeAll(async () => {
      rejectOrg = await h.createOrg(`files-reject-${dialect}`);
    });

    async function expectRejected(
      body: FormData | string,
      status: number,
      code: string,
      param: string | null,
      headers: Record<string, string> = {},
    ) {
      const response = await send('POST', '/v1/files', { body, key: rejectOrg.key, headers });
      expect(response.status, JSON.stringify(response.body)).toBe(status);
      expect(response.body.error).toMatchObject({ code, param });
      expect(onDisk(rejectOrg.orgId)).toEqual([]);
      expect(json(await h.request('GET', '/v1/files', { key: rejectOrg.key })).data).toEqual([]);
      return response.body.error;
    }

    it('413 for a file over the upload limit, with no temporary file left', async () => {
      const error = await expectRejected(
        form({ data: new Uint8Array(MAX_UPLOAD + 1), name: 'big.bin' }),
        413,
        'payload_too_large',
        'file',
      );
      expect(error.message).toContain(String(MAX_UPLOAD));
      // Much larger than the limit: the client still gets the 413, and the server stays usable.
      await expectRejected(
        form({ data: new Uint8Array(256 * 1024), name: 'huge.bin' }),
        413,
        'payload_too_large',
        'file',
      );
      expect((await upload(form({ data: 'after', name: 'after.txt' }), rejectOrg.key)).status).toBe(201);
      const [kept] = onDisk(rejectOrg.orgId);
      expect(kept).toBeDefined();
      await h.request('DELETE', `/v1/files/${kept}`, { key: rejectOrg.key });
    });

    it('400 for an empty file', async () => {
      const error = await expectRejected(form({ data: '', name: 'empty.txt' }), 400, 'validation_error', 'file');
      expect(error.message).toContain('empty');
    });

    it('400 naming file when the file field is missing or not a file', async () => {
      const error = await expectRejected(form(null, { purpose: 'user_data' }), 400, 'validation_error', 'file');
      expect(error.message).toContain('file');
      await expectRejected(form(null, { file: 'just text' }), 400, 'validation_error', 'file');
      await expectRejected(new FormData(), 400, 'validation_error', 'file');
    });

    it('400 for fields other than file and purpose, a second file or a bad purpose', async () => {
      await expectRejected(form({ data: 'x', name: 'x.txt' }, { colour: 'red' }), 400, 'validation_error', 'colour');
      const after = form({ data: 'x', name: 'x.txt' });
      after.append('colour', 'red');
      await expectRejected(after, 400, 'validation_error', 'colour');
      const two = form({ data: 'x', name: 'x.txt' });
      two.append('file', new Blob(['y']), 'y.txt');
      await expectRejected(two, 400, 'validation_error', 'file');
      const wrongName = new FormData();
      wrongName.append('upload', new Blob(['x']), 'x.txt');
      await expectRejected(wrongName, 400, 'validation_error', 'upload');
      for (const purpose of ['', 'p'.repeat(65), 'has space']) {
        await expectRejected(form({ data: 'x', name: 'x.txt' }, { purpose }), 400, 'validation_error', 'purpose');
      }
    });

    it('400 unsupported_content_type for JSON and other non-multipart bodies', async () => {
      for (const [type, body] of [
        ['application/json', JSON.stringify({ file: 'aGVsbG8=' })],
        ['text/plain', 'hello'],
        ['application/octet-stream', 'hello'],
      ] as const) {
        const error = await expectRejected(body, 400, 'unsupported_content_type', 'Content-Type', {
          'content-type': type,
        });
        expect(error.message).toContain('multipart/form-data');
      }
      const viaInject = await h.request('POST', '/v1/files', { key: rejectOrg.key, body: { file: 'x' } });
      expect(json(viaInject).error.code).toBe('unsupported_content_type');
      // Multipart stays confined to the upload route.
      const agent = await send('POST', '/v1/agents', { body: form(null, { name: 'x' }), key: rejectOrg.key });
      expect(agent.status).toBe(400);
      expect(agent.body.error.code).toBe('unsupported_content_type');
    });

    it('removes the temporary file when the client goes away mid-upload', async () => {
      const { port } = new URL(base);
      const boundary = 'abortboundary';
      const head = `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="cut.bin"\r\n\r\n`;
      const socket = connect(Number(port), '127.0.0.1');
      await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
      socket.write(
        `POST /v1/files HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${rejectOrg.key}\r\n` +
          `Content-Type: multipart/form-data; boundary=${boundary}\r\nContent-Length: 100000\r\n\r\n${head}`,
      );
      socket.write(Buffer.alloc(2000, 1));
      // The upload is under way: its temporary file exists.
      await waitUntil(async () => (onDisk(rejectOrg.orgId).length > 0 ? true : null), {
        what: 'the upload to start',
        everyMs: 20,
      });
      expect(onDisk(rejectOrg.orgId).some((name) => name.endsWith('.part'))).toBe(true);
      socket.destroy();
      await waitUntil(async () => (onDisk(rejectOrg.orgId).length === 0 ? true : null), {
        what: 'the cut upload to be removed',
        everyMs: 20,
      });
      expect(json(await h.request('GET', '/v1/files', { key: rejectOrg.key })).data).toEqual([]);
    });

    it('400 for a malformed multipart body', async () => {
      await expectRejected('--nope\r\ngarbage', 400, 'validation_error', 'body', {
        'content-type': 'multipart/form-data; boundary=xyz',
      });
    });
  });

  describe('createFileReader', () => {
    it('reads live files of the organization only', async () => {
      const reader = createFileReader({ db: h.deps.storage.db, dataDir });
      const file = await uploadOk({ data: PNG, name: 'read-me.png' });
      const read = await reader.read(orgId, file.id);
      expect(read).not.toBeNull();
      expect(read?.mediaType).toBe('image/png');
      expect(read?.filename).toBe('read-me.png');
      expect(Buffer.from(read?.data ?? []).equals(PNG)).toBe(true);

      const other = await h.createOrg(`files-reader-${dialect}`);
      expect(await reader.read(other.orgId, file.id)).toBeNull();
      expect(await reader.read(orgId, crypto.randomUUID())).toBeNull();
      await h.request('DELETE', `/v1/files/${file.id}`);
      expect(await reader.read(orgId, file.id)).toBeNull();
    });
  });
});
