/**
 * The older API under /api/sdk (spec 4.7, 2, 8; docs/legacy.md) as its clients use it: threads with metadata
 * limits and cursors, thread messages, file upload (the same storage as v1 Files) used by a run, tool runs
 * (blocking, non-blocking polled to completion, streamed and read as a client reads SSE, contentOnly, version and
 * model config), the clear errors for a bad project, agent, version or foreign thread in the older error form,
 * and the runs they leave in /v1/runs with source sdk.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitUntil } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';

type Json = Record<string, any>;

describe.each(dialects())('older API /api/sdk (%s)', (dialect) => {
  let h: Harness;
  let url: string;
  let projectId: number;
  let agentId: string;

  beforeAll(async () => {
    h = await createHarness(dialect);
    url = await h.listen();
    const organization = json(await h.request('GET', '/v1/organization'));
    projectId = organization.projectId;
    expect(organization.project_id).toBe(projectId);
    expect(Number.isInteger(projectId)).toBe(true);
    agentId = json(await h.request('POST', '/v1/agents', { body: { name: 'helper bot' } })).agent.id;
  });
  afterAll(() => h.close());

  const runPath = (agent = agentId, project: string | number = projectId) => `/api/sdk/p/${project}/a/${agent}/r`;
  const run = (body: Json, agent?: string, project?: string | number) =>
    h.request('POST', runPath(agent, project), { body });

  describe('threads', () => {
    it('creates a thread with messages and metadata, reads it and its messages', async () => {
      const created = await h.request('POST', '/api/sdk/threads', {
        body: {
          messages: [
            { role: 'user', content: 'hi' },
            { role: 'assistant', content: 'hello' },
          ],
          metadata: { customer: 'c-1' },
        },
      });
      expect(created.status).toBe(200);
      const thread = json(created);
      expect(thread).toEqual({
        id: expect.stringMatching(/^thread_[0-9a-f]{32}$/),
        object: 'thread',
        created_at: expect.any(Number),
        metadata: { customer: 'c-1' },
      });
      expect(Math.abs(thread.created_at - Date.now() / 1000)).toBeLessThan(60);
      expect(json(await h.request('GET', `/api/sdk/threads/${thread.id}`))).toEqual(thread);
      const added = json(
        await h.request('POST', `/api/sdk/threads/${thread.id}/messages`, {
          body: { role: 'user', content: 'and more', metadata: { k: 'v' } },
        }),
      );
      expect(added).toMatchObject({ thread_id: thread.id, role: 'user', content: 'and more', metadata: { k: 'v' } });
      const list = json(await h.request('GET', `/api/sdk/threads/${thread.id}/messages`)).list as Json[];
      expect(list.map((message) => [message.role, message.content])).toEqual([
        ['user', 'hi'],
        ['assistant', 'hello'],
        ['user', 'and more'],
      ]);
      const updated = json(
        await h.request('POST', `/api/sdk/threads/${thread.id}`, { body: { metadata: { stage: 'two' } } }),
      );
      expect(updated.metadata).toEqual({ stage: 'two' });
      expect(json(await h.request('GET', `/api/sdk/threads/${thread.id}`)).metadata).toEqual({ stage: 'two' });
    });

    it('enforces the metadata limits: 16 pairs, keys of 64, values of 512', async () => {
      const pairs = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, 'v']));
      expect((await h.request('POST', '/api/sdk/threads', { body: { metadata: pairs(16) } })).status).toBe(200);
      const ok = { metadata: { ['k'.repeat(64)]: 'v'.repeat(512) } };
      expect((await h.request('POST', '/api/sdk/threads', { body: ok })).status).toBe(200);
      for (const metadata of [pairs(17), { ['k'.repeat(65)]: 'v' }, { k: 'v'.repeat(513) }, { k: 5 }]) {
        const response = await h.request('POST', '/api/sdk/threads', { body: { metadata } });
        expect(response.status, JSON.stringify(metadata).slice(0, 60)).toBe(400);
        const error = json(response).error;
        expect(error.type).toBe('invalid_request_error');
        expect(error.message).toContain('metadata');
      }
      const thread = json(await h.request('POST', '/api/sdk/threads', { body: {} }));
      const update = await h.request('POST', `/api/sdk/threads/${thread.id}`, { body: { metadata: pairs(17) } });
      expect(update.status).toBe(400);
      const message = await h.request('POST', `/api/sdk/threads/${thread.id}/messages`, {
        body: { role: 'user', content: 'x', metadata: { k: 'v'.repeat(513) } },
      });
      expect(message.status).toBe(400);
      for (const body of [{ role: 'system', content: 'x' }, { role: 'user', content: '' }, { role: 'user' }]) {
        expect((await h.request('POST', `/api/sdk/threads/${thread.id}/messages`, { body })).status).toBe(400);
      }
    });

    it('lists with limit (default 20), order (default desc) and before / after cursors', async () => {
      const org = await h.createOrg(`threads-${randomUUID().slice(0, 8)}`);
      const ids: string[] = [];
      for (let i = 0; i < 23; i++) {
        ids.push(json(await h.request('POST', '/api/sdk/threads', { key: org.key, body: {} })).id);
      }
      const list = (query: string) => h.request('GET', `/api/sdk/threads${query}`, { key: org.key });
      const first = json(await list(''));
      expect(first.list).toHaveLength(20);
      expect(first.has_more).toBe(true);
      expect(first.list.map((thread: Json) => thread.id)).toEqual([...ids].reverse().slice(0, 20));
      const next = json(await list(`?after=${first.list[19].id}`));
      expect(next.list.map((thread: Json) => thread.id)).toEqual([ids[2], ids[1], ids[0]]);
      expect(next.has_more).toBe(false);
      const asc = json(await list('?order=asc&limit=5'));
      expect(asc.list.map((thread: Json) => thread.id)).toEqual(ids.slice(0, 5));
      const before = json(await list(`?order=asc&limit=2&before=${ids[5]}`));
      expect(before.list.map((thread: Json) => thread.id)).toEqual([ids[3], ids[4]]);
      for (const query of [
        '?limit=0',
        '?limit=101',
        '?order=sideways',
        '?after=not%20an%20id',
        `?after=thread_${'0'.repeat(32)}`,
      ]) {
        const response = await list(query);
        expect(response.status, query).toBe(400);
        expect(json(response).error.type).toBe('invalid_request_error');
      }
    });

    it('keeps threads of other organizations out of reach', async () => {
      const thread = json(await h.request('POST', '/api/sdk/threads', { body: {} }));
      const other = await h.createOrg(`foreign-${randomUUID().slice(0, 8)}`);
      const read = await h.request('GET', `/api/sdk/threads/${thread.id}`, { key: other.key });
      expect(read.status).toBe(404);
      expect(json(read).error).toMatchObject({ type: 'thread_not_found', message: expect.stringContaining(thread.id) });
      expect((await h.request('GET', `/api/sdk/threads/${thread.id}/messages`, { key: other.key })).status).toBe(404);
      const post = await h.request('POST', `/api/sdk/threads/${thread.id}/messages`, {
        key: other.key,
        body: { role: 'user', content: 'x' },
      });
      expect(post.status).toBe(404);
    });

    it('answers authentication errors in the older form', async () => {
      const response = await h.request('GET', '/api/sdk/threads', { key: null });
      expect(response.status).toBe(401);
      expect(json(response).error).toMatchObject({
        type: 'malformed_authorization_header_error',
        message: expect.any(String),
      });
      const bad = await h.request('GET', '/api/sdk/threads', { key: 'agk_nope' });
      expect(bad.status).toBe(401);
      expect(json(bad).error.type).toBe('not_authenticated');
    });
  });

  describe('files', () => {
    it('uploads, lists, reads, downloads and deletes, in the same storage as v1 Files', async () => {
      const form = new FormData();
      form.append('file', new Blob(['The secret number is 42.'], { type: 'text/plain' }), 'note.txt');
      const uploaded = await fetch(`${url}/api/sdk/files`, {
        method: 'POST',
        headers: { authorization: `Bearer ${h.key}` },
        body: form,
      });
      expect(uploaded.status).toBe(200);
      const result = (await uploaded.json()) as Json;
      expect(result).toEqual({
        message: 'upload file success',
        fileId: expect.stringMatching(/^[0-9a-f-]{36}$/),
        path: expect.stringContaining('note.txt'),
      });
      const record = {
        uuid: result.fileId,
        name: 'note.txt',
        mimeType: 'text/plain',
        size: 24,
        projectId,
        createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT.*Z$/),
      };
      expect(json(await h.request('GET', `/api/sdk/files/${result.fileId}`))).toEqual({ file: record });
      const listed = json(await h.request('GET', '/api/sdk/files')).files as Json[];
      expect(listed.find((file) => file.uuid === result.fileId)).toEqual(record);
      const content = await h.request('GET', `/api/sdk/files/${result.fileId}/content`);
      expect(content.text).toBe('The secret number is 42.');
      expect(json(await h.request('GET', `/v1/files/${result.fileId}`)).filename).toBe('note.txt');

      // A run reads the uploaded file.
      const answer = json(
        await run({ inputs: [{ messages: [{ role: 'user', content: 'read it' }], file_ids: [result.fileId] }] }),
      );
      expect(answer.run.results[0][0].value.content).toContain('The secret number is 42.');

      const deleted = await h.request('DELETE', `/api/sdk/files/${result.fileId}`);
      expect(json(deleted)).toEqual({ message: 'deleted', fileId: result.fileId });
      const gone = await h.request('GET', `/api/sdk/files/${result.fileId}`);
      expect(gone.status).toBe(404);
      expect(json(gone).error.type).toBe('file_not_found');
      const noFile = await fetch(`${url}/api/sdk/files`, {
        method: 'POST',
        headers: { authorization: `Bearer ${h.key}` },
        body: new FormData(),
      });
      expect(noFile.status).toBe(400);
    });
  });

  describe('tool runs', () => {
    it('runs blocking and answers the result in the run object', async () => {
      const response = await run({ version: 'latest', inputs: ['hello blocking'], blocking: true });
      expect(response.status).toBe(200);
      const body = json(response);
      expect(body.run).toMatchObject({
        run_id: expect.stringMatching(/^[0-9a-f-]{36}$/),
        app_id: agentId,
        status: { run: 'succeeded', workflow: 'completed' },
        results: [[{ value: { role: 'assistant', content: 'hello blocking' }, error: null }]],
      });
      const listed = json(await h.request('GET', `/v1/runs/${body.run.run_id}`));
      expect(listed).toMatchObject({ source: 'sdk', agent_id: agentId, status: 'completed' });
      const runs = json(await h.request('GET', '/v1/runs?limit=50')).data as Json[];
      expect(runs.some((entry) => entry.id === body.run.run_id && entry.source === 'sdk')).toBe(true);
    });

    it('runs non-blocking and is polled to completion', async () => {
      const started = json(await run({ inputs: ['sleep 300\nlater'], blocking: false }));
      expect(started.run.status.run).toBe('running');
      const runId = started.run.run_id;
      const done = await waitUntil(
        async () => {
          const status = json(await h.request('GET', `${runPath()}/${runId}`));
          return status.run.status.run === 'running' ? null : status;
        },
        { what: 'the run to finish' },
      );
      expect(done.run).toMatchObject({ status: { run: 'succeeded' }, results: [[{ value: { content: 'later' } }]] });
      // The status read checks the project and agent of the path.
      expect((await h.request('GET', `${runPath(agentId, projectId + 1)}/${runId}`)).status).toBe(404);
      expect((await h.request('GET', `${runPath(randomUUID())}/${runId}`)).status).toBe(404);
      expect((await h.request('GET', `${runPath()}/${randomUUID()}`)).status).toBe(404);
    });

    it('streams tokens and the result as a client reads them, ending with [DONE]', async () => {
      const response = await fetch(`${url}${runPath()}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${h.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ inputs: ['a streamed reply in several words'], stream: true }),
      });
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toContain('text/event-stream');
      const lines = (await response.text()).split('\n').filter((line) => line.startsWith('data: '));
      expect(lines.at(-1)).toBe('data: [DONE]');
      const events = lines.slice(0, -1).map((line) => JSON.parse(line.slice(6)) as Json);
      expect(events[0]).toMatchObject({ type: 'run_status', content: { status: 'running' } });
      const tokens = events.filter((event) => event.type === 'tokens').map((event) => event.content.tokens.text);
      expect(tokens.length).toBeGreaterThan(1);
      expect(tokens.join('')).toBe('a streamed reply in several words');
      const execution = events.find((event) => event.type === 'block_execution');
      expect(execution?.content.execution[0][0]).toEqual({
        value: { role: 'assistant', content: 'a streamed reply in several words' },
        error: null,
      });
      const statuses = events.filter((event) => event.type === 'run_status').map((event) => event.content.status);
      expect(statuses).toEqual(['running', 'succeeded']);
      expect(events.at(-1)?.type).toBe('final');
    });

    it('reports a failed run as errored', async () => {
      const body = json(await run({ inputs: ['fail model trouble'] }));
      expect(body.run.status.run).toBe('errored');
      expect(body.run.results[0][0]).toMatchObject({ value: null, error: expect.stringContaining('model trouble') });
    });

    it('answers contentOnly with the content alone', async () => {
      const body = json(await run({ inputs: ['just the content'], contentOnly: true }));
      expect(body).toEqual({ run_id: expect.any(String), status: 'succeeded', content: 'just the content' });
    });

    it('runs the version asked for and takes the model from config', async () => {
      const agent = json(await h.request('POST', '/v1/agents', { body: { name: 'versioned' } })).agent;
      await h.request('PATCH', `/v1/agents/${agent.id}`, { body: { instructions: 'second version' } });
      const v1 = json(await run({ version: 1, inputs: ['one'] }, agent.id));
      expect(v1.run.version).toBe(1);
      expect(json(await h.request('GET', `/v1/runs/${v1.run.run_id}`)).agent_version).toBe(1);
      const latest = json(await run({ inputs: ['two'] }, agent.id));
      expect(latest.run.version).toBe(2);
      const missing = await run({ version: 3, inputs: ['x'] }, agent.id);
      expect(missing.status).toBe(404);
      expect(json(missing).error).toMatchObject({ type: 'version_not_found' });
      for (const version of [0, -1, 1.5, 'newest', '2']) {
        expect((await run({ version, inputs: ['x'] }, agent.id)).status, String(version)).toBe(400);
      }
      const configured = await run({
        inputs: ['cfg'],
        config: { MODEL: { provider_id: 'scripted', model_id: 'scripted' } },
      });
      expect(json(configured).run.status.run).toBe('succeeded');
      const badModel = await run({ inputs: ['cfg'], config: { MODEL: { provider_id: 'nowhere', model_id: 'x' } } });
      expect(badModel.status).toBe(400);
      expect(json(badModel).error.param).toBe('config.MODEL.model_id');
      expect((await run({ inputs: ['cfg'], config: { MODEL: 'fast' } })).status).toBe(400);
    });

    it('gives a clear error for a bad project, agent, version or foreign thread', async () => {
      const project = await run({ inputs: ['x'] }, agentId, projectId + 1000);
      expect(project.status).toBe(404);
      expect(json(project).error).toMatchObject({
        type: 'project_not_found',
        message: expect.stringContaining('project'),
      });
      expect((await run({ inputs: ['x'] }, agentId, 'abc')).status).toBe(404);
      const agent = await run({ inputs: ['x'] }, randomUUID());
      expect(json(agent).error.type).toBe('agent_not_found');
      expect((await run({ inputs: ['x'] }, 'not-an-agent')).status).toBe(404);
      const other = await h.createOrg(`runs-${randomUUID().slice(0, 8)}`);
      const foreign = json(await h.request('POST', '/api/sdk/threads', { key: other.key, body: {} }));
      const thread = await run({ inputs: ['x'], thread_id: foreign.id });
      expect(thread.status).toBe(404);
      expect(json(thread).error.type).toBe('thread_not_found');
      // The other organization's agent is not found either, nor is this project for its key.
      const otherAgent = json(await h.request('GET', '/v1/agents', { key: other.key })).data[0].id;
      expect((await run({ inputs: ['x'] }, otherAgent)).status).toBe(404);
      const wrongProject = await h.request('POST', runPath(), { key: other.key, body: { inputs: ['x'] } });
      expect(json(wrongProject).error.type).toBe('project_not_found');
      for (const body of [{}, { inputs: [] }, { inputs: ['x'], blocking: 'yes' }, { inputs: ['x'], extra: 1 }]) {
        expect((await run(body)).status, JSON.stringify(body)).toBe(400);
      }
    });

    it('appends the input and the reply to the thread, with agent_id, name and run_id', async () => {
      const thread = json(
        await h.request('POST', '/api/sdk/threads', { body: { messages: [{ role: 'user', content: 'earlier' }] } }),
      );
      const body = json(
        await run({ inputs: [{ messages: [{ role: 'user', content: 'on the thread' }] }], thread_id: thread.id }),
      );
      expect(body.run.thread_id).toBe(thread.id);
      const messages = json(await h.request('GET', `/api/sdk/threads/${thread.id}/messages`)).list as Json[];
      expect(messages.map((message) => [message.role, message.content])).toEqual([
        ['user', 'earlier'],
        ['user', 'on the thread'],
        ['assistant', 'on the thread'],
      ]);
      expect(messages[2]).toMatchObject({ agent_id: agentId, name: 'helper bot', run_id: body.run.run_id });
      // A non-blocking run's reply reaches the thread when its status is read.
      const later = json(await run({ inputs: ['sleep 200\nasync reply'], thread_id: thread.id, blocking: false }));
      await waitUntil(
        async () => {
          const status = json(await h.request('GET', `${runPath()}/${later.run.run_id}`));
          return status.run.status.run === 'succeeded' ? status : null;
        },
        { what: 'the async run' },
      );
      const after = json(await h.request('GET', `/api/sdk/threads/${thread.id}/messages`)).list as Json[];
      expect(after.at(-1)).toMatchObject({ role: 'assistant', content: 'async reply', run_id: later.run.run_id });
    });
  });
});
