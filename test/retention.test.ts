/**
 * Data retention (docs/retention.md), once per dialect, over HTTP and the real sweeper: the organization's
 * settings through GET/PATCH /v1/organization/retention (defaults from the environment, 400 naming the field on
 * bad input, `accounts:write`), and a sweep that deletes what is older than the window (sessions with their
 * messages, items and events; ended runs with their spans; session events but each session's newest; files, rows
 * and bytes; webhook attempts and ended redeliveries) from every route, the database and the files folder, keeps
 * what is newer, keeps a session whose turn is running, leaves other organizations alone, and works in batches.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deleteExpiredSessions } from '../src/domain/turns/retention.ts';
import { flows, httpClient, type Json, waitUntil } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json, testEnvironment, testKey } from './helpers/harness.ts';
import { type ServerProcess, startServerProcess, startsTimeout } from './helpers/server-process.ts';

const DAY_MS = 86_400_000;
const BATCH = 5;

describe.each(dialects())('data retention (%s)', (dialect) => {
  let h: Harness;
  const flow = flows(() => h);
  let orgId: string;
  let agentId: string;
  let base: string;

  beforeAll(async () => {
    h = await createHarness(dialect, {
      AGENTRY_RETENTION_BATCH: String(BATCH),
      AGENTRY_RETENTION_RUNS_DAYS: '3650',
      AGENTRY_METRICS: 'true',
    });
    base = await h.listen();
    const principal = await h.deps.auth.authenticate(h.key, Date.now());
    if (principal === null) throw new Error('harness key does not authenticate');
    orgId = principal.orgId;
    agentId = await flow.createAgent();
  });
  afterAll(() => h.close());

  const db = () => h.deps.storage.db;
  const ago = (days: number) => Date.now() - days * DAY_MS;
  const setRetention = (body: Json, key?: string) =>
    h.request('PATCH', '/v1/organization/retention', key === undefined ? { body } : { body, key });

  async function upload(name: string): Promise<Json> {
    const body = new FormData();
    body.append('purpose', 'user_data');
    body.append('file', new Blob(['some bytes']), name);
    const response = await fetch(`${base}/v1/files`, {
      method: 'POST',
      headers: { authorization: `Bearer ${h.key}` },
      body,
    });
    expect(response.status).toBe(201);
    return (await response.json()) as Json;
  }

  async function backdateSession(sessionId: string, days: number): Promise<void> {
    await db()
      .updateTable('sessions')
      .set({ updated_at: ago(days) })
      .where('id', '=', sessionId)
      .execute();
  }

  const count = async (table: 'sessions' | 'messages' | 'items' | 'session_events', sessionId: string) =>
    Number(
      (
        await db()
          .selectFrom(table)
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .where(table === 'sessions' ? 'id' : 'session_id', '=', sessionId)
          .executeTakeFirstOrThrow()
      ).n,
    );

  it('answers the settings with the environment defaults, and changes them', async () => {
    const initial = await h.request('GET', '/v1/organization/retention');
    expect(initial.status, initial.text).toBe(200);
    expect(json(initial)).toEqual({
      object: 'organization.retention',
      sessions_days: null,
      runs_days: 3650,
      session_events_days: null,
      files_days: null,
      webhooks_days: null,
      organization: {
        sessions_days: null,
        runs_days: null,
        session_events_days: null,
        files_days: null,
        webhooks_days: null,
      },
      defaults: {
        sessions_days: null,
        runs_days: 3650,
        session_events_days: null,
        files_days: null,
        webhooks_days: null,
      },
    });
    const changed = await setRetention({ sessions_days: 90, runs_days: 0 });
    expect(changed.status, changed.text).toBe(200);
    expect(json(changed)).toMatchObject({
      sessions_days: 90,
      runs_days: null,
      organization: { sessions_days: 90, runs_days: 0, files_days: null },
    });
    // Kinds not given stay; null goes back to the default.
    const reset = await setRetention({ runs_days: null });
    expect(json(reset)).toMatchObject({ sessions_days: 90, runs_days: 3650, organization: { runs_days: null } });
    expect(json(await h.request('GET', '/v1/organization/retention')).sessions_days).toBe(90);
  });

  it('refuses bad input with a 400 naming the field, and keys without accounts:write', async () => {
    const cases: [Json, string][] = [
      [{ sessions_days: -1 }, 'sessions_days'],
      [{ runs_days: 'ten' }, 'runs_days'],
      [{ files_days: 1.5 }, 'files_days'],
      [{ webhooks_days: 36_501 }, 'webhooks_days'],
      [{ session_events_days: true }, 'session_events_days'],
      [{ forever: 1 }, 'forever'],
    ];
    for (const [body, field] of cases) {
      const response = await setRetention(body);
      expect(response.status, `${JSON.stringify(body)}: ${response.text}`).toBe(400);
      expect(JSON.stringify(json(response).error), JSON.stringify(body)).toContain(field);
    }
    const notJson = await h.request('PATCH', '/v1/organization/retention', {
      rawBody: '[1]',
      headers: { 'content-type': 'application/json' },
    });
    expect(notJson.status).toBe(400);
    const reader = await h.deps.orgs.createKey(orgId, ['tasks:write', 'files:write']);
    expect((await h.request('GET', '/v1/organization/retention', { key: reader })).status).toBe(403);
    expect((await setRetention({ sessions_days: 1 }, reader)).status).toBe(403);
  });

  it('deletes what is past its retention from the routes, the database and the disk, and keeps the rest', async () => {
    const other = await h.createOrg(`other-${dialect}`);
    const otherAgent = await flow.createAgent({}, other.key);
    const otherSession = await flow.createSession(otherAgent, other.key);
    await backdateSession(otherSession, 400);

    const old = await flow.turn(agentId, 'an old conversation');
    const recent = await flow.turn(agentId, 'a recent conversation');
    const runOf = async (sessionId: string) =>
      (await db().selectFrom('runs').select('id').where('session_id', '=', sessionId).executeTakeFirstOrThrow()).id;
    const oldRun = await runOf(old.sessionId);
    const recentRun = await runOf(recent.sessionId);
    // A turn still running in a session nobody has changed for long: kept.
    const busySession = await flow.createSession(agentId);
    const busy = await flow.submit(busySession, 'sleep 60000\nawake');
    await flow.waitForMessage(busySession, busy.id, ['running']);
    await backdateSession(busySession, 40);

    await backdateSession(old.sessionId, 40);
    // A stored Response in its conversation, as old.
    const response = await h.request('POST', '/v1/responses', { body: { model: agentId, input: 'an old question' } });
    expect(response.status, response.text).toBe(200);
    const responseId = json(response).id as string;
    const responseSession = (
      await db()
        .selectFrom('messages')
        .select('session_id')
        .where('id', '=', responseId.slice('resp_'.length))
        .executeTakeFirstOrThrow()
    ).session_id;
    await backdateSession(responseSession, 40);
    await db()
      .updateTable('runs')
      .set({ created_at: ago(40) })
      .where('id', '=', oldRun)
      .execute();
    // The recent session's events are all old: all but its newest go.
    await db()
      .updateTable('session_events')
      .set({ created_at: ago(40) })
      .where('session_id', '=', recent.sessionId)
      .execute();
    const recentEvents = await count('session_events', recent.sessionId);
    expect(recentEvents).toBeGreaterThan(1);

    const oldFile = await upload('old.txt');
    const newFile = await upload('new.txt');
    await db()
      .updateTable('files')
      .set({ created_at: ago(40) })
      .where('id', '=', oldFile.id)
      .execute();
    const fileOnDisk = (id: string) => join(h.deps.config.dataDir, 'files', orgId, id);
    expect(existsSync(fileOnDisk(oldFile.id))).toBe(true);

    // Webhook history: an endpoint, an event, its automatic delivery and a manual one, attempts old and new (20
    // days: within AGENTRY_WEBHOOK_HISTORY_RETENTION_MS, past the organization's 10 days).
    const now = Date.now();
    await db()
      .insertInto('webhook_endpoints')
      .values({
        id: 'we_retention',
        org_id: orgId,
        name: 'hook',
        url: 'https://hooks.example.com/in',
        event_types: '["turn.completed"]',
        sealed_secret: 'sealed',
        secret_hint: 'whsec_…abcd',
        created_at: now,
        updated_at: now,
        deleted_at: null,
      })
      .execute();
    await db()
      .insertInto('webhook_events')
      .values({
        id: 'evt_retention',
        org_id: orgId,
        type: 'turn.completed',
        data: '{}',
        created_at: ago(20),
        dispatched_at: ago(20),
      })
      .execute();
    const delivery = (id: string, kind: 'automatic' | 'manual', replayKey: string) => ({
      id,
      org_id: orgId,
      endpoint_id: 'we_retention',
      event_id: 'evt_retention',
      webhook_id: 'msg_retention',
      kind,
      replay_key: replayKey,
      status: 'delivered' as const,
      attempts: 1,
      status_code: 200,
      error: null,
      created_at: ago(20),
      updated_at: ago(20),
      next_attempt_at: null,
      deadline_at: ago(19),
      last_attempt_at: ago(20),
      completed_at: ago(20),
    });
    await db()
      .insertInto('webhook_deliveries')
      .values([delivery('wd_auto', 'automatic', ''), delivery('wd_manual', 'manual', 'again')])
      .execute();
    const attempt = (id: string, deliveryId: string, at: number) => ({
      id,
      delivery_id: deliveryId,
      org_id: orgId,
      attempted_at: at,
      webhook_timestamp: Math.floor(at / 1000),
      url: 'https://hooks.example.com/in',
      status_code: 200,
      error: null,
      duration_ms: 5,
    });
    await db()
      .insertInto('webhook_attempts')
      .values([attempt('wa_old', 'wd_auto', ago(20)), attempt('wa_new', 'wd_auto', now)])
      .execute();
    const manualDelivery = `/v1/webhook_endpoints/we_retention/events/evt_retention/delivery?replay_key=again`;
    expect((await h.request('GET', manualDelivery)).status).toBe(200);

    const set = await setRetention({
      sessions_days: 30,
      runs_days: 30,
      session_events_days: 30,
      files_days: 30,
      webhooks_days: 10,
    });
    expect(set.status, set.text).toBe(200);
    const counts = await h.deps.retention.sweep();
    expect(counts.sessions).toBe(2);
    expect(counts.runs).toBe(1);
    expect(counts.files).toBe(1);
    expect(counts.sessionEvents).toBe(recentEvents - 1);
    expect(counts.webhooks).toBeGreaterThanOrEqual(2);
    const metrics = (await h.deps.metrics.scrape()).body;
    expect(metrics).toMatch(/^agentry_retention_deleted_total\{kind="sessions"\} 2$/m);
    expect(metrics).toMatch(/^agentry_retention_deleted_total\{kind="files"\} 1$/m);

    // Gone from the routes…
    expect((await h.request('GET', `/v1/sessions/${old.sessionId}`)).status).toBe(404);
    expect((await h.request('GET', `/v1/sessions/${old.sessionId}/messages`)).status).toBe(404);
    expect((await h.request('GET', `/v1/sessions/${old.sessionId}/messages/${old.accepted.id}`)).status).toBe(404);
    expect((await h.request('GET', `/v1/runs/${oldRun}`)).status).toBe(404);
    expect((await h.request('GET', `/v1/runs/${oldRun}/trace`)).status).toBe(404);
    expect((await h.request('GET', `/v1/files/${oldFile.id}`)).status).toBe(404);
    expect((await h.request('GET', `/v1/files/${oldFile.id}/content`)).status).toBe(404);
    expect((await h.request('GET', manualDelivery)).status).toBe(404);
    expect((await h.request('GET', `/v1/responses/${responseId}`)).status).toBe(404);
    expect((await h.request('GET', `/v1/responses/${responseId}/input_items`)).status).toBe(404);
    expect((await h.request('GET', `/v1/conversations/conv_${responseSession}`)).status).toBe(404);
    const listed = json(await h.request('GET', '/v1/sessions?limit=50')).data as Json[];
    expect(listed.map((session) => session.id)).not.toContain(old.sessionId);
    const runs = json(await h.request('GET', '/v1/runs?limit=50')).data as Json[];
    expect(runs.map((run) => run.id)).not.toContain(oldRun);
    // …from the database…
    for (const table of ['sessions', 'messages', 'items', 'session_events'] as const) {
      expect(await count(table, old.sessionId), table).toBe(0);
    }
    expect(await db().selectFrom('runs').select('id').where('id', '=', oldRun).execute()).toEqual([]);
    expect(await db().selectFrom('spans').select('id').where('run_id', '=', oldRun).execute()).toEqual([]);
    expect(await db().selectFrom('files').select('id').where('id', '=', oldFile.id).execute()).toEqual([]);
    const attempts = await db().selectFrom('webhook_attempts').select('id').where('org_id', '=', orgId).execute();
    expect(attempts.map((row) => row.id)).toEqual(['wa_new']);
    // …and from the disk.
    expect(existsSync(fileOnDisk(oldFile.id))).toBe(false);

    // What is newer stays; the recent session keeps its newest event; the running turn's session stays.
    expect((await h.request('GET', `/v1/sessions/${recent.sessionId}`)).status).toBe(200);
    expect((await h.request('GET', `/v1/sessions/${recent.sessionId}/messages/${recent.accepted.id}`)).status).toBe(
      200,
    );
    expect((await h.request('GET', `/v1/runs/${recentRun}`)).status).toBe(200);
    expect(await count('session_events', recent.sessionId)).toBe(1);
    expect((await h.request('GET', `/v1/files/${newFile.id}/content`)).status).toBe(200);
    expect(existsSync(fileOnDisk(newFile.id))).toBe(true);
    expect((await h.request('GET', `/v1/sessions/${busySession}`)).status).toBe(200);
    expect((await flow.getMessage(busySession, busy.id)).status).toBe('running');
    // The automatic delivery stays as the event's assignment to the endpoint (the event can be redelivered).
    expect(await db().selectFrom('webhook_deliveries').select('id').where('id', '=', 'wd_auto').execute()).toHaveLength(
      1,
    );
    // Another organization (no retention set, defaults keep forever) keeps its old data.
    expect((await h.request('GET', `/v1/sessions/${otherSession}`, { key: other.key })).status).toBe(200);

    // Once the running turn is over, its session goes too at the next sweep.
    expect((await h.request('POST', `/v1/sessions/${busySession}/interrupt`, { body: {} })).status).toBeLessThan(300);
    await flow.waitForMessage(busySession, busy.id, ['cancelled']);
    await waitUntil(
      async () => {
        const row = await db()
          .selectFrom('sessions')
          .select(['work_pending', 'lease_owner'])
          .where('id', '=', busySession)
          .executeTakeFirst();
        return row?.work_pending === 0 ? true : null;
      },
      { what: 'the interrupted session to have no work pending' },
    );
    await backdateSession(busySession, 40);
    await waitUntil(
      async () => {
        await h.deps.retention.sweep();
        return (await h.request('GET', `/v1/sessions/${busySession}`)).status === 404 ? true : null;
      },
      { what: 'the session of the ended turn to be swept' },
    );
  });

  it('deletes in batches: one call deletes at most a batch, a sweep deletes them all', async () => {
    const created: string[] = [];
    for (let index = 0; index < BATCH * 2 + 3; index++) created.push(await flow.createSession(agentId));
    for (const id of created) await backdateSession(id, 100);
    await setRetention({ sessions_days: 30 });
    const one = await deleteExpiredSessions(db(), { orgId, before: ago(30), now: Date.now(), limit: BATCH });
    expect(one).toBe(BATCH);
    const counts = await h.deps.retention.sweep();
    expect(counts.sessions).toBe(BATCH + 3);
    for (const id of created) expect((await h.request('GET', `/v1/sessions/${id}`)).status).toBe(404);
  });
});

describe('the sweeper of a server process', () => {
  let server: ServerProcess;
  const environment = testEnvironment('sqlite');
  const key = testKey();

  beforeAll(async () => {
    server = await startServerProcess({
      ...environment.env,
      AGENTRY_BOOTSTRAP_KEY: key,
      AGENTRY_RETENTION_SESSIONS_DAYS: '30',
      AGENTRY_RETENTION_SWEEP_MS: '1000',
    });
  }, startsTimeout(1));
  afterAll(async () => {
    await server.stop('SIGKILL');
    await environment.cleanup();
  });

  it('deletes by the environment default, every AGENTRY_RETENTION_SWEEP_MS, and logs each sweep', async () => {
    const call = httpClient(server.url, key);
    const agent = await call('POST', '/v1/agents', { name: 'swept' });
    expect(agent.status).toBe(201);
    const created = await Promise.all([0, 1].map(() => call('POST', '/v1/sessions', { agentId: agent.body.agent.id })));
    const [old, recent] = created.map((response) => response.body.session.id as string);
    const file = new DatabaseSync(join(environment.env.AGENTRY_DATA_DIR ?? '', 'agentry.db'));
    try {
      file.prepare('update sessions set updated_at = ? where id = ?').run(Date.now() - 31 * DAY_MS, old ?? '');
    } finally {
      file.close();
    }
    await waitUntil(async () => ((await call('GET', `/v1/sessions/${old}`)).status === 404 ? true : null), {
      what: 'the server to sweep the old session',
    });
    expect((await call('GET', `/v1/sessions/${recent}`)).status).toBe(200);
    await waitUntil(async () => (server.output().includes('retention sweep deleted 1 rows') ? true : null), {
      what: 'the log line of the sweep',
    });
  });
});
