/**
 * GET /v1/approvals: the tool calls waiting for a decision across every session of the organization, with the
 * `scripted` model calling a real MCP server on loopback. Pending calls of two agents are listed newest first with
 * their agent, session, tool, server and arguments; status filters; `after` pages; a decision sent on the answer
 * route moves the call from pending to approved; another organization sees none of them; a key without
 * `sessions:read` is refused and a key limited to one agent sees only that agent's. Once per dialect.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flows, type Json } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';
import { type McpTestServer, startModernMcpServer } from './helpers/mcp-servers.ts';

describe.each(dialects())('approvals inbox (%s)', (dialect) => {
  let h: Harness;
  let mcp: McpTestServer;
  const flow = flows(() => h, { agentName: 'careful' });

  beforeAll(async () => {
    mcp = await startModernMcpServer({ name: 'ops' });
    h = await createHarness(dialect, { AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true', AGENTRY_POLL_MS: '100' });
  });
  afterAll(async () => {
    await h?.close();
    await mcp?.close();
  });

  const askingAgent = (name: string) =>
    flow.createAgent({
      name,
      mcpServers: [{ type: 'url', name: 'ops', url: mcp.url }],
      toolApprovals: { default: 'always_ask', overrides: {} },
    });
  /** A session of `agentId` whose turn waits for approval of a `count` call with `key`. */
  const waitingCall = async (agentId: string, key: string) => {
    const sessionId = await flow.createSession(agentId);
    const accepted = await flow.submit(sessionId, `call count {"key":"${key}"}\n---\ndone`);
    const message = await flow.waitForMessage(sessionId, accepted.id, ['requires_action', 'completed', 'failed']);
    expect(message.status).toBe('requires_action');
    return { sessionId, messageId: accepted.id as string, action: message.requiredActions[0] as Json };
  };
  const list = async (query: string, key?: string) => {
    const response = await h.request('GET', `/v1/approvals${query}`, key === undefined ? {} : { key });
    expect(response.status, response.text).toBe(200);
    return json(response);
  };

  it('lists the calls waiting across sessions and agents, pages them, and drops one once it is decided', async () => {
    const first = await askingAgent('inbox-first');
    const second = await askingAgent('inbox-second');
    const a = await waitingCall(first, 'inbox-a');
    const b = await waitingCall(second, 'inbox-b');

    const pending = await list('?status=pending');
    expect(pending).toMatchObject({ object: 'list', has_more: false });
    expect(pending.data.map((entry: Json) => entry.session_id)).toEqual([b.sessionId, a.sessionId]);
    expect(pending.data[1]).toEqual({
      id: a.action.approvalId,
      object: 'tool_approval',
      status: 'pending',
      agent_id: first,
      agent_name: 'inbox-first',
      session_id: a.sessionId,
      session_title: null,
      message_id: a.messageId,
      action_id: a.action.actionId,
      call_id: a.action.callId,
      tool: 'count',
      server: 'ops',
      server_tool: 'count',
      arguments: '{"key":"inbox-a"}',
      reason: null,
      decided_by: null,
      expires_at: null,
      decided_at: null,
      created_at: expect.any(Number),
    });

    const page = await list('?status=pending&limit=1');
    expect(page.data.map((entry: Json) => entry.session_id)).toEqual([b.sessionId]);
    expect(page.has_more).toBe(true);
    const next = await list(`?status=pending&limit=1&after=${page.last_id}`);
    expect(next.data.map((entry: Json) => entry.session_id)).toEqual([a.sessionId]);
    expect(next.has_more).toBe(false);

    const decided = await h.request('POST', `/v1/sessions/${a.sessionId}/messages/${a.messageId}/answer`, {
      body: { actionId: a.action.actionId, answer: { approved: true } },
    });
    expect(decided.status, decided.text).toBe(200);
    expect((await list('?status=pending')).data.map((entry: Json) => entry.session_id)).toEqual([b.sessionId]);
    const approved = (await list('?status=approved')).data;
    expect(approved).toHaveLength(1);
    expect(approved[0]).toMatchObject({ id: a.action.approvalId, status: 'approved', decided_by: 'answer' });
    expect(approved[0].decided_at).toEqual(expect.any(Number));
    expect((await list('')).data).toHaveLength(2);
    await flow.waitForMessage(a.sessionId, a.messageId);
  });

  it("keeps each organization's approvals to itself and needs sessions:read", async () => {
    const agentId = await askingAgent('inbox-isolated');
    const call = await waitingCall(agentId, 'inbox-isolated');
    const other = await h.createOrg('inbox-other');
    expect((await list('?status=pending', other.key)).data).toEqual([]);
    const foreignAfter = await h.request('GET', `/v1/approvals?after=${call.action.approvalId}`, { key: other.key });
    expect(foreignAfter.status).toBe(400);
    expect(json(foreignAfter).error.param).toBe('after');

    const orgId: string = json(await h.request('GET', '/v1/organization')).id;
    const agentsOnly = await h.deps.orgs.createKey(orgId, ['agents:read']);
    const refused = await h.request('GET', '/v1/approvals', { key: agentsOnly });
    expect(refused.status).toBe(403);
    expect(json(refused).error.code).toBe('insufficient_scopes');

    const otherAgent = await askingAgent('inbox-hidden');
    await waitingCall(otherAgent, 'inbox-hidden');
    const limited = await h.deps.orgs.createKey(orgId, ['sessions:read'], undefined, null, [agentId]);
    const seen = (await list('?status=pending', limited)).data;
    expect(seen.length).toBeGreaterThan(0);
    expect(seen.every((entry: Json) => entry.agent_id === agentId)).toBe(true);
  });

  it('refuses an unknown status, a malformed after and an out-of-range limit with a 400 naming the field', async () => {
    for (const [query, param] of [
      ['?status=waiting', 'status'],
      ['?after=nope', 'after'],
      ['?limit=0', 'limit'],
      [`?after=mcpr_${'0'.repeat(32)}`, 'after'],
    ] as const) {
      const response = await h.request('GET', `/v1/approvals${query}`);
      expect(response.status, query).toBe(400);
      expect(json(response).error.param, query).toBe(param);
    }
  });
});
