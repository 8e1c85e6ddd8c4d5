/**
 * Agent versions over HTTP, once per dialect: the version list and one version with its actor and a diff, restore,
 * If-Match on PATCH (quoted, bare, as a body field; two concurrent PATCHes naming one version: exactly one wins),
 * and pins (a session, a schedule, a Response through the official openai client, a Chat Completion) that keep
 * running the pinned version's config after later PATCHes. The version that ran is read from the run
 * (agent_version) and from the turn's input tokens, which the `scripted` model counts from the instructions the
 * engine loaded for the turn (docs/models.md), so a turn that ran the wrong config shows it.
 */
import { randomUUID } from 'node:crypto';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flows, httpClient, type Json, TERMINAL_STATUSES, textParts, waitUntil } from './helpers/fixtures.ts';
import {
  createHarness,
  dialects,
  type Harness,
  type Response as HarnessResponse,
  json,
  testEnvironment,
  testKey,
} from './helpers/harness.ts';
import { type ServerProcess, startServerProcess, startsTimeout } from './helpers/server-process.ts';

/** 400 characters: 100 input tokens of the scripted model, far more than the user text and the short version. */
const LONG = 'Answer in the voice of a careful archivist. '.repeat(10).slice(0, 400);
const SHORT = 'Be brief.';

describe.each(dialects())('agent versions (%s)', (dialect) => {
  let h: Harness;
  const flow = flows(() => h, { agentName: 'versioned' });
  let other: { orgId: string; key: string };

  beforeAll(async () => {
    h = await createHarness(dialect);
    other = await h.createOrg('other');
  });
  afterAll(() => h.close());

  const expectError = (response: HarnessResponse, status: number, code: string, param?: string) => {
    expect(response.status, response.text).toBe(status);
    const error = json(response).error as Json;
    expect(error.code).toBe(code);
    if (param !== undefined) expect(error.param).toBe(param);
    return error;
  };
  const patch = (id: string, body: Json, headers: Record<string, string> = {}) =>
    h.request('PATCH', `/v1/agents/${id}`, { body, headers });

  /** The agent's version after a sequence of PATCHes (each expected to succeed). */
  async function agentAt(fields: Json, changes: Json[]): Promise<string> {
    const id = await flow.createAgent(fields);
    for (const change of changes) {
      const response = await patch(id, change);
      expect(response.status, response.text).toBe(200);
    }
    return id;
  }

  it('lists versions newest first with who made them and when, pages them, and 404s another org', async () => {
    const id = await agentAt({ instructions: 'one' }, [{ instructions: 'two' }, { instructions: 'three' }]);
    const prefix = h.key.slice(0, 12);
    const first = json(await h.request('GET', `/v1/agents/${id}/versions?limit=2`));
    expect(first.object).toBe('list');
    expect(first.data.map((v: Json) => [v.version, v.config.instructions, v.actor])).toEqual([
      [3, 'three', prefix],
      [2, 'two', prefix],
    ]);
    expect(first.data[0].createdAt).toMatch(/^\d{4}-\d\d-\d\dT/);
    expect(first.data[0].agentId).toBe(id);
    expect(first.has_more).toBe(true);
    const second = json(await h.request('GET', `/v1/agents/${id}/versions?limit=2&cursor=${first.next_cursor}`));
    expect(second.data.map((v: Json) => v.version)).toEqual([1]);
    expect(second.has_more).toBe(false);
    expect(second.next_cursor).toBeNull();

    const one = json(await h.request('GET', `/v1/agents/${id}/versions/1`));
    expect(one).toMatchObject({ object: 'agent.version', version: 1, actor: prefix });
    expect(one.config).toMatchObject({ name: 'versioned', instructions: 'one', model: 'scripted' });
    expect(one.diff).toBeUndefined();

    for (const path of [`/v1/agents/${id}/versions`, `/v1/agents/${id}/versions/1`]) {
      expectError(await h.request('GET', path, { key: other.key }), 404, 'not_found');
    }
    expectError(await h.request('POST', `/v1/agents/${id}/versions/1/restore`, { key: other.key }), 404, 'not_found');
    expectError(await h.request('GET', `/v1/agents/${id}/versions/9`), 404, 'not_found');
  });

  it('answers a diff between two versions as JSON-pointer changes with before and after', async () => {
    const id = await agentAt({ instructions: 'one', clientTools: [] }, [
      { instructions: 'two', maxSteps: 5, description: 'described' },
      {
        toolApprovals: { default: 'auto', overrides: { 'a/b__*': 'always_ask' } },
        networkPolicy: { allow_network_egress: true, domain_allowlist: 'all_domains' },
      },
    ]);
    const diff = json(await h.request('GET', `/v1/agents/${id}/versions/3?diff_from=1`)).diff;
    expect(diff.from).toBe(1);
    const byPath = Object.fromEntries(diff.changes.map((c: Json) => [c.path, c]));
    expect(byPath['/instructions']).toEqual({ path: '/instructions', op: 'replace', before: 'one', after: 'two' });
    expect(byPath['/maxSteps']).toMatchObject({ before: 32, after: 5 });
    expect(byPath['/description']).toMatchObject({ before: null, after: 'described' });
    // A key with a slash is escaped as RFC 6901 says.
    expect(byPath['/toolApprovals/overrides/a~1b__*']).toEqual({
      path: '/toolApprovals/overrides/a~1b__*',
      op: 'add',
      after: 'always_ask',
    });
    expect(byPath['/networkPolicy']).toMatchObject({ op: 'replace', before: null });
    expect(byPath['/name']).toBeUndefined();
    // The other way round, and with itself: nothing changed.
    const back = json(await h.request('GET', `/v1/agents/${id}/versions/1?diff_from=3`)).diff.changes;
    expect(back.find((c: Json) => c.path === '/instructions')).toMatchObject({ before: 'two', after: 'one' });
    expect(json(await h.request('GET', `/v1/agents/${id}/versions/2?diff_from=2`)).diff.changes).toEqual([]);
    expectError(
      await h.request('GET', `/v1/agents/${id}/versions/2?diff_from=7`),
      400,
      'validation_error',
      'diff_from',
    );
  });

  it('restores a version as a new one, keeping the history, and honours If-Match', async () => {
    const id = await agentAt({ instructions: 'one', maxSteps: 3 }, [{ instructions: 'two', maxSteps: 9 }]);
    const restored = json(await h.request('POST', `/v1/agents/${id}/versions/1/restore`));
    expect(restored.agent).toMatchObject({ version: 3, instructions: 'one', maxSteps: 3 });
    const versions = json(await h.request('GET', `/v1/agents/${id}/versions`)).data;
    expect(versions.map((v: Json) => v.version)).toEqual([3, 2, 1]);
    expect(json(await h.request('GET', `/v1/agents/${id}/versions/3?diff_from=1`)).diff.changes).toEqual([]);
    const conflict = expectError(
      await h.request('POST', `/v1/agents/${id}/versions/2/restore`, { headers: { 'if-match': '"2"' } }),
      409,
      'version_conflict',
    );
    expect(conflict.details).toEqual({ currentVersion: 3, expectedVersion: 2 });
    const ok = await h.request('POST', `/v1/agents/${id}/versions/2/restore`, { headers: { 'if-match': '3' } });
    expect(json(ok).agent).toMatchObject({ version: 4, instructions: 'two' });
    expectError(await h.request('POST', `/v1/agents/${id}/versions/99/restore`), 404, 'not_found');
    expect(json(await h.request('GET', `/v1/agents/${id}`)).agent.version).toBe(4);
  });

  it('applies a PATCH only at the version If-Match names (quoted, bare or as body version)', async () => {
    const id = await flow.createAgent({ instructions: 'v1' });
    expect(json(await patch(id, { instructions: 'v2' }, { 'if-match': '"1"' })).agent.version).toBe(2);
    expect(json(await patch(id, { instructions: 'v3' }, { 'if-match': '2' })).agent.version).toBe(3);
    expect(json(await patch(id, { instructions: 'v4', version: 3 })).agent.version).toBe(4);
    const stale = expectError(
      await patch(id, { instructions: 'lost' }, { 'if-match': '"2"' }),
      409,
      'version_conflict',
    );
    expect(stale.details.currentVersion).toBe(4);
    expectError(await patch(id, { instructions: 'lost', version: 1 }), 409, 'version_conflict');
    expectError(
      await patch(id, { instructions: 'x', version: 4 }, { 'if-match': '"3"' }),
      400,
      'validation_error',
      'version',
    );
    // Nothing was written by the refusals; without If-Match the spec's behaviour stays.
    const agent = json(await h.request('GET', `/v1/agents/${id}`)).agent;
    expect(agent).toMatchObject({ version: 4, instructions: 'v4' });
    expect(json(await patch(id, { instructions: 'v5' })).agent.version).toBe(5);
  });

  it('lets exactly one of several concurrent PATCHes with the same If-Match win', async () => {
    const id = await flow.createAgent({ instructions: 'start' });
    for (let round = 1; round <= 3; round++) {
      const responses = await Promise.all(
        Array.from({ length: 6 }, (_, i) =>
          patch(id, { instructions: `r${round}-${i}` }, { 'if-match': `"${round}"` }),
        ),
      );
      const statuses = responses.map((r) => r.status).sort();
      expect(statuses).toEqual([200, 409, 409, 409, 409, 409]);
      const winner = responses.find((r) => r.status === 200);
      expect(json(winner!).agent.version).toBe(round + 1);
      for (const loser of responses.filter((r) => r.status === 409)) {
        expect(json(loser).error.details.currentVersion).toBe(round + 1);
      }
    }
    const versions = json(await h.request('GET', `/v1/agents/${id}/versions`)).data;
    expect(versions.map((v: Json) => v.version)).toEqual([4, 3, 2, 1]);
  });

  it('refuses hostile values of the new fields with a 400 naming the field', async () => {
    const id = await flow.createAgent({});
    for (const value of ['abc', '"1', '0', '-1', '1.5', '99999999999', '1,2', 'W/"1"']) {
      expectError(await patch(id, { instructions: 'x' }, { 'if-match': value }), 400, 'validation_error');
    }
    for (const version of [0, -1, 1.5, '1', null, 2 ** 31, true]) {
      expectError(await patch(id, { instructions: 'x', version }), 400, 'validation_error', 'version');
    }
    expectError(await patch(id, { version: 1 }), 400, 'validation_error', 'body');
    for (const query of ['diff_from=0', 'diff_from=x', 'diff_from=1e400']) {
      expectError(await h.request('GET', `/v1/agents/${id}/versions/1?${query}`), 400, 'validation_error', 'diff_from');
    }
    for (const query of ['cursor=x', 'cursor=0', 'cursor=-3', 'limit=0', 'limit=101']) {
      const response = await h.request('GET', `/v1/agents/${id}/versions?${query}`);
      expect(response.status, `${query}: ${response.text}`).toBe(400);
    }
    for (const version of ['0', 'x', '2147483648']) {
      expect((await h.request('GET', `/v1/agents/${id}/versions/${version}`)).status).toBe(400);
    }
    for (const agentVersion of [0, -2, 'one', 1.25, 2 ** 31, null]) {
      const response = await h.request('POST', '/v1/sessions', { body: { agentId: id, agentVersion } });
      expectError(response, 400, 'validation_error', 'agentVersion');
    }
    expectError(
      await h.request('POST', '/v1/sessions', { body: { agentId: id, agentVersion: 2 } }),
      400,
      'validation_error',
      'agentVersion',
    );
    expect(json(await h.request('GET', `/v1/agents/${id}`)).agent.version).toBe(1);
  });

  /** Runs one message in the session; its run's agent_version and the turn's input tokens. */
  async function runIn(sessionId: string, text = 'hello'): Promise<{ version: number; inputTokens: number }> {
    const accepted = await flow.submit(sessionId, text);
    const message = await flow.waitForMessage(sessionId, accepted.id);
    expect(message.status).toBe('completed');
    const run = json(await h.request('GET', `/v1/runs/${message.runId}`));
    return { version: run.agent_version, inputTokens: message.usage.inputTokens };
  }

  it('runs a pinned session on its version after later PATCHes; an unpinned one follows the latest', async () => {
    const id = await flow.createAgent({ instructions: LONG });
    const pinned = json(await h.request('POST', '/v1/sessions', { body: { agentId: id, agentVersion: 1 } })).session;
    expect(pinned.agentVersion).toBe(1);
    const follower = await flow.createSession(id);
    expect(json(await h.request('GET', `/v1/sessions/${follower}`)).session.agentVersion).toBeNull();
    expect(json(await h.request('GET', `/v1/sessions/${pinned.id}`)).session.agentVersion).toBe(1);

    const before = await runIn(pinned.id);
    expect(before.version).toBe(1);
    expect(before.inputTokens).toBeGreaterThanOrEqual(100);

    await patch(id, { instructions: SHORT });
    await patch(id, { maxSteps: 7 });
    const after = await runIn(pinned.id);
    expect(after.version).toBe(1);
    expect(after.inputTokens).toBeGreaterThanOrEqual(100);
    const latest = await runIn(follower);
    expect(latest.version).toBe(3);
    expect(latest.inputTokens).toBeLessThan(50);

    // A message that names a version of its own is not needed: the session's pin is what the run lists show.
    const runs = json(await h.request('GET', `/v1/runs?session_id=${pinned.id}`));
    if (Array.isArray(runs.data)) {
      for (const run of runs.data) expect(run.agent_version).toBe(1);
    }
    // Deleting the agent is refused while sessions reference it, as the spec says; the versions stay.
    expectError(await h.request('DELETE', `/v1/agents/${id}`), 409, 'agent_in_use');
    expect(json(await h.request('GET', `/v1/agents/${id}/versions`)).data).toHaveLength(3);
  });

  it('runs a schedule pinned to a version, and refuses an unknown version naming agent_version', async () => {
    const id = await flow.createAgent({ instructions: LONG });
    await patch(id, { instructions: SHORT });
    const base = { name: 'pinned', agent_id: id, input: 'tick', interval_seconds: 3600 };
    expectError(
      await h.request('POST', '/v1/schedules', { body: { ...base, agent_version: 5 } }),
      400,
      'validation_error',
      'agent_version',
    );
    for (const agent_version of [0, 'x', 1.5]) {
      expectError(
        await h.request('POST', '/v1/schedules', { body: { ...base, agent_version } }),
        400,
        'validation_error',
        'agent_version',
      );
    }
    const created = await h.request('POST', '/v1/schedules', { body: { ...base, agent_version: 1 } });
    expect(created.status, created.text).toBe(201);
    const schedule = json(created);
    expect(schedule.agent_version).toBe(1);
    await patch(id, { maxSteps: 9 });

    const started = json(await h.request('POST', `/v1/schedules/${schedule.id}/run`, { body: {} }));
    const done = await waitUntil(
      async () => {
        const run = json(await h.request('GET', `/v1/schedules/${schedule.id}/runs/${started.id}`));
        return TERMINAL_STATUSES.includes(run.status) || run.status === 'succeeded' ? run : null;
      },
      { what: 'the scheduled run' },
    );
    const run = json(await h.request('GET', `/v1/runs/${done.run_id}`));
    expect(run.agent_version).toBe(1);
    expect(done.usage.input_tokens).toBeGreaterThanOrEqual(100);
    const session = json(await h.request('GET', `/v1/sessions/${done.session_id}`)).session;
    expect(session.agentVersion).toBe(1);

    // The pin can be changed and dropped.
    const unpinned = json(await h.request('POST', `/v1/schedules/${schedule.id}`, { body: { agent_version: null } }));
    expect(unpinned.agent_version).toBeNull();
    expectError(
      await h.request('POST', `/v1/schedules/${schedule.id}`, { body: { agent_version: 42 } }),
      400,
      'validation_error',
      'agent_version',
    );
  });

  it('runs a Response pinned with agent_version sent by the official openai client, in both modes', async () => {
    const id = await flow.createAgent({ name: `responses-${randomUUID()}`, instructions: LONG });
    await patch(id, { instructions: SHORT });
    const client = new OpenAI({ apiKey: h.key, baseURL: `${await h.listen()}/v1` });
    // Extra body fields: the client sends what it is given.
    const pinned = { model: id, input: 'hello', agent_version: 1 };
    const response = await client.responses.create(pinned);
    expect(response.status).toBe('completed');
    expect(response.usage?.input_tokens).toBeGreaterThanOrEqual(100);
    const latest = await client.responses.create({ model: id, input: 'hello' });
    expect(latest.usage?.input_tokens).toBeLessThan(50);

    const strict = await h.request('POST', '/v1/responses', {
      body: { model: id, input: 'hello', agent_version: 1 },
      headers: { 'agentry-compat': 'strict' },
    });
    expect(strict.status, strict.text).toBe(200);
    expect(json(strict).usage.input_tokens).toBeGreaterThanOrEqual(100);

    const missing = { model: id, input: 'x', agent_version: 9 };
    const unknown = await client.responses.create(missing).catch((e) => e);
    expect(unknown).toBeInstanceOf(OpenAI.BadRequestError);
    expect(unknown.param).toBe('agent_version');
    for (const agent_version of [0, '1', 1.5]) {
      expectError(
        await h.request('POST', '/v1/responses', { body: { model: id, input: 'x', agent_version } }),
        400,
        'validation_error',
        'agent_version',
      );
    }
  });

  it('runs a Chat Completion pinned with agent_version', async () => {
    const id = await flow.createAgent({ name: `chat-${randomUUID()}`, instructions: LONG });
    await patch(id, { instructions: SHORT });
    const body = { model: id, messages: [{ role: 'user', content: 'hello' }] };
    const pinned = await h.request('POST', '/v1/chat/completions', { body: { ...body, agent_version: 1 } });
    expect(pinned.status, pinned.text).toBe(200);
    expect(json(pinned).usage.prompt_tokens).toBeGreaterThanOrEqual(100);
    const latest = json(await h.request('POST', '/v1/chat/completions', { body }));
    expect(latest.usage.prompt_tokens).toBeLessThan(50);
    for (const agent_version of [3, 0, 'x']) {
      expectError(
        await h.request('POST', '/v1/chat/completions', { body: { ...body, agent_version } }),
        400,
        'validation_error',
        'agent_version',
      );
    }
  });
});

describe.each(dialects())('agent version pins across a restart (%s)', (dialect) => {
  const environment = testEnvironment(dialect);
  const key = testKey();
  const env = { ...environment.env, LOG_LEVEL: 'warn', AGENTRY_BOOTSTRAP_KEY: key };
  let server: ServerProcess | null = null;
  afterAll(async () => {
    await server?.stop('SIGKILL');
    await environment.cleanup();
  });

  /** Sends one message and waits for it; the run's agent_version and the turn's input tokens. */
  async function turn(api: ReturnType<typeof httpClient>, sessionId: string) {
    const accepted = await api('POST', `/v1/sessions/${sessionId}/messages`, textParts('hello'), {
      'Idempotency-Key': randomUUID(),
    });
    expect(accepted.status, JSON.stringify(accepted.body)).toBe(202);
    const message = await waitUntil(
      async () => {
        const got = (await api('GET', `/v1/sessions/${sessionId}/messages/${accepted.body.id}`)).body.message;
        return TERMINAL_STATUSES.includes(got.status) ? got : null;
      },
      { what: 'the turn' },
    );
    expect(message.status).toBe('completed');
    const run = (await api('GET', `/v1/runs/${message.runId}`)).body;
    return { version: run.agent_version, inputTokens: message.usage.inputTokens };
  }

  it(
    'keeps running the pinned version after PATCHes and a restart',
    async () => {
      server = await startServerProcess(env);
      let api = httpClient(server.url, key);
      const agent = (await api('POST', '/v1/agents', { name: 'restarted', instructions: LONG })).body.agent;
      const pinned = (await api('POST', '/v1/sessions', { agentId: agent.id, agentVersion: 1 })).body.session.id;
      const follower = (await api('POST', '/v1/sessions', { agentId: agent.id })).body.session.id;
      expect((await api('PATCH', `/v1/agents/${agent.id}`, { instructions: SHORT })).status).toBe(200);
      await server.stop('SIGTERM');

      server = await startServerProcess(env);
      api = httpClient(server.url, key);
      expect((await api('GET', `/v1/sessions/${pinned}`)).body.session.agentVersion).toBe(1);
      const pinnedTurn = await turn(api, pinned);
      expect(pinnedTurn.version).toBe(1);
      expect(pinnedTurn.inputTokens).toBeGreaterThanOrEqual(100);
      const latest = await turn(api, follower);
      expect(latest.version).toBe(2);
      expect(latest.inputTokens).toBeLessThan(50);
    },
    startsTimeout(2),
  );
});
