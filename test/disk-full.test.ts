/**
 * A full disk tells the truth (docs/operations.md, "When the disk is full"): a write that fails for lack of space
 * is 507 insufficient_storage with Retry-After (never a 500, never logged as the failed ROLLBACK after it), the cause
 * is logged once per episode, /readyz answers 503 while writes fail and 200 once they work again, reads are served
 * throughout, a server started on a full disk starts read-only, and every accepted message still completes once
 * space returns.
 *
 * SQLite: a real server process whose data directory is a 20 MB tmpfs filled by a file (mounting needs root; the
 * suite is skipped otherwise). Postgres: its disk cannot be filled here, so statement triggers make the server
 * itself answer every write with SQLSTATE 53100 disk_full, the error a full Postgres disk gives.
 */
import { execFileSync } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { httpClient, type Json, TERMINAL_STATUSES, textParts, waitUntil } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json, testKey } from './helpers/harness.ts';
import { capturedLogger, linesStarting } from './helpers/log-capture.ts';
import { type ServerProcess, startServerProcess, startsTimeout } from './helpers/server-process.ts';

const EPISODE_START = 'writes fail for lack of space';
const EPISODE_END = 'writes work again';
/** Probes five times a second: the tests wait for recovery, they never sleep through it. */
const PROBE_ENV = { AGENTRY_STORAGE_PROBE_MS: '200' };

let idempotency = 0;
const nextKey = () => ({ 'idempotency-key': `disk-full-${process.pid}-${++idempotency}` });

describe.runIf(dialects().includes('postgres'))('a Postgres database whose disk is full', () => {
  let h: Harness;
  let admin: pg.Client;
  let schema: string;
  const captured = capturedLogger();
  let tables: string[] = [];

  beforeAll(async () => {
    h = await createHarness('postgres', PROBE_ENV, { logger: captured.logger, detectSandbox: false });
    schema = h.deps.config.databaseSchema ?? 'public';
    admin = new pg.Client({ connectionString: inject('postgresUrl') ?? '' });
    await admin.connect();
    await admin.query(`
      create function "${schema}".agentry_test_disk_full() returns trigger language plpgsql as $$
      begin
        raise exception 'could not extend file "base/16384/16400": No space left on device' using errcode = 'disk_full';
      end $$`);
    const { rows } = await admin.query<{ table_name: string }>(
      `select table_name from information_schema.tables where table_schema = $1 and table_type = 'BASE TABLE'`,
      [schema],
    );
    tables = rows.map((row) => row.table_name);
  });
  afterAll(async () => {
    await admin?.end();
    await h?.close();
  });

  let full: string[] = [];
  /** Every write to these tables (default: all of the deployment's) fails as on a full disk; `free` ends it. */
  async function fill(only: string[] = tables): Promise<void> {
    full = only;
    for (const table of full) {
      await admin.query(
        `create trigger disk_full before insert or update or delete on "${schema}"."${table}"
         for each statement execute function "${schema}".agentry_test_disk_full()`,
      );
    }
  }
  async function free(): Promise<void> {
    for (const table of full) await admin.query(`drop trigger disk_full on "${schema}"."${table}"`);
    full = [];
  }
  const readiness = async () => (await h.request('GET', '/readyz', { key: null })).status;
  const messagesOf = async (url: string): Promise<Json[]> => json(await h.request('GET', url)).data;

  it('answers writes 507 and reads 200, is not ready until writes work, and runs what it accepted after', async () => {
    const agentId = json(await h.request('GET', '/v1/agents')).data[0].id;
    const sessionId = json(await h.request('POST', '/v1/sessions', { body: { agentId } })).session.id;
    const url = `/v1/sessions/${sessionId}/messages`;
    expect((await h.request('POST', url, { body: textParts('before'), headers: nextKey() })).status).toBe(202);

    await fill();
    const refused = await h.request('POST', url, { body: textParts('while full'), headers: nextKey() });
    expect(refused.status).toBe(507);
    expect(refused.headers['retry-after']).toBe('1');
    expect(json(refused).error).toMatchObject({ code: 'insufficient_storage', type: 'server_error' });
    // Read-only from then on: refused up front, with the same answer.
    const again = await h.request('POST', '/v1/agents', { body: { name: 'later' } });
    expect(again.status).toBe(507);
    expect(json(again).error.code).toBe('insufficient_storage');
    expect((await h.request('GET', `/v1/sessions/${sessionId}`)).status).toBe(200);
    expect(json(await h.request('GET', url)).data).toHaveLength(1);
    const ready = await h.request('GET', '/readyz', { key: null });
    expect(ready.status).toBe(503);
    expect(json(ready).error.code).toBe('service_unavailable');
    expect((await h.request('GET', '/healthz', { key: null })).status).toBe(200);
    // Its probes keep failing while the disk is full.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect((await h.request('GET', '/readyz', { key: null })).status).toBe(503);

    await free();
    await waitUntil(async () => ((await readiness()) === 200 ? true : null), { what: '/readyz 200 once writes work' });
    expect((await h.request('POST', url, { body: textParts('after'), headers: nextKey() })).status).toBe(202);
    const messages = await waitUntil(
      async () => {
        const list: Json[] = json(await h.request('GET', url)).data;
        return list.every((message) => TERMINAL_STATUSES.includes(message.status)) ? list : null;
      },
      { what: 'every accepted message to end' },
    );
    expect(messages.map((message) => message.status)).toEqual(['completed', 'completed']);

    const lines = captured.lines();
    const starts = linesStarting(lines, EPISODE_START);
    expect(starts).toHaveLength(1);
    expect(String(starts[0]?.cause)).toContain('No space left on device');
    expect(linesStarting(lines, EPISODE_END)).toHaveLength(1);
    // Nothing else complained: no 500s, no engine, webhook or heartbeat errors at each poll.
    expect(lines.filter((line) => Number(line.level) >= 40 && line !== starts[0])).toEqual([]);
  });

  it('does not fail a turn whose step cannot be saved: it waits for space, then completes', async () => {
    const agentId = json(await h.request('GET', '/v1/agents')).data[0].id;
    const sessionId = json(await h.request('POST', '/v1/sessions', { body: { agentId } })).session.id;
    const url = `/v1/sessions/${sessionId}/messages`;
    const posted = await h.request('POST', url, { body: textParts('sleep 1500\nsaved at last'), headers: nextKey() });
    expect(posted.status).toBe(202);
    await waitUntil(async () => ((await messagesOf(url))[0]?.status === 'running' ? true : null), {
      what: 'the turn to start',
    });
    // The model's answer cannot be stored (the conversation log is full); the probe's row cannot be written either.
    await fill(['items', 'storage_probe']);
    await waitUntil(async () => ((await readiness()) === 503 ? true : null), { what: 'the failed step write' });
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect((await messagesOf(url))[0]?.status).toBe('running');

    await free();
    const [message] = await waitUntil(
      async () => {
        const list = await messagesOf(url);
        return TERMINAL_STATUSES.includes(list[0]?.status) ? list : null;
      },
      { what: 'the turn to end' },
    );
    expect(message).toMatchObject({
      status: 'completed',
      response: { parts: [{ type: 'text', text: 'saved at last' }] },
    });
  });

  it('starts another process while the disk is full: read-only, then ready once writes work', async () => {
    await fill();
    const second = capturedLogger();
    // The same database and data directory as the first process, as a second server of the deployment.
    const late = await createHarness(
      'postgres',
      {
        ...PROBE_ENV,
        AGENTRY_BOOTSTRAP_KEY: h.key,
        AGENTRY_DATABASE_SCHEMA: schema,
        AGENTRY_DATA_DIR: h.deps.config.dataDir,
      },
      { logger: second.logger, detectSandbox: false },
    );
    try {
      expect((await late.request('GET', '/v1/agents')).status).toBe(200);
      const refused = await late.request('POST', '/v1/agents', { body: { name: 'while full' } });
      expect(refused.status).toBe(507);
      expect((await late.request('GET', '/readyz', { key: null })).status).toBe(503);
      await free();
      await waitUntil(
        async () => ((await late.request('GET', '/readyz', { key: null })).status === 200 ? true : null),
        {
          what: 'the late process to be ready',
        },
      );
      expect((await late.request('POST', '/v1/agents', { body: { name: 'after' } })).status).toBe(201);
      expect(linesStarting(second.lines(), EPISODE_START)).toHaveLength(1);
    } finally {
      await free();
      await late.close();
    }
  });
});

/** Writes a file at `path` until its file system has no byte left. */
function fillUp(path: string): void {
  const fd = openSync(path, 'w');
  try {
    for (const size of [1024 * 1024, 4096, 1]) {
      const chunk = Buffer.alloc(size);
      try {
        for (;;) writeSync(fd, chunk);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOSPC') throw error;
      }
    }
  } finally {
    closeSync(fd);
  }
}

interface LogLine {
  level: number;
  msg: string;
  cause?: string;
}

function logLines(server: ServerProcess): LogLine[] {
  return server
    .output()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as LogLine);
}

describe.runIf(process.getuid?.() === 0)('a server whose disk fills up (SQLite on a 20 MB tmpfs)', () => {
  const key = testKey();
  const servers: ServerProcess[] = [];
  let mount = '';
  let fillPath = '';
  let env: Record<string, string> = {};

  beforeAll(() => {
    mount = mkdtempSync(join(tmpdir(), 'agentry-full-'));
    fillPath = join(mount, 'fill');
    env = { AGENTRY_DATA_DIR: join(mount, 'data'), AGENTRY_BOOTSTRAP_KEY: key, ...PROBE_ENV };
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=20m,mode=0711', 'tmpfs', mount]);
    mkdirSync(join(mount, 'data'));
  });
  afterAll(async () => {
    for (const server of servers) await server.stop('SIGKILL');
    if (mount === '') return;
    execFileSync('umount', [mount]);
    rmSync(mount, { recursive: true, force: true });
  });

  it(
    'refuses writes with 507, is not ready while full, restarts read-only after kill -9, and recovers once space returns',
    async () => {
      const first = await startServerProcess(env);
      servers.push(first);
      let call = httpClient(first.url, key);
      const agentId = (await call<Json>('GET', '/v1/agents')).body.data[0].id;
      const sessionId = (await call<Json>('POST', '/v1/sessions', { agentId })).body.session.id;
      const url = `/v1/sessions/${sessionId}/messages`;
      const accepted: string[] = [];
      const post = async (text: string) => {
        const response = await call<Json>('POST', url, textParts(text), nextKey());
        if (response.status === 202) accepted.push(response.body.id);
        return response;
      };
      expect((await post('hello')).status).toBe(202);

      fillUp(fillPath);
      // SQLite reuses the space its write-ahead log already has: the first writes may still fit.
      const big = 'x'.repeat(90_000);
      let refused: Awaited<ReturnType<typeof post>> | null = null;
      const statuses = new Set<number>();
      for (let attempt = 0; attempt < 400 && refused === null; attempt++) {
        const response = await post(big);
        statuses.add(response.status);
        if (response.status !== 202) refused = response;
      }
      expect(refused?.status).toBe(507);
      expect(refused?.body.error).toMatchObject({ code: 'insufficient_storage', type: 'server_error' });
      expect([...statuses].sort()).toEqual(accepted.length > 1 ? [202, 507] : [507]);
      const response = await fetch(`${first.url}${url}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...nextKey() },
        body: JSON.stringify(textParts('refused up front')),
      });
      expect(response.status).toBe(507);
      expect(response.headers.get('retry-after')).toBe('1');
      expect((await call('GET', url)).status).toBe(200);
      expect((await fetch(`${first.url}/readyz`)).status).toBe(503);
      expect((await fetch(`${first.url}/healthz`)).status).toBe(200);

      const starts = logLines(first).filter((line) => line.msg.startsWith(EPISODE_START));
      expect(starts).toHaveLength(1);
      expect(starts[0]?.cause).toBe('database or disk is full');
      expect(first.output()).not.toContain('cannot rollback');
      expect(first.output()).not.toContain('unhandled error');

      // Killed while the disk is full, started again on it: read-only, but up.
      await first.stop('SIGKILL');
      const second = await startServerProcess(env);
      servers.push(second);
      call = httpClient(second.url, key);
      expect((await call<Json>('GET', url)).body.data.map((message: Json) => message.id)).toEqual(accepted);
      const refusedAtStart = await call<Json>('POST', url, textParts('after the restart'), nextKey());
      expect(refusedAtStart.status).toBe(507);
      expect(refusedAtStart.body.error.code).toBe('insufficient_storage');
      expect((await fetch(`${second.url}/readyz`)).status).toBe(503);
      expect(logLines(second).filter((line) => line.msg.startsWith(EPISODE_START))).toHaveLength(1);

      rmSync(fillPath);
      await waitUntil(async () => ((await fetch(`${second.url}/readyz`)).status === 200 ? true : null), {
        what: '/readyz 200 once space returns',
      });
      expect((await post('space is back')).status).toBe(202);
      const messages = await waitUntil(
        async () => {
          const list: Json[] = (await call<Json>('GET', `${url}?limit=100`)).body.data;
          return list.every((message) => TERMINAL_STATUSES.includes(message.status)) ? list : null;
        },
        { what: 'every accepted message to end' },
      );
      expect(messages.map((message) => message.id)).toEqual(accepted);
      expect(new Set(messages.map((message) => message.status))).toEqual(new Set(['completed']));
      expect(logLines(second).filter((line) => line.msg.startsWith(EPISODE_END))).toHaveLength(1);
      expect(logLines(second).filter((line) => line.level >= 50 && !line.msg.startsWith(EPISODE_START))).toEqual([]);
    },
    startsTimeout(2),
  );
});
