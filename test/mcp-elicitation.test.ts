/**
 * Elicitation and sampling requests of MCP servers, with the `scripted` model calling a real MCP server (v1 SDK,
 * Streamable HTTP) whose tools ask the client during the call: a form elicitation answered over the answer route
 * reaches the tool (and its result the model), a content that does not fit the requested schema is a 400 naming
 * the field, decline and URL mode, the required action with its session event and webhook, and sampling refused
 * (the agent does not allow it, so the client does not declare it). Once per dialect; the restart case is in the second block, with real processes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WEBHOOK_EVENT_TYPES } from '../src/domain/outbox.ts';
import { crashTestEnv } from './helpers/crash-server.ts';
import { flows, httpClient, type Json, TERMINAL_STATUSES, waitUntil } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';
import { type ElicitationServer, startElicitationServer } from './helpers/mcp-elicitation-server.ts';
import { type ServerProcess, startServerProcess, startsTimeout } from './helpers/server-process.ts';

describe.each(dialects())('MCP elicitation and sampling (%s)', (dialect) => {
  let h: Harness;
  let mcp: ElicitationServer;
  let agentId: string;
  const flow = flows(() => h, { agentName: 'asker' });

  beforeAll(async () => {
    mcp = await startElicitationServer();
    h = await createHarness(dialect, { AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true', AGENTRY_POLL_MS: '100' });
    const hook = await h.request('POST', '/v1/webhook_endpoints', {
      body: { name: 'outbox', url: 'https://93.184.215.14/hooks', event_types: WEBHOOK_EVENT_TYPES },
    });
    expect(hook.status, hook.text).toBe(200);
    agentId = await flow.createAgent({ mcpServers: [{ type: 'url', name: 'asking', url: mcp.url }] });
  });
  afterAll(async () => {
    await h.close();
    await mcp.close();
  });

  const answer = (sessionId: string, messageId: string, body: Json) =>
    h.request('POST', `/v1/sessions/${sessionId}/messages/${messageId}/answer`, { body });

  async function waiting(tool: string) {
    const started = await flow.turn(agentId, `call ${tool} {}`, ['requires_action', ...TERMINAL_STATUSES]);
    expect(started.message.status, JSON.stringify(started.message)).toBe('requires_action');
    const [action] = started.message.requiredActions;
    return { ...started, action };
  }

  it('suspends on a form elicitation and gives the answer to the tool, whose result the model reads', async () => {
    const runsBefore = mcp.runs.book_table ?? 0;
    const { sessionId, accepted, action } = await waiting('book_table');
    expect(action).toMatchObject({
      type: 'mcp_elicitation',
      tool: 'book_table',
      server: 'asking',
      mode: 'form',
      message: 'Who is the table for?',
      requestedSchema: { type: 'object', required: ['name', 'guests'] },
      url: null,
    });
    expect(action.elicitationId).toMatch(/^elic_/);
    const session = json(await h.request('GET', `/v1/sessions/${sessionId}`)).session;
    expect(session.status).toBe('requires_action');

    // Content that does not fit: 400 naming the field, and the action still waits.
    const wrongType = await answer(sessionId, accepted.id, {
      actionId: action.actionId,
      answer: { action: 'accept', content: { name: 'Ada', guests: 'four' } },
    });
    expect(wrongType.status).toBe(400);
    expect(json(wrongType).error).toMatchObject({ code: 'validation_error', param: 'answer.content.guests' });
    const missing = await answer(sessionId, accepted.id, {
      actionId: action.actionId,
      answer: { action: 'accept', content: { guests: 2 } },
    });
    expect(missing.status).toBe(400);
    expect(json(missing).error.param).toBe('answer.content.name');
    const badAction = await answer(sessionId, accepted.id, { actionId: action.actionId, answer: { action: 'maybe' } });
    expect(json(badAction).error.param).toBe('answer.action');

    const ok = await answer(sessionId, accepted.id, {
      actionId: action.actionId,
      answer: { action: 'accept', content: { name: 'Ada', guests: 4 } },
    });
    expect(ok.status, ok.text).toBe(200);
    const done = await flow.waitForMessage(sessionId, accepted.id);
    expect(done.status).toBe('completed');
    expect(done.response.parts[0].text).toBe('book_table: booked for Ada, 4 guests');
    expect(mcp.answers.at(-1)).toEqual({ action: 'accept', content: { name: 'Ada', guests: 4 } });
    // Suspended once, run again with the answer.
    expect((mcp.runs.book_table ?? 0) - runsBefore).toBe(2);

    // Single use: the action no longer waits.
    const again = await answer(sessionId, accepted.id, {
      actionId: action.actionId,
      answer: { action: 'decline' },
    });
    expect(again.status).toBe(409);

    // Session events and the action_required webhook carry the elicitation.
    const events = (
      await h.deps.storage.db
        .selectFrom('session_events')
        .selectAll()
        .where('session_id', '=', sessionId)
        .orderBy('seq')
        .execute()
    ).map((row) => JSON.parse(row.data));
    expect(events).toContainEqual(
      expect.objectContaining({ type: 'elicitation', sourceType: 'mcp_elicitation', actionId: action.actionId }),
    );
    expect(events).toContainEqual(
      expect.objectContaining({ type: 'elicitation_answered', action: 'accept', actionId: action.actionId }),
    );
    const hooks = (
      await h.deps.storage.db
        .selectFrom('webhook_events')
        .selectAll()
        .where('type', '=', 'agent.session.action_required')
        .execute()
    )
      .map((row) => JSON.parse(row.data))
      .filter((data) => data.id === sessionId);
    expect(hooks.length).toBeGreaterThan(0);
    const followUp = await h.request('GET', `/v1/agents/sessions/${sessionId}`, {
      headers: { 'agentry-beta': 'agents=v1' },
    });
    expect(followUp.status, followUp.text).toBe(200);
  });

  it('declines: the tool hears the decline', async () => {
    const { sessionId, accepted, action } = await waiting('book_table');
    const content = await answer(sessionId, accepted.id, {
      actionId: action.actionId,
      answer: { action: 'decline', content: { name: 'x' } },
    });
    expect(json(content).error.param).toBe('answer.content');
    const ok = await answer(sessionId, accepted.id, { actionId: action.actionId, answer: { action: 'decline' } });
    expect(ok.status, ok.text).toBe(200);
    const done = await flow.waitForMessage(sessionId, accepted.id);
    expect(done.response.parts[0].text).toBe('book_table: booking declined');
    expect(mcp.answers.at(-1)).toEqual({ action: 'decline' });
  });

  it('shows a URL-mode elicitation as a link, accepted without content', async () => {
    const { sessionId, accepted, action } = await waiting('open_link');
    expect(action).toMatchObject({
      type: 'mcp_elicitation',
      mode: 'url',
      url: 'https://calendar.example/connect',
      message: 'Sign in to the calendar',
      requestedSchema: null,
    });
    const ok = await answer(sessionId, accepted.id, { actionId: action.actionId, answer: { action: 'accept' } });
    expect(ok.status, ok.text).toBe(200);
    const done = await flow.waitForMessage(sessionId, accepted.id);
    expect(done.response.parts[0].text).toBe('open_link: link accept');
  });

  it('does not declare sampling unless the agent allows it, so a request is refused', async () => {
    const { message } = await flow.turn(agentId, 'call summarise {}');
    expect(message.status).toBe('completed');
    expect(message.response.parts[0].text).toMatch(/sampling refused: .*method not found/i);
    expect(mcp.answers.at(-1)).toEqual({ declared: false, error: expect.stringMatching(/method not found/i) });
  });
});

describe.each(dialects())('MCP elicitation across a restart (%s)', (dialect) => {
  let server: ServerProcess | null = null;
  let mcp: ElicitationServer | null = null;
  const { key, env } = crashTestEnv(dialect, () => server, { AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true' });
  afterAll(async () => {
    await mcp?.close();
  });

  it(
    'answers an elicitation after kill -9 of the process that asked: the call runs again with the answer',
    async () => {
      mcp = await startElicitationServer();
      server = await startServerProcess(env);
      let api = httpClient(server.url, key);
      const created = await api('POST', '/v1/agents', {
        name: 'asker',
        mcpServers: [{ type: 'url', name: 'asking', url: mcp.url }],
      });
      expect(created.status).toBe(201);
      const sessionId = (await api('POST', '/v1/sessions', { agentId: created.body?.agent.id })).body?.session.id;
      const accepted = await api(
        'POST',
        `/v1/sessions/${sessionId}/messages`,
        { parts: [{ type: 'text', text: 'call book_table {}' }] },
        { 'Idempotency-Key': 'elicitation-restart' },
      );
      expect(accepted.status).toBe(202);
      const path = `/v1/sessions/${sessionId}/messages/${accepted.body?.id}`;
      const waitingMessage = await waitUntil(
        async () => {
          const message = (await api('GET', path)).body?.message;
          return message?.status === 'requires_action' ? message : null;
        },
        { what: 'the elicitation', everyMs: 50 },
      );
      const [action] = waitingMessage.requiredActions;
      expect(action).toMatchObject({ type: 'mcp_elicitation', mode: 'form' });

      await server.stop('SIGKILL');
      server = await startServerProcess(env);
      api = httpClient(server.url, key);
      const after = (await api('GET', path)).body?.message;
      expect(after.requiredActions).toEqual([action]);
      const answered = await api('POST', `${path}/answer`, {
        actionId: action.actionId,
        answer: { action: 'accept', content: { name: 'Grace', guests: 2 } },
      });
      expect(answered.status).toBe(200);
      const final = await waitUntil(
        async () => {
          const message = (await api('GET', `${path}?wait=30`)).body?.message;
          return TERMINAL_STATUSES.includes(message?.status) ? message : null;
        },
        { what: 'the turn ending', everyMs: 50 },
      );
      expect(final).toMatchObject({
        status: 'completed',
        response: { parts: [{ type: 'text', text: 'book_table: booked for Grace, 2 guests' }] },
      });
      expect(mcp.runs.book_table).toBe(2);
    },
    startsTimeout(2),
  );
});
