/**
 * Every column of the tables that hot queries read whole, by name. On Postgres a query that names its columns is
 * kept as a prepared statement, parsed and planned once per connection (named-statements.ts); a `select *` never
 * is, since a column that another process's migration adds would change its result under a kept plan. Selecting
 * these lists reads the same rows as `select *` and can be kept: a column added later is simply not read until the
 * code that knows it lists it. The type of each list fails to check while it misses a column of its table, and
 * `test/storage-columns.test.ts` compares them with the migrated tables of both dialects.
 */
import type { ItemsTable, MessagesTable } from './schema.ts';

/** `columns` when it names every column of `Table`; otherwise a type that names the missing ones. */
type EveryColumn<Table, Columns extends readonly (keyof Table & string)[]> =
  Exclude<keyof Table, Columns[number]> extends never ? Columns : { missing: Exclude<keyof Table, Columns[number]> };

function everyColumn<Table>() {
  return <const Columns extends readonly (keyof Table & string)[]>(
    columns: Columns & EveryColumn<Table, Columns>,
  ): Columns => columns;
}

export const MESSAGE_COLUMNS = everyColumn<MessagesTable>()([
  'id',
  'org_id',
  'session_id',
  'seq',
  'status',
  'parts',
  'response_text',
  'error',
  'input_tokens',
  'cached_input_tokens',
  'output_tokens',
  'cost_micros',
  'step_count',
  'cancel_requested',
  'agent_id',
  'agent_version',
  'run_id',
  'source',
  'created_at',
  'started_at',
  'completed_at',
  'updated_at',
  'options',
  'deleted_at',
  'traceparent',
  'warnings',
]);

export const ITEM_COLUMNS = everyColumn<ItemsTable>()([
  'id',
  'org_id',
  'session_id',
  'message_id',
  'seq',
  'step',
  'type',
  'call_id',
  'content',
  'created_at',
]);

/** A table's columns qualified by its name (`messages.id`), for queries that join it. */
export function qualified<const Table extends string, const Column extends string>(
  table: Table,
  columns: readonly Column[],
): `${Table}.${Column}`[] {
  return columns.map((column): `${Table}.${Column}` => `${table}.${column}`);
}
