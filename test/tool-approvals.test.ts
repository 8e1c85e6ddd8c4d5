/**
 * Approval of tool calls on the Sessions surface, with the `scripted` model driving a real MCP server on loopback
 * (which counts every execution): the agent's `toolApprovals` policy (default, exact names, `<server>__*`), the
 * `tool_approval` required action, its session event and webhook, approve and deny (with a reason) through the
 * answer route, single use (a second answer, a forged action id, another org's session), the approval timeout,
 * parallel calls where one asks, and validation of the policy and of the answer. Once per dialect.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WEBHOOK_EVENT_TYPES } from '../src/domain/outbox.ts';
import { flows, type Json, waitUntil } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';
import { type McpTestServer, startModernMcpServer } from './helpers/mcp-servers.ts';

describe.each(dialects())('tool approvals (%s)', (dialect) => {
  let h: Harness;
  let mcp: McpTestServer;
  const flow = flows(() => h, { agentName: 'careful' });

  beforeAll(async () => {
    mcp = await startModernMcpServer({ name: 'ops' });
    h = await createHarness(dialect, { AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true', AGENTRY_POLL_MS: '100' });
    // The outbox records only the webhook events an endpoint subscribes to (none is delivered: no dispatcher runs).
    const hook = await h.request('POST', '/v1/webhook_endpoints', {
      body: { name: 'outbox', url: 'https://93.184.215.14/hooks', event_types: WEBHOOK_EVENT_TYPES },
    });
    expect(hook.status, hook.text).toBe(200);
  });
  afterAll(async () => {
    await h.close();
    await mcp.close();
  });

  const agentWith = (toolApprovals: Json | undefined, fields: Json = {}) =>
    flow.createAgent({
      mcpServers: [{ type: 'url', name: 'ops', url: mcp.url }],
      ...(toolApprovals === undefined ? {} : { toolApprovals }),
      ...fields,
    });
  const counted = (key: string) => mcp.counts[key] ?? 0;
  const answer = (sessionId: string, messageId: string, body: Json, key?: string) =>
    h.request('POST', `/v1/sessions/${sessionId}/messages/${messageId}/answer`, {
      body,
      ...(key === undefined ? {} : { key }),
    });
  const sessionEvents = async (sessionId: string): Promise<Json[]> =>
    (
      await h.deps.storage.db
        .selectFrom('session_events')
        .selectAll()
        .where('session_id', '=', sessionId)
        .orderBy('seq')
        .execute()
    ).map((row) => ({ ...row, data: JSON.parse(row.data) }));
  const webhookEvents = async (type: string, sessionId: string): Promise<Json[]> =>
    (await h.deps.storage.db.selectFrom('webhook_events').selectAll().where('type', '=', type).execute())
      .map((row) => JSON.parse(row.data))
      .filter((data) => data.id === sessionId);

  it('stores the policy on the agent, with the default when none is given', async () => {
    const plain = json(await h.request('GET', `/v1/agents/${await agentWith(undefined)}`)).agent;
    expect(plain.toolApprovals).toEqual({ default: 'auto', overrides: {} });
    const policy = { default: 'auto', overrides: { count: 'always_ask', 'ops__*': 'always_ask' }, timeoutSeconds: 60 };
    const id = await agentWith(policy);
    expect(json(await h.request('GET', `/v1/agents/${id}`)).agent.toolApprovals).toEqual(policy);
    const patched = await h.request('PATCH', `/v1/agents/${id}`, {
      body: { toolApprovals: { default: 'always_ask', overrides: {} } },
    });
    expect(patched.status, patched.text).toBe(200);
    expect(json(patched).agent.toolApprovals).toEqual({ default: 'always_ask', overrides: {} });
    expect(json(patched).agent.version).toBe(2);
  });

  it('refuses a malformed policy with a 400 naming the field', async () => {
    const bad: [Json, string][] = [
      [{ default: 'sometimes', overrides: {} }, 'toolApprovals'],
      [{ default: 'auto' }, 'toolApprovals'],
      [{ default: 'auto', overrides: { count: 'never' } }, 'toolApprovals'],
      [{ default: 'auto', overrides: { 'bad name!': 'auto' } }, 'toolApprovals.overrides'],
      [{ default: 'auto', overrides: { '\u0000__*': 'auto' } }, 'toolApprovals.overrides'],
      [{ default: 'auto', overrides: {}, timeoutSeconds: 0 }, 'toolApprovals'],
      [{ default: 'auto', overrides: {}, timeoutSeconds: 1e20 }, 'toolApprovals'],
      [{ default: 'auto', overrides: {}, extra: true }, 'toolApprovals'],
    ];
    for (const [toolApprovals, param] of bad) {
      const response = await h.request('POST', '/v1/agents', { body: { name: 'x', toolApprovals } });
      expect(response.status, JSON.stringify(toolApprovals)).toBe(400);
      expect(json(response).error.param ?? '', JSON.stringify(toolApprovals)).toContain(param);
    }
  });

  it('runs every call at once under auto', async () => {
    const agentId = await agentWith({ default: 'auto', overrides: {} });
    const { message } = await flow.turn(agentId, 'call count {"key":"auto-1"}');
    expect(message.status).toBe('completed');
    expect(counted('auto-1')).toBe(1);
  });

  it('suspends an always_ask call until it is approved, then runs it exactly once', async () => {
    const agentId = await agentWith({ default: 'always_ask', overrides: {} });
    const sessionId = await flow.createSession(agentId);
    const accepted = await flow.submit(sessionId, 'call count {"key":"approve-1"}\n---\nall done');
    const waiting = await flow.waitForMessage(sessionId, accepted.id, ['requires_action', 'completed', 'failed']);
    expect(waiting.status).toBe('requires_action');
    expect(counted('approve-1')).toBe(0);
    const [action] = waiting.requiredActions;
    expect(action).toMatchObject({
      type: 'tool_approval',
      actionId: expect.any(Number),
      callId: expect.stringMatching(/^call_/),
      tool: 'count',
      server: 'ops',
      serverTool: 'count',
      arguments: '{"key":"approve-1"}',
      approvalId: expect.stringMatching(/^mcpr_[0-9a-f]{32}$/),
      expiresAt: null,
    });
    const session = json(await h.request('GET', `/v1/sessions/${sessionId}`)).session;
    expect(session.status).toBe('requires_action');

    const events = await sessionEvents(sessionId);
    const asked = events.find((event) => event.kind === 'message.event' && event.data.sourceType === 'tool_approval');
    expect(asked?.data).toMatchObject({
      actionId: action.actionId,
      tool: 'count',
      server: 'ops',
      arguments: '{"key":"approve-1"}',
      approvalId: action.approvalId,
    });
    const hooks = await webhookEvents('agent.session.action_required', sessionId);
    expect(hooks).toHaveLength(1);
    expect(hooks[0]?.required_action).toMatchObject({
      type: 'tool_approval',
      action_id: action.actionId,
      tool: 'count',
    });

    const approved = await answer(sessionId, accepted.id, { actionId: action.actionId, answer: { approved: true } });
    expect(approved.status, approved.text).toBe(200);
    expect(json(approved)).toEqual({ messageId: accepted.id, actionId: action.actionId, status: 'resuming' });
    const done = await flow.waitForMessage(sessionId, accepted.id);
    expect(done.status).toBe('completed');
    expect(done.response.parts[0].text).toBe('all done');
    expect(counted('approve-1')).toBe(1);

    // Single use: the same decision again, or the opposite one, is a 409 and runs nothing.
    for (const body of [{ approved: true }, { approved: false, reason: 'changed my mind' }]) {
      const again = await answer(sessionId, accepted.id, { actionId: action.actionId, answer: body });
      expect(again.status).toBe(409);
      expect(json(again).error.code).toBe('action_not_waiting');
    }
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(counted('approve-1')).toBe(1);
    const trace = json(await h.request('GET', `/v1/runs/${done.runId}/trace?limit=50`)).data as Json[];
    expect(trace.filter((span) => span.kind === 'tool_call' && span.name === 'count')).toHaveLength(1);
  });

  it('feeds a denial with its reason back to the model, never runs the call, and the turn goes on', async () => {
    const agentId = await agentWith({ default: 'auto', overrides: { count: 'always_ask' } });
    const sessionId = await flow.createSession(agentId);
    const accepted = await flow.submit(sessionId, 'call count {"key":"deny-1"}');
    const waiting = await flow.waitForMessage(sessionId, accepted.id, ['requires_action', 'completed', 'failed']);
    const [action] = waiting.requiredActions;
    expect(action?.type).toBe('tool_approval');
    const denied = await answer(sessionId, accepted.id, {
      actionId: action.actionId,
      answer: { approved: false, reason: 'not on a Friday' },
    });
    expect(denied.status, denied.text).toBe(200);
    const done = await flow.waitForMessage(sessionId, accepted.id);
    expect(done.status).toBe('completed');
    // The scripted model answers with one line per tool result: the denial, with the reason, is what it read.
    expect(done.response.parts[0].text).toBe(
      'count: Error: the user denied this call, so it did not run. Reason: not on a Friday',
    );
    expect(counted('deny-1')).toBe(0);
    const second = await answer(sessionId, accepted.id, { actionId: action.actionId, answer: { approved: true } });
    expect(second.status).toBe(409);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(counted('deny-1')).toBe(0);
  });

  it('matches a <server>__* wildcard, and <server>__<tool> wins over it; a bare MCP tool name never exempts', async () => {
    const agentId = await agentWith({ default: 'auto', overrides: { 'ops__*': 'always_ask', ops__echo: 'auto' } });
    const echoed = await flow.turn(agentId, 'call echo {"text":"free"}');
    expect(echoed.message.status).toBe('completed');
    // Any server may list an `echo`: the bare name can make it ask, not exempt it.
    const bare = await agentWith({ default: 'auto', overrides: { 'ops__*': 'always_ask', echo: 'auto' } });
    const asked = await flow.turn(bare, 'call echo {"text":"asks"}', ['requires_action', 'completed', 'failed']);
    expect(asked.message.status).toBe('requires_action');
    const { sessionId, message } = await flow.turn(agentId, 'call count {"key":"wild-1"}', [
      'requires_action',
      'completed',
      'failed',
    ]);
    expect(message.status).toBe('requires_action');
    expect(message.requiredActions[0]).toMatchObject({ type: 'tool_approval', tool: 'count' });
    expect(counted('wild-1')).toBe(0);
    await answer(sessionId, message.id, { actionId: message.requiredActions[0].actionId, answer: { approved: true } });
    expect((await flow.waitForMessage(sessionId, message.id)).status).toBe('completed');
    expect(counted('wild-1')).toBe(1);
  });

  it('runs the auto calls of a parallel step at once and waits only for the one that asks', async () => {
    const agentId = await agentWith({ default: 'auto', overrides: { count: 'always_ask' } });
    const sessionId = await flow.createSession(agentId);
    const accepted = await flow.submit(
      sessionId,
      'call count {"key":"par-ask"}\ncall echo {"text":"par-free"}\n---\nboth done',
    );
    const waiting = await flow.waitForMessage(sessionId, accepted.id, ['requires_action', 'completed', 'failed']);
    expect(waiting.status).toBe('requires_action');
    expect(waiting.requiredActions).toHaveLength(1);
    expect(waiting.requiredActions[0]).toMatchObject({ type: 'tool_approval', tool: 'count' });
    expect(mcp.calls.some((call) => call.tool === 'echo' && call.arguments.text === 'par-free')).toBe(true);
    expect(counted('par-ask')).toBe(0);
    await answer(sessionId, accepted.id, {
      actionId: waiting.requiredActions[0].actionId,
      answer: { approved: true, reason: 'fine' },
    });
    const done = await flow.waitForMessage(sessionId, accepted.id);
    expect(done.status).toBe('completed');
    expect(done.response.parts[0].text).toBe('both done');
    expect(counted('par-ask')).toBe(1);
    expect(mcp.calls.filter((call) => call.tool === 'echo' && call.arguments.text === 'par-free')).toHaveLength(1);
  });

  it('takes a decision sent while the other calls of the step still run', async () => {
    const agentId = await agentWith({ default: 'auto', overrides: { count: 'always_ask' } });
    const sessionId = await flow.createSession(agentId);
    const accepted = await flow.submit(
      sessionId,
      'call slow {"ms":2500,"steps":1}\ncall count {"key":"early-1"}\n---\nearly done',
    );
    const asked = await waitUntil(
      async () =>
        (await sessionEvents(sessionId)).find(
          (event) => event.kind === 'message.event' && event.data.sourceType === 'tool_approval',
        ),
      { what: 'the approval event', everyMs: 25 },
    );
    expect((await flow.getMessage(sessionId, accepted.id)).status).toBe('running');
    const early = await answer(sessionId, accepted.id, { actionId: asked.data.actionId, answer: { approved: true } });
    expect(early.status, early.text).toBe(200);
    expect(json(early).status).toBe('accepted');
    const done = await flow.waitForMessage(sessionId, accepted.id);
    expect(done.status).toBe('completed');
    expect(done.response.parts[0].text).toBe('early done');
    expect(counted('early-1')).toBe(1);
  });

  it('refuses forged, foreign and malformed answers', async () => {
    const agentId = await agentWith({ default: 'always_ask', overrides: {} });
    const sessionId = await flow.createSession(agentId);
    const accepted = await flow.submit(sessionId, 'call count {"key":"forge-1"}');
    const waiting = await flow.waitForMessage(sessionId, accepted.id, ['requires_action', 'completed', 'failed']);
    const actionId = waiting.requiredActions[0].actionId as number;

    const forged = await answer(sessionId, accepted.id, { actionId: actionId + 7, answer: { approved: true } });
    expect(forged.status).toBe(409);
    expect(json(forged).error.code).toBe('action_not_waiting');

    const other = await h.createOrg(`other-${dialect}`);
    const foreign = await answer(sessionId, accepted.id, { actionId, answer: { approved: true } }, other.key);
    expect(foreign.status).toBe(404);

    for (const [body, param] of [
      [{ approved: 'yes' }, 'answer.approved'],
      [{}, 'answer.approved'],
      ['approve', 'answer'],
      [null, 'answer'],
      [{ approved: true, reason: 7 }, 'answer.reason'],
      [{ approved: true, reason: 'x'.repeat(2001) }, 'answer.reason'],
      [{ approved: true, reason: 'a\u0000b' }, 'answer.reason'],
      [{ approved: true, reason: '\ud800' }, 'answer.reason'],
      [{ approved: true, extra: 1 }, 'answer.extra'],
    ] as const) {
      const response = await answer(sessionId, accepted.id, { actionId, answer: body });
      expect(response.status, JSON.stringify(body)).toBe(400);
      expect(json(response).error.param).toBe(param);
    }
    const huge = await h.request('POST', `/v1/sessions/${sessionId}/messages/${accepted.id}/answer`, {
      rawBody: `{"actionId":1e400,"answer":{"approved":true}}`,
      headers: { 'content-type': 'application/json' },
    });
    expect(huge.status).toBe(400);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(counted('forge-1')).toBe(0);
    expect((await flow.getMessage(sessionId, accepted.id)).status).toBe('requires_action');
    // The real decision still works after all of that.
    const real = await answer(sessionId, accepted.id, { actionId, answer: { approved: true } });
    expect(real.status).toBe(200);
    expect((await flow.waitForMessage(sessionId, accepted.id)).status).toBe('completed');
    expect(counted('forge-1')).toBe(1);
  });

  it('denies a call nobody decided within the timeout, and the turn continues', async () => {
    const agentId = await agentWith({ default: 'always_ask', overrides: {}, timeoutSeconds: 1 });
    const sessionId = await flow.createSession(agentId);
    const accepted = await flow.submit(sessionId, 'call count {"key":"late-1"}');
    const waiting = await flow.waitForMessage(sessionId, accepted.id, ['requires_action', 'completed', 'failed']);
    expect(waiting.status).toBe('requires_action');
    expect(Date.parse(waiting.requiredActions[0].expiresAt)).toBeGreaterThan(Date.now() - 5000);
    const done = await waitUntil(
      async () => {
        const message = await flow.getMessage(sessionId, accepted.id);
        return message.status === 'completed' ? message : null;
      },
      { what: 'the timeout to deny the call', everyMs: 100 },
    );
    expect(done.response.parts[0].text).toBe(
      'count: Error: the call was not approved within 1 seconds, so it was denied and did not run.',
    );
    expect(counted('late-1')).toBe(0);
    const late = await answer(sessionId, accepted.id, {
      actionId: waiting.requiredActions[0].actionId,
      answer: { approved: true },
    });
    expect(late.status).toBe(409);
    const events = await sessionEvents(sessionId);
    expect(
      events.some((event) => event.data.sourceType === 'tool_approval' && event.data.decidedBy === 'timeout'),
    ).toBe(true);
  });

  it('asks for an http_request that changes something, never for a read', async () => {
    const agentId = await flow.createAgent({
      mcpServers: [{ kind: 'internal', name: 'http_client' }],
      toolApprovals: { default: 'always_ask', overrides: {} },
    });
    const read = await flow.turn(agentId, 'call http_request {"method":"GET","url":"https://example.com/"}');
    expect(read.message.status).toBe('completed');
    expect(read.message.response.parts[0].text).toContain('http_request: Error: refused');
    for (const method of ['POST', 'delete']) {
      const write = await flow.turn(agentId, `call http_request {"method":"${method}","url":"https://example.com/"}`, [
        'requires_action',
        'completed',
        'failed',
      ]);
      expect(write.message.status, method).toBe('requires_action');
      expect(write.message.requiredActions[0]).toMatchObject({
        type: 'tool_approval',
        tool: 'http_request',
        server: 'agentry',
      });
    }
    // `http_client__*` names the built-in entry; an exact name wins over it.
    const wildcard = await flow.createAgent({
      mcpServers: [{ kind: 'internal', name: 'http_client' }],
      toolApprovals: { default: 'auto', overrides: { 'http_client__*': 'always_ask' } },
    });
    const asked = await flow.turn(wildcard, 'call http_request {"method":"PUT","url":"https://example.com/"}', [
      'requires_action',
      'completed',
    ]);
    expect(asked.message.status).toBe('requires_action');
    const exact = await flow.createAgent({
      mcpServers: [{ kind: 'internal', name: 'http_client' }],
      toolApprovals: { default: 'always_ask', overrides: { http_request: 'auto' } },
    });
    const free = await flow.turn(exact, 'call http_request {"method":"PUT","url":"https://example.com/"}');
    expect(free.message.status).toBe('completed');
  });

  it('decides with the policy of the moment of the call: a later change does not free a waiting call', async () => {
    const agentId = await agentWith({ default: 'always_ask', overrides: {} });
    const sessionId = await flow.createSession(agentId);
    const accepted = await flow.submit(sessionId, 'call count {"key":"policy-1"}');
    await flow.waitForMessage(sessionId, accepted.id, ['requires_action']);
    const patched = await h.request('PATCH', `/v1/agents/${agentId}`, {
      body: { toolApprovals: { default: 'auto', overrides: {} } },
    });
    expect(patched.status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect((await flow.getMessage(sessionId, accepted.id)).status).toBe('requires_action');
    expect(counted('policy-1')).toBe(0);
    const interrupted = await h.request('POST', `/v1/sessions/${sessionId}/interrupt`);
    expect(json(interrupted).status).toBe('interrupting');
    expect((await flow.waitForMessage(sessionId, accepted.id)).status).toBe('cancelled');
    const late = await answer(sessionId, accepted.id, { actionId: 0, answer: { approved: true } });
    expect(late.status).toBe(409);
    expect(counted('policy-1')).toBe(0);
  });

  it('leaves client tools and questions alone under always_ask', async () => {
    const agentId = await agentWith(
      { default: 'always_ask', overrides: {} },
      {
        mcpServers: [{ kind: 'internal', name: 'ask_user_question' }],
        clientTools: [
          {
            type: 'function',
            name: 'lookup',
            description: 'Look something up',
            parameters: { type: 'object', properties: {}, additionalProperties: false },
            strict: false,
          },
        ],
      },
    );
    const asked = await flow.turn(agentId, 'ask Which colour?', ['requires_action', 'completed', 'failed']);
    expect(asked.message.requiredActions.map((action: Json) => action.type)).toEqual(['ask_user_question']);
    const client = await flow.turn(agentId, 'call lookup {}', ['requires_action', 'completed', 'failed']);
    expect(client.message.requiredActions.map((action: Json) => action.type)).toEqual(['function_call']);
  });
});
