/**
 * The hot queries sent as named statements on Postgres (storage/named-statements.ts, prepared.ts and the client of
 * postgres-begin.ts), against the real server: a prepared query is parsed once per connection and kept there, the
 * same values come back, texts whose result follows a table's columns (`select *`, `returning *`) are never named,
 * a kept statement whose result type changed under it (another process's migration) fails once and its connection
 * then sends unnamed statements, and `named: false` (AGENTRY_DATABASE_PREPARED=0) names nothing.
 */
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { inlineConstants, nameStatement, statementName } from '../src/storage/named-statements.ts';
import { beginWithFirstStatement } from '../src/storage/postgres-begin.ts';
import { prepare } from '../src/storage/prepared.ts';
import type { Database } from '../src/storage/schema.ts';

describe('which texts are named', () => {
  it('names explicit column lists and never a result that follows the table', () => {
    nameStatement('select "id", "n" from "t" where "id" = $1');
    nameStatement('select count(*) as "c" from "t"');
    for (const text of [
      'select * from "t" where "id" = $1',
      'select "t".* from "t"',
      'update "t" set "n" = $1 returning *',
      'select "id", * from "t"',
    ]) {
      nameStatement(text);
      expect(statementName(text), text).toBeUndefined();
    }
    expect(statementName('select "id", "n" from "t" where "id" = $1')).toMatch(/^agentry_\d+$/);
    expect(statementName('select count(*) as "c" from "t"')).toMatch(/^agentry_\d+$/);
  });
});

describe('constants written into a prepared query', () => {
  it('writes constants as literals and renumbers the values', () => {
    const parameters = ['v1', 'queued', "it's", 'v2', 5, 'a\\b', null, true];
    const values = new Set([0, 3]);
    const { text, kept } = inlineConstants(
      'select "x" from "t" where "a" = $1 and "s" in ($2, $3) and "b" = $4 limit $5 and "c" = $6 ' +
        'and "d" is not distinct from $7 and "e" = $8',
      parameters,
      (index) => !values.has(index),
    );
    expect(text).toBe(
      `select "x" from "t" where "a" = $1 and "s" in ( 'queued' ,  'it''s' ) and "b" = $2 limit  '5'  and "c" = $3 and "d" is not distinct from  null  and "e" =  'true' `,
    );
    // A backslash stays a value: how a literal reads it depends on the server's settings.
    expect(kept).toEqual([0, 3, 5]);
  });

  it('leaves text with other quoting as it is', () => {
    for (const text of ["select $1 where e = E'\\n'", 'select $1 -- $2', 'select $$x$$, $1']) {
      expect(inlineConstants(text, ['c'], () => true)).toEqual({ text, kept: [0] });
    }
    expect(inlineConstants(`select '$1', "$1" where a = $1`, ['c'], () => true).text).toBe(
      `select '$1', "$1" where a =  'c' `,
    );
  });
});

const url = inject('postgresUrl');

type Tables = { t: { id: string; n: number } };

describe.skipIf(url === null)('named statements on Postgres', () => {
  const schema = `named_test_${process.pid}`;
  let admin: pg.Client;
  const handles: Kysely<Tables>[] = [];

  const open = (named: boolean) => {
    const db = new Kysely<Tables>({
      dialect: new PostgresDialect({
        pool: new pg.Pool({
          connectionString: url ?? '',
          max: 1,
          Client: beginWithFirstStatement(pg.Client, { named }),
          options: `-c search_path=${schema}`,
        }),
      }),
    });
    handles.push(db);
    return db as unknown as Kysely<Database>;
  };
  /** The statements the connection of `db` keeps, by name. */
  const kept = async (db: Kysely<Database>) => {
    const result = await (db as unknown as Kysely<Tables>).executeQuery<{ name: string; statement: string }>({
      sql: 'select name, statement from pg_prepared_statements order by name',
      parameters: [],
      query: { kind: 'RawNode', sqlFragments: [], parameters: [] } as never,
      queryId: { queryId: 'kept' },
    });
    return result.rows;
  };

  const byId = prepare((db, p: { id: string }) =>
    (db as unknown as Kysely<Tables>).selectFrom('t').select(['id', 'n']).where('id', '=', p.id),
  );
  const everything = prepare((db, p: { id: string }) =>
    (db as unknown as Kysely<Tables>).selectFrom('t').selectAll().where('id', '=', p.id),
  );

  beforeAll(async () => {
    admin = new pg.Client({ connectionString: url ?? '' });
    await admin.connect();
    await admin.query(`create schema "${schema}"`);
    await admin.query(`create table "${schema}".t (id text primary key, n integer not null)`);
    await admin.query(`insert into "${schema}".t values ('a', 1), ('b', 2), ('it''s', 3)`);
  });

  afterAll(async () => {
    for (const db of handles) await db.destroy();
    await admin?.query(`drop schema if exists "${schema}" cascade`);
    await admin?.end();
  });

  it('parses a prepared query once per connection and answers as an unnamed one would', async () => {
    const db = open(true);
    for (const id of ['a', 'b', "it's", 'none', 'a', 'a', 'a', 'a', 'a']) {
      const expected = { a: 1, b: 2, "it's": 3 }[id];
      expect(await byId.first(db, { id })).toEqual(expected === undefined ? undefined : { id, n: expected });
    }
    const statements = await kept(db);
    expect(statements).toHaveLength(1);
    expect(statements[0]?.name).toMatch(/^agentry_\d+$/);
    expect(statements[0]?.statement).toContain('select "id", "n" from "t"');
  });

  it('never keeps a query whose result follows the table', async () => {
    const db = open(true);
    expect(await everything.first(db, { id: 'b' })).toEqual({ id: 'b', n: 2 });
    expect(await kept(db)).toEqual([]);
  });

  it('names nothing when told not to', async () => {
    const db = open(false);
    expect(await byId.first(db, { id: 'a' })).toEqual({ id: 'a', n: 1 });
    expect(await kept(db)).toEqual([]);
  });

  it('recovers when a kept statement goes stale under another process’s migration', async () => {
    const db = open(true);
    expect(await byId.first(db, { id: 'a' })).toEqual({ id: 'a', n: 1 });
    expect(await kept(db)).toHaveLength(1);
    await admin.query(`alter table "${schema}".t alter column n type bigint`);
    // The kept plan's result type changed: the server refuses it once...
    await expect(byId.first(db, { id: 'a' })).rejects.toMatchObject({ code: '0A000' });
    // ...and from then on the connection sends the text unnamed, planned afresh each time.
    // (node-postgres answers a bigint as text without the storage's type parsers.)
    for (let i = 0; i < 3; i++) expect(await byId.first(db, { id: 'b' })).toEqual({ id: 'b', n: '2' });
    await admin.query(`alter table "${schema}".t alter column n type integer`);
  });
});
