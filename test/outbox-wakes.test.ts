/**
 * The background senders (webhook dispatcher, legacy task notices, A2A push notifications) act when a change
 * commits, told by the bus's `outbox` signal, not at their next poll: here every process polls once in ten minutes,
 * so whatever arrives within seconds was rung for. In one process (SQLite and Postgres), and in cluster mode,
 * where a session created on the API process and a turn run on a worker reach the worker's dispatcher over Redis.
 */
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { buildA2aPushNotifier, buildDispatcher, buildTaskNotifier } from '../src/deps.ts';
import type { TaskNotifier } from '../src/domain/tasks/task-notifier.ts';
import type { A2aPushNotifier } from '../src/webhooks/a2a-push.ts';
import type { WebhookDispatcher } from '../src/webhooks/dispatcher.ts';
import { asTask, clientFor, send, userMessage } from './helpers/a2a-client.ts';
import { httpClient } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json, testEnvironment, testKey } from './helpers/harness.ts';
import { REDIS_URL, redisReachable } from './helpers/redis.ts';
import { type ServerProcess, startServerProcess, startsTimeout } from './helpers/server-process.ts';
import { type Receiver, startReceiver } from './helpers/webhook-receiver.ts';

/** Ten minutes: no pass of a sender within a test comes from its poll. */
const POLL_MS = '600000';
/** What "promptly" means here, on a loaded test machine: far below the poll. */
const PROMPT_MS = 10_000;

const onPath = (receiver: Receiver, path: string) => receiver.received.filter((request) => request.path === path);
const eventTypes = (receiver: Receiver, path: string) =>
  onPath(receiver, path).map((request) => (JSON.parse(request.body) as { type?: string; event?: string }).type);

describe.each(dialects())('senders rung by committed changes (%s)', (dialect) => {
  let h: Harness;
  let receiver: Receiver;
  let dispatcher: WebhookDispatcher;
  let tasks: TaskNotifier;
  let a2a: A2aPushNotifier;

  beforeAll(async () => {
    [h, receiver] = await Promise.all([
      createHarness(dialect, { AGENTRY_POLL_MS: POLL_MS, AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true' }),
      startReceiver(),
    ]);
    dispatcher = buildDispatcher(h.deps);
    tasks = buildTaskNotifier(h.deps);
    a2a = buildA2aPushNotifier(h.deps);
    for (const sender of [dispatcher, tasks, a2a]) sender.start();
  });
  afterAll(async () => {
    await Promise.all([dispatcher?.stop(1000), tasks?.stop(), a2a?.stop(1000)]);
    await Promise.all([h?.close(), receiver?.close()]);
  });

  it('delivers a webhook of a created session and of a completed turn within seconds', async () => {
    // The senders' first passes (at start) are over; everything after this is rung or polled.
    await new Promise((resolve) => setTimeout(resolve, 100));
    const endpoint = await h.request('POST', '/v1/webhook_endpoints', {
      body: {
        name: 'rung',
        url: `${receiver.url}/rung`,
        event_types: ['agent.session.created', 'agent.session.turn.completed'],
      },
    });
    expect(endpoint.status).toBe(200);
    const agentId = json(await h.request('GET', '/v1/agents')).data[0].id;
    const started = performance.now();
    const session = json(await h.request('POST', '/v1/sessions', { body: { agentId } })).session;
    await receiver.waitFor((all) => all.some((r) => r.path === '/rung'), 'agent.session.created', PROMPT_MS);
    const accepted = await h.request('POST', `/v1/sessions/${session.id}/messages`, {
      headers: { 'idempotency-key': 'rung' },
      body: { parts: [{ type: 'text', text: 'hello' }] },
    });
    expect(accepted.status).toBe(202);
    await receiver.waitFor(
      () => eventTypes(receiver, '/rung').includes('agent.session.turn.completed'),
      'agent.session.turn.completed',
      PROMPT_MS,
    );
    expect(eventTypes(receiver, '/rung')).toEqual(['agent.session.created', 'agent.session.turn.completed']);
    expect(performance.now() - started).toBeLessThan(PROMPT_MS);
  });

  it('sends the legacy task.* notices of a task within seconds', async () => {
    const hook = await h.request('POST', '/v1/webhooks', {
      body: { url: `${receiver.url}/tasks`, events: ['task.created', 'task.running', 'task.completed'] },
    });
    expect(hook.status).toBe(201);
    const task = json(await h.request('POST', '/v1/tasks', { body: { prompt: 'notify me' } }));
    await receiver.waitFor(() => onPath(receiver, '/tasks').length >= 3, 'three task notices', PROMPT_MS);
    const notices = onPath(receiver, '/tasks').map((request) => JSON.parse(request.body));
    expect(notices.map((notice) => notice.event)).toEqual(['task.created', 'task.running', 'task.completed']);
    expect(notices.every((notice) => notice.data.taskId === task.id)).toBe(true);
  });

  it('pushes an A2A task that completed within seconds', async () => {
    const baseUrl = await h.listen();
    const agentId = json(await h.request('GET', '/v1/agents')).data[0].id;
    const client = await clientFor(baseUrl, agentId, h.key, 'JSONRPC');
    const task = asTask(
      await client.sendMessage({
        ...send(userMessage('push me\nsleep 100\ndone'), true),
        configuration: {
          acceptedOutputModes: [],
          returnImmediately: true,
          taskPushNotificationConfig: {
            tenant: '',
            id: 'cfg-rung',
            taskId: '',
            url: `${receiver.url}/a2a`,
            token: 'tok',
            authentication: undefined,
          },
        },
      }),
    );
    await receiver.waitFor(
      () => onPath(receiver, '/a2a').some((r) => JSON.parse(r.body).task?.status?.state === 'TASK_STATE_COMPLETED'),
      'the completed push notification',
      PROMPT_MS,
    );
    expect(onPath(receiver, '/a2a').every((r) => JSON.parse(r.body).task?.id === task.id)).toBe(true);
  });
});

describe('senders rung across processes (cluster mode)', () => {
  let skip: string | null = null;
  let environment: ReturnType<typeof testEnvironment> | undefined;
  let processes: ServerProcess[] = [];
  let receiver: Receiver;
  let api: ReturnType<typeof httpClient>;

  beforeAll(async () => {
    receiver = await startReceiver();
    if (inject('postgresUrl') === null) skip = 'Postgres is unreachable or disabled';
    else if (!(await redisReachable())) skip = `Redis at ${REDIS_URL} is unreachable`;
    if (skip !== null) {
      if (process.env.CI === 'true') throw new Error(`cluster mode needs Postgres and Redis under CI: ${skip}`);
      return;
    }
    const key = testKey();
    environment = testEnvironment('postgres');
    const env = {
      ...environment.env,
      REDIS_URL,
      AGENTRY_BOOTSTRAP_KEY: key,
      AGENTRY_POLL_MS: POLL_MS,
      AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true',
      LOG_LEVEL: 'warn',
    };
    const apiProcess = await startServerProcess({ ...env, AGENTRY_ROLE: 'api' });
    processes = [apiProcess, await startServerProcess({ ...env, AGENTRY_ROLE: 'worker' })];
    api = httpClient(apiProcess.url, key);
  }, startsTimeout(2));
  afterAll(async () => {
    await Promise.all(processes.map((server) => server.stop('SIGKILL')));
    await receiver?.close();
    await environment?.cleanup();
  });

  it("delivers the API's session.created and the worker's turn.completed within seconds", async (context) => {
    if (skip !== null) context.skip(skip);
    const endpoint = await api('POST', '/v1/webhook_endpoints', {
      name: 'cluster',
      url: `${receiver.url}/cluster`,
      event_types: ['agent.session.created', 'agent.session.turn.completed'],
    });
    expect(endpoint.status).toBe(200);
    const agents = await api<{ data: { id: string }[] }>('GET', '/v1/agents');
    const created = await api<{ session: { id: string } }>('POST', '/v1/sessions', {
      agentId: agents.body.data[0]?.id,
    });
    expect(created.status).toBe(201);
    // Written by the API process, which sends no webhooks: the worker hears of it over Redis.
    await receiver.waitFor((all) => all.some((r) => r.path === '/cluster'), 'agent.session.created', PROMPT_MS);
    const accepted = await api(
      'POST',
      `/v1/sessions/${created.body.session.id}/messages`,
      { parts: [{ type: 'text', text: 'hello' }] },
      { 'idempotency-key': 'cluster' },
    );
    expect(accepted.status, JSON.stringify(accepted.body)).toBe(202);
    await receiver.waitFor(
      () => eventTypes(receiver, '/cluster').includes('agent.session.turn.completed'),
      'agent.session.turn.completed',
      PROMPT_MS,
    );
    expect(eventTypes(receiver, '/cluster')).toEqual(['agent.session.created', 'agent.session.turn.completed']);
  });
});
