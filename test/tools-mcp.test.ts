/**
 * MCP tools in the agent loop, with the `scripted` model driving real MCP servers on loopback: each protocol
 * generation, parallel calls of one step, tool errors, timeouts and interrupts (seen as cancellations by the
 * server), auth headers, name clashes, the tool-list cache and `list_changed`, progress events, toolkits, traces
 * and the Responses items. Once per dialect.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flows, type Json, waitUntil } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';
import { type McpTestServer, startLegacyMcpServer, startModernMcpServer } from './helpers/mcp-servers.ts';
import type { TestTool } from './helpers/mcp-test-tools.ts';

const SECRET = 'Bearer loop-secret-19c2';

describe.each(dialects())('MCP tools in the loop (%s)', (dialect) => {
  let h: Harness;
  let modern: McpTestServer;
  let legacy: McpTestServer;
  let sse: McpTestServer;
  let guarded: McpTestServer;
  let toolkit: McpTestServer;
  const flow = flows(() => h);

  const urlAgent = async (servers: { name: string; url: string }[], fields: Json = {}) =>
    flow.createAgent({ mcpServers: servers.map((server) => ({ type: 'url', ...server })), ...fields });
  const reply = (message: Json) => message.response?.parts[0]?.text as string;
  const trace = async (runId: string): Promise<Json[]> =>
    json(await h.request('GET', `/v1/runs/${runId}/trace?limit=50`)).data;

  beforeAll(async () => {
    [modern, legacy, sse, guarded, toolkit] = await Promise.all([
      startModernMcpServer({ name: 'modern' }),
      startLegacyMcpServer({ name: 'legacy' }),
      startLegacyMcpServer({ name: 'sse', transport: 'sse' }),
      startModernMcpServer({ name: 'guarded', auth: SECRET }),
      startModernMcpServer({ name: 'toolkit', only: ['echo'] }),
    ]);
    h = await createHarness(dialect, {
      AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true',
      // Long, so that no call here meets it on a loaded machine; the timeout test has a harness of its own.
      AGENTRY_TOOL_TIMEOUT_MS: '60000',
      AGENTRY_TOOLKITS: JSON.stringify({ composio: { url: `${toolkit.url}?toolkit={toolkit}` } }),
    });
  });
  afterAll(async () => {
    await h.close();
    await Promise.all([modern, legacy, sse, guarded, toolkit].map((server) => server.close()));
  });

  describe.each([
    ['2026-07-28', () => modern],
    ['Streamable HTTP 2025', () => legacy],
    ['HTTP+SSE', () => sse],
  ] as const)('over %s', (_protocol, server) => {
    it('runs a call, feeds the result back, and records a tool_call span with the server and attempt', async () => {
      const agentId = await urlAgent([{ name: 'srv', url: server().url }]);
      const before = server().calls.length;
      const { message } = await flow.turn(agentId, 'call echo {"text":"hello there"}');
      expect(message.status).toBe('completed');
      expect(reply(message)).toBe('echo: hello there');
      const call = server()
        .calls.slice(before)
        .find((recorded) => recorded.tool === 'echo');
      expect(call?.arguments).toEqual({ text: 'hello there' });
      expect(call?.meta['agentry/call_id']).toEqual(expect.stringMatching(/^call_/));
      expect(call?.meta['agentry/run_id']).toBe(message.runId);
      const span = (await trace(message.runId)).find((s) => s.kind === 'tool_call');
      expect(span).toMatchObject({
        name: 'echo',
        status: 'completed',
        output_preview: 'hello there',
        attributes: { kind: 'server', server: 'srv', tool: 'echo', attempts: 1 },
      });
      expect(span?.duration_ms).toEqual(expect.any(Number));
    });

    it('reports an isError result to the model and still completes the turn', async () => {
      const agentId = await urlAgent([{ name: 'srv', url: server().url }]);
      const { message } = await flow.turn(agentId, 'call fail {"message":"disk full"}');
      expect(message.status).toBe('completed');
      expect(reply(message)).toBe('fail: disk full');
      const span = (await trace(message.runId)).find((s) => s.kind === 'tool_call');
      expect(span?.status).toBe('failed');
    });
  });

  it('runs the parallel calls of one step concurrently, on two servers', async () => {
    // `meet` answers `met` once both servers have been called, and `alone` after waiting 30 s for the other: calls
    // made one after the other could never both answer `met`, however fast or slow the machine.
    let called = 0;
    let allCalled = () => {};
    const together = new Promise<void>((resolve) => {
      allCalled = resolve;
    });
    const meet: TestTool = {
      name: 'meet',
      description: 'Answers once the other server was called too',
      inputSchema: { type: 'object', properties: {} },
      run: async () => {
        called += 1;
        if (called === 2) allCalled();
        const alone = new Promise<string>((resolve) => setTimeout(() => resolve('alone'), 30_000).unref());
        return { content: [{ type: 'text', text: await Promise.race([together.then(() => 'met'), alone]) }] };
      },
    };
    const [one, two] = await Promise.all([
      startModernMcpServer({ name: 'one', only: [], extraTools: [meet] }),
      startLegacyMcpServer({ name: 'two', only: [], extraTools: [meet] }),
    ]);
    try {
      const agentId = await urlAgent([
        { name: 'one', url: one.url },
        { name: 'two', url: two.url },
      ]);
      // Both servers offer `meet`: a clash, so each becomes <server>__meet.
      const { message } = await flow.turn(agentId, 'call one__meet {}\ncall two__meet {}');
      expect(message.status, JSON.stringify(message)).toBe('completed');
      expect(reply(message).split('\n').sort()).toEqual(['one__meet: met', 'two__meet: met']);
    } finally {
      await Promise.all([one.close(), two.close()]);
    }
  });

  it('names clashing tools <server>__<tool>, and never renames a client tool', async () => {
    const echoTool = {
      type: 'function',
      name: 'add',
      description: 'client add',
      parameters: { type: 'object', properties: {}, additionalProperties: false },
      strict: true,
    };
    const agentId = await urlAgent(
      [
        { name: 'a', url: modern.url },
        { name: 'b', url: legacy.url },
      ],
      { clientTools: [echoTool] },
    );
    const beforeModern = modern.calls.length;
    const beforeLegacy = legacy.calls.length;
    const { message } = await flow.turn(agentId, 'call b__echo {"text":"from b"}\n---\ncall a__add {"a":2,"b":3}');
    expect(message.status).toBe('completed');
    expect(reply(message)).toBe('a__add: 5');
    expect(legacy.calls.slice(beforeLegacy).map((c) => c.tool)).toEqual(['echo']);
    expect(modern.calls.slice(beforeModern).map((c) => c.tool)).toEqual(['add']);
    // The bare name is the client tool: the turn waits for the caller.
    const client = await flow.turn(agentId, 'call add {}', ['requires_action']);
    expect(client.message.requiredActions).toEqual([expect.objectContaining({ type: 'function_call', name: 'add' })]);
  });

  it('a call past the tool timeout becomes an error result, and the server sees the cancellation', async () => {
    const timed = await createHarness(dialect, {
      AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true',
      AGENTRY_TOOL_TIMEOUT_MS: '1500',
    });
    try {
      const timedFlow = flows(() => timed);
      const agentId = await timedFlow.createAgent({ mcpServers: [{ type: 'url', name: 'srv', url: modern.url }] });
      const cancelled = modern.cancellations.length;
      const { message } = await timedFlow.turn(agentId, 'call hang {}');
      expect(message.status).toBe('completed');
      expect(reply(message)).toBe('hang: Error: the tool did not answer within 1500 ms');
      await modern.waitFor((state) => state.cancellations.length > cancelled);
      expect(modern.cancellations.at(-1)?.tool).toBe('hang');
    } finally {
      await timed.close();
    }
  });

  it('an interrupt during a call cancels the turn and the call on the server', async () => {
    const agentId = await urlAgent([{ name: 'srv', url: legacy.url }]);
    const sessionId = await flow.createSession(agentId);
    const cancelled = legacy.cancellations.length;
    // A call of ten minutes: without the interrupt the turn would wait for the 60 s tool timeout, then complete.
    const accepted = await flow.submit(sessionId, 'call slow {"ms":600000,"steps":10}');
    await legacy.waitFor((state) => state.calls.some((call) => call.tool === 'slow' && call.arguments.ms === 600000));
    const started = Date.now();
    const res = await h.request('POST', `/v1/sessions/${sessionId}/interrupt`, { body: {} });
    expect(json(res).status).toBe('interrupting');
    const message = await flow.waitForMessage(sessionId, accepted.id);
    expect(message.status).toBe('cancelled');
    // Docs: within about a second; 10 s leaves room for a loaded machine, and is far below the tool timeout (60 s).
    expect(Date.now() - started).toBeLessThan(10_000);
    await legacy.waitFor((state) => state.cancellations.length > cancelled);
  });

  it('sends the connector headers to the server', async () => {
    const created = await h.request('POST', '/v1/mcp_servers', {
      body: { name: 'vault', url: guarded.url, headers: { Authorization: SECRET } },
    });
    expect(created.status, created.text).toBe(201);
    const agentId = await flow.createAgent({ mcpServers: [{ kind: 'custom', serverId: json(created).id }] });
    const { message } = await flow.turn(agentId, 'call whoami {}');
    expect(reply(message)).toBe(`whoami: ${SECRET}`);
  });

  it('stores a tool result holding NUL and a lone surrogate the same way on both databases', async () => {
    const agentId = await urlAgent([{ name: 'srv', url: modern.url }]);
    const { message } = await flow.turn(agentId, 'call echo {"text":"a\\u0000b\\ud800c"}');
    expect(message.status).toBe('completed');
    expect(reply(message)).toBe('echo: a\uFFFDb\uFFFDc');
  });

  it('a server that is down fails that call, not the turn', async () => {
    const server = await startModernMcpServer({ name: 'flaky' });
    const agentId = await urlAgent([{ name: 'flaky', url: server.url }]);
    await server.close();
    const { message } = await flow.turn(agentId, 'call echo {"text":"x"}');
    expect(message.status).toBe('completed');
    expect(reply(message)).toMatch(/^echo: Error: /);
  });

  it('caches tool lists: turns reuse the list discovered at create', async () => {
    const server = await startModernMcpServer({ name: 'cached' });
    try {
      const agentId = await urlAgent([{ name: 'cached', url: server.url }]);
      const afterCreate = server.listRequests;
      for (const text of ['call echo {"text":"1"}', 'call echo {"text":"2"}']) {
        expect(reply((await flow.turn(agentId, text)).message)).toMatch(/^echo: \d$/);
      }
      expect(server.listRequests).toBe(afterCreate);
    } finally {
      await server.close();
    }
  });

  it('lists again after list_changed, and offers the new tool', async () => {
    const server = await startLegacyMcpServer({ name: 'changing' });
    try {
      const agentId = await urlAgent([{ name: 'changing', url: server.url }]);
      expect(reply((await flow.turn(agentId, 'call echo {"text":"warm"}')).message)).toBe('echo: warm');
      const lists = server.listRequests;
      server.addTool({
        name: 'shout',
        description: 'Upper-cases its text.',
        inputSchema: { type: 'object', properties: { text: { type: 'string' } } },
        run: async (args) => ({ content: [{ type: 'text', text: String(args.text).toUpperCase() }] }),
      });
      await waitUntil(
        async () => {
          const { message } = await flow.turn(agentId, 'call shout {"text":"hi"}');
          return reply(message) === 'shout: HI' ? true : null;
        },
        { what: 'the new tool', everyMs: 200 },
      );
      expect(server.listRequests).toBeGreaterThan(lists);
    } finally {
      await server.close();
    }
  });

  it('streams MCP progress to live listeners as tool_progress events', async () => {
    const agentId = await urlAgent([{ name: 'srv', url: modern.url }]);
    const sessionId = await flow.createSession(agentId);
    const seen: Json[] = [];
    const off = h.hub.subscribe(sessionId, (event) => {
      const data = (event as Json).data;
      if ((event as Json).kind === 'message.event' && data?.type === 'tool_progress') seen.push(data);
    });
    try {
      const accepted = await flow.submit(sessionId, 'call slow {"ms":300,"steps":3}');
      const message = await flow.waitForMessage(sessionId, accepted.id);
      expect(reply(message)).toBe('slow: done after 3 steps');
      expect(seen.map((data) => data.progress)).toEqual([1, 2, 3]);
      expect(seen[0]).toMatchObject({ name: 'slow', total: 3, message: 'step 1 of 3', callId: expect.any(String) });
    } finally {
      off();
    }
  });

  it('runs a configured toolkit, and reports an unconfigured one naming the configured kinds', async () => {
    const agentId = await flow.createAgent({ mcpServers: [{ kind: 'composio', toolkit: 'gmail' }] });
    const sessionId = await flow.createSession(agentId);
    const accepted = await flow.submit(sessionId, 'call echo {"text":"via toolkit"}');
    expect(accepted.warnings).toEqual([]);
    const message = await flow.waitForMessage(sessionId, accepted.id);
    expect(reply(message)).toBe('echo: via toolkit');
    const bare = await createHarness(dialect);
    try {
      const bareFlow = flows(bare);
      const other = await bareFlow.createAgent({ mcpServers: [{ kind: 'composio', toolkit: 'gmail' }] });
      const warned = await bareFlow.submit(await bareFlow.createSession(other), 'hello');
      expect(warned.warnings).toEqual([
        { code: 'tool_unavailable', message: expect.stringContaining('configured toolkit kinds: none') },
      ]);
    } finally {
      await bare.close();
    }
  });

  it('warns about internal tools this deployment cannot run, and does not offer them', async () => {
    const agentId = await flow.createAgent({ mcpServers: [{ kind: 'internal', name: 'coding_agent' }] });
    const sessionId = await flow.createSession(agentId);
    const accepted = await flow.submit(sessionId, 'call coding_agent {}');
    expect(accepted.warnings).toEqual([
      { code: 'tool_unavailable', message: expect.stringContaining('internal tool "coding_agent"') },
    ]);
    expect(reply(await flow.waitForMessage(sessionId, accepted.id))).toBe(
      'coding_agent: Error: no tool named "coding_agent" is available',
    );
  });

  it('shows mcp_list_tools once per conversation and mcp_call items with the server label on Responses', async () => {
    const agentId = await urlAgent([{ name: 'docs', url: modern.url }]);
    const first = await h.request('POST', '/v1/responses', {
      body: { model: agentId, input: 'call add {"a":1,"b":2}' },
    });
    expect(first.status, first.text).toBe(200);
    const output: Json[] = json(first).output;
    expect(output.map((item) => item.type)).toEqual(['mcp_list_tools', 'mcp_call', 'message']);
    // No `error` when the tools were listed, no `description: null` (the AI SDK's schema refuses null there).
    expect(output[0]).toMatchObject({ server_label: 'docs' });
    expect(output[0]).not.toHaveProperty('error');
    for (const tool of output[0]?.tools ?? [])
      expect(tool.description === undefined || typeof tool.description === 'string').toBe(true);
    expect(output[0]?.tools.map((tool: Json) => tool.name)).toContain('add');
    expect(output[0]?.tools.find((tool: Json) => tool.name === 'add').input_schema).toMatchObject({ type: 'object' });
    expect(output[1]).toMatchObject({
      type: 'mcp_call',
      server_label: 'docs',
      name: 'add',
      arguments: '{"a":1,"b":2}',
      output: '3',
      error: null,
      status: 'completed',
    });
    const again = await h.request('POST', '/v1/responses', {
      body: { model: agentId, input: 'call echo {"text":"x"}', conversation: json(first).conversation.id },
    });
    expect(json(again).output.map((item: Json) => item.type)).toEqual(['mcp_call', 'message']);
  });

  it('streams the MCP lifecycle to the real openai client, and its stream helper accepts it', async () => {
    const agentId = await urlAgent([{ name: 'live', url: modern.url }]);
    const client = new OpenAI({ apiKey: h.key, baseURL: `${await h.listen()}/v1` });
    const types: string[] = [];
    const vendor: Json[] = [];
    const stream = await client.responses.create({
      model: agentId,
      input: 'call slow {"ms":200,"steps":2}',
      stream: true,
    });
    let completed: Json | undefined;
    for await (const event of stream) {
      types.push(event.type);
      if (event.type.startsWith('response.agentry_tool_call.')) vendor.push(event as unknown as Json);
      if (event.type === 'response.completed') completed = event.response as unknown as Json;
    }
    const order = [
      'response.mcp_list_tools.in_progress',
      'response.mcp_list_tools.completed',
      'response.mcp_call.in_progress',
      'response.mcp_call_arguments.delta',
      'response.mcp_call_arguments.done',
      'response.mcp_call.completed',
      'response.completed',
    ];
    const positions = order.map((type) => types.indexOf(type));
    expect(
      positions.every((position) => position >= 0),
      types.join(' '),
    ).toBe(true);
    expect([...positions].sort((a, b) => a - b)).toEqual(positions);
    expect(vendor.map((event) => event.type)).toEqual(
      expect.arrayContaining(['response.agentry_tool_call.started', 'response.agentry_tool_call.progress']),
    );
    expect(vendor.find((event) => event.data?.progress === 1)?.data).toMatchObject({ server_label: 'live', total: 2 });
    expect(completed?.output.map((item: Json) => item.type)).toEqual(['mcp_list_tools', 'mcp_call', 'message']);
    expect(completed?.output[1]).toMatchObject({ server_label: 'live', name: 'slow', status: 'completed' });

    // The SDK's stream helper, with its defaults, over an agent whose tools run on the server.
    const helper = client.responses.stream({ model: agentId, input: 'call echo {"text":"helper"}' });
    const final = await helper.finalResponse();
    expect(final.output_text).toBe('echo: helper');
    // A new conversation: the server's tools are listed in it first.
    expect(final.output.map((item) => item.type)).toEqual(['mcp_list_tools', 'mcp_call', 'message']);
  });
});
