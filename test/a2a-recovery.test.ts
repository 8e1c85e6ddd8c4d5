/**
 * An A2A task survives a crash like every turn: kill -9 a real server while the task works, restart it, and the
 * task completes once; the client reads it with GetTask afterwards (over the other binding, from the restarted
 * server's card), its reply once in the artifact and once in the context's transcript; its push notification
 * config survives too, and the receiver gets each state change once.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { TaskState } from '@a2a-js/sdk';
import { afterAll, describe, expect, it } from 'vitest';
import { asTask, clientFor, partText, send, userMessage } from './helpers/a2a-client.ts';
import { crashTestEnv } from './helpers/crash-server.ts';
import { httpClient, waitUntil } from './helpers/fixtures.ts';
import { dialects } from './helpers/harness.ts';
import { type ServerProcess, startServerProcess, startsTimeout } from './helpers/server-process.ts';

describe.each(dialects())('A2A task after kill -9 (%s)', (dialect) => {
  let server: ServerProcess | null = null;
  const { key, env } = crashTestEnv(dialect, () => server, { AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true' });
  const received: { token: string | undefined; state: string }[] = [];
  const receiver = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      const token = request.headers['x-a2a-notification-token'];
      received.push({ token: typeof token === 'string' ? token : undefined, state: body.task.status.state });
      response.writeHead(204).end();
    });
  });
  afterAll(() => {
    receiver.close();
  });

  it(
    'completes the task once after a restart, and GetTask answers it',
    async () => {
      server = await startServerProcess(env);
      const agentId = (await httpClient(server.url, key)('GET', '/v1/agents')).body?.data[0].id;
      const before = await clientFor(server.url, agentId, key, 'JSONRPC');
      await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
      const hook = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/notify`;
      const request = send(userMessage('sleep 2500\ntask survived'), true);
      const started = asTask(
        await before.sendMessage({
          ...request,
          configuration: {
            ...request.configuration,
            taskPushNotificationConfig: {
              tenant: '',
              id: 'survives',
              taskId: '',
              url: hook,
              token: 'crash-token',
              authentication: undefined,
            },
          },
        }),
      );
      await waitUntil(
        async () => {
          const task = await before.getTask({ tenant: '', id: started.id });
          return task.status?.state === TaskState.TASK_STATE_WORKING ? true : null;
        },
        { what: 'the task working', everyMs: 100 },
      );
      await waitUntil(async () => (received.length > 0 ? true : null), { what: 'the working notification' });
      // Past the moment the delivery is recorded (at least once: a kill between the answer and its record repeats it).
      await new Promise((resolve) => setTimeout(resolve, 300));
      await server.stop('SIGKILL');

      server = await startServerProcess(env);
      const after = await clientFor(server.url, agentId, key, 'HTTP+JSON');
      const done = await waitUntil(
        async () => {
          const task = await after.getTask({ tenant: '', id: started.id });
          return task.status?.state === TaskState.TASK_STATE_WORKING ? null : task;
        },
        { what: 'the task to finish', everyMs: 200 },
      );
      expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
      expect(done.artifacts).toHaveLength(1);
      expect(partText(done.artifacts[0]?.parts[0])).toBe('task survived');
      const api = httpClient(server.url, key);
      const transcript = (await api('GET', `/v1/sessions/${done.contextId}/messages`)).body;
      expect(transcript?.total).toBe(1);
      expect(transcript?.data[0]).toMatchObject({ id: started.id, status: 'completed' });
      expect(transcript?.data[0].response.parts.map((part: { text: string }) => part.text)).toEqual(['task survived']);
      await waitUntil(async () => (received.length >= 2 ? true : null), { what: 'the completed notification' });
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(received).toEqual([
        { token: 'crash-token', state: 'TASK_STATE_WORKING' },
        { token: 'crash-token', state: 'TASK_STATE_COMPLETED' },
      ]);
      const configs = await after.listTaskPushNotificationConfig({
        tenant: '',
        taskId: started.id,
        pageSize: 0,
        pageToken: '',
      });
      expect(configs.configs.map((config) => config.id)).toEqual(['survives']);
    },
    startsTimeout(2),
  );
});
