/**
 * MCP tasks (2025-11-25) of Agentry's MCP server with the v1 SDK client's task API: a long turn run as a task,
 * polled to completion, its result the same as a direct call's; a cancelled task cancelling its turn; tasks/list
 * holding only the key's organization's tasks, and another org's key not finding them; and a task across kill -9
 * of the server, whose result is read after the restart. Once per dialect.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, CreateTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { crashTestEnv } from './helpers/crash-server.ts';
import { flows, type Json, waitUntil } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness } from './helpers/harness.ts';
import { type ServerProcess, startServerProcess, startsTimeout } from './helpers/server-process.ts';

async function connect(url: string, key: string): Promise<Client> {
  const client = new Client({ name: 'tasks-test', version: '1.0.0' });
  const withKey: typeof fetch = (input, init) => {
    const headers = new Headers(init?.headers);
    headers.set('authorization', `Bearer ${key}`);
    return fetch(input, { ...init, headers });
  };
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { fetch: withKey }));
  return client;
}

/** Starts a tools/call as a task; the task as the server created it. */
async function startTask(client: Client, name: string, args: Json) {
  const created = await client.request(
    { method: 'tools/call', params: { name, arguments: args, task: { ttl: 60_000 } } },
    CreateTaskResultSchema,
  );
  return created.task;
}

async function statusOf(client: Client, taskId: string, wanted: string) {
  return waitUntil(
    async () => {
      const task = await client.experimental.tasks.getTask(taskId);
      return task.status === wanted ? task : null;
    },
    { what: `task ${wanted}`, everyMs: 50 },
  );
}

describe.each(dialects())('MCP tasks (%s)', (dialect) => {
  let h: Harness;
  const flow = flows(() => h, { agentName: 'tasker' });
  let base: string;
  let agentId: string;
  let other: { orgId: string; key: string };

  beforeAll(async () => {
    h = await createHarness(dialect);
    base = await h.listen();
    agentId = await flow.createAgent({ description: 'Says what it is told' });
    other = await h.createOrg('other');
  });
  afterAll(async () => {
    await h.close();
  });

  it('declares tasks, runs a long turn as a task polled to completion, with the result of a direct call', async () => {
    const client = await connect(`${base}/v1/mcp`, h.key);
    try {
      expect(client.getServerCapabilities()?.tasks).toMatchObject({
        list: {},
        cancel: {},
        requests: { tools: { call: {} } },
      });
      const tools = await client.listTools();
      const byName = Object.fromEntries(tools.tools.map((tool) => [tool.name, tool]));
      expect(byName.message_agent?.execution).toEqual({ taskSupport: 'optional' });
      expect(byName.list_agents?.execution).toBeUndefined();

      const task = await startTask(client, 'message_agent', { agent: 'tasker', message: 'sleep 1500\nslow answer' });
      expect(task).toMatchObject({ status: 'working', ttl: null, pollInterval: expect.any(Number) });
      const [sessionId, messageId] = task.taskId.split('.');
      await statusOf(client, task.taskId, 'completed');
      const result = await client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema);
      const direct = await client.callTool({
        name: 'message_agent',
        arguments: { agent: 'tasker', message: 'slow answer' },
      });
      expect(result.content).toEqual(direct.content);
      expect(result.structuredContent).toMatchObject({
        status: 'completed',
        text: 'slow answer',
        session_id: sessionId,
        message_id: messageId,
      });
      const run = await h.request('GET', `/v1/runs/${String(result.structuredContent?.run_id)}`);
      expect(JSON.parse(run.text)).toMatchObject({ source: 'mcp', status: 'completed', message_id: messageId });

      // The agent endpoint runs its `message` tool as a task too.
      const one = await connect(`${base}/v1/agents/${agentId}/mcp`, h.key);
      try {
        const own = await startTask(one, 'message', { message: 'from the agent endpoint' });
        const answered = await one.experimental.tasks.getTaskResult(own.taskId, CallToolResultSchema);
        expect(answered.content).toEqual([{ type: 'text', text: 'from the agent endpoint' }]);
      } finally {
        await one.close();
      }
    } finally {
      await client.close();
    }
  });

  it('cancels a task and its turn; a task that ended cannot be cancelled', async () => {
    const client = await connect(`${base}/v1/mcp`, h.key);
    try {
      const task = await startTask(client, 'message_agent', { agent: 'tasker', message: 'sleep 30000\nnever said' });
      const [sessionId, messageId] = task.taskId.split('.');
      await waitUntil(
        async () => {
          const message = JSON.parse((await h.request('GET', `/v1/sessions/${sessionId}/messages/${messageId}`)).text);
          return message.message?.status === 'running' ? true : null;
        },
        { what: 'the turn running', everyMs: 50 },
      );
      await client.experimental.tasks.cancelTask(task.taskId);
      await statusOf(client, task.taskId, 'cancelled');
      const result = await client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema);
      expect(result.isError).toBe(true);
      expect(result.structuredContent).toMatchObject({ status: 'cancelled' });
      await expect(client.experimental.tasks.cancelTask(task.taskId)).rejects.toThrow(/terminal status cancelled/);
    } finally {
      await client.close();
    }
  });

  it("lists only the key's organization's tasks; another org's key finds none of them", async () => {
    const client = await connect(`${base}/v1/mcp`, h.key);
    const stranger = await connect(`${base}/v1/mcp`, other.key);
    try {
      const task = await startTask(client, 'message_agent', { agent: 'tasker', message: 'listed' });
      await statusOf(client, task.taskId, 'completed');
      const listed = await client.experimental.tasks.listTasks();
      expect(listed.tasks.map((each) => each.taskId)).toContain(task.taskId);
      expect(
        listed.tasks.every((each) =>
          ['working', 'completed', 'failed', 'cancelled', 'input_required'].includes(each.status),
        ),
      ).toBe(true);
      expect((await stranger.experimental.tasks.listTasks()).tasks).toEqual([]);
      await expect(stranger.experimental.tasks.getTask(task.taskId)).rejects.toThrow(/Task not found/);
      await expect(stranger.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema)).rejects.toThrow(
        /Task not found/,
      );
      await expect(stranger.experimental.tasks.cancelTask(task.taskId)).rejects.toThrow(/Task not found/);
      await expect(client.experimental.tasks.getTask('not-a-task')).rejects.toThrow(/Task not found/);
      // An agent endpoint's tasks are that agent's only.
      const otherAgent = await flow.createAgent({ name: 'second' });
      const second = await connect(`${base}/v1/agents/${otherAgent}/mcp`, h.key);
      try {
        await expect(second.experimental.tasks.getTask(task.taskId)).rejects.toThrow(/Task not found/);
      } finally {
        await second.close();
      }
    } finally {
      await client.close();
      await stranger.close();
    }
  });
});

describe.each(dialects())('an MCP task across kill -9 (%s)', (dialect) => {
  let server: ServerProcess | null = null;
  const { key, env } = crashTestEnv(dialect, () => server);

  it(
    'answers tasks/result with the turn, completed once, after the restart',
    async () => {
      server = await startServerProcess(env);
      const created = await fetch(`${server.url}/v1/agents`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'durable' }),
      });
      expect(created.status).toBe(201);
      let client = await connect(`${server.url}/v1/mcp`, key);
      const task = await startTask(client, 'message_agent', { agent: 'durable', message: 'sleep 2500\nfinished once' });
      await waitUntil(
        async () => {
          const [sessionId, messageId] = task.taskId.split('.');
          const response = await fetch(`${server?.url}/v1/sessions/${sessionId}/messages/${messageId}`, {
            headers: { authorization: `Bearer ${key}` },
          });
          return ((await response.json()) as Json).message?.status === 'running' ? true : null;
        },
        { what: 'the turn running', everyMs: 50 },
      );
      await server.stop('SIGKILL');
      await client.close().catch(() => {});

      server = await startServerProcess(env);
      client = await connect(`${server.url}/v1/mcp`, key);
      try {
        const result = await client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema);
        expect(result.content).toEqual([{ type: 'text', text: 'finished once' }]);
        expect((await client.experimental.tasks.getTask(task.taskId)).status).toBe('completed');
        const runs = await fetch(`${server.url}/v1/runs?limit=50`, { headers: { authorization: `Bearer ${key}` } });
        const [, messageId] = task.taskId.split('.');
        const ofTask = ((await runs.json()) as Json).data.filter((run: Json) => run.message_id === messageId);
        expect(ofTask).toHaveLength(1);
        expect(ofTask[0]).toMatchObject({ source: 'mcp', status: 'completed' });
      } finally {
        await client.close();
      }
    },
    startsTimeout(2),
  );
});
