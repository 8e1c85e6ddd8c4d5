/**
 * A transaction's BEGIN sent with its first statement on Postgres (storage/postgres-begin.ts), against the real
 * server through Kysely as the storage uses it: one round trip fewer per transaction, the same values stored and
 * read back (quotes, backslashes, placeholders inside values, numbers, nulls, booleans), values that cannot be
 * written as literals sent as parameters after a BEGIN of their own, a failed first statement rolled back, and an
 * empty transaction that sends nothing. Deferred writes (prepared.ts runDeferred) go with the transaction's next
 * statement or its COMMIT; one that fails fails that statement and the transaction; a rollback drops them; outside
 * a transaction they are sent at once. A prepared query in such a batch is prepared once per connection (or not
 * at all when node-postgres has parsed it already) and then executed by name; a failed batch that prepared
 * something leaves its connection sending unnamed statements.
 */
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { beginWithFirstStatement, inlineParameters } from '../src/storage/postgres-begin.ts';
import { prepare } from '../src/storage/prepared.ts';
import type { Database } from '../src/storage/schema.ts';

const quote = (text: string) => pg.escapeLiteral(text);

describe('inlineParameters', () => {
  it('writes each placeholder as a quoted literal', () => {
    expect(inlineParameters('select $1, $2, $10', [1, "it's", null, 4, 5, 6, 7, 8, 9, true], quote)).toBe(
      "select  '1' ,  'it''s' ,  'true' ",
    );
  });

  it('leaves quoted text alone and refuses what it cannot write safely', () => {
    expect(inlineParameters(`select '$1', "$2" from t where a = $1`, ['x'], quote)).toBe(
      `select '$1', "$2" from t where a =  'x' `,
    );
    expect(inlineParameters('select $1', [new Date(0)], quote)).toBeNull();
    expect(inlineParameters('select $1', [Buffer.from('x')], quote)).toBeNull();
    expect(inlineParameters('select $2', ['x'], quote)).toBeNull();
    expect(inlineParameters('select $$x$$', [], quote)).toBeNull();
    expect(inlineParameters("select E'\\n' || $1", ['x'], quote)).toBeNull();
    expect(inlineParameters('select 1 -- $1', ['x'], quote)).toBeNull();
    expect(inlineParameters('select $1', ['x'.repeat(20_000)], quote)).toBeNull();
  });
});

const url = inject('postgresUrl');

/** What node-postgres sends, counted by wrapping its query in this test's process only. */
const sent: string[] = [];
const send = pg.Client.prototype.query as (this: pg.Client, ...args: unknown[]) => unknown;
Object.defineProperty(pg.Client.prototype, 'query', {
  configurable: true,
  writable: true,
  value(this: pg.Client, ...args: unknown[]) {
    if (typeof args[0] === 'string') sent.push(args[0]);
    return send.apply(this, args);
  },
});

describe.skipIf(url === null)('a transaction on Postgres', () => {
  const schema = `begin_test_${process.pid}`;
  let admin: pg.Client;
  let db: Kysely<{ t: { id: string; n: number | null; flag: boolean | null; at: Date | null } }>;

  beforeAll(async () => {
    admin = new pg.Client({ connectionString: url ?? '' });
    await admin.connect();
    await admin.query(`create schema "${schema}"`);
    await admin.query(`create table "${schema}".t (id text primary key, n bigint, flag boolean, at timestamptz)`);
    // The admin client's statements are not the transactions'.
    db = new Kysely({
      dialect: new PostgresDialect({
        pool: new pg.Pool({
          connectionString: url ?? '',
          max: 1,
          Client: beginWithFirstStatement(pg.Client, { named: true }),
          options: `-c search_path=${schema}`,
        }),
      }),
    });
  });

  afterAll(async () => {
    await db?.destroy();
    await admin?.query(`drop schema if exists "${schema}" cascade`);
    await admin?.end();
  });

  it('sends the BEGIN with the first statement and stores the same values', async () => {
    sent.length = 0;
    const tricky = `it's a \\back\\slash, $1 and "quotes" and ünïcode`;
    await db.transaction().execute(async (trx) => {
      await trx.insertInto('t').values({ id: 'a', n: 42, flag: true, at: null }).execute();
      await trx.insertInto('t').values({ id: tricky, n: -7, flag: false, at: null }).execute();
    });
    expect(sent).toHaveLength(3);
    expect(sent[0]).toMatch(/^begin;insert into "t"/);
    expect(sent[2]).toBe('commit');
    const rows = await db.selectFrom('t').select(['id', 'n', 'flag']).orderBy('n').execute();
    expect(rows).toEqual([
      { id: tricky, n: '-7', flag: false },
      { id: 'a', n: '42', flag: true },
    ]);
  });

  it('answers the first statement as its own result (rows, counts, returning)', async () => {
    const result = await db.transaction().execute(async (trx) =>
      trx
        .updateTable('t')
        .set({ n: sql`n + ${1}` })
        .where('id', '=', 'a')
        .returning(['id', 'n'])
        .execute(),
    );
    expect(result).toEqual([{ id: 'a', n: '43' }]);
    const counted = await db
      .transaction()
      .execute(async (trx) =>
        trx.updateTable('t').set({ flag: null }).where('id', 'in', ['a', 'none']).executeTakeFirst(),
      );
    expect(counted.numUpdatedRows).toBe(1n);
  });

  it('sends a value it cannot write as a literal as a parameter, after a BEGIN of its own', async () => {
    sent.length = 0;
    const at = new Date('2026-01-02T03:04:05Z');
    await db.transaction().execute(async (trx) => {
      await trx.updateTable('t').set({ at }).where('id', '=', 'a').execute();
    });
    expect(sent.slice(0, 2)).toEqual(['begin', 'update "t" set "at" = $1 where "id" = $2']);
    const row = await db.selectFrom('t').select('at').where('id', '=', 'a').executeTakeFirstOrThrow();
    expect(row.at?.toISOString()).toBe(at.toISOString());
  });

  it('rolls back a transaction whose first statement fails, and the connection goes on', async () => {
    await expect(
      db.transaction().execute(async (trx) => {
        await trx.insertInto('t').values({ id: 'a', n: 1, flag: null, at: null }).execute();
      }),
    ).rejects.toThrow(/duplicate key/);
    await expect(
      db.transaction().execute(async (trx) => {
        await trx.insertInto('t').values({ id: 'b', n: 1, flag: null, at: null }).execute();
        throw new Error('changed my mind');
      }),
    ).rejects.toThrow('changed my mind');
    const ids = await db.selectFrom('t').select('id').orderBy('id').execute();
    expect(ids.map((row) => row.id)).not.toContain('b');
    sent.length = 0;
    await db.transaction().execute(async () => undefined);
    expect(sent).toEqual([]);
  });

  describe('deferred writes', () => {
    type Tables = { t: { id: string; n: number | null; flag: boolean | null; at: Date | null } };
    const insert = prepare((builder, p: { id: string; n: number }) =>
      (builder as unknown as Kysely<Tables>).insertInto('t').values({ id: p.id, n: p.n, flag: null, at: null }),
    );
    const asStorage = () => db as unknown as Kysely<Database>;
    const ids = async () => (await db.selectFrom('t').select('id').orderBy('id').execute()).map((row) => row.id);

    it('sends them with the next statement, in order, and with the COMMIT', async () => {
      sent.length = 0;
      const count = await asStorage()
        .transaction()
        .execute(async (trx) => {
          await insert.runDeferred(trx, { id: 'd1', n: 1 });
          await insert.runDeferred(trx, { id: "d2's", n: 2 });
          const row = await (trx as unknown as Kysely<Tables>)
            .selectFrom('t')
            .select((eb) => eb.fn.countAll<string>().as('count'))
            .where('id', 'in', ['d1', "d2's"])
            .executeTakeFirstOrThrow();
          await insert.runDeferred(trx, { id: 'd3', n: 3 });
          return row.count;
        });
      // The select saw both rows it was sent with; the last insert went with the COMMIT.
      expect(count).toBe('2');
      expect(sent).toHaveLength(2);
      // The prepared insert is prepared once on the connection, then executed by name with its values.
      expect(sent[0]).toMatch(
        /^begin;prepare (agentry_\d+) as insert into "t" .*;execute \1\('d1','1'\);execute \1\('d2''s','2'\);select count/,
      );
      expect(sent[1]).toMatch(/^execute agentry_\d+\('d3','3'\);commit$/);
      expect(await ids()).toEqual(expect.arrayContaining(['d1', "d2's", 'd3']));
    });

    it('fails the transaction when one fails, and drops them on a rollback', async () => {
      await expect(
        asStorage()
          .transaction()
          .execute(async (trx) => {
            await insert.runDeferred(trx, { id: 'fresh', n: 1 });
            await insert.runDeferred(trx, { id: 'd1', n: 1 }); // a duplicate key: fails with the commit
          }),
      ).rejects.toThrow(/duplicate key/);
      sent.length = 0;
      await expect(
        asStorage()
          .transaction()
          .execute(async (trx) => {
            await insert.runDeferred(trx, { id: 'dropped', n: 1 });
            throw new Error('changed my mind');
          }),
      ).rejects.toThrow('changed my mind');
      // Nothing was sent: the BEGIN and the write were held, and the rollback dropped both.
      expect(sent).toEqual([]);
      const left = await ids();
      expect(left).not.toContain('fresh');
      expect(left).not.toContain('dropped');
    });

    it('sends them at once outside a transaction', async () => {
      await insert.runDeferred(asStorage(), { id: 'alone', n: 1 });
      expect(await ids()).toContain('alone');
    });
  });
});

describe.skipIf(url === null)('prepared queries in a batch on Postgres', () => {
  const schema = `batch_test_${process.pid}`;
  type Tables = { t: { id: string; n: number | null } };
  let admin: pg.Client;
  const handles: Kysely<Tables>[] = [];

  /** A storage of one connection, as the server's pool makes them. */
  const open = (batched = true) => {
    const db = new Kysely<Tables>({
      dialect: new PostgresDialect({
        pool: new pg.Pool({
          connectionString: url ?? '',
          max: 1,
          Client: beginWithFirstStatement(pg.Client, { named: true, batched }),
          options: `-c search_path=${schema}`,
        }),
      }),
    });
    handles.push(db);
    return db as unknown as Kysely<Database>;
  };
  const insert = prepare((builder, p: { id: string; n: number }) =>
    (builder as unknown as Kysely<Tables>).insertInto('t').values({ id: p.id, n: p.n }),
  );
  const bump = prepare((builder, p: { id: string }) =>
    (builder as unknown as Kysely<Tables>)
      .updateTable('t')
      .set((eb) => ({ n: eb('n', '+', 1) }))
      .where('id', '=', p.id)
      .returning('n'),
  );
  /** The statements the one connection of `db` keeps. */
  const kept = async (db: Kysely<Database>) =>
    (await sql<{ name: string }>`select name from pg_prepared_statements order by name`.execute(db)).rows.map(
      (row) => row.name,
    );
  const stored = async (id: string) =>
    (await admin.query(`select n from "${schema}".t where id = $1`, [id])).rows as { n: string }[];

  beforeAll(async () => {
    admin = new pg.Client({ connectionString: url ?? '' });
    await admin.connect();
    await admin.query(`create schema "${schema}"`);
    await admin.query(`create table "${schema}".t (id text primary key, n bigint)`);
  });

  afterAll(async () => {
    for (const db of handles) await db.destroy();
    await admin?.query(`drop schema if exists "${schema}" cascade`);
    await admin?.end();
  });

  it('prepares a statement once per connection, then executes it by name', async () => {
    const db = open();
    for (const round of [1, 2, 3]) {
      sent.length = 0;
      const n = await db.transaction().execute(async (trx) => {
        await insert.runDeferred(trx, { id: `p${round}`, n: round });
        return (await bump.first(trx, { id: `p${round}` }))?.n;
      });
      expect(String(n)).toBe(String(round + 1));
      expect(sent).toHaveLength(2);
      const batch = sent[0] ?? '';
      if (round === 1) {
        expect(batch).toMatch(
          /^begin;prepare (agentry_\d+) as insert into "t" .*;execute \1\('p1','1'\);prepare (agentry_\d+) as update "t" .*;execute \2\('p1'\)$/,
        );
      } else {
        expect(batch).not.toContain('prepare');
        expect(batch).toMatch(
          new RegExp(`^begin;execute agentry_\\d+\\('p${round}','${round}'\\);execute agentry_\\d+\\('p${round}'\\)$`),
        );
      }
      expect(sent[1]).toBe('commit');
    }
    expect(await kept(db)).toHaveLength(2);
    const { rows } = await admin.query(`select id, n from "${schema}".t where id like 'p%' order by id`);
    expect(rows).toEqual([
      { id: 'p1', n: '2' },
      { id: 'p2', n: '3' },
      { id: 'p3', n: '4' },
    ]);
  });

  it('executes by name what node-postgres parsed alone, without preparing it again', async () => {
    const db = open();
    await insert.run(db, { id: 'alone1', n: 1 });
    expect(await kept(db)).toHaveLength(1);
    sent.length = 0;
    await db.transaction().execute(async (trx) => {
      await insert.runDeferred(trx, { id: 'alone2', n: 2 });
    });
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatch(/^begin;execute agentry_\d+\('alone2','2'\);commit$/);
    // ...and the other way round: prepared in a batch, then sent alone by name without a parse.
    await db.transaction().execute(async (trx) => {
      await bump.first(trx, { id: 'alone1' });
    });
    expect(await kept(db)).toHaveLength(2);
    expect(await bump.first(db, { id: 'alone1' })).toEqual({ n: '3' });
    expect(await kept(db)).toHaveLength(2);
  });

  it('prepares again after a rollback dropped the batch that held the PREPARE', async () => {
    const db = open();
    sent.length = 0;
    await expect(
      db.transaction().execute(async (trx) => {
        await insert.runDeferred(trx, { id: 'never', n: 1 });
        throw new Error('changed my mind');
      }),
    ).rejects.toThrow('changed my mind');
    expect(sent).toEqual([]);
    await db.transaction().execute(async (trx) => {
      await insert.runDeferred(trx, { id: 'after', n: 1 });
    });
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatch(/^begin;prepare agentry_\d+ as insert into "t" .*;commit$/);
    expect(await kept(db)).toHaveLength(1);
  });

  it('sends unnamed statements after a failed batch that prepared something, and stores the same', async () => {
    const db = open();
    await admin.query(`insert into "${schema}".t values ('taken', 1)`);
    await expect(
      db.transaction().execute(async (trx) => {
        await insert.runDeferred(trx, { id: 'taken', n: 2 });
      }),
    ).rejects.toThrow(/duplicate key/);
    sent.length = 0;
    const n = await db.transaction().execute(async (trx) => {
      await insert.runDeferred(trx, { id: 'unnamed', n: 5 });
      return (await bump.first(trx, { id: 'unnamed' }))?.n;
    });
    expect(String(n)).toBe('6');
    expect(sent).toHaveLength(2);
    expect(sent[0]).toMatch(/^begin;insert into "t" .*;update "t" /);
    expect(sent[0]).not.toContain('execute');
    expect(await stored('unnamed')).toEqual([{ n: '6' }]);
    expect(await stored('taken')).toEqual([{ n: '1' }]);
  });

  it('sends unnamed statements once a statement it kept is gone (a pooler gave it another connection)', async () => {
    const db = open();
    await db.transaction().execute(async (trx) => {
      await insert.runDeferred(trx, { id: 'kept1', n: 1 });
    });
    expect(await kept(db)).toHaveLength(1);
    // The server's connection no longer has it, though node-postgres has it recorded as parsed.
    await sql`deallocate all`.execute(db);
    await expect(
      db.transaction().execute(async (trx) => {
        await insert.runDeferred(trx, { id: 'kept2', n: 2 });
      }),
    ).rejects.toMatchObject({ code: '26000' });
    sent.length = 0;
    await db.transaction().execute(async (trx) => {
      await insert.runDeferred(trx, { id: 'kept3', n: 3 });
    });
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatch(/^begin;insert into "t" .*'kept3'.*;commit$/);
    expect(await stored('kept2')).toEqual([]);
    expect(await stored('kept3')).toEqual([{ n: '3' }]);
  });

  it('keeps batches unnamed when told to name statements through the protocol only', async () => {
    const db = open(false);
    sent.length = 0;
    await db.transaction().execute(async (trx) => {
      await insert.runDeferred(trx, { id: 'protocol1', n: 1 });
    });
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatch(/^begin;insert into "t" .*;commit$/);
    // Alone, a prepared query is still a named statement.
    expect(await bump.first(db, { id: 'protocol1' })).toEqual({ n: '2' });
    expect(await kept(db)).toHaveLength(1);
  });

  it('writes values it cannot execute by name into the text or sends them as parameters', async () => {
    const db = open();
    sent.length = 0;
    const large = 'x'.repeat(20_000);
    await db.transaction().execute(async (trx) => {
      await insert.runDeferred(trx, { id: large, n: 1 });
      await insert.runDeferred(trx, { id: 'small', n: 2 });
    });
    const { rows } = await admin.query(`select id, n from "${schema}".t where id in ($1, 'small') order by n`, [large]);
    expect(rows).toEqual([
      { id: large, n: '1' },
      { id: 'small', n: '2' },
    ]);
  });
});
