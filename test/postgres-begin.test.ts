/**
 * A transaction's BEGIN sent with its first statement on Postgres (storage/postgres-begin.ts), against the real
 * server through Kysely as the storage uses it: one round trip fewer per transaction, the same values stored and
 * read back (quotes, backslashes, placeholders inside values, numbers, nulls, booleans), values that cannot be
 * written as literals sent as parameters after a BEGIN of their own, a failed first statement rolled back, and an
 * empty transaction that sends nothing. Deferred writes (prepared.ts runDeferred) go with the transaction's next
 * statement or its COMMIT; one that fails fails that statement and the transaction; a rollback drops them; outside
 * a transaction they are sent at once. A prepared query goes alone, named, the first time on a connection, and in
 * a batch as `execute <name>(…)` after that; a connection that finds a kept statement missing sends unnamed
 * statements from then on, and `batched: false` keeps batches unnamed.
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

/**
 * What node-postgres sends, counted by wrapping its query in this test's process only: a simple query's text, and
 * a named statement as `named <name>`.
 */
const sent: string[] = [];
const send = pg.Client.prototype.query as (this: pg.Client, ...args: unknown[]) => unknown;
Object.defineProperty(pg.Client.prototype, 'query', {
  configurable: true,
  writable: true,
  value(this: pg.Client, ...args: unknown[]) {
    const [first] = args;
    if (typeof first === 'string') sent.push(first);
    else if (typeof first === 'object' && first !== null && 'name' in first) sent.push(`named ${String(first.name)}`);
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
      // The connection parses the prepared insert by name the first time it sends it (alone), then asks whether
      // the server keeps it under that name.
      await insert.run(asStorage(), { id: 'd0', n: 0 });
      await sql`select 1`.execute(db); // the look was sent before this: it has answered
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
      // The prepared insert, parsed on the connection, is executed by name with its values.
      expect(sent[0]).toMatch(/^begin;execute (agentry_\d+)\('d1','1'\);execute \1\('d2''s','2'\);select count/);
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

  it('parses a prepared query by name on its first use, then executes it by name in batches', async () => {
    const db = open();
    for (const round of [1, 2, 3]) {
      sent.length = 0;
      const n = await db.transaction().execute(async (trx) => {
        await insert.runDeferred(trx, { id: `p${round}`, n: round });
        return (await bump.first(trx, { id: `p${round}` }))?.n;
      });
      expect(String(n)).toBe(String(round + 1));
      if (round === 1) {
        // Alone: the BEGIN, then each statement named, so that the connection parses it; after the first, a look
        // whether the server keeps it under its name.
        expect(sent).toEqual([
          'begin',
          expect.stringMatching(/^named agentry_\d+$/),
          expect.stringMatching(/^select 1 from pg_prepared_statements/),
          expect.stringMatching(/^named agentry_\d+$/),
          'commit',
        ]);
      } else {
        expect(sent).toHaveLength(2);
        expect(sent[0]).toMatch(
          new RegExp(`^begin;execute agentry_\\d+\\('p${round}','${round}'\\);execute agentry_\\d+\\('p${round}'\\)$`),
        );
        expect(sent[1]).toBe('commit');
      }
    }
    expect(await kept(db)).toHaveLength(2);
    const { rows } = await admin.query(`select id, n from "${schema}".t where id like 'p%' order by id`);
    expect(rows).toEqual([
      { id: 'p1', n: '2' },
      { id: 'p2', n: '3' },
      { id: 'p3', n: '4' },
    ]);
  });

  it('executes by name in a batch what the connection parsed alone', async () => {
    const db = open();
    await insert.run(db, { id: 'alone1', n: 1 });
    expect(await kept(db)).toHaveLength(1);
    for (const id of ['alone2', 'alone3']) {
      sent.length = 0;
      await db.transaction().execute(async (trx) => {
        await insert.runDeferred(trx, { id, n: 2 });
      });
    }
    expect(sent).toEqual([expect.stringMatching(/^begin;execute agentry_\d+\('alone3','2'\);commit$/)]);
    expect(await stored('alone3')).toEqual([{ n: '2' }]);
  });

  it('never executes by name behind a pooler that keeps statements under names of its own', async () => {
    const pooled = () => {
      const pool = new pg.Pool({
        connectionString: url ?? '',
        max: 1,
        Client: beginWithFirstStatement(pg.Client, { named: true }),
        options: `-c search_path=${schema}`,
      });
      const db = new Kysely<Tables>({ dialect: new PostgresDialect({ pool }) });
      handles.push(db);
      return { pool, db: db as unknown as Kysely<Database> };
    };
    /** node-postgres's record of the statements its connection parsed. */
    const parsed = async (pool: pg.Pool) => {
      const client = await pool.connect();
      try {
        return Reflect.get(Reflect.get(client, 'connection'), 'parsedStatements') as Record<string, string>;
      } finally {
        client.release();
      }
    };
    const first = pooled();
    await insert.run(first.db, { id: 'renamed0', n: 0 });
    const [entry] = Object.entries(await parsed(first.pool));
    expect(entry).toBeDefined();
    const [name, text] = entry ?? ['', ''];
    // As PgBouncer does: the client's Parse was answered, and the server keeps the statement under a name of its own.
    const behind = pooled();
    const records = await parsed(behind.pool);
    await sql.raw(`prepare pgbouncer_1 as ${text}`).execute(behind.db);
    records[name] = text;
    for (const id of ['renamed1', 'renamed2']) {
      sent.length = 0;
      await behind.db.transaction().execute(async (trx) => {
        await insert.runDeferred(trx, { id, n: 1 });
      });
      expect(sent.join('\n')).not.toContain('execute');
    }
    expect(await stored('renamed2')).toEqual([{ n: '1' }]);
  });

  it('runs statements sent at once in one transaction, parsed or not', async () => {
    const db = open();
    await admin.query(`insert into "${schema}".t values ('c1', 1), ('c2', 2)`);
    for (const round of [1, 2]) {
      const results = await db
        .transaction()
        .execute(async (trx) =>
          Promise.all([
            bump.first(trx, { id: 'c1' }),
            insert.runDeferred(trx, { id: `c-new-${round}`, n: round }),
            bump.first(trx, { id: 'c2' }),
            bump.first(trx, { id: 'c1' }),
          ]),
        );
      expect(results.map((row) => (row === undefined ? null : String(row.n)))).toEqual(
        round === 1 ? ['2', null, '3', '3'] : ['4', null, '4', '5'],
      );
    }
    expect(await stored('c-new-2')).toEqual([{ n: '2' }]);
  });

  it('keeps executing by name after a transaction that failed for its own reasons', async () => {
    const db = open();
    await insert.run(db, { id: 'own1', n: 1 });
    await expect(
      db.transaction().execute(async (trx) => {
        await insert.runDeferred(trx, { id: 'own1', n: 2 });
      }),
    ).rejects.toThrow(/duplicate key/);
    sent.length = 0;
    await db.transaction().execute(async (trx) => {
      await insert.runDeferred(trx, { id: 'own2', n: 2 });
    });
    expect(sent).toEqual([expect.stringMatching(/^begin;execute agentry_\d+\('own2','2'\);commit$/)]);
  });

  it('sends unnamed statements once a statement it kept is gone (a pooler gave it another connection)', async () => {
    const db = open();
    // Parsed alone, then seen kept under its name.
    for (const id of ['kept0', 'kept1']) {
      await db.transaction().execute(async (trx) => {
        await insert.runDeferred(trx, { id, n: 1 });
      });
    }
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
