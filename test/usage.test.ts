/**
 * Usage reports (`GET /v1/usage`, docs/usage.md) over HTTP, once per dialect: turns submitted through the
 * Sessions API, Responses and Chat Completions with two keys and by a schedule (no key), on two UTC days (a test clock), with and
 * without end users; each grouping's sums checked against the runs themselves; time range edges; paging through
 * every group; CSV (RFC 4180 quoting, formula injection, a report longer than one internal page); organization
 * isolation; bad input answered 400 naming the field; the time range read through the index.
 */
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Scope } from '../src/domain/auth/scopes.ts';
import { csvField, csvRecord } from '../src/lib/csv.ts';
import { flows, type Json, waitUntil } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';
import { testClock } from './helpers/test-clock.ts';

/** 23:00 UTC: two hours later it is the next day. */
const DAY1 = Date.UTC(2031, 0, 10, 23, 0, 0);
const DAY2_START = Date.UTC(2031, 0, 11) / 1000;
const FORMULA_USER = '=HYPERLINK("https://evil.example","click"),x';
const SUMS = ['turns', 'input_tokens', 'cached_input_tokens', 'output_tokens', 'total_tokens', 'cost_usd'] as const;
const DIMENSIONS = ['day', 'agent', 'api_key', 'model', 'source', 'end_user'] as const;
type Dimension = (typeof DIMENSIONS)[number];

/** What the test knows of a run: the Run view, and the key and end user its turn was submitted with. */
interface KnownRun {
  run: Json;
  keyId: string | null;
  endUser: string | null;
}

const dayOf = (seconds: number) => new Date(seconds * 1000).toISOString().slice(0, 10);

function keyValue(known: KnownRun, dimension: Dimension): string | null {
  if (dimension === 'day') return dayOf(known.run.created_at);
  if (dimension === 'agent') return known.run.agent_id;
  if (dimension === 'api_key') return known.keyId;
  if (dimension === 'model') return known.run.model;
  if (dimension === 'source') return known.run.source;
  return known.endUser;
}

const FIELD: Record<Dimension, string> = {
  day: 'day',
  agent: 'agent_id',
  api_key: 'api_key_id',
  model: 'model',
  source: 'source',
  end_user: 'end_user',
};

/** The sums per group the runs add up to, keyed by the JSON of the group's key values. */
function expectedGroups(runs: KnownRun[], dimensions: readonly Dimension[]): Map<string, Record<string, number>> {
  const groups = new Map<string, Record<string, number>>();
  for (const known of runs) {
    const key = JSON.stringify(dimensions.map((dimension) => keyValue(known, dimension)));
    const sums = groups.get(key) ?? { turns: 0, input_tokens: 0, cached_input_tokens: 0, output_tokens: 0 };
    const usage = known.run.usage;
    sums.turns = (sums.turns ?? 0) + 1;
    sums.input_tokens = (sums.input_tokens ?? 0) + usage.input_tokens;
    sums.cached_input_tokens = (sums.cached_input_tokens ?? 0) + (usage.input_tokens_details?.cached_tokens ?? 0);
    sums.output_tokens = (sums.output_tokens ?? 0) + usage.output_tokens;
    sums.total_tokens = (sums.input_tokens ?? 0) + (sums.output_tokens ?? 0);
    sums.cost_micros = (sums.cost_micros ?? 0) + Math.round(known.run.cost_usd * 1_000_000);
    groups.set(key, sums);
  }
  return groups;
}

/** The report's groups in the same shape. */
function reportedGroups(data: Json[], dimensions: readonly Dimension[]): Map<string, Record<string, number>> {
  return new Map(
    data.map((group) => [
      JSON.stringify(dimensions.map((dimension) => group[FIELD[dimension]])),
      {
        turns: group.turns,
        input_tokens: group.input_tokens,
        cached_input_tokens: group.cached_input_tokens,
        output_tokens: group.output_tokens,
        total_tokens: group.total_tokens,
        cost_micros: Math.round(group.cost_usd * 1_000_000),
      },
    ]),
  );
}

/** RFC 4180 records (quoted fields with doubled quotes, CRLF), for checking what the server wrote. */
function parseCsv(text: string): string[][] {
  const records: string[][] = [];
  let field = '';
  let record: string[] = [];
  let quoted = false;
  for (let i = 0; i < text.length; i += 1) {
    const c = text[i];
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') {
        field += '"';
        i += 1;
      } else if (c === '"') quoted = false;
      else field += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') {
      record.push(field);
      field = '';
    } else if (c === '\r' && text[i + 1] === '\n') {
      record.push(field);
      records.push(record);
      record = [];
      field = '';
      i += 1;
    } else field += c;
  }
  expect(field, 'the CSV ends with CRLF').toBe('');
  return records;
}

describe('CSV fields', () => {
  it('quotes per RFC 4180 and defuses formulas', () => {
    expect(csvField('plain')).toBe('plain');
    expect(csvField('a,b')).toBe('"a,b"');
    expect(csvField('say "hi"')).toBe('"say ""hi"""');
    expect(csvField('two\nlines')).toBe('"two\nlines"');
    expect(csvField('=1+2')).toBe("'=1+2");
    expect(csvField('+1')).toBe("'+1");
    expect(csvField('-1')).toBe("'-1");
    expect(csvField('@SUM(A1)')).toBe("'@SUM(A1)");
    expect(csvField('\tcmd')).toBe("'\tcmd");
    expect(csvField('=a,"b"')).toBe(`"'=a,""b"""`);
    expect(csvField(-1.5)).toBe('-1.5');
    expect(csvField(null)).toBe('');
    expect(csvRecord(['a', 1, null])).toBe('a,1,\r\n');
  });
});

describe.each(dialects())('usage (%s)', (dialect) => {
  let h: Harness;
  const clock = testClock();
  const flow = flows(() => h);
  let adminKeyId: string;
  let chatKey: string;
  let chatKeyId: string;
  let alpha: string;
  let beta: string;
  const known: KnownRun[] = [];

  const usage = async (query: string, key?: string) => {
    const response = await h.request('GET', `/v1/usage${query}`, key === undefined ? {} : { key });
    expect(response.status, response.text).toBe(200);
    return json(response);
  };

  async function keyIdOf(key: string): Promise<string> {
    const response = await h.request('GET', '/v1/organization', { key });
    expect(response.status, response.text).toBe(200);
    return json(response).api_key.id;
  }

  /** A session turn (Sessions API) with this key and end user; returns the session id once the turn ended. */
  async function sessionTurn(agentId: string, key: string, endUser: string | null, text: string): Promise<string> {
    const created = await h.request('POST', '/v1/sessions', {
      body: { agentId, ...(endUser === null ? {} : { endUser }) },
      key,
    });
    expect(created.status, created.text).toBe(201);
    const sessionId = json(created).session.id;
    const accepted = await flow.submit(sessionId, text, { key });
    await flow.waitForMessage(sessionId, accepted.id, undefined, key);
    return sessionId;
  }

  async function allRuns(key?: string): Promise<Json[]> {
    const response = await h.request('GET', '/v1/runs?limit=50', key === undefined ? {} : { key });
    expect(response.status, response.text).toBe(200);
    expect(json(response).has_more).toBe(false);
    return json(response).data;
  }

  beforeAll(async () => {
    clock.set(DAY1);
    h = await createHarness(dialect, {}, { clock });
    const org = json(await h.request('GET', '/v1/organization'));
    adminKeyId = org.api_key.id;
    const scopes: Scope[] = ['sessions:read', 'sessions:write', 'agents:read'];
    chatKey = await h.deps.orgs.createKey(org.id, scopes);
    chatKeyId = await keyIdOf(chatKey);
    alpha = await flow.createAgent({ name: 'alpha' });
    beta = await flow.createAgent({ name: 'beta', model: 'scripted/priced' });

    const bySession = new Map<string, { keyId: string | null; endUser: string | null }>();
    // Day 1.
    bySession.set(await sessionTurn(alpha, h.key, 'alice', 'Hello from alice'), {
      keyId: adminKeyId,
      endUser: 'alice',
    });
    bySession.set(await sessionTurn(beta, chatKey, 'alice', 'A longer question from alice, priced'), {
      keyId: chatKeyId,
      endUser: 'alice',
    });
    const response = await h.request('POST', '/v1/responses', {
      body: { model: beta, input: 'Hi from bob over Responses', safety_identifier: 'bob' },
      key: chatKey,
    });
    expect(response.status, response.text).toBe(200);
    // Day 2.
    clock.advance(2 * 3600_000);
    bySession.set(await sessionTurn(alpha, h.key, null, 'Nobody in particular'), { keyId: adminKeyId, endUser: null });
    bySession.set(await sessionTurn(alpha, chatKey, FORMULA_USER, 'A spreadsheet fan'), {
      keyId: chatKeyId,
      endUser: FORMULA_USER,
    });
    const chat = await h.request('POST', '/v1/chat/completions', {
      body: {
        model: alpha,
        messages: [{ role: 'user', content: 'Hi from carol over Chat Completions' }],
        user: 'carol',
      },
      key: chatKey,
    });
    expect(chat.status, chat.text).toBe(200);
    const schedule = await h.request('POST', '/v1/schedules', {
      body: { name: 'nightly', agent_id: beta, input: 'scheduled hello', interval_seconds: 86400, enabled: false },
    });
    expect(schedule.status, schedule.text).toBe(201);
    const scheduleId = json(schedule).id;
    const fired = await h.request('POST', `/v1/schedules/${scheduleId}/run`, {
      headers: { 'idempotency-key': randomUUID() },
    });
    expect(fired.status, fired.text).toBe(202);
    const scheduleRunId = json(fired).id;
    const scheduled = await waitUntil(
      async () => {
        const run = json(await h.request('GET', `/v1/schedules/${scheduleId}/runs/${scheduleRunId}`));
        return ['completed', 'failed'].includes(run.status) ? run : null;
      },
      { what: 'the scheduled run to end' },
    );
    bySession.set(scheduled.session_id, { keyId: null, endUser: null });

    for (const run of await allRuns()) {
      // Responses and Chat Completions sessions are not known here: one turn each, with the chat key.
      const who = bySession.get(run.session_id) ?? {
        keyId: chatKeyId,
        endUser: run.source === 'responses' ? 'bob' : 'carol',
      };
      expect(['completed']).toContain(run.status);
      known.push({ run, ...who });
    }
    expect(known.length).toBe(7);
    expect(known.filter((k) => k.run.source === 'chat_completions')).toHaveLength(1);
  });
  afterAll(() => h?.close());

  it('records the key and end user of every turn: null key for the scheduled one', async () => {
    const report = await usage('?group_by=api_key,source');
    const none = report.data.filter((group: Json) => group.api_key_id === null);
    expect(none).toHaveLength(1);
    expect(none[0]).toMatchObject({ source: 'schedule', turns: 1, api_key_prefix: null });
    const chat = report.data.find((group: Json) => group.api_key_id === chatKeyId && group.source === 'sessions');
    expect(chatKey.startsWith(chat.api_key_prefix)).toBe(true);
    expect(chat.api_key_prefix.length).toBeGreaterThan(4);
  });

  it.each([
    [[]],
    [['day']],
    [['agent']],
    [['api_key']],
    [['model']],
    [['source']],
    [['end_user']],
    [['day', 'agent']],
    [['day', 'model']],
    [['api_key', 'end_user']],
    [['day', 'agent', 'api_key', 'model', 'source', 'end_user']],
  ] as Dimension[][][])('sums what the runs add up to, grouped by %j', async (dimensions) => {
    const report = await usage(`?limit=1000${dimensions.length === 0 ? '' : `&group_by=${dimensions.join(',')}`}`);
    expect(report.object).toBe('list');
    expect(report.has_more).toBe(false);
    expect(reportedGroups(report.data, dimensions)).toEqual(expectedGroups(known, dimensions));
    for (const group of report.data) {
      expect(group.object).toBe('usage.group');
      // Only the keys grouped by are present.
      for (const dimension of DIMENSIONS) expect(FIELD[dimension] in group).toBe(dimensions.includes(dimension));
      for (const sum of SUMS) expect(typeof group[sum]).toBe('number');
    }
    const priced = known.filter((k) => k.run.cost_usd > 0);
    expect(priced.length).toBeGreaterThan(0);
  });

  it('orders newest day first and splits days at UTC midnight', async () => {
    const report = await usage('?group_by=day');
    expect(report.data.map((group: Json) => group.day)).toEqual(['2031-01-11', '2031-01-10']);
    expect(report.data.map((group: Json) => group.turns)).toEqual([4, 3]);
  });

  it('filters by agent, key, model, source and end user', async () => {
    const check = async (query: string, keep: (k: KnownRun) => boolean) => {
      const report = await usage(`?group_by=agent${query}`);
      expect(reportedGroups(report.data, ['agent']), query).toEqual(expectedGroups(known.filter(keep), ['agent']));
    };
    await check(`&agent_id=${beta}`, (k) => k.run.agent_id === beta);
    await check(`&api_key_id=${chatKeyId}`, (k) => k.keyId === chatKeyId);
    await check('&model=scripted/priced', (k) => k.run.model === 'scripted/priced');
    await check('&source=responses', (k) => k.run.source === 'responses');
    await check('&end_user=carol', (k) => k.endUser === 'carol');
    await check('&end_user=alice', (k) => k.endUser === 'alice');
    await check(`&end_user=${encodeURIComponent(FORMULA_USER)}`, (k) => k.endUser === FORMULA_USER);
    await check(`&agent_id=${beta}&end_user=alice`, (k) => k.run.agent_id === beta && k.endUser === 'alice');
    const nothing = await usage(`?group_by=agent&agent_id=${randomUUID()}`);
    expect(nothing.data).toEqual([]);
    expect(nothing).toMatchObject({ first_id: null, last_id: null, has_more: false });
  });

  it('takes start_time inclusive and end_time exclusive, in Unix seconds', async () => {
    const seconds = known.map((k) => k.run.created_at as number).sort((a, b) => a - b);
    const first = seconds[0] ?? 0;
    const last = seconds.at(-1) ?? 0;
    const turnsIn = async (start: number | null, end: number | null) => {
      const query = [start === null ? '' : `start_time=${start}`, end === null ? '' : `end_time=${end}`]
        .filter((part) => part !== '')
        .join('&');
      const report = await usage(`?${query}`);
      expect(report.data).toHaveLength(1);
      return report.data[0].turns;
    };
    const count = (start: number, end: number) => seconds.filter((s) => s >= start && s < end).length;
    expect(await turnsIn(first, last + 1)).toBe(7);
    expect(await turnsIn(first + 1, last + 1)).toBe(count(first + 1, last + 1));
    expect(await turnsIn(first, last)).toBe(count(first, last));
    expect(await turnsIn(last, last)).toBe(0);
    expect(await turnsIn(last + 1, null)).toBe(0);
    expect(await turnsIn(null, first)).toBe(0);
    expect(await turnsIn(DAY2_START, null)).toBe(4);
    expect(await turnsIn(null, DAY2_START)).toBe(3);
    expect(await turnsIn(0, Number.MAX_SAFE_INTEGER)).toBe(7);
    const day2 = await usage(`?group_by=day&start_time=${DAY2_START}`);
    expect(day2.data.map((group: Json) => group.day)).toEqual(['2031-01-11']);
  });

  it('pages through every group with after = last_id, in the order of one page', async () => {
    const grouping = '&group_by=day,agent,api_key,model,source,end_user';
    const whole = await usage(`?limit=1000${grouping}`);
    expect(whole.data.length).toBeGreaterThan(3);
    const seen: Json[] = [];
    let after: string | null = null;
    for (let page = 0; page < 20; page += 1) {
      const report = await usage(`?limit=2${grouping}${after === null ? '' : `&after=${after}`}`);
      seen.push(...report.data);
      expect(report.first_id).toBe(report.data[0]?.id ?? null);
      expect(report.last_id).toBe(report.data.at(-1)?.id ?? null);
      if (!report.has_more) break;
      after = report.last_id;
    }
    expect(seen).toEqual(whole.data);
    // The last group's id ends the report.
    const end = await usage(`?limit=2${grouping}&after=${whole.last_id}`);
    expect(end).toMatchObject({ data: [], has_more: false, first_id: null });
  });

  it('refuses an after that is not a group id of this grouping (400 on after)', async () => {
    const byDay = await usage('?group_by=day');
    const forged = Buffer.from(JSON.stringify({ g: 'day', k: ['x'] })).toString('base64url');
    for (const query of [
      `?group_by=agent&after=${byDay.last_id}`,
      '?group_by=day&after=nonsense',
      `?group_by=day&after=${forged}`,
      `?group_by=day&after=${byDay.last_id}==`,
    ]) {
      const response = await h.request('GET', `/v1/usage${query}`);
      expect(response.status, query).toBe(400);
      expect(json(response).error).toMatchObject({ code: 'validation_error', param: 'after' });
    }
  });

  it('answers CSV for format=csv and Accept: text/csv, quoted and defused', async () => {
    const json6 = await usage('?limit=1000&group_by=day,agent,api_key,end_user');
    for (const options of [
      { query: '&format=csv', headers: {} },
      { query: '', headers: { accept: 'text/csv' } },
    ]) {
      const response = await h.request('GET', `/v1/usage?group_by=day,agent,api_key,end_user${options.query}`, {
        headers: options.headers,
      });
      expect(response.status, response.text).toBe(200);
      expect(String(response.headers['content-type'])).toMatch(/^text\/csv/);
      expect(String(response.headers['content-disposition'])).toContain('usage.csv');
      const records = parseCsv(response.text);
      expect(records[0]).toEqual([
        'day',
        'agent_id',
        'api_key_id',
        'api_key_prefix',
        'end_user',
        'turns',
        'input_tokens',
        'cached_input_tokens',
        'output_tokens',
        'total_tokens',
        'cost_usd',
      ]);
      const rows = records.slice(1);
      expect(rows).toHaveLength(json6.data.length);
      for (const [index, row] of rows.entries()) {
        const group = json6.data[index];
        expect(row).toEqual([
          group.day,
          group.agent_id,
          group.api_key_id ?? '',
          group.api_key_prefix ?? '',
          group.end_user === null ? '' : group.end_user === FORMULA_USER ? `'${FORMULA_USER}` : group.end_user,
          String(group.turns),
          String(group.input_tokens),
          String(group.cached_input_tokens),
          String(group.output_tokens),
          String(group.total_tokens),
          String(group.cost_usd),
        ]);
      }
      // The formula cell is quoted (it holds a comma and quotes) and starts with the defusing quote.
      expect(response.text).toContain(`"'=HYPERLINK(""https://evil.example"",""click""),x"`);
    }
    const plain = await h.request('GET', '/v1/usage?group_by=day', { headers: { accept: 'application/json' } });
    expect(String(plain.headers['content-type'])).toContain('application/json');
  });

  it('writes a CSV longer than one internal page, every group once', async () => {
    const other = await h.createOrg(`bulk-${randomUUID().slice(0, 8)}`);
    const db = h.deps.storage.db;
    const rows = Array.from({ length: 1234 }, (_, index) => ({
      id: randomUUID(),
      org_id: other.orgId,
      agent_id: randomUUID(),
      session_id: randomUUID(),
      message_id: randomUUID(),
      source: 'sessions' as const,
      status: 'completed' as const,
      model: 'scripted',
      agent_version: 1,
      input_preview: '',
      output_preview: null,
      input_tokens: index,
      cached_input_tokens: 0,
      output_tokens: 1,
      cost_micros: 10,
      error: null,
      created_at: DAY1,
      started_at: DAY1,
      completed_at: DAY1,
      end_user: `user-${String(index).padStart(5, '0')}`,
    }));
    for (let start = 0; start < rows.length; start += 200) {
      await db
        .insertInto('runs')
        .values(rows.slice(start, start + 200))
        .execute();
    }
    const response = await h.request('GET', '/v1/usage?group_by=end_user&format=csv', { key: other.key });
    expect(response.status, response.text.slice(0, 200)).toBe(200);
    const records = parseCsv(response.text).slice(1);
    expect(records).toHaveLength(1234);
    expect(new Set(records.map((record) => record[0])).size).toBe(1234);
    expect(records.reduce((sum, record) => sum + Number(record[1]), 0)).toBe(1234);
    expect(records.reduce((sum, record) => sum + Number(record[2]), 0)).toBe((1233 * 1234) / 2);
    const total = await usage('', other.key);
    expect(total.data[0]).toMatchObject({ turns: 1234, output_tokens: 1234, cost_usd: 0.01234 });
  });

  it("isolates organizations: another org's usage is invisible either way", async () => {
    const other = await h.createOrg(`other-${randomUUID().slice(0, 8)}`);
    const theirAgent = await flow.createAgent({ name: 'theirs' }, other.key);
    await sessionTurn(theirAgent, other.key, 'alice', 'Their turn');
    const theirs = await usage('?group_by=agent,end_user', other.key);
    expect(theirs.data).toHaveLength(1);
    expect(theirs.data[0]).toMatchObject({ agent_id: theirAgent, end_user: 'alice', turns: 1 });
    const ours = await usage('?group_by=agent&limit=1000');
    expect(ours.data.map((group: Json) => group.agent_id)).not.toContain(theirAgent);
    expect((await usage(`?agent_id=${theirAgent}`)).data[0].turns).toBe(0);
    expect((await usage(`?agent_id=${alpha}`, other.key)).data[0].turns).toBe(0);
    const total = await usage('');
    expect(total.data[0].turns).toBe(7);
  });

  it('needs sessions:read', async () => {
    const org = json(await h.request('GET', '/v1/organization'));
    const filesOnly = await h.deps.orgs.createKey(org.id, ['files:read']);
    const refused = await h.request('GET', '/v1/usage', { key: filesOnly });
    expect(refused.status).toBe(403);
    expect(json(refused).error.code).toBe('insufficient_scopes');
    const reader = await h.deps.orgs.createKey(org.id, ['sessions:read']);
    expect((await h.request('GET', '/v1/usage', { key: reader })).status).toBe(200);
    expect((await h.request('GET', '/v1/usage', { key: null })).status).toBe(401);
  });

  it.each([
    ['group_by=agent,bogus', 'group_by'],
    ['group_by=day,day', 'group_by'],
    ['group_by=', 'group_by'],
    ['start_time=9007199254740993', 'start_time'],
    ['start_time=-1', 'start_time'],
    ['start_time=1.5', 'start_time'],
    ['start_time=yesterday', 'start_time'],
    ['end_time=99999999999999999999', 'end_time'],
    ['start_time=200&end_time=100', 'end_time'],
    ['end_user=a%00b', 'end_user'],
    ['model=x%00', 'model'],
    ['group_by=day%00', 'group_by'],
    ['agent_id=not-a-uuid', 'agent_id'],
    ['api_key_id=123', 'api_key_id'],
    ['source=console-ish', 'source'],
    ['limit=0', 'limit'],
    ['limit=1001', 'limit'],
    ['format=xml', 'format'],
    ['colour=blue', 'colour'],
  ])('refuses %s with a 400 naming %s', async (query, param) => {
    const response = await h.request('GET', `/v1/usage?${query}`);
    expect(response.status, response.text).toBe(400);
    expect(json(response).error.code).toBe('validation_error');
    expect(json(response).error.param).toBe(param);
  });

  it("reads an organization's month through an index, not the whole table", async () => {
    const org = json(await h.request('GET', '/v1/organization'));
    const start = Date.UTC(2031, 0, 1);
    const end = Date.UTC(2031, 1, 1);
    const db = h.deps.storage.db;
    const query = (by: string) =>
      sql`select count(*), sum(input_tokens) from runs where org_id = ${org.id} ${sql.raw(by)}
        and created_at >= ${start} and created_at < ${end}`;
    if (dialect === 'sqlite') {
      for (const [by, index] of [
        ['', 'runs_org_created'],
        [`and api_key_id = '${chatKeyId}'`, 'runs_org_key_created'],
        ["and end_user = 'alice'", 'runs_org_end_user_created'],
      ] as const) {
        const plan = await sql<{ detail: string }>`explain query plan ${query(by)}`.execute(db);
        const text = plan.rows.map((row) => row.detail).join('\n');
        expect(text, by).toContain(`USING INDEX ${index}`);
        expect(text, by).not.toMatch(/SCAN runs\b/);
      }
      return;
    }
    // Postgres plans a sequential scan of a table this small whatever the indexes: with that option off it picks
    // an index when one serves the range, and says so.
    await db.transaction().execute(async (trx) => {
      await sql`set local enable_seqscan = off`.execute(trx);
      for (const by of ['', `and api_key_id = '${chatKeyId}'`, "and end_user = 'alice'"]) {
        const plan = await sql<{ 'QUERY PLAN': string }>`explain ${query(by)}`.execute(trx);
        const text = plan.rows.map((row) => row['QUERY PLAN']).join('\n');
        expect(text, by).toMatch(/Index (Only )?Scan|Bitmap Index Scan/);
        expect(text, by).not.toContain('Seq Scan');
      }
    });
  });
});
