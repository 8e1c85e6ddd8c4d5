/**
 * A2A push notifications (docs/a2a.md), with the real `@a2a-js/sdk` client over both bindings and a local
 * receiver, on SQLite and Postgres: the config operations, a config given with SendMessage, the Task of each state
 * change POSTed with the config's token and Bearer credentials, retries after a failed answer, one notification per
 * state change with two notifiers racing (two processes), the egress guard, org isolation, hostile input.
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type StreamResponse, type Task, type TaskPushNotificationConfig, TaskState } from '@a2a-js/sdk';
import type { Client } from '@a2a-js/sdk/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildA2aPushNotifier } from '../src/deps.ts';
import { createPushConfigs } from '../src/domain/a2a/push-configs.ts';
import { type A2aPushNotifier, createA2aPushNotifier } from '../src/webhooks/a2a-push.ts';
import { asTask, BINDINGS, clientFor, partText, send, userMessage } from './helpers/a2a-client.ts';
import { waitUntil } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';

interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: Record<string, any>;
}

/** A receiver on loopback: records every POST; `fail` answers that many requests 503 first. */
async function startReceiver(): Promise<{
  url: string;
  received: Received[];
  fail: Map<string, number>;
  server: Server;
}> {
  const received: Received[] = [];
  const fail = new Map<string, number>();
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const path = request.url ?? '/';
      const left = fail.get(path) ?? 0;
      if (left > 0) {
        fail.set(path, left - 1);
        response.writeHead(503, { 'retry-after': '0' }).end();
        return;
      }
      received.push({ path, headers: request.headers, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) });
      response.writeHead(200).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, received, fail, server };
}

const config = (taskId: string, url: string, fields: Partial<TaskPushNotificationConfig> = {}) => ({
  tenant: '',
  id: '',
  taskId,
  url,
  token: '',
  authentication: undefined,
  ...fields,
});

const stateOf = (item: Received): string | undefined => item.body.task?.status?.state;

describe.each(dialects())('A2A push notifications (%s)', (dialect) => {
  let h: Harness;
  let baseUrl: string;
  let agentId: string;
  let notifier: A2aPushNotifier;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let other: { orgId: string; key: string };

  beforeAll(async () => {
    h = await createHarness(dialect, {
      AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true',
      AGENTRY_WEBHOOK_RETRY_BASE_MS: '50',
    });
    baseUrl = await h.listen();
    receiver = await startReceiver();
    const created = await h.request('POST', '/v1/agents', {
      body: {
        name: 'a2a-push',
        model: 'scripted',
        mcpServers: [
          { kind: 'internal', name: 'ask_user_question' },
          { kind: 'internal', name: 'report_builder' },
        ],
      },
    });
    agentId = json(created).agent.id;
    other = await h.createOrg('other-a2a-push');
    notifier = buildA2aPushNotifier(h.deps);
    notifier.start();
  });
  afterAll(async () => {
    await notifier.stop(1000);
    receiver.server.close();
    await h.close();
  });

  it('declares push notifications in the card', async () => {
    const card = json(await h.request('GET', `/v1/agents/${agentId}/.well-known/agent-card.json`));
    expect(card.capabilities.pushNotifications).toBe(true);
  });

  describe.each(BINDINGS)('over %s', (binding) => {
    let client: Client;
    beforeAll(async () => {
      client = await clientFor(baseUrl, agentId, h.key, binding);
    });

    it('delivers the task at each state change to the config given with SendMessage, with its token', async () => {
      const path = `/send-${binding}`;
      const message = userMessage(`pushed over ${binding}\nsleep 200\ndone`);
      const request = {
        ...send(message, true),
        configuration: {
          acceptedOutputModes: [],
          returnImmediately: true,
          taskPushNotificationConfig: config('', `${receiver.url}${path}`, { id: 'cfg-1', token: 'tok-1' }),
        },
      };
      const task = asTask(await client.sendMessage(request));
      const listed = await client.listTaskPushNotificationConfig({
        tenant: '',
        taskId: task.id,
        pageSize: 0,
        pageToken: '',
      });
      expect(listed.configs.map((item) => [item.id, item.taskId, item.token])).toEqual([['cfg-1', task.id, 'tok-1']]);
      const got = await waitUntil(
        async () => {
          const mine = receiver.received.filter((item) => item.path === path);
          return mine.some((item) => stateOf(item) === 'TASK_STATE_COMPLETED') ? mine : null;
        },
        { what: 'the completed notification' },
      );
      for (const item of got) {
        expect(item.headers['x-a2a-notification-token']).toBe('tok-1');
        expect(item.headers['content-type']).toBe('application/a2a+json');
        expect(item.headers.authorization).toBeUndefined();
        expect(item.body.task.id).toBe(task.id);
      }
      const completed = got.find((item) => stateOf(item) === 'TASK_STATE_COMPLETED');
      expect(completed?.body.task.artifacts[0].parts[0].text).toBe(`pushed over ${binding}\ndone`);
      // Each state once, in order; nothing delivered twice.
      const states = got.map(stateOf);
      expect(new Set(states).size).toBe(states.length);
      expect(states.at(-1)).toBe('TASK_STATE_COMPLETED');
    });

    it('sets, reads, lists and deletes configs of a task; Bearer authentication is sent, never read back', async () => {
      const path = `/ask-${binding}`;
      const waiting = asTask(await client.sendMessage(send(userMessage('ask Your name?\n---\nThanks.'))));
      expect(waiting.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
      const created = await client.createTaskPushNotificationConfig(
        config(waiting.id, `${receiver.url}${path}`, {
          id: 'bearer',
          authentication: { scheme: 'Bearer', credentials: 'secret-credential' },
        }),
      );
      expect(created).toMatchObject({ id: 'bearer', taskId: waiting.id, url: `${receiver.url}${path}` });
      expect(created.authentication).toEqual({ scheme: 'Bearer', credentials: '' });
      const spare = await client.createTaskPushNotificationConfig(config(waiting.id, `${receiver.url}/spare`));
      expect(spare.id).toMatch(/^[0-9a-f-]{36}$/);
      // The same new id set by several requests at once: each succeeds, one config stays.
      const racing = await Promise.all(
        [1, 2, 3].map(() =>
          client.createTaskPushNotificationConfig(config(waiting.id, `${receiver.url}/race`, { id: 'race' })),
        ),
      );
      expect(racing.map((item) => item.id)).toEqual(['race', 'race', 'race']);
      await client.deleteTaskPushNotificationConfig({ tenant: '', taskId: waiting.id, id: 'race' });
      const read = await client.getTaskPushNotificationConfig({ tenant: '', taskId: waiting.id, id: 'bearer' });
      expect(read.url).toBe(`${receiver.url}${path}`);
      const listed = await client.listTaskPushNotificationConfig({
        tenant: '',
        taskId: waiting.id,
        pageSize: 0,
        pageToken: '',
      });
      expect(listed.configs.map((item) => item.id)).toEqual(['bearer', spare.id]);
      await client.deleteTaskPushNotificationConfig({ tenant: '', taskId: waiting.id, id: spare.id });
      await expect(
        client.getTaskPushNotificationConfig({ tenant: '', taskId: waiting.id, id: spare.id }),
      ).rejects.toMatchObject({ name: expect.stringMatching(/TaskNotFound/) });

      const done = asTask(
        await client.sendMessage(send(userMessage('Ada', { taskId: waiting.id, contextId: waiting.contextId }))),
      );
      expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
      const got = await waitUntil(
        async () => {
          const mine = receiver.received.filter((item) => item.path === path);
          return mine.some((item) => stateOf(item) === 'TASK_STATE_COMPLETED') ? mine : null;
        },
        { what: 'the completed notification' },
      );
      for (const item of got) {
        expect(item.headers.authorization).toBe('Bearer secret-credential');
        expect(item.headers['x-a2a-notification-token']).toBeUndefined();
      }
      expect(receiver.received.filter((item) => item.path === '/spare')).toEqual([]);
      expect(partText(done.artifacts[0]?.parts[0])).toBe('Thanks.');
    });

    it('shows the reports a turn wrote as file artifacts (a URL served with the same key), in the task, the stream and the notification', async () => {
      const path = `/report-${binding}`;
      const title = `Quarterly ${binding === 'JSONRPC' ? 'rpc' : 'rest'}`;
      const name = `quarterly-${binding === 'JSONRPC' ? 'rpc' : 'rest'}.md`;
      const script = `call build_report ${JSON.stringify({ title, content: '# Q3\nup 4%' })}\n---\nReport written.`;
      const request = {
        ...send(userMessage(script)),
        configuration: {
          acceptedOutputModes: [],
          returnImmediately: false,
          taskPushNotificationConfig: config('', `${receiver.url}${path}`),
        },
      };
      const task = asTask(await client.sendMessage(request));
      expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
      expect(task.artifacts.map((artifact) => artifact.name)).toEqual(['response', name]);
      const report = task.artifacts[1];
      const part = report?.parts[0];
      expect(part?.mediaType).toBe('text/markdown');
      expect(part?.filename).toBe(name);
      if (part?.content?.$case !== 'url') throw new Error('expected a URL file part');
      expect(part.content.value).toBe(`${baseUrl}/v1/agents/${agentId}/reports/${name}`);
      const download = await fetch(part.content.value, { headers: { authorization: `Bearer ${h.key}` } });
      expect(download.status).toBe(200);
      expect(await download.text()).toContain('up 4%');
      expect((await fetch(part.content.value)).status).toBe(401);
      expect((await fetch(part.content.value, { headers: { authorization: `Bearer ${other.key}` } })).status).toBe(404);

      const again = await client.getTask({ tenant: '', id: task.id });
      expect(again.artifacts.map((artifact) => artifact.name)).toEqual(['response', name]);

      const events: StreamResponse[] = [];
      for await (const event of client.sendMessageStream(send(userMessage(script.replace(title, `${title} 2`))))) {
        events.push(event);
      }
      const streamed = events.flatMap((event) =>
        event.payload?.$case === 'artifactUpdate' ? [event.payload.value.artifact?.name] : [],
      );
      expect(streamed.sort()).toEqual(['response', name.replace('.md', '-2.md')].sort());

      const notified = await waitUntil(
        async () =>
          receiver.received.find((item) => item.path === path && stateOf(item) === 'TASK_STATE_COMPLETED') ?? null,
        { what: 'the completed notification' },
      );
      const names = notified.body.task.artifacts.map((artifact: Record<string, any>) => artifact.name);
      expect(names).toEqual(['response', name]);
      expect(notified.body.task.artifacts[1].parts[0].url).toBe(`${baseUrl}/v1/agents/${agentId}/reports/${name}`);
    });

    it('refuses bad configs naming the field, and another organization gets nothing', async () => {
      const task = asTask(await client.sendMessage(send(userMessage('plain'))));
      const bad = [
        [config(task.id, ''), /url is required/],
        [config(task.id, 'ftp://example.com/x'), /url/],
        [
          config(task.id, `${receiver.url}/x`, { authentication: { scheme: 'Basic', credentials: 'a:b' } }),
          /authentication\.scheme/,
        ],
        [config(task.id, `${receiver.url}/x`, { token: 'a\r\nb' }), /token/],
        [config(task.id, `${receiver.url}/x`, { id: 'x'.repeat(201) }), /id/],
      ] as const;
      for (const [input, message] of bad) {
        await expect(client.createTaskPushNotificationConfig(input)).rejects.toThrow(message);
      }
      await expect(
        client.createTaskPushNotificationConfig(config('00000000-0000-4000-8000-000000000000', `${receiver.url}/x`)),
      ).rejects.toMatchObject({ name: expect.stringMatching(/TaskNotFound/) });
      const theirs = await clientFor(baseUrl, agentId, other.key, binding).catch((error: unknown) => error);
      expect(theirs).toBeInstanceOf(Error);
    });
  });

  it('answers bad REST bodies with 400 naming the field, and 404 for a config of another task', async () => {
    const client = await clientFor(baseUrl, agentId, h.key, 'JSONRPC');
    const task = asTask(await client.sendMessage(send(userMessage('rest'))));
    const base = `/v1/agents/${agentId}/a2a/rest/tasks/${task.id}/pushNotificationConfigs`;
    const bad = await h.request('POST', base, {
      body: { url: 'https://example.com', authentication: { scheme: 'Digest', credentials: 'x' } },
    });
    expect(bad.status).toBe(400);
    expect(bad.text).toContain('authentication.scheme');
    const notJson = await h.request('POST', base, { rawBody: '[', headers: { 'content-type': 'application/json' } });
    expect(notJson.status).toBe(400);
    const missing = await h.request('GET', `${base}/nope`);
    expect(missing.status).toBe(404);
    const theirs = await h.request('GET', base, { key: other.key });
    expect(theirs.status).toBe(404);
    const rpc = await h.request('POST', `/v1/agents/${agentId}/a2a`, {
      body: { jsonrpc: '2.0', id: 1, method: 'CreateTaskPushNotificationConfig', params: { taskId: task.id, url: 7 } },
    });
    expect(rpc.status).toBe(200);
    expect(json(rpc).error).toBeDefined();
  });

  it('retries a failed answer with backoff, and notifies each change once with two notifiers racing', async () => {
    const second = buildA2aPushNotifier(h.deps);
    second.start();
    try {
      const client = await clientFor(baseUrl, agentId, h.key, 'HTTP+JSON');
      const path = '/retry';
      receiver.fail.set(path, 2);
      const request = {
        ...send(userMessage('retried\nsleep 100\nreply'), true),
        configuration: {
          acceptedOutputModes: [],
          returnImmediately: true,
          taskPushNotificationConfig: config('', `${receiver.url}${path}`, { token: 't' }),
        },
      };
      const task: Task = asTask(await client.sendMessage(request));
      await waitUntil(
        async () =>
          receiver.received.some((item) => item.path === path && stateOf(item) === 'TASK_STATE_COMPLETED')
            ? true
            : null,
        { what: 'the completed notification after retries' },
      );
      // Let any duplicate arrive before counting.
      await new Promise((resolve) => setTimeout(resolve, 500));
      const states = receiver.received.filter((item) => item.path === path).map(stateOf);
      expect(new Set(states).size).toBe(states.length);
      const rows = await h.deps.storage.db
        .selectFrom('a2a_push_deliveries as d')
        .innerJoin('a2a_push_configs as c', 'c.id', 'd.config_id')
        .select(['d.status', 'd.attempts', 'd.task_status'])
        .where('c.task_id', '=', task.id)
        .execute();
      expect(rows.every((row) => row.status === 'delivered')).toBe(true);
      expect(rows.reduce((sum, row) => sum + row.attempts, 0)).toBe(rows.length + 2);
    } finally {
      await second.stop(1000);
    }
  });

  it('deletes ended notifications past the history retention', async () => {
    const before = await h.deps.storage.db
      .selectFrom('a2a_push_deliveries')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('status', '=', 'delivered')
      .executeTakeFirstOrThrow();
    expect(Number(before.n)).toBeGreaterThan(0);
    const sweeper = createA2aPushNotifier(
      {
        db: h.deps.storage.db,
        dialect: h.deps.storage.dialect,
        clock: h.deps.clock,
        logger: h.deps.logger,
        messages: h.deps.messages,
        reportsOf: (orgId, taskId) => h.deps.a2a.reportsOf(orgId, taskId),
        secrets: h.deps.secrets,
        allowInsecureDestinations: true,
        retryBaseMs: 50,
        retryWindowMs: 60_000,
        historyRetentionMs: 1,
        space: h.deps.storage.space,
        bus: h.deps.bus,
      },
      { pollMs: 1000, minGapMs: 50, timeoutMs: 1000, leaseMs: 20_000, concurrency: 4 },
    );
    await new Promise((resolve) => setTimeout(resolve, 5));
    await sweeper.tick();
    const after = await h.deps.storage.db
      .selectFrom('a2a_push_deliveries')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('completed_at', 'is not', null)
      .executeTakeFirstOrThrow();
    expect(Number(after.n)).toBe(0);
  });

  it('refuses a private destination unless the deployment allows insecure ones', async () => {
    const strict = createPushConfigs({
      db: h.deps.storage.db,
      clock: h.deps.clock,
      secrets: h.deps.secrets,
      allowInsecureDestinations: false,
    });
    await expect(strict.check({ id: '', url: 'https://127.0.0.1/hook', token: '' })).rejects.toThrow(/url/);
    await expect(strict.check({ id: '', url: 'http://example.com/hook', token: '' })).rejects.toThrow(/url/);
    await expect(
      strict.check({ id: '', url: 'https://10.0.0.1/hook', token: '' }, 'configuration.taskPushNotificationConfig'),
    ).rejects.toMatchObject({
      param: 'configuration.taskPushNotificationConfig.url',
    });
  });
});
