/**
 * Agentry as an MCP server (/v1/mcp and /v1/agents/{id}/mcp) with real clients: the v2 SDK client on the
 * 2026-07-28 revision and on the 2025 `initialize` handshake, and the v1 SDK client. Tools listed and called (the
 * `scripted` model), a session continued, progress while the turn calls a tool, a cancelled call cancelling its
 * turn, a question answered by elicitation or left pending, another org's key, no key, a foreign Origin and hostile
 * arguments. Once per dialect.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ASK_USER_QUESTION_SERVER, flows, type Json, WEATHER_TOOL } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';
import { type McpTestServer, startModernMcpServer } from './helpers/mcp-servers.ts';

type Kind = 'v2 (2026-07-28)' | 'v2 (2025 initialize)' | 'v1';
const KINDS: Kind[] = ['v2 (2026-07-28)', 'v2 (2025 initialize)', 'v1'];

interface CallOptions {
  onprogress?: (progress: { progress: number; message?: string | undefined }) => void;
  signal?: AbortSignal;
}

/** What the tests need of either SDK's client. */
interface AnyClient {
  listTools(): Promise<{ tools: { name: string; inputSchema: Json }[] }>;
  callTool(name: string, args: Json, options?: CallOptions): Promise<Json>;
  close(): Promise<void>;
}

function withKey(key: string | null, origin?: string): typeof fetch {
  return (input, init) => {
    const headers = new Headers(init?.headers);
    if (key !== null) headers.set('authorization', `Bearer ${key}`);
    if (origin !== undefined) headers.set('origin', origin);
    return fetch(input, { ...init, headers });
  };
}

async function connect(
  kind: Kind,
  url: string,
  key: string,
  options: { elicit?: (message: string) => string | null } = {},
): Promise<AnyClient> {
  if (kind === 'v1') {
    const client = new ClientV1({ name: 'v1-test', version: '1.0.0' });
    await client.connect(new TransportV1(new URL(url), { fetch: withKey(key) }));
    return {
      listTools: () => client.listTools() as Promise<{ tools: { name: string; inputSchema: Json }[] }>,
      callTool: async (name, args, call = {}) =>
        (await client.callTool({ name, arguments: args }, undefined, {
          ...(call.onprogress === undefined ? {} : { onprogress: call.onprogress, resetTimeoutOnProgress: true }),
          ...(call.signal === undefined ? {} : { signal: call.signal }),
        })) as Json,
      close: () => client.close(),
    };
  }
  const elicit = options.elicit;
  const client = new ClientV2(
    { name: 'v2-test', version: '1.0.0' },
    {
      versionNegotiation: { mode: kind === 'v2 (2026-07-28)' ? 'auto' : 'legacy' },
      capabilities: elicit === undefined ? {} : { elicitation: { form: {} } },
    },
  );
  if (elicit !== undefined) {
    client.setRequestHandler('elicitation/create', async (request) => {
      const answer = elicit(String(request.params.message));
      // The form's one field: `answer` for a question, `output` for a client tool.
      const params = request.params as { requestedSchema?: { properties?: Record<string, unknown> } };
      const field = Object.keys(params.requestedSchema?.properties ?? {})[0] ?? 'answer';
      return answer === null ? { action: 'decline' } : { action: 'accept', content: { [field]: answer } };
    });
  }
  await client.connect(new TransportV2(new URL(url), { fetch: withKey(key) }));
  return {
    listTools: () => client.listTools() as Promise<{ tools: { name: string; inputSchema: Json }[] }>,
    callTool: async (name, args, call = {}) =>
      (await client.callTool(
        { name, arguments: args },
        {
          ...(call.onprogress === undefined ? {} : { onprogress: call.onprogress, resetTimeoutOnProgress: true }),
          ...(call.signal === undefined ? {} : { signal: call.signal }),
        },
      )) as Json,
    close: () => client.close(),
  };
}

const textOf = (result: Json): string => result.content?.[0]?.text ?? '';

describe.each(dialects())('Agentry as an MCP server (%s)', (dialect) => {
  let h: Harness;
  const flow = flows(() => h, { agentName: 'helper' });
  let base: string;
  let agentId: string;
  let opsId: string;
  let other: { orgId: string; key: string };
  let tools: McpTestServer;

  beforeAll(async () => {
    tools = await startModernMcpServer({ name: 'ops' });
    h = await createHarness(dialect, { AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true' });
    base = await h.listen();
    agentId = await flow.createAgent({ description: 'Says what it is told' });
    opsId = await flow.createAgent({
      name: 'ops',
      mcpServers: [{ type: 'url', name: 'ops', url: tools.url }, ASK_USER_QUESTION_SERVER],
    });
    other = await h.createOrg('other');
  });
  afterAll(async () => {
    await h.close();
    await tools.close();
  });

  const agentUrl = (id: string) => `${base}/v1/agents/${id}/mcp`;

  async function runOf(runId: string): Promise<Json> {
    const response = await h.request('GET', `/v1/runs/${runId}`);
    expect(response.status, response.text).toBe(200);
    return json(response);
  }

  describe.each(KINDS)('with the %s client', (kind) => {
    it('lists the tools of both endpoints and runs a turn recorded as a Run with source mcp', async () => {
      const org = await connect(kind, `${base}/v1/mcp`, h.key);
      try {
        const listed = await org.listTools();
        expect(listed.tools.map((tool) => tool.name).sort()).toEqual(['list_agents', 'message_agent']);
        const agents = await org.callTool('list_agents', {});
        expect(agents.isError ?? false).toBe(false);
        expect(agents.structuredContent.agents).toEqual(
          expect.arrayContaining([expect.objectContaining({ id: agentId, name: 'helper' })]),
        );
        const reply = await org.callTool('message_agent', { agent: 'helper', message: `Hello over ${kind}` });
        expect(reply.isError ?? false).toBe(false);
        expect(textOf(reply)).toBe(`Hello over ${kind}`);
        expect(reply.structuredContent).toMatchObject({ status: 'completed', text: `Hello over ${kind}` });
        const run = await runOf(reply.structuredContent.run_id);
        expect(run.run ?? run).toMatchObject({
          source: 'mcp',
          status: 'completed',
          agent_id: agentId,
          message_id: reply.structuredContent.message_id,
        });
      } finally {
        await org.close();
      }
      const one = await connect(kind, agentUrl(agentId), h.key);
      try {
        const listed = await one.listTools();
        expect(listed.tools.map((tool) => tool.name)).toEqual(['message']);
        expect(listed.tools[0]?.inputSchema.required).toEqual(['message']);
        const first = await one.callTool('message', { message: 'first' });
        const second = await one.callTool('message', {
          message: 'second',
          session_id: first.structuredContent.session_id,
        });
        expect(textOf(second)).toBe('second');
        expect(second.structuredContent.session_id).toBe(first.structuredContent.session_id);
        const fresh = await one.callTool('message', { message: 'third' });
        expect(fresh.structuredContent.session_id).not.toBe(first.structuredContent.session_id);
        // The conversation is a Session of the Sessions API: both turns are there, in order.
        const listedMessages = await h.request('GET', `/v1/sessions/${first.structuredContent.session_id}/messages`);
        expect(json(listedMessages).data.map((m: Json) => m.response?.parts?.[0]?.text)).toEqual(['first', 'second']);
      } finally {
        await one.close();
      }
    });

    it('reports the turn’s tool calls as progress, and a cancelled call cancels its turn', async () => {
      const client = await connect(kind, agentUrl(opsId), h.key);
      try {
        const progress: string[] = [];
        const reply = await client.callTool(
          'message',
          { message: 'call echo {"text":"ping"}\n---\ndone' },
          { onprogress: (p) => progress.push(p.message ?? '') },
        );
        expect(textOf(reply)).toBe('done');
        expect(progress).toEqual(expect.arrayContaining(['calling echo', 'echo done']));

        const aborter = new AbortController();
        const call = client.callTool('message', { message: 'sleep 20000\nnever said' }, { signal: aborter.signal });
        const settled = call.catch((error: unknown) => error);
        const running = await waitForRunning();
        aborter.abort();
        expect(await settled).toBeInstanceOf(Error);
        const ended = await flow.waitForMessage(running.session_id, running.message_id);
        expect(ended.status).toBe('cancelled');
      } finally {
        await client.close();
      }
    });

    it('leaves a question pending with how to answer it when the client cannot elicit', async () => {
      const client = await connect(kind, agentUrl(opsId), h.key);
      try {
        const reply = await client.callTool('message', { message: 'ask Which colour?\n---\nnoted' });
        expect(reply.isError ?? false).toBe(false);
        expect(reply.structuredContent).toMatchObject({ status: 'requires_action', text: null });
        expect(reply.structuredContent.pending).toEqual([
          expect.objectContaining({ type: 'ask_user_question', question: 'Which colour?' }),
        ]);
        const { session_id: sessionId, message_id: messageId } = reply.structuredContent;
        expect(textOf(reply)).toContain(`POST /v1/sessions/${sessionId}/messages/${messageId}/answer`);
        const actionId = reply.structuredContent.pending[0].actionId;
        const answered = await h.request('POST', `/v1/sessions/${sessionId}/messages/${messageId}/answer`, {
          body: { actionId, answer: 'blue' },
        });
        expect(answered.status, answered.text).toBe(200);
        expect((await flow.waitForMessage(sessionId, messageId)).status).toBe('completed');
      } finally {
        await client.close();
      }
    });

    it('answers hostile arguments with tool errors, and another org sees none of this org', async () => {
      const client = await connect(kind, `${base}/v1/mcp`, h.key);
      try {
        for (const args of [
          {},
          { agent: 'helper' },
          { agent: 'helper', message: 42 },
          { agent: ['x'], message: 'hi' },
          { agent: 'helper', message: 'hi', session_id: 'x'.repeat(5000) },
          { agent: 'helper', message: 'hi', session_id: "'; drop table sessions; --" },
          { agent: 'helper', message: 'hi', session_id: '00000000-0000-4000-8000-000000000000' },
          { agent: 'nobody', message: 'hi' },
          { agent: 'helper', message: 'hi', extra: true },
        ]) {
          // A tool error, or the protocol's invalid-params error; never a failure of the server.
          const result = await client.callTool('message_agent', args).catch((error: Error) => {
            expect(error.message, JSON.stringify(args)).toMatch(/-32602|invalid/i);
            return { isError: true, content: [{ type: 'text', text: error.message }] };
          });
          expect(result.isError, JSON.stringify(args)).toBe(true);
          expect(textOf(result)).not.toMatch(/failed on the server|internal/i);
        }
        // A session of another agent is not continued by this one.
        const ops = await client.callTool('message_agent', { agent: 'ops', message: 'hi' });
        const crossed = await client.callTool('message_agent', {
          agent: 'helper',
          message: 'hi',
          session_id: ops.structuredContent.session_id,
        });
        expect(crossed.isError).toBe(true);
        expect(textOf(crossed)).toMatch(/not a session of agent/);
      } finally {
        await client.close();
      }

      const stranger = await connect(kind, `${base}/v1/mcp`, other.key);
      try {
        const agents = await stranger.callTool('list_agents', {});
        expect(agents.structuredContent.agents.map((a: Json) => a.id)).not.toContain(agentId);
        const byId = await stranger.callTool('message_agent', { agent: agentId, message: 'hi' });
        expect(byId.isError).toBe(true);
        const mine = await connect(kind, agentUrl(agentId), h.key);
        const started = await mine.callTool('message', { message: 'private' });
        await mine.close();
        const strangerAgent = (await stranger.callTool('list_agents', {})).structuredContent.agents[0];
        const stolen = await stranger.callTool('message_agent', {
          agent: strangerAgent.id,
          message: 'hi',
          session_id: started.structuredContent.session_id,
        });
        expect(stolen.isError).toBe(true);
        expect(textOf(stolen)).toMatch(/not found/);
      } finally {
        await stranger.close();
      }
      await expect(connect(kind, agentUrl(agentId), other.key)).rejects.toThrow();
    });
  });

  /** The open MCP turn of the ops agent (polled until one is running). */
  async function waitForRunning(): Promise<{ session_id: string; message_id: string }> {
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline) {
      const row = await h.deps.storage.db
        .selectFrom('messages')
        .select(['id', 'session_id'])
        .where('source', '=', 'mcp')
        .where('status', '=', 'running')
        .executeTakeFirst();
      if (row !== undefined) return { session_id: row.session_id, message_id: row.id };
      await sleep(25);
    }
    throw new Error('no MCP turn started running');
  }

  it('answers a question through elicitation on both protocol generations', async () => {
    for (const kind of ['v2 (2026-07-28)', 'v2 (2025 initialize)'] as const) {
      const asked: string[] = [];
      const client = await connect(kind, agentUrl(opsId), h.key, {
        elicit: (message) => {
          asked.push(message);
          return 'green';
        },
      });
      try {
        const reply = await client.callTool('message', { message: 'ask Which colour?\n---\nnoted' });
        expect(asked).toEqual(['Which colour?']);
        expect(reply.isError ?? false, textOf(reply)).toBe(false);
        expect(reply.structuredContent).toMatchObject({ status: 'completed', text: 'noted' });
      } finally {
        await client.close();
      }
    }
  });

  it('asks for the output of a client tool through elicitation on both protocol generations, or leaves it pending', async () => {
    const weatherId = await flow.createAgent({ name: 'weather', clientTools: [WEATHER_TOOL] });
    for (const kind of ['v2 (2026-07-28)', 'v2 (2025 initialize)'] as const) {
      const asked: string[] = [];
      const client = await connect(kind, agentUrl(weatherId), h.key, {
        elicit: (message) => {
          asked.push(message);
          return `sunny (${kind})`;
        },
      });
      try {
        const reply = await client.callTool('message', { message: 'call get_weather {"city":"Paris"}' });
        // The form shows the tool and its arguments; the output given goes to the turn, which goes on with it.
        expect(asked).toEqual([
          'The agent calls the tool get_weather with the arguments {"city":"Paris"}: what is its output?',
        ]);
        expect(reply.isError ?? false, textOf(reply)).toBe(false);
        expect(reply.structuredContent).toMatchObject({ status: 'completed', text: `get_weather: sunny (${kind})` });
      } finally {
        await client.close();
      }
    }
    // Declined: the turn is cancelled.
    const declining = await connect('v2 (2026-07-28)', agentUrl(weatherId), h.key, { elicit: () => null });
    try {
      const reply = await declining.callTool('message', { message: 'call get_weather {"city":"Oslo"}' });
      expect(reply.isError).toBe(true);
      expect(textOf(reply)).toMatch(/cancelled/);
    } finally {
      await declining.close();
    }
    // A client that cannot elicit gets the call pending, and how to give its output.
    const plain = await connect('v1', agentUrl(weatherId), h.key);
    try {
      const reply = await plain.callTool('message', { message: 'call get_weather {"city":"Rome"}' });
      expect(reply.structuredContent).toMatchObject({ status: 'requires_action' });
      expect(reply.structuredContent.pending).toEqual([
        expect.objectContaining({ type: 'function_call', name: 'get_weather', arguments: '{"city":"Rome"}' }),
      ]);
    } finally {
      await plain.close();
    }
  });

  it('answers 401 with the protected-resource metadata, refuses foreign origins, and 404s another org’s agent', async () => {
    const initialize = {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
    };
    const post = (url: string, headers: Record<string, string>) =>
      fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
        body: JSON.stringify(initialize),
      });
    for (const [path, resource] of [
      ['/v1/mcp', '/v1/mcp'],
      [`/v1/agents/${agentId}/mcp`, ''],
    ] as const) {
      const anonymous = await post(`${base}${path}`, {});
      expect(anonymous.status).toBe(401);
      const challenge = anonymous.headers.get('www-authenticate') ?? '';
      const metadataUrl = /^Bearer resource_metadata="([^"]+)"$/.exec(challenge)?.[1];
      expect(metadataUrl).toBe(`${base}/.well-known/oauth-protected-resource${resource}`);
      const metadata = await fetch(metadataUrl ?? '');
      expect(metadata.status).toBe(200);
      // The resource is the endpoint, or the origin, which covers every agent endpoint.
      expect(await metadata.json()).toMatchObject({
        resource: `${base}${resource === '' ? '/' : resource}`,
        bearer_methods_supported: ['header'],
        authorization_servers: [],
      });
    }
    const auth = { authorization: `Bearer ${h.key}` };
    const foreign = await post(`${base}/v1/mcp`, { ...auth, origin: 'https://evil.example' });
    expect(foreign.status).toBe(403);
    const local = await post(`${base}/v1/mcp`, { ...auth, origin: 'http://localhost:5173' });
    expect(local.status).toBe(200);
    // A key must be able to talk to agents (sessions:read and sessions:write); configuring them is not enough.
    const org = await h.deps.orgs.requireByName('default');
    for (const scopes of [['agents:read', 'agents:write'], ['sessions:read']] as const) {
      const narrow = await h.deps.orgs.createKey(org.id, scopes);
      const refused = await post(`${base}/v1/mcp`, { authorization: `Bearer ${narrow}` });
      expect(refused.status, scopes.join()).toBe(403);
    }
    const talker = await h.deps.orgs.createKey(org.id, ['sessions:read', 'sessions:write']);
    expect((await post(`${base}/v1/mcp`, { authorization: `Bearer ${talker}` })).status).toBe(200);
    const strangers = await post(agentUrl(agentId), { authorization: `Bearer ${other.key}` });
    expect(strangers.status).toBe(404);
    const unknown = await post(agentUrl('00000000-0000-4000-8000-000000000000'), auth);
    expect(unknown.status).toBe(404);
    // A 2025 session opened with one org's key is not another org's.
    const opened = await post(`${base}/v1/mcp`, auth);
    const sessionId = opened.headers.get('mcp-session-id');
    expect(sessionId).toBeTruthy();
    const hijack = await fetch(`${base}/v1/mcp`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        authorization: `Bearer ${other.key}`,
        'mcp-session-id': sessionId ?? '',
        'mcp-protocol-version': '2025-06-18',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }),
    });
    expect(hijack.status).toBe(404);
  });
});
