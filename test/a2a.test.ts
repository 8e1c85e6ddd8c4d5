/**
 * Agents as A2A 1.0 servers (docs/a2a.md), driven by the real `@a2a-js/sdk` client over loopback HTTP through
 * both bindings (JSON-RPC and HTTP+JSON), on SQLite and Postgres: the Agent Card and its auth, SendMessage
 * (blocking, returnImmediately, in an existing context), streaming, GetTask, ListTasks and its filters, CancelTask,
 * the input-required round trip of a question, runs with source a2a, other organizations, hostile input.
 */
import { randomUUID } from 'node:crypto';
import { type Part, Role, type StreamResponse, TaskState } from '@a2a-js/sdk';
import type { Client } from '@a2a-js/sdk/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { asTask, BINDINGS, clientFor, partText, send, userMessage } from './helpers/a2a-client.ts';
import { waitUntil } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';

describe.each(dialects())('A2A server (%s)', (dialect) => {
  let h: Harness;
  let baseUrl: string;
  let agentId: string;
  let other: { orgId: string; key: string };
  let otherAgentId: string;

  beforeAll(async () => {
    h = await createHarness(dialect);
    baseUrl = await h.listen();
    const created = await h.request('POST', '/v1/agents', {
      body: {
        name: 'a2a-helper',
        description: 'Answers over A2A',
        model: 'scripted',
        mcpServers: [{ kind: 'internal', name: 'ask_user_question' }],
      },
    });
    agentId = json(created).agent.id;
    other = await h.createOrg('other-a2a');
    const theirs = await h.request('POST', '/v1/agents', {
      key: other.key,
      body: { name: 'theirs', model: 'scripted' },
    });
    otherAgentId = json(theirs).agent.id;
  });
  afterAll(() => h.close());

  it('serves an Agent Card per agent behind the API key, and lists the organization cards', async () => {
    const path = `/v1/agents/${agentId}/.well-known/agent-card.json`;
    expect((await h.request('GET', path, { key: null })).status).toBe(401);
    expect((await h.request('GET', path, { key: other.key })).status).toBe(404);
    const response = await fetch(`${baseUrl}${path}`, { headers: { authorization: `Bearer ${h.key}` } });
    expect(response.status).toBe(200);
    const card = (await response.json()) as Record<string, any>;
    expect(card).toMatchObject({
      name: 'a2a-helper',
      description: 'Answers over A2A',
      capabilities: { streaming: true },
      supportedInterfaces: [
        { url: `${baseUrl}/v1/agents/${agentId}/a2a`, protocolBinding: 'JSONRPC', protocolVersion: '1.0' },
        { url: `${baseUrl}/v1/agents/${agentId}/a2a/rest`, protocolBinding: 'HTTP+JSON', protocolVersion: '1.0' },
      ],
      securityRequirements: [{ schemes: { agentryApiKey: {} } }],
    });
    expect(card.securitySchemes.agentryApiKey.httpAuthSecurityScheme.scheme).toBe('bearer');
    expect(card.skills[0]).toMatchObject({ id: agentId, name: 'a2a-helper', description: 'Answers over A2A' });

    // Behind a proxy, its forwarded scheme and host shape the URLs; a malformed host is ignored.
    const proxied = json(
      await h.request('GET', path, {
        headers: { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'agents.example.com' },
      }),
    );
    expect(proxied.supportedInterfaces[0].url).toBe(`https://agents.example.com/v1/agents/${agentId}/a2a`);
    const spoofed = json(
      await h.request('GET', path, {
        headers: { 'x-forwarded-proto': 'gopher', 'x-forwarded-host': 'evil.example/x?' },
      }),
    );
    expect(spoofed.supportedInterfaces[0].url).toBe(`http://localhost:80/v1/agents/${agentId}/a2a`);

    const list = json(await h.request('GET', '/v1/a2a/agents'));
    expect(list.data.map((item: Record<string, unknown>) => item.name)).toContain('a2a-helper');
    expect(list.data.map((item: Record<string, unknown>) => item.name)).not.toContain('theirs');
    const theirs = json(await h.request('GET', '/v1/a2a/agents', { key: other.key }));
    expect(theirs.data.map((item: Record<string, unknown>) => item.name)).toContain('theirs');
    expect(theirs.data.map((item: Record<string, unknown>) => item.name)).not.toContain('a2a-helper');
  });

  describe.each(BINDINGS)('over %s', (binding) => {
    let client: Client;
    beforeAll(async () => {
      client = await clientFor(baseUrl, agentId, h.key, binding);
    });

    it('runs a blocking SendMessage as a task of a new context, with the reply as an artifact and a run of source a2a', async () => {
      const task = asTask(await client.sendMessage(send(userMessage(`hello over ${binding}`))));
      expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
      expect(task.contextId).toMatch(/^[0-9a-f-]{36}$/);
      expect(partText(task.artifacts[0]?.parts[0])).toBe(`hello over ${binding}`);
      expect(task.history.map((message) => message.role)).toEqual([Role.ROLE_USER, Role.ROLE_AGENT]);
      // The context is a session of the agent, the task one of its messages, run with source a2a.
      const session = json(await h.request('GET', `/v1/sessions/${task.contextId}`));
      expect(session.session.agentId).toBe(agentId);
      const message = json(await h.request('GET', `/v1/sessions/${task.contextId}/messages/${task.id}`));
      expect(message.message.status).toBe('completed');
      const run = json(await h.request('GET', `/v1/runs/${message.message.runId}`));
      expect(run.source).toBe('a2a');

      const again = await client.getTask({ tenant: '', id: task.id, historyLength: 1 });
      expect(again.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
      expect(again.history).toHaveLength(1);
      expect(partText(again.history[0]?.parts[0])).toBe(`hello over ${binding}`);

      // A second message in the same context is a new task of the same session.
      const next = asTask(await client.sendMessage(send(userMessage('second', { contextId: task.contextId }))));
      expect(next.contextId).toBe(task.contextId);
      expect(next.id).not.toBe(task.id);
      const listed = await client.listTasks({
        tenant: '',
        contextId: task.contextId,
        status: TaskState.TASK_STATE_UNSPECIFIED,
        pageSize: 1,
        pageToken: '',
        statusTimestampAfter: undefined,
        includeArtifacts: true,
      });
      expect(listed.totalSize).toBe(2);
      expect(listed.tasks.map((item) => item.id)).toEqual([next.id]);
      expect(partText(listed.tasks[0]?.artifacts[0]?.parts[0])).toBe('second');
      const page2 = await client.listTasks({
        tenant: '',
        contextId: task.contextId,
        status: TaskState.TASK_STATE_COMPLETED,
        pageSize: 1,
        pageToken: listed.nextPageToken,
        statusTimestampAfter: undefined,
      });
      expect(page2.tasks.map((item) => item.id)).toEqual([task.id]);
      expect(page2.nextPageToken).toBe('');
      const failed = await client.listTasks({
        tenant: '',
        contextId: task.contextId,
        status: TaskState.TASK_STATE_FAILED,
        pageToken: '',
        statusTimestampAfter: undefined,
      });
      expect(failed.tasks).toEqual([]);
    });

    it('streams a task: the task first, then status updates and the reply artifact until it completes', async () => {
      const events: StreamResponse[] = [];
      for await (const event of client.sendMessageStream(send(userMessage('streamed reply\nsleep 300\nmore')))) {
        events.push(event);
      }
      expect(events[0]?.payload?.$case).toBe('task');
      const last = events.at(-1)?.payload;
      expect(last?.$case).toBe('statusUpdate');
      if (last?.$case !== 'statusUpdate') throw new Error('unreachable');
      expect(last.value.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
      const artifact = events.find((event) => event.payload?.$case === 'artifactUpdate')?.payload;
      if (artifact?.$case !== 'artifactUpdate') throw new Error('no artifact update');
      expect(partText(artifact.value.artifact?.parts[0])).toBe('streamed reply\nmore');
      const states = events.flatMap((event) =>
        event.payload?.$case === 'statusUpdate' ? [event.payload.value.status?.state] : [],
      );
      expect(states).toContain(TaskState.TASK_STATE_WORKING);
    });

    it('cancels a running task, and refuses to cancel it again', async () => {
      const started = asTask(await client.sendMessage(send(userMessage('sleep 30000\nnever'), true)));
      expect([TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING]).toContain(started.status?.state);
      await client.cancelTask({ tenant: '', id: started.id, metadata: {} });
      const canceled = await waitUntil(
        async () => {
          const task = await client.getTask({ tenant: '', id: started.id });
          return task.status?.state === TaskState.TASK_STATE_CANCELED ? task : null;
        },
        { what: 'the task to be canceled' },
      );
      expect(canceled.artifacts).toEqual([]);
      await expect(client.cancelTask({ tenant: '', id: started.id, metadata: {} })).rejects.toMatchObject({
        name: expect.stringMatching(/TaskNotCancelable/),
      });
    });

    it('asks a question as input-required and resumes the task with the answer', async () => {
      const script = 'ask What is your name?\n---\nThanks, noted.';
      const waiting = asTask(await client.sendMessage(send(userMessage(script))));
      expect(waiting.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
      const parts = waiting.status?.message?.parts ?? [];
      expect(partText(parts[0])).toBe('What is your name?');
      const data = parts[1]?.content;
      expect(data?.$case).toBe('data');
      if (data?.$case !== 'data') throw new Error('unreachable');
      expect(data.value.requiredActions[0]).toMatchObject({
        type: 'ask_user_question',
        question: 'What is your name?',
      });

      const done = asTask(
        await client.sendMessage(send(userMessage('Ada', { taskId: waiting.id, contextId: waiting.contextId }))),
      );
      expect(done.id).toBe(waiting.id);
      expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
      expect(partText(done.artifacts[0]?.parts[0])).toBe('Thanks, noted.');
      // A task that waits for nothing takes no answer.
      await expect(client.sendMessage(send(userMessage('again', { taskId: waiting.id })))).rejects.toMatchObject({
        name: expect.stringMatching(/UnsupportedOperation/),
      });
    });

    it("gives another organization's key nothing: its own agent does not know the task, ours is a 404", async () => {
      const task = asTask(await client.sendMessage(send(userMessage('private'))));
      const theirs = await clientFor(baseUrl, otherAgentId, other.key, binding);
      await expect(theirs.getTask({ tenant: '', id: task.id })).rejects.toMatchObject({
        name: expect.stringMatching(/TaskNotFound/),
      });
      await expect(theirs.cancelTask({ tenant: '', id: task.id, metadata: {} })).rejects.toMatchObject({
        name: expect.stringMatching(/TaskNotFound/),
      });
      const listed = await theirs.listTasks({
        tenant: '',
        contextId: '',
        status: 0,
        pageToken: '',
        statusTimestampAfter: undefined,
      });
      expect(listed.tasks).toEqual([]);
      // Their agent cannot continue our context either.
      await expect(theirs.sendMessage(send(userMessage('in', { contextId: task.contextId })))).rejects.toThrow(
        /context/,
      );
      await expect(clientFor(baseUrl, agentId, other.key, binding)).rejects.toThrow(/404/);
    });

    it('refuses file parts, empty messages and unknown tasks with the field named', async () => {
      const file: Part = {
        content: { $case: 'url', value: 'http://127.0.0.1/x' },
        metadata: undefined,
        filename: 'x',
        mediaType: 'text/plain',
      };
      await expect(client.sendMessage(send(userMessage([file])))).rejects.toThrow(/message\.parts\[0\]/);
      await expect(client.sendMessage(send(userMessage([])))).rejects.toThrow(/message\.parts/);
      await expect(client.getTask({ tenant: '', id: randomUUID() })).rejects.toMatchObject({
        name: expect.stringMatching(/TaskNotFound/),
      });
      await expect(client.getTask({ tenant: '', id: '../../etc' })).rejects.toMatchObject({
        name: expect.stringMatching(/TaskNotFound/),
      });
      await expect(
        client.listTasks({
          tenant: '',
          contextId: '',
          status: 0,
          pageToken: 'bm90LWEtbnVtYmVy',
          statusTimestampAfter: undefined,
        }),
      ).rejects.toThrow(/pageToken/);
      // A push notification config of a task that does not exist (test/a2a-push.test.ts covers the rest).
      await expect(
        (async () =>
          client.createTaskPushNotificationConfig({
            tenant: '',
            id: 'c1',
            taskId: randomUUID(),
            url: 'http://127.0.0.1:9/hook',
            token: '',
            authentication: undefined,
          }))(),
      ).rejects.toMatchObject({ name: expect.stringMatching(/TaskNotFound/) });
    });
  });

  it('answers malformed JSON-RPC as JSON-RPC errors and malformed bodies as 400', async () => {
    const url = `/v1/agents/${agentId}/a2a`;
    // The hand-written request of docs/a2a.md, as JSON-RPC clients send it.
    const documented = json(
      await h.request('POST', url, {
        headers: { 'a2a-version': '1.0' },
        body: {
          jsonrpc: '2.0',
          id: 1,
          method: 'SendMessage',
          params: { message: { messageId: 'm-1', role: 'ROLE_USER', parts: [{ text: 'Hello over A2A' }] } },
        },
      }),
    );
    expect(documented.result.task.status.state).toBe('TASK_STATE_COMPLETED');
    expect(documented.result.task.artifacts[0].parts[0].text).toBe('Hello over A2A');
    const unknown = json(await h.request('POST', url, { body: { jsonrpc: '2.0', id: 7, method: 'Nope', params: {} } }));
    expect(unknown).toMatchObject({ jsonrpc: '2.0', id: 7, error: { code: -32601 } });
    const bad = await h.request('POST', url, {
      rawBody: '{"jsonrpc":',
      headers: { 'content-type': 'application/json' },
    });
    expect(bad.status).toBe(400);
    const notRpc = await h.request('POST', url, { body: { method: 'GetTask' } });
    expect(notRpc.status).toBe(400);
    expect(json(notRpc).error.param).toMatch(/jsonrpc/);
    expect(
      (
        await h.request('POST', `/v1/agents/${randomUUID()}/a2a`, {
          body: { jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id: 'x' } },
        })
      ).status,
    ).toBe(404);
    expect(
      (await h.request('POST', `/v1/agents/not-a-uuid/a2a`, { body: { jsonrpc: '2.0', id: 1, method: 'GetTask' } }))
        .status,
    ).toBe(400);
    const rest = await h.request('POST', `/v1/agents/${agentId}/a2a/rest/tasks/${randomUUID()}:explode`);
    expect(rest.status).toBe(400);
    expect(json(rest).error.message).toMatch(/explode/);
    const push = await h.request(
      'POST',
      `/v1/agents/${agentId}/a2a/rest/tasks/${randomUUID()}/pushNotificationConfigs`,
      {
        body: { url: 'http://127.0.0.1:9/hook' },
      },
    );
    expect(push.status).toBeGreaterThanOrEqual(400);
    expect(json(push).error.status).toBeDefined();
    expect(json(push).error.details[0].reason).toMatch(/TASK_NOT_FOUND/);
    const rpcPush = json(
      await h.request('POST', url, {
        body: {
          jsonrpc: '2.0',
          id: 'p',
          method: 'CreateTaskPushNotificationConfig',
          params: { taskId: 'x', url: 'http://127.0.0.1:9/' },
        },
      }),
    );
    expect(rpcPush).toMatchObject({ id: 'p', error: { code: expect.any(Number) } });
    expect(rpcPush.result).toBeUndefined();
  });
});
