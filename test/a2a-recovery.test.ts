/**
 * An A2A task survives a crash like every turn: kill -9 a real server while the task works, restart it, and the
 * task completes once; the client reads it with GetTask afterwards (over the other binding, from the restarted
 * server's card), its reply once in the artifact and once in the context's transcript.
 */
import { TaskState } from '@a2a-js/sdk';
import { afterAll, describe, expect, it } from 'vitest';
import { asTask, clientFor, partText, send, userMessage } from './helpers/a2a-client.ts';
import { httpClient, waitUntil } from './helpers/fixtures.ts';
import { dialects, testEnvironment, testKey } from './helpers/harness.ts';
import { CRASH_TEST_ENV, type ServerProcess, startServerProcess, startsTimeout } from './helpers/server-process.ts';

describe.each(dialects())('A2A task after kill -9 (%s)', (dialect) => {
  const environment = testEnvironment(dialect);
  const key = testKey();
  const env = { ...environment.env, ...CRASH_TEST_ENV, AGENTRY_BOOTSTRAP_KEY: key };
  let server: ServerProcess | null = null;
  afterAll(async () => {
    await server?.stop('SIGKILL');
    await environment.cleanup();
  });

  it(
    'completes the task once after a restart, and GetTask answers it',
    async () => {
      server = await startServerProcess(env);
      const agentId = (await httpClient(server.url, key)('GET', '/v1/agents')).body?.data[0].id;
      const before = await clientFor(server.url, agentId, key, 'JSONRPC');
      const started = asTask(await before.sendMessage(send(userMessage('sleep 2500\ntask survived'), true)));
      await waitUntil(
        async () => {
          const task = await before.getTask({ tenant: '', id: started.id });
          return task.status?.state === TaskState.TASK_STATE_WORKING ? true : null;
        },
        { what: 'the task working', everyMs: 100 },
      );
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
    },
    startsTimeout(2),
  );
});
