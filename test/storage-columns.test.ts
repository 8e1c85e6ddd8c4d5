/**
 * The column lists that hot queries select instead of `*` (storage/columns.ts) name exactly the columns of their
 * migrated tables on both dialects, and a query that selects one reads the same row as `select *`.
 */
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { ITEM_COLUMNS, MESSAGE_COLUMNS } from '../src/storage/columns.ts';
import { dialects } from './helpers/harness.ts';
import { afterMigrating, SESSION_SEED } from './helpers/migrations.ts';

/** A name after every migration's: the database gets all of them. */
const AFTER_ALL = '9999';

describe.each(dialects())('column lists (%s)', (dialect) => {
  it('name every column of their tables, and only those', async () => {
    await afterMigrating(dialect, AFTER_ALL, [], async ({ storage }) => {
      const tables = await storage.db.introspection.getTables();
      const columnsOf = (name: string) =>
        tables
          .find((table) => table.name === name)
          ?.columns.map((column) => column.name)
          .sort();
      expect(columnsOf('messages')).toEqual([...MESSAGE_COLUMNS].sort());
      expect(columnsOf('items')).toEqual([...ITEM_COLUMNS].sort());
    });
  });

  it('read the same row as select *', async () => {
    const seed = [
      ...SESSION_SEED,
      `insert into messages (id, org_id, session_id, seq, status, parts, input_tokens, output_tokens, cost_micros,
         step_count, cancel_requested, agent_id, run_id, source, created_at, updated_at, options, warnings)
         values ('message-1', 'org-1', 'session-1', 1, 'queued', '[]', 0, 0, 0, 0, 0, 'agent-1', 'run-1',
         'sessions', 1, 1, '{"a":1}', '[]')`,
    ];
    await afterMigrating(dialect, AFTER_ALL, seed, async ({ storage }) => {
      const all = await sql`select * from messages where id = 'message-1'`.execute(storage.db);
      const listed = await storage.db
        .selectFrom('messages')
        .select(MESSAGE_COLUMNS)
        .where('id', '=', 'message-1')
        .executeTakeFirst();
      expect(all.rows).toHaveLength(1);
      expect(listed).toEqual(all.rows[0]);
    });
  });
});
