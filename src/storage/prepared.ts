/**
 * Queries of the hot paths, built and compiled once per SQL dialect instead of through the query builder on every
 * call. A query is written with the builder as usual, its variable values taken from a parameter object; each of
 * those values compiles to a marker, and executing the query puts the call's values in the markers' places. The
 * SQLite adapter then reuses its prepared statement for the same text (sqlite-adapter.ts); on Postgres the text is
 * sent as a named statement, parsed once per connection (named-statements.ts).
 *
 * Values must reach the SQL as plain parameters (comparisons, `set`, `values`, `limit`): a value that changes the
 * SQL's shape (an `in` list of varying length, an identifier) cannot be a parameter here. Writes to the tables the
 * change signal watches (change-signal.ts) must not be prepared: the signal sees writes while they are compiled.
 */
import { type Compilable, type CompiledQuery, type Kysely, PostgresAdapter, type QueryResult, sql } from 'kysely';
import { SIGNALLED_TABLES } from './change-signal.ts';
import { inlineConstants, nameStatement } from './named-statements.ts';
import { DEFERRED } from './postgres-begin.ts';
import type { Database } from './schema.ts';

type Executor = Kysely<Database>;

const MARK = '\u0000agentry-param:';

/** The parameter object a prepared query is built with: each field stands for the value given at execution. */
export type Params<P> = { readonly [K in keyof P]: P[K] };

export interface Prepared<P, R> {
  /** Every row. */
  all(db: Executor, params: P): Promise<R[]>;
  /** The first row, if any. */
  first(db: Executor, params: P): Promise<R | undefined>;
  /** Rows changed by a write. */
  run(db: Executor, params: P): Promise<bigint>;
  /**
   * A write whose answer is not needed: inside a Postgres transaction it goes to the server with the next statement
   * (postgres-begin.ts DEFERRED), so its failure fails that statement and the transaction instead of this call.
   */
  runDeferred(db: Executor, params: P): Promise<void>;
}

const markers = new Proxy(
  {},
  {
    get: (_target, key) => (typeof key === 'string' ? `${MARK}${key}` : undefined),
  },
);

export function prepare<P extends object, R>(
  build: (db: Executor, params: Params<P>) => Compilable<R>,
): Prepared<P, R> {
  // One compilation per dialect: the adapter class tells them apart (a transaction shares its database's).
  const compiled = new Map<unknown, { query: CompiledQuery<R>; slots: (string | null)[] }>();
  const compile = (db: Executor) => {
    const adapter = db.getExecutor().adapter;
    const kind = adapter.constructor;
    let entry = compiled.get(kind);
    if (entry === undefined) {
      const built = build(db, markers as Params<P>).compile();
      const slotOf = (value: unknown) =>
        typeof value === 'string' && value.startsWith(MARK) ? value.slice(MARK.length) : null;
      if (adapter instanceof PostgresAdapter) {
        // Constants become literals, so that a plan the server keeps knows them (named-statements.ts).
        const { text, kept } = inlineConstants(built.sql, built.parameters, (index) => {
          return slotOf(built.parameters[index]) === null;
        });
        const parameters = kept.map((index) => built.parameters[index]);
        const query = { ...built, sql: text, parameters };
        entry = { query, slots: parameters.map(slotOf) };
        nameStatement(text);
      } else {
        entry = { query: built, slots: built.parameters.map(slotOf) };
      }
      compiled.set(kind, entry);
    }
    return entry;
  };
  const execute = (db: Executor, params: P, deferred = false): Promise<QueryResult<R>> => {
    const { query, slots } = compile(db);
    const parameters = query.parameters.map((value, index) => {
      const name = slots[index];
      return name === null || name === undefined ? value : (params as Record<string, unknown>)[name];
    });
    const held = deferred && db.isTransaction && db.getExecutor().adapter instanceof PostgresAdapter;
    return db.executeQuery<R>({ ...query, ...(held ? { sql: `${DEFERRED}${query.sql}` } : {}), parameters });
  };
  return {
    all: async (db, params) => (await execute(db, params)).rows,
    first: async (db, params) => (await execute(db, params)).rows[0],
    run: async (db, params) => (await execute(db, params)).numAffectedRows ?? 0n,
    runDeferred: async (db, params) => {
      await execute(db, params, true);
    },
  };
}

/** Rows an insert is prepared for at most; larger batches go through the query builder. */
const MAX_PREPARED_ROWS = 16;

type Table = keyof Database & string;
type Row = Readonly<Record<string, unknown>>;

function assertUnsignalled(table: string): void {
  // The change signal sees writes only while they are compiled (see the top of this file).
  if (SIGNALLED_TABLES.has(table)) throw new Error(`writes to ${table} cannot be prepared`);
}

/** Positional parameter names of a row of a batch (`2.seq`: the seq of the third row). */
const slotOf = (row: number, column: string) => `${row}.${column}`;

/** Row `index` of a batch, each column's value the parameter of its slot. */
const rowOfSlots = (index: number, columns: readonly string[], p: Record<string, unknown>) =>
  Object.fromEntries(columns.map((column) => [column, p[slotOf(index, column)]]));

/** The parameters of a batch of rows, by slot. */
function slotsOf(rows: readonly Row[], columns: readonly string[]): Record<string, unknown> {
  const params: Record<string, unknown> = {};
  rows.forEach((row, index) => {
    for (const column of columns) params[slotOf(index, column)] = row[column];
  });
  return params;
}

export interface PreparedInsert {
  /**
   * Inserts rows that all have the same columns, in the same order; `deferred`: sent with the transaction's next
   * statement on Postgres (Prepared.runDeferred).
   */
  run(db: Executor, rows: readonly Row[], options?: { deferred?: boolean }): Promise<void>;
}

/**
 * A multi-row insert into `table`, compiled once per column list and row count (the shapes a hot path uses are
 * few: one event, two events, an item...). Rows' values are plain parameters.
 */
export function prepareInsert(table: Table): PreparedInsert {
  assertUnsignalled(table);
  const shapes = new Map<string, Prepared<Record<string, unknown>, unknown>>();
  return {
    async run(db, rows, options = {}) {
      const first = rows[0];
      if (first === undefined) return;
      const columns = Object.keys(first);
      if (rows.length > MAX_PREPARED_ROWS) {
        // The builder checks column names against the schema; this one is only reached with rows of that table.
        await db
          .insertInto(table)
          .values(rows as never)
          .execute();
        return;
      }
      const key = `${rows.length}:${columns.join(',')}`;
      let query = shapes.get(key);
      if (query === undefined) {
        const count = rows.length;
        query = prepare((builder, p: Record<string, unknown>) =>
          builder
            .insertInto(table)
            .values(Array.from({ length: count }, (_, index) => rowOfSlots(index, columns, p)) as never),
        );
        shapes.set(key, query);
      }
      if (options.deferred === true) await query.runDeferred(db, slotsOf(rows, columns));
      else await query.run(db, slotsOf(rows, columns));
    },
  };
}

export interface PreparedNumberedInsert {
  /**
   * Inserts rows that all have the same columns (`seq` not among them), numbered on after `last`, the last `seq`
   * of the rows whose `scope` column holds `scope`; when the caller does not know it (undefined), after the one
   * the insert itself finds. Answers that last seq (0: there was none).
   */
  run(db: Executor, scope: string, rows: readonly Row[], last: number | undefined): Promise<number>;
}

/**
 * A multi-row insert into `table` whose rows are numbered by `seq` within their `scope` column. When the last seq
 * is not known, each row's seq is the scope's `max(seq)` read in the insert itself plus its place in the batch
 * (every row's read sees the table as the statement found it, on both dialects), so the writer needs no read of
 * its own before it. Callers hold what keeps others from numbering the scope meanwhile (the session's row).
 * Compiled once per column list and row count.
 */
export function prepareNumberedInsert(table: 'session_events' | 'items', scope: 'session_id'): PreparedNumberedInsert {
  const insert = prepareInsert(table);
  const shapes = new Map<string, Prepared<Record<string, unknown>, { seq: number }>>();
  // Numbered here, the insert answers nothing its caller needs: on Postgres it goes with the next statement.
  const numberedFrom = async (db: Executor, rows: readonly Row[], last: number) => {
    await insert.run(
      db,
      rows.map((row, index) => ({ ...row, seq: last + index + 1 })),
      { deferred: true },
    );
    return last;
  };
  return {
    async run(db, scopeValue, rows, last) {
      const first = rows[0];
      if (first === undefined) return last ?? 0;
      if (last !== undefined) return numberedFrom(db, rows, last);
      if (rows.length > MAX_PREPARED_ROWS) {
        // A large batch (rare): the last seq read first.
        const found = await db
          .selectFrom(table)
          .select((eb) => eb.fn.max<number | null>('seq').as('seq'))
          .where(scope, '=', scopeValue)
          .executeTakeFirst();
        return numberedFrom(db, rows, Number(found?.seq ?? 0));
      }
      const columns = Object.keys(first);
      const key = `${rows.length}:${columns.join(',')}`;
      let query = shapes.get(key);
      if (query === undefined) {
        const count = rows.length;
        query = prepare((builder, p: Record<string, unknown>) =>
          builder
            .insertInto(table)
            .values(
              Array.from({ length: count }, (_, index) => ({
                ...rowOfSlots(index, columns, p),
                seq: sql<number>`(select coalesce(max(${sql.ref('seq')}), 0) from ${sql.table(table)} where ${sql.ref(scope)} = ${p.scope}) + ${sql.lit(index + 1)}`,
              })) as never,
            )
            .returning(sql<number>`${sql.ref('seq')}`.as('seq')),
        );
        shapes.set(key, query);
      }
      const numbered = await query.all(db, { ...slotsOf(rows, columns), scope: scopeValue });
      return Math.min(...numbered.map((row) => Number(row.seq))) - 1;
    },
  };
}

export interface PreparedUpdate {
  /** Sets `values` on the row whose id is `id`; the number of rows changed. */
  run(db: Executor, id: string, values: Row): Promise<bigint>;
}

/** An update of one row of `table` by id, compiled once per set of columns written. */
export function prepareUpdate(table: Table): PreparedUpdate {
  assertUnsignalled(table);
  const shapes = new Map<string, Prepared<Record<string, unknown>, unknown>>();
  return {
    async run(db, id, values) {
      const columns = Object.keys(values).filter((column) => values[column] !== undefined);
      const key = columns.join(',');
      let query = shapes.get(key);
      if (query === undefined) {
        query = prepare((builder, p: Record<string, unknown>) =>
          builder
            .updateTable(table)
            .set(Object.fromEntries(columns.map((column) => [column, p[`set.${column}`]])) as never)
            .where('id' as never, '=', p.id as never),
        );
        shapes.set(key, query);
      }
      const params: Record<string, unknown> = { id };
      for (const column of columns) params[`set.${column}`] = values[column];
      return query.run(db, params);
    },
  };
}
