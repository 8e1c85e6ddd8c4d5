/**
 * Turn engine flows driven by the `scripted` model (DESIGN 6, 9; spec 3, 4.4, 6): questions and answers, client
 * tools, step limits, model failures, interrupts, session deletion, the webhook outbox and agent changes between
 * turns. Real server with the engine running, once per dialect.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WEBHOOK_EVENT_TYPES } from '../src/domain/outbox.ts';
import { AppError } from '../src/errors/app-error.ts';
import {
  ASK_USER_QUESTION_SERVER,
  flows,
  type Json,
  TERMINAL_STATUSES,
  textParts,
  WEATHER_TOOL,
} from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, type Response as HarnessResponse, json } from './helpers/harness.ts';

describe.each(dialects())('engine flows (%s)', (dialect) => {
  let h: Harness;
  const flow = flows(() => h, { agentName: 'flows' });
  let orgId: string;
  let agentId: string;
  let toolAgentId: string;

  beforeAll(async () => {
    h = await createHarness(dialect);
    orgId = (await db().selectFrom('orgs').select('id').where('name', '=', 'default').executeTakeFirstOrThrow()).id;
    // The outbox records only the webhook events an endpoint subscribes to (none is delivered: no dispatcher runs).
    const hook = await h.request('POST', '/v1/webhook_endpoints', {
      body: { name: 'outbox', url: 'https://93.184.215.14/hooks', event_types: WEBHOOK_EVENT_TYPES },
    });
    expect(hook.status, hook.text).toBe(200);
    agentId = await flow.createAgent({ mcpServers: [ASK_USER_QUESTION_SERVER] });
    toolAgentId = await flow.createAgent({ clientTools: [WEATHER_TOOL], mcpServers: [ASK_USER_QUESTION_SERVER] });
  });
  afterAll(() => h.close());

  const db = () => h.deps.storage.db;

  /** Starts a session with one message and waits until it reaches one of `statuses`. */
  const run = (text: string, statuses?: readonly string[], agent = agentId) => flow.turn(agent, text, statuses);

  const sessionStatus = async (sessionId: string) =>
    json(await h.request('GET', `/v1/sessions/${sessionId}`)).session.status;

  const answer = (sessionId: string, messageId: string, body: unknown) =>
    h.request('POST', `/v1/sessions/${sessionId}/messages/${messageId}/answer`, { body });

  const expectError = (response: HarnessResponse, status: number, code: string) => {
    expect(response.status, response.text).toBe(status);
    expect(json(response).error.code).toBe(code);
  };

  const parse = (data: unknown): Json => (typeof data === 'string' ? JSON.parse(data) : (data as Json));

  /** Webhook outbox rows of this org, with parsed data. */
  async function webhooks(): Promise<{ type: string; data: Json }[]> {
    const rows = await db()
      .selectFrom('webhook_events')
      .select(['type', 'data'])
      .where('org_id', '=', orgId)
      .orderBy('created_at')
      .execute();
    return rows.map((row) => ({ type: row.type, data: parse(row.data) }));
  }

  const messageRow = (id: string) => db().selectFrom('messages').selectAll().where('id', '=', id).executeTakeFirst();

  describe('questions', () => {
    it('suspends on a question and resumes with the answer', async () => {
      const { sessionId, message } = await run('ask What is your name?\n---\nHello then', ['requires_action']);
      expect(message.requiredActions).toHaveLength(1);
      expect(message.requiredActions[0]).toMatchObject({
        type: 'ask_user_question',
        actionId: 0,
        question: 'What is your name?',
      });
      expect(message.response).toBeNull();
      expect(await sessionStatus(sessionId)).toBe('requires_action');

      const events = await db()
        .selectFrom('session_events')
        .select(['kind', 'data', 'message_id'])
        .where('session_id', '=', sessionId)
        .where('kind', '=', 'message.event')
        .execute();
      const question = events.map((event) => ({ ...event, data: parse(event.data) }));
      expect(question).toContainEqual(
        expect.objectContaining({
          message_id: message.id,
          data: expect.objectContaining({ sourceType: 'tool_ask_user_question', actionId: 0 }),
        }),
      );

      const ok = await answer(sessionId, message.id, { actionId: 0, answer: 'Ada' });
      expect(ok.status, ok.text).toBe(200);
      expect(json(ok)).toEqual({ messageId: message.id, actionId: 0, status: 'resuming' });
      const done = await flow.waitForMessage(sessionId, message.id);
      expect(done.status).toBe('completed');
      expect(done.response.parts[0].text).toBe('Hello then');
      expect(done.requiredActions).toEqual([]);
      expect(await sessionStatus(sessionId)).toBe('idle');

      expectError(await answer(sessionId, message.id, { actionId: 0, answer: 'again' }), 409, 'action_not_waiting');
    });

    it('rejects answers to absent, malformed or foreign actions', async () => {
      const { sessionId, message } = await run('ask Ready?\n---\nGo', ['requires_action']);
      expectError(await answer(sessionId, message.id, { actionId: 5, answer: 'x' }), 409, 'action_not_waiting');
      for (const actionId of [-1, '0', 1.5, null]) {
        expectError(await answer(sessionId, message.id, { actionId, answer: 'x' }), 400, 'validation_error');
      }
      expectError(await answer(sessionId, message.id, { answer: 'x' }), 400, 'validation_error');
      expectError(await answer(sessionId, message.id, { actionId: 0 }), 400, 'validation_error');
      expectError(await answer(sessionId, message.id, { actionId: 0, answer: 1, x: 1 }), 400, 'validation_error');
      const otherSession = await flow.createSession(agentId);
      expectError(await answer(otherSession, message.id, { actionId: 0, answer: 'x' }), 404, 'not_found');
      expectError(await answer(sessionId, randomUUID(), { actionId: 0, answer: 'x' }), 404, 'not_found');
      // None of these consumed the action.
      expect((await flow.waitForMessage(sessionId, message.id, ['requires_action'])).requiredActions).toHaveLength(1);
      expect(json(await answer(sessionId, message.id, { actionId: 0, answer: 'yes' })).status).toBe('resuming');
      expect((await flow.waitForMessage(sessionId, message.id)).response.parts[0].text).toBe('Go');
    });

    it.each([
      [null, 'ask_user_question: null'],
      [{ a: 1 }, 'ask_user_question: {"a":1}'],
      [[1, 'two'], 'ask_user_question: [1,"two"]'],
      ['plain', 'ask_user_question: plain'],
    ])('passes the answer %j to the model', async (value, reply) => {
      const { sessionId, message } = await run('ask q', ['requires_action']);
      expect((await answer(sessionId, message.id, { actionId: 0, answer: value })).status).toBe(200);
      const done = await flow.waitForMessage(sessionId, message.id);
      expect(done.status).toBe('completed');
      expect(done.response.parts[0].text).toBe(reply);
    });

    it('resumes only once every parallel question is answered', async () => {
      const { sessionId, message } = await run('ask A\nask B', ['requires_action']);
      expect(message.requiredActions.map((a: Json) => [a.actionId, a.question])).toEqual([
        [0, 'A'],
        [1, 'B'],
      ]);
      expect(json(await answer(sessionId, message.id, { actionId: 0, answer: 'a1' }))).toMatchObject({
        actionId: 0,
        status: 'accepted',
      });
      const half = await flow.waitForMessage(sessionId, message.id, ['requires_action']);
      expect(half.requiredActions.map((a: Json) => a.actionId)).toEqual([1]);
      expect(json(await answer(sessionId, message.id, { actionId: 1, answer: 'b1' })).status).toBe('resuming');
      const done = await flow.waitForMessage(sessionId, message.id);
      expect(done.response.parts[0].text).toBe('ask_user_question: a1\nask_user_question: b1');
    });

    it('accepts exactly one of concurrent answers to one action', async () => {
      const { sessionId, message } = await run('ask Once?\n---\nOnce', ['requires_action']);
      const responses = await Promise.all(
        Array.from({ length: 10 }, (_, i) => answer(sessionId, message.id, { actionId: 0, answer: `a${i}` })),
      );
      const statuses = responses.map((response) => response.status).sort();
      expect(statuses).toEqual([200, ...Array(9).fill(409)]);
      expect((await flow.waitForMessage(sessionId, message.id)).response.parts[0].text).toBe('Once');
      const outputs = await db()
        .selectFrom('items')
        .select('id')
        .where('message_id', '=', message.id)
        .where('type', '=', 'function_call_output')
        .execute();
      expect(outputs).toHaveLength(1);
    });
  });

  describe('client tools', () => {
    it('hands a client call to the caller and continues with its output', async () => {
      const { sessionId, message } = await run('call get_weather {"city":"Paris"}', ['requires_action'], toolAgentId);
      expect(message.requiredActions).toEqual([
        { type: 'function_call', callId: expect.any(String), name: 'get_weather', arguments: '{"city":"Paris"}' },
      ]);
      const { callId } = message.requiredActions[0];
      expect(await sessionStatus(sessionId)).toBe('requires_action');
      const required = (await webhooks()).find(
        (event) => event.type === 'agent.session.action_required' && event.data.id === sessionId,
      );
      expect(required?.data.required_action).toMatchObject({ type: 'function_call', call_id: callId });
      expectError(await flow.postMessage(sessionId, textParts('new input')), 409, 'client_tool_output_required');

      const [item] = await h.deps.messages.recordClientOutputs(
        orgId,
        sessionId,
        [{ callId, output: '18C' }],
        'continue',
      );
      expect(item?.id).toEqual(expect.any(String));
      const done = await flow.waitForMessage(sessionId, message.id);
      expect(done.status).toBe('completed');
      expect(done.response.parts[0].text).toBe('get_weather: 18C');

      const [again] = await h.deps.messages.recordClientOutputs(
        orgId,
        sessionId,
        [{ callId, output: '18C' }],
        'continue',
      );
      expect(again?.id).toBe(item?.id);
      const conflict = h.deps.messages.recordClientOutputs(orgId, sessionId, [{ callId, output: '20C' }], 'continue');
      await expect(conflict).rejects.toBeInstanceOf(AppError);
      await expect(conflict).rejects.toMatchObject({ code: 'function_call_output_conflict' });
      const unknown = h.deps.messages.recordClientOutputs(
        orgId,
        sessionId,
        [{ callId: 'call_nope', output: 'x' }],
        'continue',
      );
      await expect(unknown).rejects.toMatchObject({ code: 'validation_error' });
      // The session takes new input again.
      const next = await flow.submit(sessionId, 'thanks');
      expect((await flow.waitForMessage(sessionId, next.id)).response.parts[0].text).toBe('thanks');
    });

    it('resumes only when both a question and a client call of one step are resolved', async () => {
      const script = 'ask Units?\ncall get_weather {"city":"Lima"}';
      const { sessionId, message } = await run(script, ['requires_action'], toolAgentId);
      expect(message.requiredActions.map((action: Json) => action.type)).toEqual([
        'ask_user_question',
        'function_call',
      ]);
      const required = (await webhooks()).filter(
        (event) => event.type === 'agent.session.action_required' && event.data.id === sessionId,
      );
      expect(required).toHaveLength(1);
      expect(required[0]?.data.required_action.type).toBe('ask_user_question');
      expectError(await flow.postMessage(sessionId, textParts('new input')), 409, 'client_tool_output_required');
      expect(json(await answer(sessionId, message.id, { actionId: 0, answer: 'celsius' })).status).toBe('accepted');
      const half = await flow.waitForMessage(sessionId, message.id, ['requires_action']);
      expect(half.requiredActions).toEqual([expect.objectContaining({ type: 'function_call', name: 'get_weather' })]);
      const { callId } = half.requiredActions[0];
      await h.deps.messages.recordClientOutputs(orgId, sessionId, [{ callId, output: '19C' }], 'continue');
      const done = await flow.waitForMessage(sessionId, message.id);
      expect(done.status).toBe('completed');
      expect(done.response.parts[0].text).toBe('ask_user_question: celsius\nget_weather: 19C');
    });

    it('persists an output without calling the model again', async () => {
      const script = 'call get_weather {"city":"Rome"}\n---\nnever played';
      const { sessionId, message } = await run(script, ['requires_action'], toolAgentId);
      expect((await messageRow(message.id))?.step_count).toBe(1);
      const { callId } = message.requiredActions[0];
      await h.deps.messages.recordClientOutputs(orgId, sessionId, [{ callId, output: '25C' }], 'persist');
      const done = await flow.waitForMessage(sessionId, message.id);
      expect(done.status).toBe('completed');
      expect(done.requiredActions).toEqual([]);
      expect(done.response.parts[0].text).not.toContain('never played');
      expect((await messageRow(message.id))?.step_count).toBe(1);
      expect(await sessionStatus(sessionId)).toBe('idle');
      const next = await flow.submit(sessionId, 'after persist');
      expect((await flow.waitForMessage(sessionId, next.id)).response.parts[0].text).toBe('after persist');
    });
  });

  describe('steps and failures', () => {
    it('fails a turn that still calls tools after maxSteps', async () => {
      const limited = await flow.createAgent({ maxSteps: 2 });
      const script = 'call nothing {}\n---\ncall nothing {}\n---\ncall nothing {}';
      const { message } = await run(script, TERMINAL_STATUSES, limited);
      expect(message.status).toBe('failed');
      expect(message.error.code).toBe('max_steps_exceeded');
      expect((await messageRow(message.id))?.step_count).toBe(2);
    });

    it('shows the model an error result for an unknown server tool', async () => {
      const { message } = await run('call nothing {}');
      expect(message.status).toBe('completed');
      expect(message.response.parts[0].text).toContain('nothing: Error');
    });

    it('fails the turn with the model error and still runs the next message', async () => {
      const { sessionId, message } = await run('fail boom');
      expect(message.status).toBe('failed');
      expect(message.error).toEqual({ code: 'model_error', message: 'boom' });
      expect(await sessionStatus(sessionId)).toBe('failed');
      const next = await flow.submit(sessionId, 'still here');
      const done = await flow.waitForMessage(sessionId, next.id);
      expect(done.status).toBe('completed');
      expect(done.response.parts[0].text).toBe('still here');
      expect(await sessionStatus(sessionId)).toBe('idle');
    });
  });

  describe('interrupts and deletion', () => {
    it('cancels a running turn promptly', async () => {
      const { sessionId, message } = await run('sleep 60000\nlate', ['running']);
      const started = Date.now();
      const response = await h.request('POST', `/v1/sessions/${sessionId}/interrupt`);
      expect(response.status).toBe(200);
      expect(json(response)).toEqual({ status: 'interrupting' });
      const done = await flow.waitForMessage(sessionId, message.id);
      // Docs: a running turn stops within about a second. Checked with room for a loaded machine (10 s), still far
      // below the minute the turn would otherwise sleep; the window starts at the interrupt.
      expect(Date.now() - started).toBeLessThan(10_000);
      expect(done.status).toBe('cancelled');
      expect(done.error.code).toBe('cancelled');
      expect(await sessionStatus(sessionId)).toBe('idle');
      expect(json(await h.request('POST', `/v1/sessions/${sessionId}/interrupt`))).toEqual({ status: 'no_turn' });
    });

    it('answers no_turn without a turn and 404 for an unknown session', async () => {
      const sessionId = await flow.createSession(agentId);
      expect(json(await h.request('POST', `/v1/sessions/${sessionId}/interrupt`))).toEqual({ status: 'no_turn' });
      expectError(await h.request('POST', `/v1/sessions/${randomUUID()}/interrupt`), 404, 'not_found');
    });

    it('cancels a turn waiting for a client tool at once and unblocks new input', async () => {
      const { sessionId, message } = await run('call get_weather {"city":"Oslo"}', ['requires_action'], toolAgentId);
      expectError(await flow.postMessage(sessionId, textParts('blocked')), 409, 'client_tool_output_required');
      expect(json(await h.request('POST', `/v1/sessions/${sessionId}/interrupt`))).toEqual({ status: 'interrupting' });
      const now = json(await h.request('GET', `/v1/sessions/${sessionId}/messages/${message.id}`)).message;
      expect(now.status).toBe('cancelled');
      expect(now.requiredActions).toEqual([]);
      const next = await flow.submit(sessionId, 'unblocked');
      expect((await flow.waitForMessage(sessionId, next.id)).response.parts[0].text).toBe('unblocked');
    });

    it('runs a message queued behind a question once the question is answered', async () => {
      const { sessionId, message } = await run('ask Wait?\n---\nanswered', ['requires_action']);
      const queued = await flow.submit(sessionId, 'behind the question');
      expect((await flow.waitForMessage(sessionId, queued.id, ['queued'])).status).toBe('queued');
      expect(json(await answer(sessionId, message.id, { actionId: 0, answer: 'go' })).status).toBe('resuming');
      expect((await flow.waitForMessage(sessionId, message.id)).response.parts[0].text).toBe('answered');
      expect((await flow.waitForMessage(sessionId, queued.id)).response.parts[0].text).toBe('behind the question');
    });

    it('runs a message queued behind a question once the question is interrupted', async () => {
      const { sessionId, message } = await run('ask Wait?\n---\nnever', ['requires_action']);
      const queued = await flow.submit(sessionId, 'behind the interrupted question');
      expect(json(await h.request('POST', `/v1/sessions/${sessionId}/interrupt`))).toEqual({ status: 'interrupting' });
      const cancelled = await flow.waitForMessage(sessionId, message.id);
      expect(cancelled.status).toBe('cancelled');
      expect(cancelled.error.code).toBe('cancelled');
      expectError(await answer(sessionId, message.id, { actionId: 0, answer: 'late' }), 409, 'action_not_waiting');
      const done = await flow.waitForMessage(sessionId, queued.id);
      expect(done.status).toBe('completed');
      expect(done.response.parts[0].text).toBe('behind the interrupted question');
    });

    it('lets a late interrupt for an ended turn pass by the turn running after it', async () => {
      const { sessionId, message } = await run('sleep 600\nstill here', ['running']);
      // The interrupt of an earlier turn of the session arrives while this one runs: it is not this turn's.
      h.deps.bus.publish('interrupt', { sessionId, messageId: randomUUID() });
      const done = await flow.waitForMessage(sessionId, message.id);
      expect(done.status).toBe('completed');
      expect(done.response.parts[0].text).toBe('still here');
    });

    it('hides answers and interrupts from other organizations', async () => {
      const { sessionId, message } = await run('ask Private?\n---\nok', ['requires_action']);
      const other = await h.createOrg(`flows-other-${dialect}`);
      const foreignAnswer = await h.request('POST', `/v1/sessions/${sessionId}/messages/${message.id}/answer`, {
        key: other.key,
        body: { actionId: 0, answer: 'intruder' },
      });
      expectError(foreignAnswer, 404, 'not_found');
      const foreignInterrupt = await h.request('POST', `/v1/sessions/${sessionId}/interrupt`, { key: other.key });
      expectError(foreignInterrupt, 404, 'not_found');
      expect((await flow.waitForMessage(sessionId, message.id, ['requires_action'])).requiredActions).toHaveLength(1);
    });

    it('runs a queued message behind a cancelled one', async () => {
      const sessionId = await flow.createSession(agentId);
      const first = await flow.submit(sessionId, 'sleep 5000\nnever');
      const second = await flow.submit(sessionId, 'next in line');
      await flow.waitForMessage(sessionId, first.id, ['running']);
      expect(json(await h.request('POST', `/v1/sessions/${sessionId}/interrupt`)).status).toBe('interrupting');
      expect((await flow.waitForMessage(sessionId, first.id)).status).toBe('cancelled');
      const done = await flow.waitForMessage(sessionId, second.id);
      expect(done.status).toBe('completed');
      expect(done.response.parts[0].text).toBe('next in line');
    });

    it('deletes a session during a turn, cancelling the turn', async () => {
      const { sessionId, message } = await run('sleep 5000\nnever', ['running']);
      const response = await h.request('DELETE', `/v1/sessions/${sessionId}`);
      expect(response.status).toBe(204);
      expectError(await h.request('GET', `/v1/sessions/${sessionId}`), 404, 'not_found');
      expectError(await h.request('GET', `/v1/sessions/${sessionId}/messages/${message.id}`), 404, 'not_found');
      expectError(await flow.postMessage(sessionId, textParts('too late')), 404, 'not_found');
      const cancelled = (await webhooks()).filter((event) => event.type === 'agent.session.turn.cancelled');
      expect(cancelled).toContainEqual({
        type: 'agent.session.turn.cancelled',
        data: expect.objectContaining({ id: message.id, session_id: sessionId }),
      });
    });
  });

  describe('webhook outbox', () => {
    const typesFor = async (sessionId: string, messageId: string) =>
      (await webhooks())
        .filter((event) => event.data.id === sessionId || event.data.id === messageId)
        .map((event) => event.type);

    it('records the lifecycle of a completed turn', async () => {
      const { sessionId, message } = await run('hello outbox');
      expect(message.status).toBe('completed');
      expect(await typesFor(sessionId, message.id)).toEqual(
        expect.arrayContaining([
          'agent.session.created',
          'agent.session.in_progress',
          'agent.session.turn.completed',
          'agent.session.idle',
        ]),
      );
      const completed = (await webhooks()).find(
        (event) => event.type === 'agent.session.turn.completed' && event.data.id === message.id,
      );
      expect(completed?.data).toMatchObject({ id: message.id, session_id: sessionId });
      const types = await typesFor(sessionId, message.id);
      expect(types.indexOf('agent.session.created')).toBeLessThan(types.indexOf('agent.session.in_progress'));
      expect(types).not.toContain('agent.session.turn.failed');
    });

    it('records action_required for a question', async () => {
      const { sessionId, message } = await run('ask Which city?', ['requires_action']);
      const required = (await webhooks()).filter(
        (event) => event.type === 'agent.session.action_required' && event.data.id === sessionId,
      );
      expect(required).toHaveLength(1);
      expect(required[0]?.data.required_action.type).toBe('ask_user_question');
      expect(await typesFor(sessionId, message.id)).not.toContain('agent.session.idle');
    });

    it('records turn.failed and session failed for a failure', async () => {
      const { sessionId, message } = await run('fail kaput');
      expect(message.status).toBe('failed');
      const types = await typesFor(sessionId, message.id);
      expect(types).toEqual(expect.arrayContaining(['agent.session.turn.failed', 'agent.session.failed']));
      expect(types).not.toContain('agent.session.turn.completed');
      const failed = (await webhooks()).find(
        (event) => event.type === 'agent.session.turn.failed' && event.data.id === message.id,
      );
      expect(failed?.data.session_id).toBe(sessionId);
    });
  });

  describe('agent changes between turns', () => {
    it('fixes skills once the workspace is provisioned but applies other changes to the next turn', async () => {
      const agent = await flow.createAgent({ name: 'workspace' });
      const patch = (body: unknown) => h.request('PATCH', `/v1/agents/${agent}`, { body });
      const skill = { repo: 'acme/skills', path: 'tools/pdf' };
      // Before the first turn skills may still change.
      expect((await patch({ skills: [skill] })).status).toBe(200);
      expect((await patch({ skills: [] })).status).toBe(200);

      const { sessionId, message: first } = await run('call nothing {}', TERMINAL_STATUSES, agent);
      expect(first.status).toBe('completed');
      expectError(await patch({ skills: [skill] }), 409, 'sandbox_provisioned');
      expect((await patch({ instructions: 'New instructions' })).status).toBe(200);
      const updated = await patch({ maxSteps: 1 });
      expect(updated.status).toBe(200);

      const second = await flow.submit(sessionId, 'call nothing {}');
      const done = await flow.waitForMessage(sessionId, second.id);
      expect(done.status).toBe('failed');
      expect(done.error.code).toBe('max_steps_exceeded');
      const versions = await db()
        .selectFrom('runs')
        .select(['id', 'agent_version'])
        .where('id', 'in', [first.runId, done.runId])
        .execute();
      const versionOf = (id: string) => versions.find((row) => row.id === id)?.agent_version ?? 0;
      expect(versionOf(done.runId)).toBeGreaterThan(versionOf(first.runId));
      expect(versionOf(done.runId)).toBe(json(updated).agent.version);
    });
  });
});
