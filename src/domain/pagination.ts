/**
 * `after`-cursor lists, newest first, as OpenAI-style list objects (`{object: "list", data, first_id, last_id,
 * has_more}`). The order is (created_at desc, id desc) and `after` names the last item of the previous page; the
 * cursor is looked up by the caller, so a row that has been deleted since can still anchor it and deleting while
 * paging skips nothing.
 */
import { type SelectQueryBuilder, type SqlBool, type StringReference, sql } from 'kysely';
import { validationError } from '../errors/app-error.ts';

export interface CursorQuery {
  limit: number;
  after?: string;
}

export interface CursorPage<T> {
  object: 'list';
  data: T[];
  first_id: string | null;
  last_id: string | null;
  has_more: boolean;
}

/** Where a cursor points: the order key of the row `after` names. */
export interface Anchor {
  id: string;
  created_at: number;
}

export interface NewestFirst<DB, TB extends keyof DB, R, T> {
  /** The order columns of `select`; qualify them (`d.created_at`) when it joins. */
  createdAt: StringReference<DB, TB>;
  id: StringReference<DB, TB>;
  /** The order key of the row `after` names, or undefined when it names none the caller accepts. */
  anchor(after: string): Promise<Anchor | undefined>;
  /** The message of the validation error (param `after`) for an `after` that `anchor` did not find. */
  unknownAfter(after: string): string;
  view(row: R): T;
}

/** One page of `select` (its filters applied, no order or limit yet) newest first, after `query.after`. */
export async function newestFirstPage<DB, TB extends keyof DB, R, T extends { id: string }>(
  select: SelectQueryBuilder<DB, TB, R>,
  query: CursorQuery,
  page: NewestFirst<DB, TB, R, T>,
): Promise<CursorPage<T>> {
  const createdAt = sql.ref(page.createdAt);
  const id = sql.ref(page.id);
  let filtered = select;
  if (query.after !== undefined) {
    const cursor = await page.anchor(query.after);
    if (cursor === undefined) throw validationError('after', page.unknownAfter(query.after));
    filtered = filtered.where(
      sql<SqlBool>`(${createdAt} < ${cursor.created_at} or (${createdAt} = ${cursor.created_at} and ${id} < ${cursor.id}))`,
    );
  }
  const rows = await filtered
    .orderBy(createdAt, 'desc')
    .orderBy(id, 'desc')
    .limit(query.limit + 1)
    .execute();
  return pageOf(rows, query.limit, page.view);
}

/** A page of `rows` fetched with limit + 1, as an OpenAI-style cursor list. */
function pageOf<R, T extends { id: string }>(rows: R[], limit: number, view: (row: R) => T): CursorPage<T> {
  const data = rows.slice(0, limit).map(view);
  return {
    object: 'list',
    data,
    first_id: data[0]?.id ?? null,
    last_id: data.at(-1)?.id ?? null,
    has_more: rows.length > limit,
  };
}
