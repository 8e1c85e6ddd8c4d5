/**
 * Runs and traces over HTTP (spec 4.2, 8; DESIGN 5): the Run of every kind of turn ending, list filters and
 * keyset pagination with strict cursors, tenant isolation, and traces in pre-order with the spans the engine
 * writes for steps, model calls and tool calls (including a question waiting for its answer). Real server, real
 * engine, once per dialect.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ASK_USER_QUESTION_SERVER, flows, type Json, TERMINAL_STATUSES, weatherTool } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, type Response as HarnessResponse, json } from './helpers/harness.ts';

const RUN_KEYS = [
  'id',
  'object',
  'agent_id',
  'session_id',
  'conversation_id',
  'message_id',
  'response_id',
  'source',
  'status',
  'model',
  'agent_version',
  'input_preview',
  'output_preview',
  'usage',
  'cost_usd',
  'error',
  'warnings',
  'created_at',
  'started_at',
  'completed_at',
];
const SPAN_KEYS = [
  'id',
  'run_id',
  'parent_id',
  'kind',
  'name',
  'status',
  'started_at',
  'ended_at',
  'duration_ms',
  'input_preview',
  'output_preview',
  'usage',
  'cost_usd',
  'attributes',
];
const b64 = (value: string) => Buffer.from(value, 'utf8').toString('base64url');
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.each(dialects())('runs and traces (%s)', (dialect) => {
  let h: Harness;
  const flow = flows(() => h);
  let agentId: string;
  let pricedAgentId: string;

  beforeAll(async () => {
    h = await createHarness(dialect);
    agentId = await flow.createAgent({ mcpServers: [ASK_USER_QUESTION_SERVER] });
    pricedAgentId = await flow.createAgent({ model: 'scripted/priced' });
  });
  afterAll(() => h.close());

  /** One message in a new session, waited for. */
  const turn = (text: string, statuses?: readonly string[], agent = agentId) => flow.turn(agent, text, statuses);

  async function getRun(runId: string): Promise<Json> {
    const response = await h.request('GET', `/v1/runs/${runId}`);
    expect(response.status, response.text).toBe(200);
    return json(response);
  }

  /** The whole trace of a run (one page of 50). */
  async function trace(runId: string): Promise<Json[]> {
    const response = await h.request('GET', `/v1/runs/${runId}/trace?limit=50`);
    expect(response.status, response.text).toBe(200);
    expect(json(response).has_more).toBe(false);
    return json(response).data;
  }

  const expectError = (response: HarnessResponse, status: number, code: string, param?: string) => {
    expect(response.status, response.text).toBe(status);
    expect(json(response).error.code).toBe(code);
    if (param !== undefined) expect(json(response).error.param).toBe(param);
  };

  describe('the Run of a turn', () => {
    it('describes a completed turn: identity, previews, usage and cost', async () => {
      const before = Math.floor(Date.now() / 1000);
      const { sessionId, message } = await turn('hello priced world', TERMINAL_STATUSES, pricedAgentId);
      expect(message.status).toBe('completed');
      const run = await getRun(message.runId);
      expect(Object.keys(run).sort()).toEqual([...RUN_KEYS].sort());
      expect(run).toMatchObject({
        id: message.runId,
        object: 'run',
        agent_id: pricedAgentId,
        session_id: sessionId,
        conversation_id: `conv_${sessionId}`,
        message_id: message.id,
        response_id: `resp_${message.id}`,
        source: 'sessions',
        status: 'completed',
        model: 'scripted/priced',
        agent_version: 1,
        input_preview: 'hello priced world',
        output_preview: 'hello priced world',
        error: null,
      });
      expect(run.warnings).toEqual([]);
      expect(run.usage.input_tokens).toBeGreaterThan(0);
      expect(run.usage.output_tokens).toBeGreaterThan(0);
      expect(run.usage).toEqual({
        input_tokens: message.usage.inputTokens,
        // The scripted model reads nothing from a prompt cache.
        input_tokens_details: { cached_tokens: 0 },
        output_tokens: message.usage.outputTokens,
        total_tokens: message.usage.inputTokens + message.usage.outputTokens,
      });
      // $1 per 1M tokens each way: micro-dollars equal tokens.
      expect(run.cost_usd).toBeGreaterThan(0);
      expect(run.cost_usd).toBe(run.usage.total_tokens / 1_000_000);
      for (const field of ['created_at', 'started_at', 'completed_at']) {
        expect(Number.isInteger(run[field]), field).toBe(true);
        expect(run[field], field).toBeGreaterThanOrEqual(before);
        expect(run[field], field).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000));
      }
      expect(run.started_at).toBeGreaterThanOrEqual(run.created_at);
      expect(run.completed_at).toBeGreaterThanOrEqual(run.started_at);

      const spans = await trace(message.runId);
      const modelCall = spans.find((span) => span.kind === 'model_call');
      // A span's usage has no cached-token details (runs have them).
      const { input_tokens_details: cachedDetails, ...tokens } = run.usage;
      expect(cachedDetails).toEqual({ cached_tokens: 0 });
      expect(modelCall?.usage).toEqual(tokens);
      expect(modelCall?.cost_usd).toBe(run.cost_usd);
      expect(modelCall?.name).toBe('scripted/priced');
    });

    it('cuts input and output previews at 1,000 characters', async () => {
      const text = `${'a'.repeat(600)}${'b'.repeat(900)}`;
      const { message } = await turn(text);
      expect(message.status).toBe('completed');
      const run = await getRun(message.runId);
      expect(run.input_preview).toBe(text.slice(0, 1000));
      expect(run.output_preview).toBe(text.slice(0, 1000));
      const [step, modelCall] = await trace(message.runId);
      expect(step?.input_preview).toBe(text.slice(0, 1000));
      expect(modelCall?.input_preview).toBe(text.slice(0, 1000));
      expect(modelCall?.output_preview).toBe(text.slice(0, 1000));
    });

    it('describes a failed turn, with its failed model call in the trace', async () => {
      const { message } = await turn('fail the model broke');
      expect(message.status).toBe('failed');
      const run = await getRun(message.runId);
      expect(run.status).toBe('failed');
      expect(run.error).toEqual({ code: 'model_error', message: 'the model broke' });
      expect(run.output_preview).toBeNull();
      expect(run.completed_at).not.toBeNull();
      const spans = await trace(message.runId);
      expect(spans.map((span) => [span.kind, span.status])).toEqual([
        ['agent_step', 'failed'],
        ['model_call', 'failed'],
      ]);
      expect(spans[1]?.attributes.error).toEqual({ code: 'model_error', message: 'the model broke' });
      expect(spans[1]?.parent_id).toBe(spans[0]?.id);
      for (const span of spans) expect(span.duration_ms).toBeGreaterThanOrEqual(0);
    });

    it('describes a cancelled turn; the interrupted model call is cancelled in the trace', async () => {
      const sessionId = await flow.createSession(agentId);
      const accepted = await flow.submit(sessionId, 'sleep 5000\nnever said');
      await flow.waitForMessage(sessionId, accepted.id, ['running']);
      await sleep(150); // let the model call begin
      const interrupt = await h.request('POST', `/v1/sessions/${sessionId}/interrupt`);
      expect(json(interrupt).status).toBe('interrupting');
      const message = await flow.waitForMessage(sessionId, accepted.id);
      expect(message.status).toBe('cancelled');
      const run = await getRun(message.runId);
      expect(run.status).toBe('cancelled');
      expect(run.error).toEqual({ code: 'cancelled', message: 'The turn was interrupted' });
      expect(run.completed_at).not.toBeNull();
      const spans = await trace(message.runId);
      expect(spans.map((span) => [span.kind, span.status])).toEqual([
        ['agent_step', 'cancelled'],
        ['model_call', 'cancelled'],
      ]);
      for (const span of spans) expect(span.ended_at).not.toBeNull();
    });

    it('shows requires_action while a question waits; its tool_call span runs until answered', async () => {
      const { sessionId, message } = await turn('ask What is your name?\n---\nNice to meet you', ['requires_action']);
      const run = await getRun(message.runId);
      expect(run.status).toBe('requires_action');
      expect(run.completed_at).toBeNull();
      const waiting = await trace(message.runId);
      expect(waiting.map((span) => [span.kind, span.status])).toEqual([
        ['agent_step', 'running'],
        ['model_call', 'completed'],
        ['tool_call', 'running'],
      ]);
      const question = waiting[2] as Json;
      expect(question).toMatchObject({
        name: 'ask_user_question',
        parent_id: waiting[0]?.id,
        ended_at: null,
        duration_ms: null,
        output_preview: null,
        input_preview: JSON.stringify({ question: 'What is your name?' }),
        attributes: { call_id: expect.any(String), kind: 'question' },
      });
      expect(waiting[0]).toMatchObject({ ended_at: null, duration_ms: null });

      const answered = await h.request('POST', `/v1/sessions/${sessionId}/messages/${message.id}/answer`, {
        body: { actionId: 0, answer: 'Ada' },
      });
      expect(answered.status, answered.text).toBe(200);
      expect((await flow.waitForMessage(sessionId, message.id)).status).toBe('completed');
      const done = await trace(message.runId);
      expect(done.map((span) => [span.kind, span.name, span.status])).toEqual([
        ['agent_step', 'step 1', 'completed'],
        ['model_call', 'scripted', 'completed'],
        ['tool_call', 'ask_user_question', 'completed'],
        ['agent_step', 'step 2', 'completed'],
        ['model_call', 'scripted', 'completed'],
      ]);
      expect(done[2]).toMatchObject({ id: question.id, output_preview: 'Ada' });
      expect(done[2]?.duration_ms).toBeGreaterThanOrEqual(0);
      expect(done[4]?.input_preview).toBe('ask_user_question: Ada');
      expect((await getRun(message.runId)).status).toBe('completed');
    });
  });

  describe('tool calls answered or abandoned', () => {
    const WEATHER_TOOL = weatherTool({ required: false, strict: false });
    let toolAgentId: string;
    let orgId: string;
    beforeAll(async () => {
      toolAgentId = await flow.createAgent({ clientTools: [WEATHER_TOOL], mcpServers: [ASK_USER_QUESTION_SERVER] });
      const org = await h.deps.storage.db
        .selectFrom('orgs')
        .select('id')
        .where('name', '=', 'default')
        .executeTakeFirst();
      orgId = org?.id ?? '';
    });

    const states = (spans: Json[]) => spans.map((span) => `${span.kind}:${span.name}:${span.status}`);

    it('ends a step only when its question and its client call both have results', async () => {
      const script = 'ask Units?\ncall get_weather {"city":"Lima"}\n---\nThanks';
      const { sessionId, message } = await turn(script, ['requires_action'], toolAgentId);
      const waiting = await trace(message.runId);
      expect(states(waiting)).toEqual([
        'agent_step:step 1:running',
        'model_call:scripted:completed',
        'tool_call:ask_user_question:running',
        'tool_call:get_weather:running',
      ]);
      expect(waiting[1]?.output_preview).toBe('tool calls: ask_user_question, get_weather');
      expect(waiting[3]?.attributes).toEqual({ call_id: expect.any(String), kind: 'client' });
      expect(waiting[3]?.input_preview).toBe('{"city":"Lima"}');

      await h.request('POST', `/v1/sessions/${sessionId}/messages/${message.id}/answer`, {
        body: { actionId: 0, answer: { units: 'celsius' } },
      });
      const half = await trace(message.runId);
      expect(states(half).slice(0, 4)).toEqual([
        'agent_step:step 1:running',
        'model_call:scripted:completed',
        'tool_call:ask_user_question:completed',
        'tool_call:get_weather:running',
      ]);
      expect(half[2]?.output_preview).toBe('{"units":"celsius"}');

      const callId = waiting[3]?.attributes.call_id as string;
      await h.deps.messages.recordClientOutputs(orgId, sessionId, [{ callId, output: '19C' }], 'continue');
      expect((await flow.waitForMessage(sessionId, message.id)).status).toBe('completed');
      const done = await trace(message.runId);
      expect(states(done)).toEqual([
        'agent_step:step 1:completed',
        'model_call:scripted:completed',
        'tool_call:ask_user_question:completed',
        'tool_call:get_weather:completed',
        'agent_step:step 2:completed',
        'model_call:scripted:completed',
      ]);
      expect(done[3]?.output_preview).toBe('19C');
      expect(done[5]?.input_preview).toBe('ask_user_question: {"units":"celsius"}\nget_weather: 19C');
    });

    it('cancels the open spans of a waiting turn that is interrupted', async () => {
      const { sessionId, message } = await turn('call get_weather {"city":"Oslo"}', ['requires_action'], toolAgentId);
      expect(json(await h.request('POST', `/v1/sessions/${sessionId}/interrupt`)).status).toBe('interrupting');
      expect((await flow.waitForMessage(sessionId, message.id)).status).toBe('cancelled');
      const spans = await trace(message.runId);
      expect(states(spans)).toEqual([
        'agent_step:step 1:cancelled',
        'model_call:scripted:completed',
        'tool_call:get_weather:cancelled',
      ]);
      expect(spans[2]?.output_preview).toBe('Tool call cancelled: the turn was interrupted');
      for (const span of spans) expect(span.duration_ms).toBeGreaterThanOrEqual(0);
    });

    it('fails the open spans of a turn that runs out of steps', async () => {
      const agent = await flow.createAgent({ maxSteps: 1 });
      const { message } = await turn('call nothing {}\n---\nnever', TERMINAL_STATUSES, agent);
      expect(message.status).toBe('failed');
      const run = await getRun(message.runId);
      expect(run.error.code).toBe('max_steps_exceeded');
      const spans = await trace(message.runId);
      expect(states(spans)).toEqual([
        'agent_step:step 1:failed',
        'model_call:scripted:completed',
        'tool_call:nothing:failed',
      ]);
      expect(spans[2]?.output_preview).toMatch(/^Turn failed: /);
    });

    it('keeps runs and traces after their session is deleted', async () => {
      const { sessionId, message } = await turn('ask Still there?', ['requires_action']);
      expect((await h.request('DELETE', `/v1/sessions/${sessionId}`)).status).toBe(204);
      const run = await getRun(message.runId);
      expect(run).toMatchObject({ status: 'cancelled', session_id: sessionId, conversation_id: `conv_${sessionId}` });
      expect(states(await trace(message.runId))).toEqual([
        'agent_step:step 1:cancelled',
        'model_call:scripted:completed',
        'tool_call:ask_user_question:cancelled',
      ]);
      const listed = json(await h.request('GET', `/v1/runs?conversation_id=conv_${sessionId}`));
      expect(listed.data.map((r: Json) => r.id)).toEqual([message.runId]);
    });
  });

  describe('listing', () => {
    let org: { orgId: string; key: string };
    let agentA: string;
    let agentB: string;
    let sessionA: string;
    /** Run ids in submission order: three in session A (agent A), two in a session of agent B. */
    const runIds: string[] = [];

    const list = (query: string, key = org.key) => h.request('GET', `/v1/runs${query}`, { key });

    beforeAll(async () => {
      org = await h.createOrg(`runs-${dialect}-${randomUUID()}`);
      agentA = await flow.createAgent({}, org.key);
      agentB = await flow.createAgent({}, org.key);
      sessionA = await flow.createSession(agentA, org.key);
      const sessionB = await flow.createSession(agentB, org.key);
      for (const [sessionId, text] of [
        [sessionA, 'one'],
        [sessionB, 'two'],
        [sessionA, 'three'],
        [sessionB, 'four'],
        [sessionA, 'five'],
      ] as const) {
        const accepted = await flow.submit(sessionId, text, { key: org.key });
        runIds.push(accepted.runId);
        await flow.waitForMessage(sessionId, accepted.id, TERMINAL_STATUSES, org.key);
        await sleep(3); // distinct creation milliseconds make "newest first" observable
      }
    });

    it('lists every run of the organization, newest first', async () => {
      const response = await list('');
      expect(response.status, response.text).toBe(200);
      const body = json(response);
      expect(body).toMatchObject({ object: 'list', has_more: false, next_cursor: null });
      expect(body.data.map((run: Json) => run.id)).toEqual([...runIds].reverse());
      expect(body.data.map((run: Json) => run.input_preview)).toEqual(['five', 'four', 'three', 'two', 'one']);
      for (const run of body.data) expect(Object.keys(run).sort()).toEqual([...RUN_KEYS].sort());
    });

    it('filters by agent_id and by conversation_id', async () => {
      const byAgent = json(await list(`?agent_id=${agentB}`));
      expect(byAgent.data.map((run: Json) => run.input_preview)).toEqual(['four', 'two']);
      const byConversation = json(await list(`?conversation_id=conv_${sessionA}`));
      expect(byConversation.data.map((run: Json) => run.input_preview)).toEqual(['five', 'three', 'one']);
      const both = json(await list(`?agent_id=${agentB}&conversation_id=conv_${sessionA}`));
      expect(both.data).toEqual([]);
      const upper = json(await list(`?conversation_id=conv_${sessionA.toUpperCase()}`));
      expect(upper.data).toHaveLength(3);
    });

    it('pages through with limit and cursor: no duplicates, no gaps', async () => {
      const seen: string[] = [];
      const pages: Json[] = [];
      let cursor: string | null = null;
      do {
        const response = await list(`?limit=2${cursor === null ? '' : `&cursor=${cursor}`}`);
        expect(response.status, response.text).toBe(200);
        const page = json(response);
        pages.push(page);
        seen.push(...page.data.map((run: Json) => run.id));
        cursor = page.next_cursor;
        expect(page.has_more).toBe(cursor !== null);
      } while (cursor !== null);
      expect(pages.map((page) => page.data.length)).toEqual([2, 2, 1]);
      expect(pages.map((page) => page.has_more)).toEqual([true, true, false]);
      expect(seen).toEqual([...runIds].reverse());

      // A cursor keeps the filter it is used with.
      const first = json(await list(`?conversation_id=conv_${sessionA}&limit=2`));
      const second = json(await list(`?conversation_id=conv_${sessionA}&limit=2&cursor=${first.next_cursor}`));
      expect(second.data.map((run: Json) => run.input_preview)).toEqual(['one']);
      expect(second).toMatchObject({ has_more: false, next_cursor: null });
    });

    it.each([
      ['not base64 JSON', 'x'],
      ['2001 characters', 'a'.repeat(2001)],
      ['base64 of the wrong JSON', b64('{"page":2}')],
      ['base64 of an array', b64('[1,2]')],
      ['a non-uuid id', b64('{"created_at":1,"id":"nope"}')],
      ['a negative time', b64(`{"created_at":-1,"id":"${randomUUID()}"}`)],
      ['an extra key', b64(`{"created_at":1,"id":"${randomUUID()}","x":1}`)],
      ['a trace cursor', b64('{"seq":3}')],
      ['padding', `${b64(`{"created_at":1,"id":"${randomUUID()}"}`)}=`],
    ])('rejects a cursor that is %s', async (_name, cursor) => {
      expectError(await list(`?cursor=${encodeURIComponent(cursor)}`), 400, 'validation_error', 'cursor');
    });

    it.each([
      ['limit 0', '?limit=0', 'limit'],
      ['limit 51', '?limit=51', 'limit'],
      ['an empty cursor', '?cursor=', 'cursor'],
      ['an unknown parameter', '?offset=2', 'offset'],
      ['a non-uuid agent_id', '?agent_id=abc', 'agent_id'],
      ['a conversation_id without conv_', `?conversation_id=${randomUUID()}`, 'conversation_id'],
    ])('rejects %s', async (_name, query, param) => {
      expectError(await list(query), 400, 'validation_error', param);
    });

    it('shows nothing of another organization', async () => {
      const theirs = runIds[0] as string;
      expectError(await h.request('GET', `/v1/runs/${theirs}`), 404, 'not_found');
      expectError(await h.request('GET', `/v1/runs/${theirs}/trace`), 404, 'not_found');
      const mine = json(await h.request('GET', '/v1/runs?limit=50'));
      expect(mine.data.some((run: Json) => runIds.includes(run.id))).toBe(false);
      expect(json(await h.request('GET', `/v1/runs?agent_id=${agentA}`)).data).toEqual([]);
      expect(json(await h.request('GET', `/v1/runs?conversation_id=conv_${sessionA}`)).data).toEqual([]);
      const other = await h.createOrg(`runs-empty-${dialect}-${randomUUID()}`);
      expect(json(await list('', other.key))).toEqual({ object: 'list', data: [], has_more: false, next_cursor: null });
    });

    it('answers 404 for an unknown run and 400 for a malformed id', async () => {
      expectError(await h.request('GET', `/v1/runs/${randomUUID()}`), 404, 'not_found');
      expectError(await h.request('GET', '/v1/runs/not-a-uuid'), 400, 'validation_error', 'id');
    });
  });

  describe('traces', () => {
    let sessionId: string;
    let message: Json;
    let spans: Json[];

    beforeAll(async () => {
      ({ sessionId, message } = await turn('call nothing {}\n---\nAll done'));
      expect(message.status).toBe('completed');
      spans = await trace(message.runId);
    });

    it('lists a two-step tool turn parent-first', () => {
      expect(spans.map((span) => [span.kind, span.name, span.status])).toEqual([
        ['agent_step', 'step 1', 'completed'],
        ['model_call', 'scripted', 'completed'],
        // No server tool is called "nothing": the call ends with an error result the model sees.
        ['tool_call', 'nothing', 'failed'],
        ['agent_step', 'step 2', 'completed'],
        ['model_call', 'scripted', 'completed'],
      ]);
      const [step1, call1, tool, step2, call2] = spans as [Json, Json, Json, Json, Json];
      expect([step1.parent_id, call1.parent_id, tool.parent_id, step2.parent_id, call2.parent_id]).toEqual([
        null,
        step1.id,
        step1.id,
        null,
        step2.id,
      ]);
      expect(new Set(spans.map((span) => span.id)).size).toBe(5);
      for (const span of spans) {
        expect(Object.keys(span).sort()).toEqual([...SPAN_KEYS].sort());
        expect(span.run_id).toBe(message.runId);
        expect(span.duration_ms).toBeGreaterThanOrEqual(0);
        expect(span.ended_at).toBeGreaterThanOrEqual(span.started_at);
      }
      expect(call1).toMatchObject({
        input_preview: 'call nothing {}\n---\nAll done',
        output_preview: 'tool calls: nothing',
        attributes: { tool_calls: 1, finish: 'tool_calls' },
      });
      expect(tool).toMatchObject({
        input_preview: '{}',
        output_preview: 'Error: no tool named "nothing" is available',
        attributes: { call_id: expect.any(String), kind: 'server' },
        usage: { input_tokens: 0, output_tokens: 0, total_tokens: 0 },
      });
      expect(call2).toMatchObject({
        input_preview: 'nothing: Error: no tool named "nothing" is available',
        output_preview: 'All done',
        attributes: { tool_calls: 0, finish: 'stop' },
      });
    });

    it('counts usage once, on the model calls', async () => {
      const run = await getRun(message.runId);
      const modelCalls = spans.filter((span) => span.kind === 'model_call');
      const sum = (field: string) => modelCalls.reduce((total, span) => total + span.usage[field], 0);
      expect(sum('input_tokens')).toBe(run.usage.input_tokens);
      expect(sum('output_tokens')).toBe(run.usage.output_tokens);
      for (const span of spans.filter((s) => s.kind !== 'model_call')) expect(span.usage.total_tokens).toBe(0);
    });

    it('pages through a trace with limit and cursor', async () => {
      const seen: Json[] = [];
      const sizes: number[] = [];
      let cursor: string | null = null;
      do {
        const response = await h.request(
          'GET',
          `/v1/runs/${message.runId}/trace?limit=2${cursor === null ? '' : `&cursor=${cursor}`}`,
        );
        expect(response.status, response.text).toBe(200);
        const page = json(response);
        expect(page.object).toBe('list');
        sizes.push(page.data.length);
        seen.push(...page.data);
        cursor = page.next_cursor;
        expect(page.has_more).toBe(cursor !== null);
      } while (cursor !== null);
      expect(sizes).toEqual([2, 2, 1]);
      expect(seen).toEqual(spans);
    });

    it('serves the same trace for the Response of the message', async () => {
      const byRun = await h.request('GET', `/v1/runs/${message.runId}/trace`);
      const byResponse = await h.request('GET', `/v1/responses/resp_${message.id}/trace`);
      expect(byResponse.status, byResponse.text).toBe(200);
      expect(json(byResponse)).toEqual(json(byRun));
      expect(json(byRun).data).toEqual(spans);
      const paged = json(await h.request('GET', `/v1/responses/resp_${message.id}/trace?limit=3`));
      expect(paged.data).toEqual(spans.slice(0, 3));
      const rest = json(await h.request('GET', `/v1/responses/resp_${message.id}/trace?cursor=${paged.next_cursor}`));
      expect(rest.data).toEqual(spans.slice(3));
    });

    it.each([
      ['a bare uuid', () => message.id],
      ['a short resp_ id', () => 'resp_123'],
      ['a conv_ id', () => `conv_${sessionId}`],
    ])('rejects a response id that is %s', async (_name, id) => {
      expectError(await h.request('GET', `/v1/responses/${id()}/trace`), 400, 'validation_error', 'id');
    });

    it('answers 404 for an unknown response', async () => {
      expectError(await h.request('GET', `/v1/responses/resp_${randomUUID()}/trace`), 404, 'not_found');
    });

    it.each([
      ['limit 0', '?limit=0', 'limit'],
      ['limit 51', '?limit=51', 'limit'],
      ['a cursor that does not decode', '?cursor=x', 'cursor'],
      ['a run cursor', `?cursor=${b64(`{"created_at":1,"id":"${randomUUID()}"}`)}`, 'cursor'],
      ['a fractional seq', `?cursor=${b64('{"seq":1.5}')}`, 'cursor'],
      ['an unknown parameter', '?agent_id=x', 'agent_id'],
    ])('rejects a trace query with %s', async (_name, query, param) => {
      expectError(await h.request('GET', `/v1/runs/${message.runId}/trace${query}`), 400, 'validation_error', param);
      expectError(
        await h.request('GET', `/v1/responses/resp_${message.id}/trace${query}`),
        400,
        'validation_error',
        param,
      );
    });
  });
});
