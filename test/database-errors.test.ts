/**
 * isDatabaseUnavailable (storage/errors.ts) on the errors Postgres and its clients really produce: an unreachable
 * database (refused, terminated, timed out, a pool that cannot get a connection in time) counts, a query the database
 * refused does not. The errors come from real connections to the test Postgres and from a TCP proxy in front of it.
 */
import { createServer } from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { isDatabaseUnavailable, isUniqueViolation } from '../src/storage/errors.ts';
import { type FaultProxy, startFaultProxy } from './helpers/fault-proxy.ts';

const url = inject('postgresUrl');

/** The error `run` rejects with. */
async function failure(run: () => Promise<unknown>): Promise<unknown> {
  try {
    await run();
  } catch (error) {
    return error;
  }
  throw new Error('expected a failure');
}

async function client(config: pg.ClientConfig = {}): Promise<pg.Client> {
  const connected = new pg.Client({ connectionString: url ?? '', ...config });
  connected.on('error', () => undefined);
  await connected.connect();
  return connected;
}

describe.skipIf(url === null)('which database errors mean "unreachable right now" (postgres)', () => {
  let proxy: FaultProxy;
  let proxied: string;
  beforeAll(async () => {
    const parsed = new URL(url ?? '');
    proxy = await startFaultProxy({ host: parsed.hostname, port: Number(parsed.port || 5432) });
    parsed.host = `127.0.0.1:${proxy.port}`;
    proxied = parsed.toString();
  });
  afterAll(async () => {
    await proxy.close();
  });

  it('counts a refused connection, a terminated backend and a statement past its time', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const address = closed.address();
    await new Promise((resolve) => closed.close(resolve));
    const port = typeof address === 'object' && address !== null ? address.port : 0;
    const refused = await failure(() => client({ connectionString: `postgres://postgres@127.0.0.1:${port}/test` }));
    expect(isDatabaseUnavailable(refused), String(refused)).toBe(true);

    const victim = await client();
    const killer = await client();
    try {
      const pid = (await victim.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]?.pid;
      const query = failure(() => victim.query('select pg_sleep(30)'));
      await new Promise((resolve) => setTimeout(resolve, 200));
      await killer.query('select pg_terminate_backend($1)', [pid]);
      const terminated = await query;
      expect(isDatabaseUnavailable(terminated), String(terminated)).toBe(true);
      // The connection is gone: the next query fails too, and counts the same.
      const after = await failure(() => victim.query('select 1'));
      expect(isDatabaseUnavailable(after), String(after)).toBe(true);
    } finally {
      await killer.end();
      await victim.end().catch(() => undefined);
    }

    const slow = await client({ statement_timeout: 100 });
    try {
      const cancelled = await failure(() => slow.query('select pg_sleep(5)'));
      expect(Reflect.get(cancelled as object, 'code')).toBe('57014');
      expect(isDatabaseUnavailable(cancelled)).toBe(true);
    } finally {
      await slow.end();
    }
  });

  it('counts a partitioned database: a statement or a connection that gets no answer in time', async () => {
    const partitioned = await client({ connectionString: proxied, query_timeout: 300 });
    const pool = new pg.Pool({ connectionString: proxied, connectionTimeoutMillis: 300 });
    pool.on('error', () => undefined);
    try {
      await proxy.set('blackhole');
      const unanswered = await failure(() => partitioned.query('select 1'));
      expect(isDatabaseUnavailable(unanswered), String(unanswered)).toBe(true);
      const noConnection = await failure(() => pool.query('select 1'));
      expect(isDatabaseUnavailable(noConnection), String(noConnection)).toBe(true);
      await proxy.set('reset');
      const reset = await failure(() => pool.query('select 1'));
      expect(isDatabaseUnavailable(reset), String(reset)).toBe(true);
    } finally {
      await proxy.set('pass');
      await partitioned.end().catch(() => undefined);
      await pool.end();
    }
  });

  it('does not count what the database refused, or a failure wrapping none of the above', async () => {
    const connected = await client();
    try {
      const syntax = await failure(() => connected.query('selec 1'));
      expect(isDatabaseUnavailable(syntax)).toBe(false);
      await connected.query('create temporary table t (id int primary key)');
      await connected.query('insert into t values (1)');
      const duplicate = await failure(() => connected.query('insert into t values (1)'));
      expect(isUniqueViolation(duplicate)).toBe(true);
      expect(isDatabaseUnavailable(duplicate)).toBe(false);
      // A failure caused by an unreachable database counts through its cause.
      const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' });
      expect(isDatabaseUnavailable(new Error('database migration failed', { cause: refused }))).toBe(true);
      expect(isDatabaseUnavailable(new Error('something else'))).toBe(false);
      expect(isDatabaseUnavailable(null)).toBe(false);
    } finally {
      await connected.end();
    }
  });
});
