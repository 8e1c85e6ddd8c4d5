/**
 * The MCP tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) of Agentry's MCP server on the 2026-07-28
 * revision, in raw JSON-RPC over HTTP (no SDK has it): server/discover advertising it; a long turn answered with a
 * task, polled with tasks/get to the result a direct call gives; a question and a client tool answered through
 * tasks/update; tasks/cancel; tasks/result and tasks/list not found; a call without the extension (or with the
 * 2025-11-25 task opt-in only) answered synchronously; another org's key not finding the task; the Mcp-Name header
 * checked; and a task across kill -9 of the server completing once. Once per dialect.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { crashTestEnv } from './helpers/crash-server.ts';
import { ASK_USER_QUESTION_SERVER, flows, type Json, WEATHER_TOOL, waitUntil } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness } from './helpers/harness.ts';
import { type ServerProcess, startServerProcess, startsTimeout } from './helpers/server-process.ts';

const REVISION = '2026-07-28';
const TASKS = 'io.modelcontextprotocol/tasks';
const WITH_TASKS = { extensions: { [TASKS]: {} } };
const WITH_TASKS_AND_ELICITATION = { extensions: { [TASKS]: {} }, elicitation: { form: {} } };

interface RpcOptions {
  key: string;
  /** The per-request client capabilities. */
  capabilities?: Json;
  /** Replaces the Mcp-Name header (null: none) the method's params would give. */
  mcpName?: string | null;
}

let nextId = 1;

/** The JSON-RPC message of a response: the JSON body, or the last data event naming the request of an SSE body. */
async function messageOf(response: Response, id: number): Promise<Json> {
  const text = await response.text();
  if (!(response.headers.get('content-type') ?? '').includes('text/event-stream')) return JSON.parse(text);
  const events = text
    .split('\n')
    .filter((line) => line.startsWith('data:'))
    .map((line) => JSON.parse(line.slice(5)) as Json)
    .filter((message) => message.id === id);
  const last = events.at(-1);
  if (last === undefined) throw new Error(`no response in ${text}`);
  return last;
}

/** One 2026-07-28 request with the per-request envelope and the standard headers; its status and message. */
async function rpc(url: string, method: string, params: Json, options: RpcOptions) {
  const id = nextId++;
  const name = params.taskId ?? params.name;
  const mcpName = options.mcpName === undefined ? name : options.mcpName;
  const headers: Record<string, string> = {
    authorization: `Bearer ${options.key}`,
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': REVISION,
    'mcp-method': method,
    ...(typeof mcpName === 'string' ? { 'mcp-name': mcpName } : {}),
  };
  const _meta = {
    'io.modelcontextprotocol/protocolVersion': REVISION,
    'io.modelcontextprotocol/clientInfo': { name: 'raw-test', version: '1.0.0' },
    'io.modelcontextprotocol/clientCapabilities': options.capabilities ?? {},
  };
  const response = await fetch(url, {
    method: 'POST',
    headers,
    body: JSON.stringify({ jsonrpc: '2.0', id, method, params: { ...params, _meta } }),
  });
  return { status: response.status, message: await messageOf(response, id) };
}

/** The result of a request that must succeed. */
async function resultOf(url: string, method: string, params: Json, options: RpcOptions): Promise<Json> {
  const { status, message } = await rpc(url, method, params, options);
  expect(status, JSON.stringify(message)).toBe(200);
  expect(message.error, JSON.stringify(message.error)).toBeUndefined();
  return message.result;
}

/** Polls tasks/get (at the task's pollIntervalMs, at most 200 ms here) until the task has the status wanted. */
async function taskWith(url: string, taskId: string, wanted: string, options: RpcOptions): Promise<Json> {
  return waitUntil(
    async () => {
      const task = await resultOf(url, 'tasks/get', { taskId }, options);
      expect(task.resultType).toBe('complete');
      return task.status === wanted ? task : null;
    },
    { what: `task ${wanted}`, everyMs: 200 },
  );
}

describe.each(dialects())('the MCP tasks extension (%s)', (dialect) => {
  let h: Harness;
  const flow = flows(() => h, { agentName: 'tasker' });
  let mcp: string;
  let base: string;
  let agentId: string;
  let other: { orgId: string; key: string };

  beforeAll(async () => {
    h = await createHarness(dialect);
    base = await h.listen();
    mcp = `${base}/v1/mcp`;
    agentId = await flow.createAgent({ description: 'Says what it is told' });
    other = await h.createOrg('other');
  });
  afterAll(async () => {
    await h.close();
  });

  it('advertises the extension in server/discover, not the 2025-11-25 tasks capability', async () => {
    for (const url of [mcp, `${base}/v1/agents/${agentId}/mcp`]) {
      const discovered = await resultOf(url, 'server/discover', {}, { key: h.key });
      expect(discovered.capabilities.extensions).toEqual({ [TASKS]: {} });
      expect(discovered.capabilities.tasks).toBeUndefined();
    }
  });

  it('answers a long turn with a task, polled with tasks/get to the result of a direct call and one mcp Run', async () => {
    const key = { key: h.key, capabilities: WITH_TASKS };
    const call = { name: 'message_agent', arguments: { agent: 'tasker', message: 'sleep 3000\nslow answer' } };
    const created = await resultOf(mcp, 'tools/call', call, key);
    expect(created).toMatchObject({
      resultType: 'task',
      status: 'working',
      ttlMs: null,
      pollIntervalMs: 1000,
      createdAt: expect.any(String),
      lastUpdatedAt: expect.any(String),
    });
    expect(created.content).toBeUndefined();
    expect(created._meta['io.modelcontextprotocol/serverInfo']).toMatchObject({ name: 'agentry' });
    const [sessionId, messageId] = String(created.taskId).split('.');
    const working = await resultOf(mcp, 'tasks/get', { taskId: created.taskId }, key);
    expect(working).toMatchObject({ resultType: 'complete', taskId: created.taskId, status: 'working' });
    expect(working.result).toBeUndefined();

    const done = await taskWith(mcp, created.taskId, 'completed', key);
    const direct = await resultOf(
      mcp,
      'tools/call',
      { name: 'message_agent', arguments: { agent: 'tasker', message: 'slow answer' } },
      { key: h.key },
    );
    expect(direct.resultType).toBe('complete');
    expect(done.result.content).toEqual(direct.content);
    expect(done.result.content).toEqual([{ type: 'text', text: 'slow answer' }]);
    expect(done.result.structuredContent).toMatchObject({
      status: 'completed',
      text: 'slow answer',
      session_id: sessionId,
      message_id: messageId,
    });
    const runs = await h.request('GET', '/v1/runs?limit=50');
    const ofTask = JSON.parse(runs.text).data.filter((run: Json) => run.message_id === messageId);
    expect(ofTask).toHaveLength(1);
    expect(ofTask[0]).toMatchObject({ source: 'mcp', status: 'completed' });

    // A turn that ends within the wait is answered with its result, even when the client could take a task.
    const quick = await resultOf(mcp, 'tools/call', { ...call, arguments: { agent: 'tasker', message: 'quick' } }, key);
    expect(quick).toMatchObject({ resultType: 'complete', content: [{ type: 'text', text: 'quick' }] });

    // The agent endpoint's `message` tool runs as a task too.
    const agentMcp = `${base}/v1/agents/${agentId}/mcp`;
    const own = await resultOf(
      agentMcp,
      'tools/call',
      { name: 'message', arguments: { message: 'sleep 2500\nown' } },
      key,
    );
    expect(own.resultType).toBe('task');
    const ownDone = await taskWith(agentMcp, own.taskId, 'completed', key);
    expect(ownDone.result.content).toEqual([{ type: 'text', text: 'own' }]);
  });

  it('surfaces a question as inputRequests and resumes the turn with tasks/update', async () => {
    const askerId = await flow.createAgent({ name: 'asker', mcpServers: [ASK_USER_QUESTION_SERVER] });
    const url = `${base}/v1/agents/${askerId}/mcp`;
    const key = { key: h.key, capabilities: WITH_TASKS_AND_ELICITATION };
    const created = await resultOf(
      url,
      'tools/call',
      { name: 'message', arguments: { message: 'ask Which colour?\n---\nnoted' } },
      key,
    );
    expect(created).toMatchObject({ resultType: 'task', status: 'input_required' });
    expect(created.inputRequests).toBeUndefined();
    const waiting = await taskWith(url, created.taskId, 'input_required', key);
    const keys = Object.keys(waiting.inputRequests);
    expect(keys).toHaveLength(1);
    const [questionKey] = keys as [string];
    expect(questionKey).toMatch(/^question_\d+$/);
    expect(waiting.inputRequests[questionKey]).toMatchObject({
      method: 'elicitation/create',
      params: {
        message: 'Which colour?',
        requestedSchema: { type: 'object', properties: { answer: { type: 'string' } }, required: ['answer'] },
      },
    });
    // A client that cannot elicit sees the task working, and how to answer through the HTTP API.
    const plain = await resultOf(
      url,
      'tasks/get',
      { taskId: created.taskId },
      { key: h.key, capabilities: WITH_TASKS },
    );
    expect(plain.status).toBe('working');
    expect(plain.inputRequests).toBeUndefined();
    expect(plain.statusMessage).toContain('/answer');

    // Bad input is a clear invalid-params error and changes nothing.
    const missing = await rpc(url, 'tasks/update', { taskId: created.taskId }, key);
    expect(missing.message.error).toMatchObject({ code: -32602, message: expect.stringContaining('inputResponses') });
    const wrong = await rpc(
      url,
      'tasks/update',
      { taskId: created.taskId, inputResponses: { [questionKey]: { action: 'accept', content: { answer: 7 } } } },
      key,
    );
    expect(wrong.message.error).toMatchObject({
      code: -32602,
      message: expect.stringContaining(`inputResponses.${questionKey}`),
    });
    expect((await resultOf(url, 'tasks/get', { taskId: created.taskId }, key)).status).toBe('input_required');

    // Keys of nothing outstanding are ignored; the answer resumes the turn.
    const ack = await resultOf(
      url,
      'tasks/update',
      {
        taskId: created.taskId,
        inputResponses: {
          unknown_key: { action: 'accept' },
          [questionKey]: { action: 'accept', content: { answer: 'green' } },
        },
      },
      key,
    );
    expect(ack).toMatchObject({ resultType: 'complete' });
    const done = await taskWith(url, created.taskId, 'completed', key);
    expect(done.result.structuredContent).toMatchObject({ status: 'completed', text: 'noted' });
    expect(done.inputRequests).toBeUndefined();
  });

  it("asks for a client tool's output as inputRequests; a declined request cancels the turn", async () => {
    const weatherId = await flow.createAgent({ name: 'weather', clientTools: [WEATHER_TOOL] });
    const url = `${base}/v1/agents/${weatherId}/mcp`;
    const key = { key: h.key, capabilities: WITH_TASKS_AND_ELICITATION };
    const created = await resultOf(
      url,
      'tools/call',
      { name: 'message', arguments: { message: 'call get_weather {"city":"Paris"}' } },
      key,
    );
    const waiting = await taskWith(url, created.taskId, 'input_required', key);
    const [toolKey] = Object.keys(waiting.inputRequests) as [string];
    expect(toolKey).toMatch(/^client_tool_/);
    expect(waiting.inputRequests[toolKey].params.message).toBe(
      'The agent calls the tool get_weather with the arguments {"city":"Paris"}: what is its output?',
    );
    await resultOf(
      url,
      'tasks/update',
      { taskId: created.taskId, inputResponses: { [toolKey]: { action: 'accept', content: { output: 'sunny' } } } },
      key,
    );
    const done = await taskWith(url, created.taskId, 'completed', key);
    expect(done.result.structuredContent).toMatchObject({ status: 'completed', text: 'get_weather: sunny' });

    const declined = await resultOf(
      url,
      'tools/call',
      { name: 'message', arguments: { message: 'call get_weather {"city":"Oslo"}' } },
      key,
    );
    const asked = await taskWith(url, declined.taskId, 'input_required', key);
    const [declinedKey] = Object.keys(asked.inputRequests) as [string];
    await resultOf(
      url,
      'tasks/update',
      { taskId: declined.taskId, inputResponses: { [declinedKey]: { action: 'decline' } } },
      key,
    );
    await taskWith(url, declined.taskId, 'cancelled', key);
  });

  it('cancels a task and its turn with tasks/cancel, acknowledged also once it ended', async () => {
    const key = { key: h.key, capabilities: WITH_TASKS };
    const created = await resultOf(
      mcp,
      'tools/call',
      { name: 'message_agent', arguments: { agent: 'tasker', message: 'sleep 30000\nnever said' } },
      key,
    );
    expect(created.resultType).toBe('task');
    expect(await resultOf(mcp, 'tasks/cancel', { taskId: created.taskId }, key)).toMatchObject({
      resultType: 'complete',
    });
    const cancelled = await taskWith(mcp, created.taskId, 'cancelled', key);
    expect(cancelled.result).toBeUndefined();
    const [sessionId, messageId] = String(created.taskId).split('.');
    expect((await flow.waitForMessage(String(sessionId), String(messageId))).status).toBe('cancelled');
    expect(await resultOf(mcp, 'tasks/cancel', { taskId: created.taskId }, key)).toMatchObject({
      resultType: 'complete',
    });
  });

  it('reports a failed turn as a completed task whose result is the tool error a direct call gives', async () => {
    const key = { key: h.key, capabilities: WITH_TASKS };
    const call = { name: 'message_agent', arguments: { agent: 'tasker', message: 'sleep 2500\nfail out of luck' } };
    const created = await resultOf(mcp, 'tools/call', call, key);
    expect(created.resultType).toBe('task');
    const done = await taskWith(mcp, created.taskId, 'completed', key);
    expect(done.error).toBeUndefined();
    expect(done.statusMessage).toContain('out of luck');
    expect(done.result).toMatchObject({ isError: true, structuredContent: { status: 'failed' } });
    expect(done.result.content[0].text).toContain('The turn failed');
  });

  it('answers tasks/result and tasks/list with method not found', async () => {
    const key = { key: h.key, capabilities: WITH_TASKS };
    const created = await resultOf(
      mcp,
      'tools/call',
      { name: 'message_agent', arguments: { agent: 'tasker', message: 'sleep 2500\nlisted' } },
      key,
    );
    for (const [method, params] of [
      ['tasks/result', { taskId: created.taskId }],
      ['tasks/list', {}],
    ] as const) {
      const { message } = await rpc(mcp, method, params, key);
      expect(message.error?.code, method).toBe(-32601);
    }
    await taskWith(mcp, created.taskId, 'completed', key);
  });

  it('answers synchronously without the extension, also to the 2025-11-25 task opt-in', async () => {
    const plain = await resultOf(
      mcp,
      'tools/call',
      { name: 'message_agent', arguments: { agent: 'tasker', message: 'sleep 2500\nwaited for' } },
      { key: h.key },
    );
    expect(plain).toMatchObject({ resultType: 'complete', content: [{ type: 'text', text: 'waited for' }] });
    const legacy = await resultOf(
      mcp,
      'tools/call',
      {
        name: 'message_agent',
        arguments: { agent: 'tasker', message: 'sleep 2500\nstill waited for' },
        task: { ttl: 60_000 },
      },
      { key: h.key, capabilities: { tasks: { requests: { elicitation: { create: {} } } } } },
    );
    expect(legacy).toMatchObject({ resultType: 'complete', content: [{ type: 'text', text: 'still waited for' }] });
    expect(legacy.taskId).toBeUndefined();
    // Bad arguments are the same errors as a direct call's, with or without the extension.
    for (const capabilities of [{}, WITH_TASKS]) {
      const invalid = await resultOf(
        mcp,
        'tools/call',
        { name: 'message_agent', arguments: { agent: 'tasker' } },
        { key: h.key, capabilities },
      );
      expect(invalid).toMatchObject({ resultType: 'complete', isError: true });
      expect(invalid.content[0].text).toMatch(/Input validation error.*message/);
      const unknown = await resultOf(
        mcp,
        'tools/call',
        { name: 'message_agent', arguments: { agent: 'nobody', message: 'hi' } },
        { key: h.key, capabilities },
      );
      expect(unknown).toMatchObject({ resultType: 'complete', isError: true });
    }
  });

  it('finds no task of another organization or agent, nor one that is not a task id; checks Mcp-Name', async () => {
    const key = { key: h.key, capabilities: WITH_TASKS };
    const created = await resultOf(
      mcp,
      'tools/call',
      { name: 'message_agent', arguments: { agent: 'tasker', message: 'sleep 2500\nmine' } },
      key,
    );
    const stranger = { key: other.key, capabilities: WITH_TASKS };
    for (const method of ['tasks/get', 'tasks/cancel', 'tasks/update']) {
      const { message } = await rpc(mcp, method, { taskId: created.taskId, inputResponses: {} }, stranger);
      expect(message.error, method).toMatchObject({ code: -32602, message: expect.stringContaining('Task not found') });
    }
    const secondId = await flow.createAgent({ name: 'second' });
    const atSecond = await rpc(`${base}/v1/agents/${secondId}/mcp`, 'tasks/get', { taskId: created.taskId }, key);
    expect(atSecond.message.error).toMatchObject({ code: -32602, message: expect.stringContaining('Task not found') });
    // A request that does not declare the extension may not use its methods.
    for (const method of ['tasks/get', 'tasks/cancel', 'tasks/update']) {
      const { message } = await rpc(mcp, method, { taskId: created.taskId, inputResponses: {} }, { key: h.key });
      expect(message.error, method).toMatchObject({
        code: -32021,
        data: { requiredCapabilities: { extensions: { [TASKS]: {} } } },
      });
    }
    const garbage = await rpc(mcp, 'tasks/get', { taskId: 'not-a-task' }, key);
    expect(garbage.message.error).toMatchObject({ code: -32602, message: expect.stringContaining('Task not found') });

    // The Mcp-Name header must name the task (SEP-2663's Streamable HTTP binding).
    const unnamed = await rpc(mcp, 'tasks/get', { taskId: created.taskId }, { ...key, mcpName: null });
    expect(unnamed.status).toBe(400);
    expect(unnamed.message.error.code).toBe(-32020);
    const misnamed = await rpc(mcp, 'tasks/get', { taskId: created.taskId }, { ...key, mcpName: 'another.task' });
    expect(misnamed.status).toBe(400);
    const misnamedCall = await rpc(
      mcp,
      'tools/call',
      { name: 'message_agent', arguments: { agent: 'tasker', message: 'x' } },
      { ...key, mcpName: 'list_agents' },
    );
    expect(misnamedCall.status).toBe(400);
    await taskWith(mcp, created.taskId, 'completed', key);
  });
});

describe.each(dialects())('an MCP extension task across kill -9 (%s)', (dialect) => {
  let server: ServerProcess | null = null;
  const { key, env } = crashTestEnv(dialect, () => server);

  it(
    'answers tasks/get with the turn, completed once, after the restart',
    async () => {
      server = await startServerProcess(env);
      const created = await fetch(`${server.url}/v1/agents`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'durable' }),
      });
      expect(created.status).toBe(201);
      const options = { key, capabilities: WITH_TASKS };
      const task = await resultOf(
        `${server.url}/v1/mcp`,
        'tools/call',
        { name: 'message_agent', arguments: { agent: 'durable', message: 'sleep 5000\nfinished once' } },
        options,
      );
      expect(task).toMatchObject({ resultType: 'task', status: 'working' });
      await server.stop('SIGKILL');

      server = await startServerProcess(env);
      const done = await taskWith(`${server.url}/v1/mcp`, task.taskId, 'completed', options);
      expect(done.result.content).toEqual([{ type: 'text', text: 'finished once' }]);
      const runs = await fetch(`${server.url}/v1/runs?limit=50`, { headers: { authorization: `Bearer ${key}` } });
      const [, messageId] = String(task.taskId).split('.');
      const ofTask = ((await runs.json()) as Json).data.filter((run: Json) => run.message_id === messageId);
      expect(ofTask).toHaveLength(1);
      expect(ofTask[0]).toMatchObject({ source: 'mcp', status: 'completed' });
    },
    startsTimeout(2),
  );
});
