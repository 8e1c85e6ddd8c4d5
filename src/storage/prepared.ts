/**
 * Queries of the hot paths, built and compiled once per SQL dialect instead of through the query builder on every
 * call. A query is written with the builder as usual, its variable values taken from a parameter object; each of
 * those values compiles to a marker, and executing the query puts the call's values in the markers' places. The
 * SQLite adapter then reuses its prepared statement for the same text (sqlite-adapter.ts).
 *
 * Values must reach the SQL as plain parameters (comparisons, `set`, `values`, `limit`): a value that changes the
 * SQL's shape (an `in` list of varying length, an identifier) cannot be a parameter here. Writes to the tables the
 * change signal watches (change-signal.ts) must not be prepared: the signal sees writes while they are compiled.
 */
import type { Compilable, CompiledQuery, Kysely, QueryResult } from 'kysely';
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
    const kind = db.getExecutor().adapter.constructor;
    let entry = compiled.get(kind);
    if (entry === undefined) {
      const query = build(db, markers as Params<P>).compile();
      const slots = query.parameters.map((value) =>
        typeof value === 'string' && value.startsWith(MARK) ? value.slice(MARK.length) : null,
      );
      entry = { query, slots };
      compiled.set(kind, entry);
    }
    return entry;
  };
  const execute = (db: Executor, params: P): Promise<QueryResult<R>> => {
    const { query, slots } = compile(db);
    const parameters = query.parameters.map((value, index) => {
      const name = slots[index];
      return name === null || name === undefined ? value : (params as Record<string, unknown>)[name];
    });
    return db.executeQuery<R>({ ...query, parameters });
  };
  return {
    all: async (db, params) => (await execute(db, params)).rows,
    first: async (db, params) => (await execute(db, params)).rows[0],
    run: async (db, params) => (await execute(db, params)).numAffectedRows ?? 0n,
  };
}
