/**
 * Legacy Tasks over HTTP (spec 4.5, docs/legacy.md): create on the default or a named agent, workspaces (new,
 * reused, reserved for a Session), prompt and task statuses, follow-ups, cancel, soft delete, content with events,
 * the SSE event stream read as a client reads it, limits, scopes, the API_KEY header, isolation, and the runs
 * each prompt leaves in /v1/runs with source tasks.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitUntil } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';

type Json = Record<string, any>;

describe.each(dialects())('legacy tasks (%s)', (dialect) => {
  let h: Harness;
  beforeAll(async () => {
    h = await createHarness(dialect);
  });
  afterAll(() => h.close());

  const create = async (body: Json, key?: string) => h.request('POST', '/v1/tasks', { body, ...(key ? { key } : {}) });
  const getTask = async (id: string) => json(await h.request('GET', `/v1/tasks/${id}`));
  const settled = (id: string) =>
    waitUntil(
      async () => {
        const task = await getTask(id);
        return task.status === 'running' ? null : task;
      },
      { what: `task ${id} to finish` },
    );

  it('creates a task on the default agent, runs it, and derives its status', async () => {
    const response = await create({ prompt: 'hello from a task' });
    expect(response.status).toBe(201);
    const task = json(response);
    const agents = json(await h.request('GET', '/v1/agents')).data as Json[];
    const defaultAgent = agents.find((agent) => agent.isDefault === true);
    expect(task).toMatchObject({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      object: 'task',
      agentId: defaultAgent?.id,
      title: 'hello from a task',
      status: 'running',
      completedAt: null,
    });
    expect(task.prompts).toHaveLength(1);
    expect(['pending', 'running']).toContain(task.prompts[0].status);
    const done = await settled(task.id);
    expect(done.status).toBe('completed');
    expect(done.prompts[0]).toMatchObject({ status: 'succeeded', completedAt: expect.any(String) });
    expect(done.completedAt).toBe(done.prompts[0].completedAt);
    const content = json(await h.request('GET', `/v1/tasks/${task.id}/content`));
    expect(content).toMatchObject({ id: task.id, object: 'task.content', status: 'completed' });
    expect(content.prompts[0]).toMatchObject({ prompt: 'hello from a task', response: 'hello from a task' });
    expect(content.prompts[0].events).toBeUndefined();
    // The workspace is a hidden session: not in the Sessions API.
    expect((await h.request('GET', `/v1/sessions/${task.workspaceId}`)).status).toBe(404);
    const sessions = json(await h.request('GET', '/v1/sessions?limit=100')).data as Json[];
    expect(sessions.some((session) => session.id === task.workspaceId)).toBe(false);
    expect((await h.request('GET', `/v1/sessions/${task.workspaceId}/messages`)).status).toBe(404);
    const injected = await h.request('POST', `/v1/sessions/${task.workspaceId}/messages`, {
      headers: { 'idempotency-key': randomUUID() },
      body: { parts: [{ type: 'text', text: 'not through the Sessions API' }] },
    });
    expect(injected.status).toBe(404);
  });

  it('accepts the API_KEY header form as well as Bearer', async () => {
    const response = await h.request('GET', '/v1/tasks', { key: null, headers: { API_KEY: h.key } });
    expect(response.status).toBe(200);
    expect((await h.request('GET', '/v1/tasks', { key: null })).status).toBe(401);
  });

  it('runs a follow-up prompt in the same conversation and reports events per prompt', async () => {
    const task = json(await create({ prompt: 'first' }));
    await settled(task.id);
    const follow = await h.request('POST', `/v1/tasks/${task.id}/prompts`, { body: { prompt: 'second' } });
    expect(follow.status).toBe(201);
    const { promptId } = json(follow);
    expect(json(follow)).toEqual({ promptId: expect.any(String), taskId: task.id });
    const done = await settled(task.id);
    expect(done.prompts.map((prompt: Json) => [prompt.id === promptId, prompt.status])).toEqual([
      [false, 'succeeded'],
      [true, 'succeeded'],
    ]);
    const content = json(await h.request('GET', `/v1/tasks/${task.id}/content?include=events`));
    expect(content.prompts.map((prompt: Json) => [prompt.prompt, prompt.response])).toEqual([
      ['first', 'first'],
      ['second', 'second'],
    ]);
    const second = content.prompts[1].events as Json[];
    expect(second.map((event) => event.eventType)).toEqual(['init', 'text', 'result']);
    expect(second[2]?.payload).toMatchObject({ status: 'succeeded', result: 'second' });
    const all = [...content.prompts[0].events, ...second];
    expect(all.map((event: Json) => event.seq)).toEqual(all.map((_: Json, index: number) => index + 1));
    // Both prompts are runs of the tasks surface.
    const runs = json(await h.request('GET', '/v1/runs?limit=50')).data as Json[];
    for (const prompt of done.prompts) {
      expect(runs.find((run) => run.id === prompt.runId)).toMatchObject({
        source: 'tasks',
        session_id: task.workspaceId,
      });
    }
  });

  it('reports tool use in the normalized events', async () => {
    const agent = json(
      await h.request('POST', '/v1/agents', {
        body: {
          name: 'tools',
          clientTools: [
            {
              type: 'function',
              name: 'lookup',
              description: 'Looks a thing up',
              parameters: { type: 'object', properties: {}, additionalProperties: false },
              strict: true,
            },
          ],
        },
      }),
    ).agent;
    const task = json(await create({ prompt: 'call lookup {}', agentId: agent.id }));
    const waiting = await waitUntil(
      async () => {
        const content = json(await h.request('GET', `/v1/tasks/${task.id}/content?include=events`));
        const events = content.prompts[0].events as Json[];
        return events.some((event) => event.eventType === 'tool_use') ? events : null;
      },
      { what: 'the tool call' },
    );
    expect(waiting.find((event) => event.eventType === 'tool_use')?.payload).toMatchObject({
      name: 'lookup',
      kind: 'client',
    });
    // A turn waiting for a client tool is still running from the Task's point of view; cancel ends it.
    expect((await getTask(task.id)).status).toBe('running');
    const canceled = await h.request('POST', `/v1/tasks/${task.id}/cancel`);
    expect(canceled.status).toBe(200);
    expect(json(canceled)).toMatchObject({ status: 'canceled', prompts: [{ status: 'canceled' }] });
  });

  it('cancels a running prompt and the prompts queued behind it', async () => {
    const task = json(await create({ prompt: 'sleep 30000\nnever' }));
    await h.request('POST', `/v1/tasks/${task.id}/prompts`, { body: { prompt: 'queued' } });
    await waitUntil(async () => ((await getTask(task.id)).prompts[0].status === 'running' ? true : null), {
      what: 'the first prompt to start',
    });
    expect((await h.request('POST', `/v1/tasks/${task.id}/cancel`)).status).toBe(200);
    const done = await settled(task.id);
    expect(done.status).toBe('canceled');
    expect(done.prompts.map((prompt: Json) => prompt.status)).toEqual(['canceled', 'canceled']);
  });

  it('reports a failed prompt as a failed task', async () => {
    const task = json(await create({ prompt: 'fail the model broke' }));
    const done = await settled(task.id);
    expect(done.status).toBe('failed');
    const content = json(await h.request('GET', `/v1/tasks/${task.id}/content`));
    expect(content.prompts[0].status).toBe('failed');
    expect(content.prompts[0].error).toMatchObject({ message: expect.stringContaining('the model broke') });
  });

  it('reuses the workspace of an earlier task, refuses a Session and an unknown one', async () => {
    const first = json(await create({ prompt: 'remember the word kiwi' }));
    await settled(first.id);
    const second = await create({ prompt: 'again', workspaceId: first.workspaceId });
    expect(second.status).toBe(201);
    expect(json(second).workspaceId).toBe(first.workspaceId);
    await settled(json(second).id);
    // The first task still has only its own prompt.
    expect((await getTask(first.id)).prompts).toHaveLength(1);

    const agentId = json(await h.request('POST', '/v1/agents', { body: { name: 'session agent' } })).agent.id;
    const session = json(await h.request('POST', '/v1/sessions', { body: { agentId } })).session;
    const reserved = await create({ prompt: 'x', workspaceId: session.id });
    expect(reserved.status).toBe(409);
    expect(json(reserved).error).toMatchObject({ code: 'workspace_reserved', param: 'workspaceId' });
    const unknown = await create({ prompt: 'x', workspaceId: randomUUID() });
    expect(unknown.status).toBe(404);
    const badAgent = await create({ prompt: 'x', agentId: randomUUID() });
    expect(badAgent.status).toBe(404);
  });

  it('attaches uploaded files to the first prompt', async () => {
    const form = new FormData();
    form.append('purpose', 'user_data');
    form.append('file', new Blob(['The secret number is 42.'], { type: 'text/plain' }), 'note.txt');
    const url = await h.listen();
    const uploaded = await fetch(`${url}/v1/files`, {
      method: 'POST',
      headers: { authorization: `Bearer ${h.key}` },
      body: form,
    });
    expect(uploaded.status).toBeLessThan(300);
    const file = (await uploaded.json()) as Json;
    const task = await create({ prompt: 'read it', files: [{ id: file.id, filename: 'note.txt' }] });
    expect(task.status).toBe(201);
    await settled(json(task).id);
    const missing = await create({ prompt: 'read it', files: [{ id: randomUUID() }] });
    expect(missing.status).toBe(404);
  });

  it('streams events as a client reads them, ending with done', async () => {
    const url = await h.listen();
    const task = json(await create({ prompt: 'sleep 300\nstreamed reply' }));
    const response = await fetch(`${url}/v1/tasks/${task.id}/events`, { headers: { API_KEY: h.key } });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('text/event-stream');
    const text = await response.text();
    const frames = text.split('\n\n').filter((frame) => frame.includes('data: '));
    const events = frames
      .filter((frame) => !frame.startsWith('event: done'))
      .map((frame) => JSON.parse(frame.slice(frame.indexOf('data: ') + 6)) as Json);
    expect(events.map((event) => event.eventType)).toEqual(['init', 'text', 'result']);
    expect(events[1]).toMatchObject({ seq: 2, promptId: task.prompts[0].id, payload: { text: 'streamed reply' } });
    const done = frames.find((frame) => frame.startsWith('event: done'));
    expect(done).toBeDefined();
    expect(JSON.parse(done?.slice(done.indexOf('data: ') + 6) ?? '{}')).toEqual({
      status: 'succeeded',
      lastSeq: 3,
      finalResult: 'streamed reply',
    });
    // A finished task's stream replays and ends at once.
    const again = await (await fetch(`${url}/v1/tasks/${task.id}/events`, { headers: { API_KEY: h.key } })).text();
    expect(again).toContain('event: done');
  });

  it('lists newest first with limit, clamping and offset', async () => {
    const created = [];
    for (const n of [1, 2, 3]) created.push(json(await create({ prompt: `list ${n}` })).id);
    const page = json(await h.request('GET', '/v1/tasks?limit=2'));
    expect(page.limit).toBe(2);
    expect(page.offset).toBe(0);
    expect(page.data.map((task: Json) => task.id)).toEqual([created[2], created[1]]);
    const next = json(await h.request('GET', '/v1/tasks?limit=2&offset=1'));
    expect(next.data[0].id).toBe(created[1]);
    const clamped = json(await h.request('GET', '/v1/tasks?limit=1000'));
    expect(clamped.limit).toBe(100);
    expect(json(await h.request('GET', '/v1/tasks')).limit).toBe(50);
    expect(json(await h.request('GET', '/v1/tasks?limit=100000')).limit).toBe(100);
    expect(json(await h.request('GET', '/v1/tasks?offset=9007199254740991')).data).toEqual([]);
    for (const query of [
      'limit=0',
      'limit=-1',
      'limit=abc',
      'offset=-1',
      'limit=1.5',
      'offset=1e30',
      'limit=100000000000000000000',
    ]) {
      const response = await h.request('GET', `/v1/tasks?${query}`);
      expect(response.status, query).toBe(400);
      expect(json(response).error.param).toBe(query.split('=')[0]);
    }
  });

  it('soft deletes: 204, then 404 everywhere and gone from the list', async () => {
    const task = json(await create({ prompt: 'to delete' }));
    await settled(task.id);
    expect((await h.request('DELETE', `/v1/tasks/${task.id}`)).status).toBe(204);
    for (const path of ['', '/content', '/events']) {
      expect((await h.request('GET', `/v1/tasks/${task.id}${path}`)).status).toBe(404);
    }
    expect((await h.request('POST', `/v1/tasks/${task.id}/prompts`, { body: { prompt: 'x' } })).status).toBe(404);
    expect((await h.request('DELETE', `/v1/tasks/${task.id}`)).status).toBe(404);
    const list = json(await h.request('GET', '/v1/tasks?limit=100')).data as Json[];
    expect(list.some((entry) => entry.id === task.id)).toBe(false);
  });

  it.each([
    [{}, 'prompt'],
    [{ prompt: '' }, 'prompt'],
    [{ prompt: '   ' }, 'prompt'],
    [{ prompt: 'x'.repeat(100_001) }, 'prompt'],
    [{ prompt: 5 }, 'prompt'],
    [{ prompt: 'a\u0000b' }, 'prompt'],
    [{ prompt: 'a\ud800b' }, 'prompt'],
    [{ prompt: 'x', agentId: 'nope' }, 'agentId'],
    [{ prompt: 'x', workspaceId: 12 }, 'workspaceId'],
    [{ prompt: 'x', files: [{ id: 'nope' }] }, 'files'],
    [{ prompt: 'x', files: Array.from({ length: 11 }, () => ({ id: randomUUID() })) }, 'files'],
    [{ prompt: 'x', extra: 1 }, 'extra'],
  ])('rejects %# with a 400 naming %s', async (body, param) => {
    const response = await create(body);
    expect(response.status).toBe(400);
    expect(json(response).error.code).toBe('validation_error');
    expect(String(json(response).error.param)).toContain(param);
  });

  it('accepts a 100000-character prompt', async () => {
    const response = await create({ prompt: 'y'.repeat(100_000) });
    expect(response.status).toBe(201);
    await h.request('POST', `/v1/tasks/${json(response).id}/cancel`);
  });

  it('checks scopes and keeps organizations apart', async () => {
    const task = json(await create({ prompt: 'mine' }));
    const other = await h.createOrg(`other-${randomUUID().slice(0, 8)}`);
    for (const [method, path] of [
      ['GET', ''],
      ['GET', '/content'],
      ['GET', '/events'],
      ['DELETE', ''],
      ['POST', '/cancel'],
    ] as const) {
      expect((await h.request(method, `/v1/tasks/${task.id}${path}`, { key: other.key })).status).toBe(404);
    }
    const prompt = await h.request('POST', `/v1/tasks/${task.id}/prompts`, { body: { prompt: 'x' }, key: other.key });
    expect(prompt.status).toBe(404);
    const reuse = await create({ prompt: 'x', workspaceId: task.workspaceId }, other.key);
    expect(reuse.status).toBe(404);
    expect(json(await h.request('GET', '/v1/tasks', { key: other.key })).total).toBe(0);
    const readOnly = await h.deps.orgs.createKey(other.orgId, ['tasks:read']);
    const denied = await create({ prompt: 'x' }, readOnly);
    expect(denied.status).toBe(403);
    expect((await h.request('GET', '/v1/tasks', { key: readOnly })).status).toBe(200);
  });

  it('answers 402 when the credits are spent and the model is priced', async () => {
    const org = await h.createOrg(`broke-${randomUUID().slice(0, 8)}`);
    const agent = json(
      await h.request('POST', '/v1/agents', { body: { name: 'priced', model: 'scripted/priced' }, key: org.key }),
    ).agent;
    await h.deps.orgs.setCredits(org.orgId, 0);
    const response = await create({ prompt: 'x', agentId: agent.id }, org.key);
    expect(response.status).toBe(402);
    expect(json(response).error.code).toBe('insufficient_credits');
    expect(json(await h.request('GET', '/v1/tasks', { key: org.key })).total).toBe(0);
  });
});
