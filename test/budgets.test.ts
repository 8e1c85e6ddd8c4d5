/**
 * Budgets (docs/budgets.md) over HTTP with the engine running, once per dialect: the `budget` field of agents,
 * sessions and schedules (validated, unversioned on agents), the refusal up front (402 budget_exceeded), the turn
 * that fails before a model call past its cap, the budget.threshold and budget.exceeded webhooks recorded once per
 * crossing, a schedule whose runs fail once its budget is spent, and two sessions of one agent running at once that
 * pass the agent's cap by less than one step's cost. The `scripted/priced` model bills $1 per 1M tokens each way.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flows, type Json, TERMINAL_STATUSES, textParts, WEATHER_TOOL } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';

const PRICED = 'scripted/priced';

describe.each(dialects())('budgets (%s)', (dialect) => {
  let h: Harness;
  const flow = flows(() => h);
  let org: { orgId: string; key: string };

  beforeAll(async () => {
    h = await createHarness(dialect, { AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true' });
    org = await h.createOrg(`budgets-${dialect}`);
    // Budget webhooks are recorded only for organizations with an endpoint subscribed to them.
    const endpoint = await h.request('POST', '/v1/webhook_endpoints', {
      key: org.key,
      body: {
        name: 'budgets',
        url: 'http://127.0.0.1:9/budgets',
        event_types: ['budget.threshold', 'budget.exceeded'],
      },
    });
    expect(endpoint.status, endpoint.text).toBe(200);
  });
  afterAll(() => h.close());

  const db = () => h.deps.storage.db;
  const request = (method: string, url: string, body?: unknown) =>
    h.request(method, url, { key: org.key, ...(body === undefined ? {} : { body }) });
  const agent = async (fields: Json) => {
    const response = await request('POST', '/v1/agents', { name: 'budgeted', model: PRICED, ...fields });
    expect(response.status, response.text).toBe(201);
    return json(response).agent as Json;
  };
  const session = async (agentId: string, budget?: Json) => {
    const response = await request('POST', '/v1/sessions', { agentId, ...(budget === undefined ? {} : { budget }) });
    expect(response.status, response.text).toBe(201);
    return json(response).session as Json;
  };
  /** Submits and waits for the end of the turn; the refusal when it is not accepted. */
  const turn = async (sessionId: string, text: string): Promise<{ status: number; message: Json }> => {
    const response = await flow.postMessage(sessionId, textParts(text), { key: org.key });
    if (response.status !== 202) return { status: response.status, message: json(response) };
    return {
      status: 202,
      message: await flow.waitForMessage(sessionId, json(response).id, TERMINAL_STATUSES, org.key),
    };
  };
  const costOf = async (messageId: string) =>
    Number(
      (await db().selectFrom('messages').select('cost_micros').where('id', '=', messageId).executeTakeFirstOrThrow())
        .cost_micros,
    );
  const webhooks = async (id: string) =>
    (
      await db()
        .selectFrom('webhook_events')
        .select(['type', 'data'])
        .where('org_id', '=', org.orgId)
        .where('type', 'in', ['budget.threshold', 'budget.exceeded'])
        .orderBy('created_at')
        .execute()
    )
      .map((row) => ({ type: row.type, data: JSON.parse(row.data) as Json }))
      .filter((event) => event.data.id === id);

  describe('the budget field', () => {
    it('refuses bad limits and periods with a 400 naming the field, on agents, sessions and schedules', async () => {
      const agentId = (await agent({})).id;
      const cases: [string, string, Json, string][] = [
        ['POST', '/v1/agents', { name: 'x', budget: { limitUsd: -1 } }, 'budget.limitUsd'],
        ['POST', '/v1/agents', { name: 'x', budget: { limitUsd: 'NaN' } }, 'budget.limitUsd'],
        ['POST', '/v1/agents', { name: 'x', budget: { limitUsd: 2 ** 53 } }, 'budget.limitUsd'],
        ['POST', '/v1/agents', { name: 'x', budget: { limitUsd: 1, period: 'week' } }, 'budget.period'],
        ['POST', '/v1/agents', { name: 'x', budget: {} }, 'budget.limitUsd'],
        ['PATCH', `/v1/agents/${agentId}`, { budget: { limitUsd: '1e400' } }, 'budget.limitUsd'],
        ['POST', '/v1/sessions', { agentId, budget: { limitUsd: -0.5 } }, 'budget.limitUsd'],
        ['POST', '/v1/sessions', { agentId, budget: { limitUsd: 1, period: 'month' } }, 'budget.period'],
        [
          'POST',
          '/v1/schedules',
          { name: 's', agent_id: agentId, input: 'hi', interval_seconds: 60, budget: { limit_usd: 1e300 } },
          'budget.limit_usd',
        ],
      ];
      for (const [method, url, body, param] of cases) {
        const response = await request(method, url, body);
        expect(response.status, `${method} ${url} ${JSON.stringify(body)}: ${response.text}`).toBe(400);
        expect(json(response).error.code).toBe('validation_error');
        expect(json(response).error.param, response.text).toBe(param);
      }
    });

    it("shows an agent's budget and changes it without a new version, honouring If-Match", async () => {
      const created = await agent({ budget: { limitUsd: 5 } });
      expect(created.budget).toEqual({ limitUsd: 5, period: 'month' });
      expect(created.version).toBe(1);
      const changed = await request('PATCH', `/v1/agents/${created.id}`, {
        budget: { limitUsd: 7.5, period: 'lifetime' },
      });
      expect(changed.status, changed.text).toBe(200);
      expect(json(changed).agent.budget).toEqual({ limitUsd: 7.5, period: 'lifetime' });
      expect(json(changed).agent.version).toBe(1);
      const versions = json(await request('GET', `/v1/agents/${created.id}/versions`));
      expect(versions.data).toHaveLength(1);
      expect(versions.data[0].config.budget).toBeUndefined();
      const stale = await h.request('PATCH', `/v1/agents/${created.id}`, {
        key: org.key,
        headers: { 'if-match': '"2"' },
        body: { budget: null },
      });
      expect(stale.status, stale.text).toBe(409);
      expect(json(stale).error.code).toBe('version_conflict');
      // With another field the agent gets a new version, and the budget goes with it.
      const both = json(await request('PATCH', `/v1/agents/${created.id}`, { instructions: 'x', budget: null }));
      expect(both.agent.version).toBe(2);
      expect(both.agent.budget).toBeNull();
      expect(json(await request('GET', `/v1/agents/${created.id}`)).agent.budget).toBeNull();
    });
  });

  it('applies a budget from an agent document without a new version, and leaves it when a document names none', async () => {
    const apply = async (documents: Json[]) => {
      const response = await request('POST', '/v1/apply', { documents });
      expect(response.status, response.text).toBe(200);
      return json(response).plan[0] as Json;
    };
    const document = { kind: 'agent', name: 'as-code', model: PRICED, instructions: 'Be brief.' };
    const created = await apply([{ ...document, budget: { limitUsd: 3 } }]);
    expect(created.action).toBe('create');
    const agentId = created.id;
    expect(json(await request('GET', `/v1/agents/${agentId}`)).agent.budget).toEqual({ limitUsd: 3, period: 'month' });
    const raised = await apply([{ ...document, budget: { limitUsd: 4, period: 'lifetime' } }]);
    expect(raised).toMatchObject({ action: 'update', changes: ['/budget'], version: 1 });
    const after = json(await request('GET', `/v1/agents/${agentId}`)).agent;
    expect(after.budget).toEqual({ limitUsd: 4, period: 'lifetime' });
    expect(after.version).toBe(1);
    expect(await apply([document])).toMatchObject({ action: 'unchanged', version: 1 });
    // An export writes the budget, and applied back it changes nothing.
    const exported = json(await request('GET', '/v1/export')).documents.find((doc: Json) => doc.name === 'as-code');
    expect(exported.budget).toEqual({ limitUsd: 4, period: 'lifetime' });
    expect(await apply([exported])).toMatchObject({ action: 'unchanged', version: 1 });
    expect(json(await request('GET', `/v1/agents/${agentId}`)).agent.budget).toEqual({
      limitUsd: 4,
      period: 'lifetime',
    });
    const bad = await request('POST', '/v1/apply', { documents: [{ ...document, budget: { limitUsd: -1 } }] });
    expect(bad.status).toBe(400);
    expect(json(bad).error.param).toMatch(/budget\.limitUsd$/);
  });

  it('announces 80 % and 100 % once, fails nothing below the cap and refuses a turn once it is spent', async () => {
    // The cost of one turn, measured on an agent without a budget (the same instructions and input cost the same).
    const probe = await agent({ name: 'probe' });
    const probed = await turn((await session(probe.id)).id, 'hello there');
    const cost = await costOf(probed.message.id);
    expect(cost).toBeGreaterThan(0);

    // One turn passes 80 % of the cap, the second passes the cap: each webhook once; the third is refused.
    const limitMicros = Math.ceil(cost / 0.9);
    const capped = await agent({ name: 'probe', budget: { limitUsd: limitMicros / 1e6, period: 'lifetime' } });
    const first = await turn((await session(capped.id)).id, 'hello there');
    expect(first.message.status).toBe('completed');
    expect((await webhooks(capped.id)).map((event) => event.type)).toEqual(['budget.threshold']);
    const second = await turn((await session(capped.id)).id, 'hello there');
    expect(second.message.status).toBe('completed');
    const third = await turn((await session(capped.id)).id, 'hello there');
    expect(third.status).toBe(402);
    expect(third.message.error.code).toBe('budget_exceeded');
    expect(third.message.error.message).toContain(`agent ${capped.id}`);
    const events = await webhooks(capped.id);
    expect(events.map((event) => event.type)).toEqual(['budget.threshold', 'budget.exceeded']);
    expect(events[1]?.data).toEqual({
      scope: 'agent',
      id: capped.id,
      period: 'lifetime',
      period_key: null,
      limit_usd: limitMicros / 1e6,
      spent_usd: (2 * cost) / 1e6,
      threshold: 1,
    });

    // Raised, the agent runs again; its spend is the stored cost, recomputed when the budget is set.
    await request('PATCH', `/v1/agents/${capped.id}`, { budget: { limitUsd: 1, period: 'lifetime' } });
    expect((await turn((await session(capped.id)).id, 'hello there')).message.status).toBe('completed');
  });

  it('ends a running turn failed before a model call past its cap (a lowered budget applies at once)', async () => {
    const capped = await agent({
      name: 'tools',
      budget: { limitUsd: 1, period: 'month' },
      clientTools: [WEATHER_TOOL],
    });
    const sessionId = (await session(capped.id)).id;
    const accepted = await flow.postMessage(sessionId, textParts('call get_weather {"city":"Paris"}\n---\nfound it'), {
      key: org.key,
    });
    expect(accepted.status, accepted.text).toBe(202);
    const waiting = {
      message: await flow.waitForMessage(
        sessionId,
        json(accepted).id,
        ['requires_action', ...TERMINAL_STATUSES],
        org.key,
      ),
    };
    expect(waiting.message.status).toBe('requires_action');
    const spent = await costOf(waiting.message.id);
    // Lowered to what the turn has spent: its next model call would pass the cap.
    await request('PATCH', `/v1/agents/${capped.id}`, { budget: { limitUsd: spent / 1e6 } });
    const callId = waiting.message.requiredActions[0].callId;
    await h.deps.messages.recordClientOutputs(org.orgId, sessionId, [{ callId, output: 'the answer' }], 'continue');
    const ended = await flow.waitForMessage(sessionId, waiting.message.id, TERMINAL_STATUSES, org.key);
    expect(ended.status).toBe('failed');
    expect(ended.error.code).toBe('budget_exceeded');
    expect(ended.error.message).toMatch(/monthly budget \(\d{4}-\d\d\) of agent/);
    expect(await costOf(waiting.message.id)).toBe(spent);
  });

  it("refuses new messages once a session's budget is spent, naming the session", async () => {
    const free = await agent({ name: 'session-capped' });
    const capped = await session(free.id, { limitUsd: 0.000001 });
    expect(capped.budget).toEqual({ limitUsd: 0.000001, period: 'lifetime' });
    // Below the cap when it starts, the first turn runs its step; then the session's budget is spent.
    expect((await turn(capped.id, 'hello')).message.status).toBe('completed');
    const refused = await turn(capped.id, 'hello again');
    expect(refused.status).toBe(402);
    expect(refused.message.error.code).toBe('budget_exceeded');
    expect(refused.message.error.message).toContain(`session ${capped.id}`);
    expect((await webhooks(capped.id)).map((event) => event.type)).toEqual(['budget.threshold', 'budget.exceeded']);
    // Another session of the same agent is not capped.
    expect((await turn((await session(free.id)).id, 'hello')).message.status).toBe('completed');
    // PATCH changes a session's budget: raised, it runs again; refused input names the field; another org's is 404.
    const bad = await request('PATCH', `/v1/sessions/${capped.id}`, { budget: { limitUsd: Number.MAX_VALUE } });
    expect(bad.status, bad.text).toBe(400);
    expect(json(bad).error.param).toBe('budget.limitUsd');
    const other = await h.request('PATCH', `/v1/sessions/${capped.id}`, { body: { budget: null } });
    expect(other.status).toBe(404);
    const raised = await request('PATCH', `/v1/sessions/${capped.id}`, { budget: { limitUsd: 1 } });
    expect(raised.status, raised.text).toBe(200);
    expect(json(raised).session.budget).toEqual({ limitUsd: 1, period: 'lifetime' });
    expect((await turn(capped.id, 'hello again')).message.status).toBe('completed');
    const removed = await request('PATCH', `/v1/sessions/${capped.id}`, { budget: null });
    expect(json(removed).session.budget).toBeNull();
  });

  it("fails a schedule's runs with budget_exceeded once its budget is spent", async () => {
    const scheduled = await agent({ name: 'scheduled' });
    const created = await request('POST', '/v1/schedules', {
      name: 'capped',
      agent_id: scheduled.id,
      input: 'report',
      interval_seconds: 3600,
      enabled: false,
      budget: { limit_usd: 0.000001, period: 'lifetime' },
    });
    expect(created.status, created.text).toBe(201);
    const schedule = json(created);
    expect(schedule.budget).toEqual({ limit_usd: 0.000001, period: 'lifetime' });
    const runNow = async () => {
      const response = await request('POST', `/v1/schedules/${schedule.id}/run`);
      expect(response.status, response.text).toBe(202);
      const runId = json(response).id;
      let run: Json = json(response);
      for (let i = 0; i < 400 && !['completed', 'failed', 'cancelled'].includes(run.status); i++) {
        await new Promise((resolve) => setTimeout(resolve, 25));
        run = json(await request('GET', `/v1/schedules/${schedule.id}/runs/${runId}`));
      }
      return run;
    };
    expect((await runNow()).status).toBe('completed');
    const refused = await runNow();
    expect(refused.status).toBe('failed');
    expect(refused.error.code).toBe('budget_exceeded');
    expect(refused.error.message).toContain(`schedule ${schedule.id}`);
    // Raised, the schedule runs again.
    await request('POST', `/v1/schedules/${schedule.id}`, { budget: { limit_usd: 1, period: 'lifetime' } });
    expect((await runNow()).status).toBe('completed');
  });

  it("keeps two sessions of one agent running at once within one step's cost of the agent's cap", async () => {
    const probe = await agent({ name: 'concurrent' });
    const stepCost = await costOf((await turn((await session(probe.id)).id, SLOW)).message.id);
    const limitMicros = Math.round(stepCost * 4.5);
    const capped = await agent({ name: 'concurrent', budget: { limitUsd: limitMicros / 1e6, period: 'lifetime' } });
    const costs = await inLockstep([flow, flow], capped.id, org.key, (id) => costOf(id));
    expectWithinOneStep(costs, limitMicros);
  });
});

/** One slow step per turn (the scripted model sleeps), so the model calls of turns started together overlap. */
const SLOW = 'sleep 150\nworking on it';

/**
 * Rounds of two turns started together, each in a new session of the agent (every turn costs the same) through its
 * own flow, until a turn is refused or fails: the costs of the turns that ran. Without holds the two calls of the
 * round that reaches the cap would both run.
 */
async function inLockstep(
  through: [ReturnType<typeof flows>, ReturnType<typeof flows>],
  agentId: string,
  key: string,
  costOf: (messageId: string) => Promise<number>,
): Promise<number[]> {
  const costs: number[] = [];
  for (let round = 0; round < 20; round++) {
    const sessions = await Promise.all(through.map((flow) => flow.createSession(agentId, key)));
    const ended = await Promise.all(
      through.map(async (flow, i) => {
        const sessionId = sessions[i] ?? '';
        const response = await flow.postMessage(sessionId, textParts(SLOW), { key });
        if (response.status === 402) {
          expect(json(response).error.code).toBe('budget_exceeded');
          return false;
        }
        expect(response.status, response.text).toBe(202);
        const message = await flow.waitForMessage(sessionId, json(response).id, TERMINAL_STATUSES, key);
        costs.push(await costOf(message.id));
        if (message.status === 'completed') return true;
        expect(message.error.code).toBe('budget_exceeded');
        return false;
      }),
    );
    if (ended.includes(false)) return costs;
  }
  return costs;
}

/** The cap was reached and passed by less than one step. */
function expectWithinOneStep(costs: number[], limitMicros: number): void {
  const spent = costs.reduce((sum, cost) => sum + cost, 0);
  const step = Math.max(...costs);
  expect(costs.length).toBeGreaterThan(2);
  expect(spent).toBeGreaterThanOrEqual(limitMicros);
  expect(spent - limitMicros, `spent ${spent} of ${limitMicros} in steps of ${costs.join(', ')}`).toBeLessThan(step);
}

describe.skipIf(!dialects().includes('postgres'))('budgets across two servers on one Postgres', () => {
  let a: Harness;
  let b: Harness;

  beforeAll(async () => {
    // No polling: each engine runs only the turns its own server's wake-ups name, so each session has its engine.
    a = await createHarness('postgres', { AGENTRY_POLL_MS: '600000' });
    const { databaseUrl, databaseSchema } = a.deps.config;
    if (databaseUrl === null || databaseSchema === null) throw new Error('a Postgres harness has a database URL');
    // A second server (its own engine, pool and in-process bus) over the same database, as a second worker is.
    b = await createHarness('postgres', {
      DATABASE_URL: databaseUrl,
      AGENTRY_DATABASE_SCHEMA: databaseSchema,
      AGENTRY_BOOTSTRAP_KEY: a.key,
      AGENTRY_POLL_MS: '600000',
    });
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
  });

  it("keeps the turns of one agent run by two engines within one step's cost of its cap", async () => {
    const flowA = flows(() => a);
    const flowB = flows(() => b);
    const costOf = async (messageId: string) =>
      Number(
        (
          await a.deps.storage.db
            .selectFrom('messages')
            .select('cost_micros')
            .where('id', '=', messageId)
            .executeTakeFirstOrThrow()
        ).cost_micros,
      );
    const probe = await flowA.createAgent({ model: PRICED });
    const stepCost = await costOf((await flowA.turn(probe, SLOW)).message.id);
    const limitMicros = Math.round(stepCost * 4.5);
    const agentId = await flowA.createAgent({
      model: PRICED,
      budget: { limitUsd: limitMicros / 1e6, period: 'lifetime' },
    });
    // Each session is written to through its own server, whose engine is woken and runs its turns.
    expectWithinOneStep(await inLockstep([flowA, flowB], agentId, a.key, costOf), limitMicros);
  });
});
