/**
 * The older surfaces survive a crash like every turn does: kill -9 a real server while a Task prompt and a
 * non-blocking tool run are in flight, restart it, and both finish (the Task completes with its reply, the run's
 * reply reaches its thread exactly once).
 */
import { describe, expect, it } from 'vitest';
import { crashTestEnv } from './helpers/crash-server.ts';
import { httpClient, waitUntil } from './helpers/fixtures.ts';
import { dialects } from './helpers/harness.ts';
import { type ServerProcess, startServerProcess, startsTimeout } from './helpers/server-process.ts';

describe.each(dialects())('legacy surfaces after kill -9 (%s)', (dialect) => {
  let server: ServerProcess | null = null;
  const { key, env } = crashTestEnv(dialect, () => server);

  it(
    'finishes a Task prompt and a tool run that were running when the process died',
    async () => {
      server = await startServerProcess(env);
      let api = httpClient(server.url, key);
      const projectId = (await api('GET', '/v1/organization')).body?.projectId;
      const agentId = (await api('GET', '/v1/agents')).body?.data[0].id;
      const task = (await api('POST', '/v1/tasks', { prompt: 'sleep 2500\ntask survived' })).body;
      const thread = (await api('POST', '/api/sdk/threads', {})).body;
      const run = (
        await api('POST', `/api/sdk/p/${projectId}/a/${agentId}/r`, {
          inputs: ['sleep 2500\nrun survived'],
          thread_id: thread?.id,
          blocking: false,
        })
      ).body?.run;
      await waitUntil(
        async () => {
          const current = (await api('GET', `/v1/tasks/${task?.id}`)).body;
          const status = (await api('GET', `/api/sdk/p/${projectId}/a/${agentId}/r/${run.run_id}`)).body;
          return current?.prompts[0].status === 'running' && status?.run.status.workflow === 'in_progress'
            ? true
            : null;
        },
        { what: 'both turns in flight', everyMs: 100 },
      );
      await server.stop('SIGKILL');

      server = await startServerProcess(env);
      api = httpClient(server.url, key);
      const finished = await waitUntil(
        async () => {
          const current = (await api('GET', `/v1/tasks/${task?.id}`)).body;
          return current?.status === 'running' ? null : current;
        },
        { what: 'the task', everyMs: 200 },
      );
      expect(finished.status).toBe('completed');
      const content = (await api('GET', `/v1/tasks/${task?.id}/content`)).body;
      expect(content?.prompts[0].response).toBe('task survived');
      // Nobody waits for the run: the server settles it and its reply reaches the thread once.
      const messages = await waitUntil(
        async () => {
          const list = (await api('GET', `/api/sdk/threads/${thread?.id}/messages`)).body?.list;
          return list?.length === 2 ? list : null;
        },
        { what: "the run's reply on the thread", everyMs: 200 },
      );
      expect(messages.map((message: { role: string; content: string }) => [message.role, message.content])).toEqual([
        ['user', 'sleep 2500\nrun survived'],
        ['assistant', 'run survived'],
      ]);
      const status = (await api('GET', `/api/sdk/p/${projectId}/a/${agentId}/r/${run.run_id}`)).body;
      expect(status?.run.status.run).toBe('succeeded');
    },
    startsTimeout(2),
  );
});
