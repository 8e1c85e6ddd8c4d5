/**
 * Schedules over HTTP with an injected clock (no test waits for a tick in real time): validation, cron and
 * interval firing, a DST change in Europe/Berlin, overlap skip and queue, catch-up after downtime, pause and
 * resume, manual runs, timeouts (a running turn and one waiting for a client result), org isolation, cursor
 * lists, and exactly one run per tick with two schedulers racing on one database (100 ticks). Each dialect.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDeps, buildScheduler } from '../src/deps.ts';
import { claimTicks } from '../src/domain/schedules/schedule-store.ts';
import type { Scheduler } from '../src/engine/scheduler.ts';
import { flows, type Json, TERMINAL_STATUSES, waitUntil, weatherTool } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';
import { runCli } from './helpers/server-process.ts';
import { type TestClock, testClock } from './helpers/test-clock.ts';

const MINUTE = 60_000;
const at = (iso: string): number => Date.parse(iso);
const secs = (iso: string): number => Math.floor(Date.parse(iso) / 1000);

describe.each(dialects())('schedules (%s)', (dialect) => {
  let h: Harness;
  let clock: TestClock;
  let scheduler: Scheduler;
  let agentId: string;
  let toolAgentId: string;
  let other: { orgId: string; key: string };
  const flow = flows(() => h);

  beforeAll(async () => {
    clock = testClock();
    // Tests move the clock forward only, in the order they are written (leases and deadlines follow it).
    clock.set(at('2026-03-01T00:00:00Z'));
    h = await createHarness(dialect, {}, { clock });
    scheduler = buildScheduler(h.deps);
    agentId = await flow.createAgent();
    toolAgentId = await flow.createAgent({ clientTools: [weatherTool()] });
    other = await h.createOrg('other');
  });
  afterAll(async () => {
    await scheduler?.stop();
    await h?.close();
  });

  const moveTo = (when: number) => {
    const delta = when - clock.now();
    expect(delta, 'the test clock only moves forward').toBeGreaterThanOrEqual(0);
    clock.advance(delta);
  };
  const create = async (body: Json) => {
    const response = await h.request('POST', '/v1/schedules', {
      body: { name: 'nightly', agent_id: agentId, input: 'hello', ...body },
    });
    expect(response.status, response.text).toBe(201);
    return json(response);
  };
  const runs = async (scheduleId: string): Promise<Json[]> => {
    const response = await h.request('GET', `/v1/schedules/${scheduleId}/runs?limit=100`);
    expect(response.status, response.text).toBe(200);
    return json(response).data;
  };
  const waitRun = (scheduleId: string, runId: string, statuses: readonly string[]) =>
    waitUntil(
      async () => {
        const run = json(await h.request('GET', `/v1/schedules/${scheduleId}/runs/${runId}`));
        return statuses.includes(run.status) ? run : null;
      },
      { what: `schedule run ${runId} to reach ${statuses.join('|')}` },
    );
  const update = async (id: string, body: Json) => {
    const response = await h.request('POST', `/v1/schedules/${id}`, { body });
    expect(response.status, response.text).toBe(200);
    return json(response);
  };

  it.each([
    ['an invalid cron', { cron: '61 * * * *' }, 'cron'],
    ['a 6-field cron', { cron: '0 0 9 * * 1-5' }, 'cron'],
    ['a cron that never fires', { cron: '0 0 30 2 *' }, 'cron'],
    ['both cron and interval', { cron: '* * * * *', interval_seconds: 60 }, 'cron'],
    ['neither cron nor interval', {}, 'cron'],
    ['an unknown time zone', { cron: '* * * * *', timezone: 'Mars/Olympus' }, 'timezone'],
    ['an unknown agent', { cron: '* * * * *', agent_id: randomUUID() }, 'agent_id'],
    ['an agent id that is no uuid', { cron: '* * * * *', agent_id: 'abc' }, 'agent_id'],
    ['a zero interval', { interval_seconds: 0 }, 'interval_seconds'],
    ['a huge interval', { interval_seconds: 2 ** 70 }, 'interval_seconds'],
    ['a fractional interval', { interval_seconds: 1.5 }, 'interval_seconds'],
    ['an interval as a string', { interval_seconds: '60' }, 'interval_seconds'],
    ['an unknown overlap', { cron: '* * * * *', overlap: 'parallel' }, 'overlap'],
    ['an unknown catch_up', { cron: '* * * * *', catch_up: 'all' }, 'catch_up'],
    ['a NUL byte in the input', { cron: '* * * * *', input: 'a\u0000b' }, 'input'],
    ['a lone surrogate in the name', { cron: '* * * * *', name: 'x\ud800' }, 'name'],
    ['an empty input', { cron: '* * * * *', input: '' }, 'input'],
    ['a zero timeout', { cron: '* * * * *', timeout_seconds: 0 }, 'timeout_seconds'],
    ['an unknown session', { cron: '* * * * *', session_id: randomUUID() }, 'session_id'],
    ['an unknown field', { cron: '* * * * *', color: 'red' }, 'color'],
  ])('refuses %s with a 400 naming the field', async (_name, body, param) => {
    const response = await h.request('POST', '/v1/schedules', {
      body: { name: 'bad', agent_id: agentId, input: 'hello', ...body },
    });
    expect(response.status, response.text).toBe(400);
    expect(json(response).error).toMatchObject({ code: 'validation_error' });
    expect(json(response).error.param).toContain(param);
  });

  it('replays a create with the same Idempotency-Key and refuses the key with another body (409)', async () => {
    const headers = { 'idempotency-key': randomUUID() };
    const body = { name: 'once', agent_id: agentId, input: 'hi', cron: '0 0 1 1 *', enabled: false };
    const first = await h.request('POST', '/v1/schedules', { body, headers });
    const again = await h.request('POST', '/v1/schedules', { body, headers });
    expect([first.status, again.status]).toEqual([201, 201]);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(json(again).id).toBe(json(first).id);
    const other = await h.request('POST', '/v1/schedules', { body: { ...body, name: 'twice' }, headers });
    expect(other.status).toBe(409);
    expect(json(other).error.code).toBe('idempotency_conflict');
    await h.request('DELETE', `/v1/schedules/${json(first).id}`);
  });

  it.each([
    ['an enabled flag as a string', { enabled: 'yes' }, 'enabled'],
    ['a huge timeout', { timeout_seconds: 1e30 }, 'timeout_seconds'],
    ['a cron with a NUL byte', { cron: '0 9 * * 1\u0000' }, 'cron'],
    ['both cron and interval', { cron: '* * * * *', interval_seconds: 5 }, 'cron'],
    ['an unknown zone', { timezone: 'Europe/Atlantis' }, 'timezone'],
    ['a session of another agent', { session_id: 'SESSION' }, 'session_id'],
  ])('refuses an update with %s (400 naming the field)', async (_name, change: Json, param) => {
    const schedule = await create({ cron: '0 0 1 1 *', enabled: false });
    let body: Json = change;
    if (change.session_id === 'SESSION') body = { session_id: await flow.createSession(toolAgentId) };
    const response = await h.request('POST', `/v1/schedules/${schedule.id}`, { body });
    expect(response.status, response.text).toBe(400);
    expect(json(response).error.param).toContain(param);
    expect(json(await h.request('GET', `/v1/schedules/${schedule.id}`))).toEqual(schedule);
    await h.request('DELETE', `/v1/schedules/${schedule.id}`);
  });

  it('refuses malformed ids and list parameters with a 400', async () => {
    for (const url of [
      '/v1/schedules/not-a-uuid',
      '/v1/schedules?limit=0',
      '/v1/schedules?limit=101',
      `/v1/schedules/${randomUUID()}/runs?limit=1e3`,
      `/v1/schedules/${randomUUID()}/runs/nope`,
    ]) {
      const response = await h.request('GET', url);
      expect(response.status, url).toBe(400);
    }
    expect((await h.request('GET', `/v1/schedules/${randomUUID()}`)).status).toBe(404);
  });

  it("refuses another organization's agent as a 400 on agent_id", async () => {
    const response = await h.request('POST', '/v1/schedules', {
      body: { name: 'x', agent_id: agentId, input: 'hi', cron: '* * * * *' },
      key: other.key,
    });
    expect(response.status).toBe(400);
    expect(json(response).error.param).toBe('agent_id');
  });

  it('shows weekday 09:00 Europe/Berlin fire times across the spring DST change', async () => {
    moveTo(at('2026-03-26T12:00:00Z'));
    const schedule = await create({ cron: '0 9 * * 1-5', timezone: 'Europe/Berlin' });
    expect(schedule).toMatchObject({ object: 'schedule', enabled: true, timezone: 'Europe/Berlin', overlap: 'skip' });
    // 09:00 CET is 08:00 UTC until Sunday 29 March, then 09:00 CEST is 07:00 UTC; no runs on the weekend.
    expect(schedule.next_run_times).toEqual([
      secs('2026-03-27T08:00:00Z'),
      secs('2026-03-30T07:00:00Z'),
      secs('2026-03-31T07:00:00Z'),
      secs('2026-04-01T07:00:00Z'),
      secs('2026-04-02T07:00:00Z'),
    ]);
    expect(schedule.next_run_at).toBe(secs('2026-03-27T08:00:00Z'));
    await h.request('DELETE', `/v1/schedules/${schedule.id}`);
  });

  it('fires a cron tick inside the DST gap once, at the first valid time, and the run completes', async () => {
    moveTo(at('2026-03-28T12:00:00Z'));
    // 02:30 does not exist in Berlin on 29 March 2026: the clock jumps from 02:00 to 03:00 (01:00 UTC).
    const schedule = await create({ cron: '30 2 * * *', timezone: 'Europe/Berlin', input: 'dst run' });
    expect(schedule.next_run_at).toBe(secs('2026-03-29T01:00:00Z'));
    moveTo(at('2026-03-29T00:59:30Z'));
    await scheduler.poke();
    expect(await runs(schedule.id)).toEqual([]);
    moveTo(at('2026-03-29T01:00:05Z'));
    await Promise.all([scheduler.poke(), scheduler.poke()]);
    await scheduler.poke();
    const [run, ...more] = await runs(schedule.id);
    expect(more).toEqual([]);
    expect(run).toMatchObject({
      object: 'schedule.run',
      schedule_id: schedule.id,
      trigger: 'scheduled',
      scheduled_at: secs('2026-03-29T01:00:00Z'),
    });
    const done = await waitRun(schedule.id, run?.id, ['completed']);
    expect(done.result).toBe('dst run');
    expect(done.usage.total_tokens).toBeGreaterThan(0);
    expect(done.conversation_id).toBe(`conv_${done.session_id}`);
    // The turn is an engine run with source schedule and a trace.
    const engineRun = json(await h.request('GET', `/v1/runs/${done.run_id}`));
    expect(engineRun).toMatchObject({ source: 'schedule', session_id: done.session_id, message_id: done.turn_id });
    const trace = json(await h.request('GET', `/v1/runs/${done.run_id}/trace`));
    expect(trace.data.length).toBeGreaterThan(0);
    const after = json(await h.request('GET', `/v1/schedules/${schedule.id}`));
    expect(after.next_run_at).toBe(secs('2026-03-30T00:30:00Z'));
    await h.request('DELETE', `/v1/schedules/${schedule.id}`);
  });

  it('fires an interval schedule on each interval and never twice for one tick', async () => {
    moveTo(at('2026-04-01T00:00:00Z'));
    const schedule = await create({ interval_seconds: 60, input: 'tick' });
    const created = clock.now();
    expect(schedule.next_run_at).toBe(Math.floor((created + MINUTE) / 1000));
    for (let i = 1; i <= 3; i++) {
      moveTo(created + i * MINUTE + 100);
      await Promise.all([scheduler.poke(), scheduler.poke(), scheduler.poke()]);
      const listed = await runs(schedule.id);
      expect(listed).toHaveLength(i);
      await waitRun(schedule.id, listed[0]?.id, TERMINAL_STATUSES);
    }
    const ticks = (await runs(schedule.id)).map((run) => run.scheduled_at).sort();
    expect(ticks).toEqual([1, 2, 3].map((i) => Math.floor((created + i * MINUTE) / 1000)));
    await h.request('DELETE', `/v1/schedules/${schedule.id}`);
  });

  it('skips a tick while the previous run is unfinished (overlap skip)', async () => {
    moveTo(at('2026-04-02T00:00:00Z'));
    const schedule = await create({ interval_seconds: 60, overlap: 'skip', input: 'sleep 60000\nslow' });
    const created = clock.now();
    moveTo(created + MINUTE + 100);
    await scheduler.poke();
    const [first] = await runs(schedule.id);
    await waitRun(schedule.id, first?.id, ['running']);
    moveTo(created + 2 * MINUTE + 100);
    await scheduler.poke();
    const listed = await runs(schedule.id);
    expect(listed.map((run) => run.status)).toEqual(['skipped', 'running']);
    expect(listed[0]?.error).toMatchObject({ code: 'overlap_skipped' });
    await h.request('POST', `/v1/sessions/${first?.session_id}/interrupt`, { body: {} });
    expect((await waitRun(schedule.id, first?.id, TERMINAL_STATUSES)).status).toBe('cancelled');
    await h.request('DELETE', `/v1/schedules/${schedule.id}`);
  });

  it('queues a tick while the previous run is unfinished and starts it after (overlap queue)', async () => {
    moveTo(at('2026-04-03T00:00:00Z'));
    const schedule = await create({ interval_seconds: 60, overlap: 'queue', input: 'sleep 60000\nslow' });
    const created = clock.now();
    moveTo(created + MINUTE + 100);
    await scheduler.poke();
    const [first] = await runs(schedule.id);
    await waitRun(schedule.id, first?.id, ['running']);
    moveTo(created + 2 * MINUTE + 100);
    await scheduler.poke();
    const [second] = await runs(schedule.id);
    expect(second).toMatchObject({ status: 'preparing', session_id: null });
    await h.request('POST', `/v1/sessions/${first?.session_id}/interrupt`, { body: {} });
    await waitRun(schedule.id, first?.id, ['cancelled']);
    await scheduler.poke();
    const started = await waitRun(schedule.id, second?.id, ['running']);
    expect(started.session_id).not.toBe(first?.session_id);
    await h.request('POST', `/v1/sessions/${started.session_id}/interrupt`, { body: {} });
    await waitRun(schedule.id, second?.id, TERMINAL_STATUSES);
    await h.request('DELETE', `/v1/schedules/${schedule.id}`);
  });

  it('after downtime skips missed ticks (catch_up skip) or runs once for them (catch_up run_once)', async () => {
    moveTo(at('2026-04-04T00:10:00Z'));
    const skip = await create({ cron: '0 * * * *', catch_up: 'skip', input: 'skip' });
    const once = await create({ cron: '0 * * * *', catch_up: 'run_once', input: 'once' });
    expect(skip.next_run_at).toBe(secs('2026-04-04T01:00:00Z'));
    // No worker ran from 00:10 until 03:20: the ticks at 01:00, 02:00 and 03:00 were missed.
    moveTo(at('2026-04-04T03:20:00Z'));
    await scheduler.poke();
    expect(await runs(skip.id)).toEqual([]);
    const caughtUp = await runs(once.id);
    expect(caughtUp).toHaveLength(1);
    expect(caughtUp[0]?.scheduled_at).toBe(secs('2026-04-04T03:00:00Z'));
    await waitRun(once.id, caughtUp[0]?.id, ['completed']);
    for (const id of [skip.id, once.id]) {
      expect(json(await h.request('GET', `/v1/schedules/${id}`)).next_run_at).toBe(secs('2026-04-04T04:00:00Z'));
    }
    // A tick only a little late (within the misfire grace) still fires on time.
    moveTo(at('2026-04-04T04:00:30Z'));
    await scheduler.poke();
    expect(await runs(skip.id)).toHaveLength(1);
    await waitRun(skip.id, (await runs(skip.id))[0]?.id, TERMINAL_STATUSES);
    await waitRun(once.id, (await runs(once.id))[0]?.id, TERMINAL_STATUSES);
    await h.request('DELETE', `/v1/schedules/${skip.id}`);
    await h.request('DELETE', `/v1/schedules/${once.id}`);
  });

  it('pauses and resumes with an update', async () => {
    moveTo(at('2026-04-05T00:00:00Z'));
    const schedule = await create({ cron: '*/10 * * * *' });
    const paused = await update(schedule.id, { enabled: false });
    expect(paused).toMatchObject({ enabled: false, next_run_at: null, next_run_times: [] });
    moveTo(at('2026-04-05T01:00:00Z'));
    await scheduler.poke();
    expect(await runs(schedule.id)).toEqual([]);
    const resumed = await update(schedule.id, { enabled: true });
    expect(resumed.next_run_at).toBe(secs('2026-04-05T01:10:00Z'));
    const changed = await update(schedule.id, { interval_seconds: 300 });
    expect(changed).toMatchObject({ cron: null, interval_seconds: 300 });
    expect(changed.next_run_at).toBe(Math.floor((clock.now() + 300_000) / 1000));
    const bad = await h.request('POST', `/v1/schedules/${schedule.id}`, { body: { timezone: 'Nowhere/City' } });
    expect(bad.status).toBe(400);
    expect(json(bad).error.param).toBe('timezone');
    await h.request('DELETE', `/v1/schedules/${schedule.id}`);
  });

  it('runs a paused schedule manually (202), replaying an Idempotency-Key', async () => {
    const schedule = await create({ cron: '0 0 1 1 *', enabled: false, input: 'manual' });
    const headers = { 'idempotency-key': randomUUID() };
    const first = await h.request('POST', `/v1/schedules/${schedule.id}/run`, { body: {}, headers });
    expect(first.status, first.text).toBe(202);
    const run = json(first);
    expect(run).toMatchObject({ object: 'schedule.run', trigger: 'manual', scheduled_at: null });
    const again = await h.request('POST', `/v1/schedules/${schedule.id}/run`, { body: {}, headers });
    expect(again.status).toBe(202);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(json(again).id).toBe(run.id);
    const done = await waitRun(schedule.id, run.id, ['completed']);
    expect(done.result).toBe('manual');
    expect(await runs(schedule.id)).toHaveLength(1);
    // Without a body at all as well.
    const bare = await h.request('POST', `/v1/schedules/${schedule.id}/run`);
    expect(bare.status, bare.text).toBe(202);
    await waitRun(schedule.id, json(bare).id, TERMINAL_STATUSES);
  });

  it('runs every time in a given session when session_id is set', async () => {
    const sessionId = await flow.createSession(agentId);
    const schedule = await create({ cron: '0 0 1 1 *', session_id: sessionId, input: 'same session' });
    for (let i = 0; i < 2; i++) {
      const run = json(await h.request('POST', `/v1/schedules/${schedule.id}/run`, { body: {} }));
      const done = await waitRun(schedule.id, run.id, ['completed']);
      expect(done.session_id).toBe(sessionId);
    }
    const messages = json(await h.request('GET', `/v1/sessions/${sessionId}/messages`));
    expect(messages.data).toHaveLength(2);
  });

  it('runs in a Conversation created without an agent, which takes the schedule agent', async () => {
    const conversation = json(await h.request('POST', '/v1/conversations', { body: {} }));
    const sessionId = String(conversation.id).slice('conv_'.length);
    const schedule = await create({ cron: '0 0 1 1 *', session_id: sessionId, input: 'bound' });
    const run = json(await h.request('POST', `/v1/schedules/${schedule.id}/run`, { body: {} }));
    const done = await waitRun(schedule.id, run.id, TERMINAL_STATUSES);
    expect(done).toMatchObject({ status: 'completed', session_id: sessionId, result: 'bound' });
    expect(json(await h.request('GET', `/v1/sessions/${sessionId}`)).session.agentId).toBe(agentId);
  });

  it('cancels a run past its timeout; it fails with schedule_run_timeout and retries do not extend it', async () => {
    moveTo(at('2026-04-06T00:00:00Z'));
    const schedule = await create({ cron: '0 0 1 1 *', timeout_seconds: 30, input: 'sleep 600000\nslow' });
    const run = json(await h.request('POST', `/v1/schedules/${schedule.id}/run`, { body: {} }));
    const running = await waitRun(schedule.id, run.id, ['running']);
    expect(running.deadline_at).toBe(running.started_at + 30);
    moveTo(clock.now() + 10_000);
    await scheduler.poke();
    expect(json(await h.request('GET', `/v1/schedules/${schedule.id}/runs/${run.id}`)).status).toBe('running');
    moveTo(clock.now() + 25_000);
    await scheduler.poke();
    const failed = await waitRun(schedule.id, run.id, ['failed', 'completed', 'cancelled']);
    expect(failed.status).toBe('failed');
    expect(failed.error).toMatchObject({ code: 'schedule_run_timeout' });
    expect(failed.deadline_at).toBe(running.deadline_at);
    const message = await flow.getMessage(failed.session_id, failed.turn_id);
    expect(message.status).toBe('cancelled');
  });

  it('fails a run that waits for a client function result past its deadline, showing the pending call until then', async () => {
    const schedule = await create({
      cron: '0 0 1 1 *',
      agent_id: toolAgentId,
      timeout_seconds: 60,
      input: 'call get_weather {"city":"Paris"}',
    });
    const run = json(await h.request('POST', `/v1/schedules/${schedule.id}/run`, { body: {} }));
    const waiting = await waitUntil(
      async () => {
        const view = json(await h.request('GET', `/v1/schedules/${schedule.id}/runs/${run.id}`));
        return view.required_actions.length > 0 ? view : null;
      },
      { what: 'the run to wait for a client result' },
    );
    expect(waiting.status).toBe('running');
    expect(waiting.required_actions[0]).toMatchObject({ type: 'function_call', name: 'get_weather' });
    moveTo(clock.now() + 61_000);
    await scheduler.poke();
    const failed = await waitRun(schedule.id, run.id, ['failed', 'completed', 'cancelled']);
    expect(failed).toMatchObject({ status: 'failed', error: { code: 'schedule_run_timeout' }, required_actions: [] });
  });

  it('keeps schedules and runs of one organization invisible to another (404)', async () => {
    const schedule = await create({ cron: '0 0 1 1 *', enabled: false });
    const run = json(await h.request('POST', `/v1/schedules/${schedule.id}/run`, { body: {} }));
    await waitRun(schedule.id, run.id, TERMINAL_STATUSES);
    const key = other.key;
    const attempts = [
      h.request('GET', `/v1/schedules/${schedule.id}`, { key }),
      h.request('POST', `/v1/schedules/${schedule.id}`, { body: { name: 'mine' }, key }),
      h.request('POST', `/v1/schedules/${schedule.id}/run`, { body: {}, key }),
      h.request('GET', `/v1/schedules/${schedule.id}/runs`, { key }),
      h.request('GET', `/v1/schedules/${schedule.id}/runs/${run.id}`, { key }),
      h.request('DELETE', `/v1/schedules/${schedule.id}`, { key }),
    ];
    for (const response of await Promise.all(attempts)) expect(response.status, response.text).toBe(404);
    expect(json(await h.request('GET', '/v1/schedules', { key })).data).toEqual([]);
    expect(json(await h.request('GET', `/v1/schedules/${schedule.id}`)).name).toBe('nightly');
    // A run id under another schedule of the same organization is not found either.
    const second = await create({ cron: '0 0 1 1 *', enabled: false });
    expect((await h.request('GET', `/v1/schedules/${second.id}/runs/${run.id}`)).status).toBe(404);
  });

  it('checks scopes: reads need tasks:read, writes tasks:write', async () => {
    const readOnly = await h.deps.orgs.createKey((await h.deps.auth.authenticate(h.key, Date.now()))?.orgId ?? '', [
      'tasks:read',
    ]);
    expect((await h.request('GET', '/v1/schedules', { key: readOnly })).status).toBe(200);
    const write = await h.request('POST', '/v1/schedules', {
      body: { name: 'x', agent_id: agentId, input: 'x', cron: '* * * * *' },
      key: readOnly,
    });
    expect(write.status).toBe(403);
  });

  it('lists schedules and their next runs on the CLI', async () => {
    const schedule = await create({ cron: '0 9 * * 1-5', timezone: 'Europe/Berlin', name: 'weekday summary' });
    const { config } = h.deps;
    const env: Record<string, string> = {
      AGENTRY_DATA_DIR: config.dataDir,
      ...(config.databaseUrl === null ? {} : { DATABASE_URL: config.databaseUrl }),
      ...(config.databaseSchema === null ? {} : { AGENTRY_DATABASE_SCHEMA: config.databaseSchema }),
    };
    const listed = runCli(['schedules', 'list', '--org', 'default'], env);
    expect(listed.status, listed.stderr).toBe(0);
    const line = listed.stdout.split('\n').find((row) => row.startsWith(schedule.id));
    expect(line).toContain('weekday summary');
    expect(line).toContain('0 9 * * 1-5 (Europe/Berlin)');
    const first = new Date(schedule.next_run_times[0] * 1000).toISOString().slice(0, 16).replace('T', ' ');
    expect(line).toContain(`${first} UTC`);
    expect(runCli(['schedules', 'list'], env).status).not.toBe(0);
    await h.request('DELETE', `/v1/schedules/${schedule.id}`);
  });

  it('lists schedules newest first with a cursor', async () => {
    const made: string[] = [];
    for (let i = 0; i < 5; i++) made.push((await create({ cron: '0 0 1 1 *', enabled: false, name: `page ${i}` })).id);
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const query: string = cursor === null ? '' : `&cursor=${cursor}`;
      const page = json(await h.request('GET', `/v1/schedules?limit=2${query}`));
      expect(page.data.length).toBeLessThanOrEqual(2);
      seen.push(...page.data.map((schedule: Json) => schedule.id));
      cursor = page.has_more ? page.next_cursor : null;
    } while (cursor !== null);
    expect(seen.slice(0, 5)).toEqual([...made].reverse());
    expect(new Set(seen).size).toBe(seen.length);
    expect((await h.request('GET', '/v1/schedules?cursor=nope')).status).toBe(400);
  });

  it('leaves a tick whose claim died before commit to the next worker, and a claimed run that never started to any', async () => {
    moveTo(at('2026-04-20T00:00:00Z'));
    const schedule = await create({ interval_seconds: 60, input: 'after a crash' });
    moveTo(clock.now() + MINUTE + 100);
    const db = h.deps.storage.db;
    const seen = await db.selectFrom('schedules').selectAll().where('id', '=', schedule.id).executeTakeFirstOrThrow();
    // A process killed mid-claim: its transaction never commits (the database rolls it back the same way).
    await expect(
      db.transaction().execute(async (trx) => {
        const claimed = await claimTicks(trx, h.deps.webhooks.subscriptions, seen, clock.now(), MINUTE, 'doomed');
        expect(claimed?.runs).toHaveLength(1);
        throw new Error('killed before commit');
      }),
    ).rejects.toThrow('killed before commit');
    expect(await runs(schedule.id)).toEqual([]);
    // A process that claims the tick and dies before starting its run.
    expect(await h.deps.scheduleRunner.fireDue(MINUTE)).toContain(schedule.id);
    const [claimed] = await runs(schedule.id);
    expect(claimed).toMatchObject({ status: 'preparing', session_id: null });
    // Any other worker starts it; the tick is not claimed again.
    await Promise.all([scheduler.poke(), scheduler.poke()]);
    const done = await waitRun(schedule.id, claimed?.id, ['completed']);
    expect(done.result).toBe('after a crash');
    expect(await runs(schedule.id)).toHaveLength(1);
    await h.request('DELETE', `/v1/schedules/${schedule.id}`);
  });

  it('refuses a claim from a stale read, and never fires a tick twice even if next_run_at goes back to it', async () => {
    moveTo(at('2026-04-25T00:00:00Z'));
    const schedule = await create({ interval_seconds: 60, input: 'once' });
    moveTo(clock.now() + MINUTE + 100);
    const db = h.deps.storage.db;
    const stale = await db.selectFrom('schedules').selectAll().where('id', '=', schedule.id).executeTakeFirstOrThrow();
    await scheduler.poke();
    const [run] = await runs(schedule.id);
    // A worker that read the schedule before that claim: its claim changes nothing.
    expect(
      await db
        .transaction()
        .execute((trx) => claimTicks(trx, h.deps.webhooks.subscriptions, stale, clock.now(), MINUTE, 'late')),
    ).toBeNull();
    // Even with next_run_at put back on the claimed tick, the tick keeps its one run and the schedule moves on.
    await db.updateTable('schedules').set({ next_run_at: stale.next_run_at }).where('id', '=', schedule.id).execute();
    await scheduler.poke();
    expect((await runs(schedule.id)).map((listed) => listed.id)).toEqual([run?.id]);
    const after = json(await h.request('GET', `/v1/schedules/${schedule.id}`));
    expect(after.next_run_at * 1000).toBeGreaterThan(Number(stale.next_run_at));
    await waitRun(schedule.id, run?.id, TERMINAL_STATUSES);
    await h.request('DELETE', `/v1/schedules/${schedule.id}`);
  });

  it('fires each of 100 ticks exactly once with two schedulers racing on one database', async () => {
    moveTo(at('2026-05-01T00:00:00Z'));
    // On Postgres the second worker has its own deps and connection pool, as another process would; SQLite is one
    // process's file, so there the embedded process runs two schedulers over its one connection.
    const secondDeps =
      dialect === 'postgres' ? await buildDeps(h.deps.config, h.deps.logger, clock, { detectSandbox: false }) : null;
    const second = buildScheduler(secondDeps ?? h.deps);
    const schedule = await create({ interval_seconds: 10, overlap: 'queue', input: 'race' });
    const created = clock.now();
    for (let i = 1; i <= 100; i++) {
      moveTo(created + i * 10_000 + 10);
      await Promise.all([scheduler.poke(), second.poke()]);
    }
    const all: Json[] = [];
    let cursor: string | null = null;
    do {
      const query: string = cursor === null ? '' : `&cursor=${cursor}`;
      const page = json(await h.request('GET', `/v1/schedules/${schedule.id}/runs?limit=100${query}`));
      all.push(...page.data);
      cursor = page.has_more ? page.next_cursor : null;
    } while (cursor !== null);
    const ticks = all.map((run) => run.scheduled_at).sort((a, b) => a - b);
    expect(ticks).toEqual(Array.from({ length: 100 }, (_, i) => Math.floor((created + (i + 1) * 10_000) / 1000)));
    await second.stop();
    await update(schedule.id, { enabled: false });
    if (secondDeps !== null) {
      await secondDeps.close();
      await secondDeps.storage.close();
    }
  });
});
