/**
 * Migration 0021 rebuilds SQLite's text-keyed tables written on every turn (session events, spans, idempotency
 * keys) WITHOUT ROWID: the rows an older version stored are all there, each table keeps its unique constraints and
 * indexes, and its rows live in the tree of its key (no separate index of the key). On Postgres it changes nothing.
 */
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import type { Executor } from '../src/storage/db.ts';
import { dialects } from './helpers/harness.ts';
import { afterMigrating, SESSION_SEED } from './helpers/migrations.ts';

const MIGRATION = '0021-without-rowid';
const BIG = 'x'.repeat(9000);

/** A row or two in each rebuilt table (and what they reference), as an older version stored them. */
const SEED = [
  ...SESSION_SEED,
  `insert into session_events (id, session_id, seq, kind, message_id, run_id, data, created_at)
     values ('event-1', 'session-1', 1, 'session.status', null, null, '{}', 1),
            ('event-2', 'session-1', 2, 'session.status', null, null, '{"big":"${BIG}"}', 2)`,
  `insert into spans (id, org_id, run_id, parent_id, kind, name, status, seq, started_at, attributes)
     values ('span-1', 'org-1', 'run-1', null, 'agent', 'turn', 'ok', 1, 1, '{}')`,
  `insert into idempotency_keys (org_id, scope, key, request_hash, status_code, response_body, created_at)
     values ('org-1', 'messages', 'key-1', 'hash', 202, '{}', 1)`,
];

async function count(db: Executor, query: string): Promise<number> {
  const { rows } = await sql<{ n: number }>`${sql.raw(query)}`.execute(db);
  return Number(rows[0]?.n);
}

describe.each(dialects())('migration 0021 (%s)', (dialect) => {
  it('keeps every row, key and index of the rebuilt tables', async () => {
    await afterMigrating(dialect, MIGRATION, SEED, async ({ storage, applied }) => {
      expect(applied).toContain(MIGRATION);
      const { db } = storage;
      const events = await db.selectFrom('session_events').select(['id', 'seq', 'data']).orderBy('seq').execute();
      expect(events.map((event) => [event.id, event.seq])).toEqual([
        ['event-1', 1],
        ['event-2', 2],
      ]);
      expect(events[1]?.data).toBe(`{"big":"${BIG}"}`);
      expect(await db.selectFrom('spans').select('id').execute()).toEqual([{ id: 'span-1' }]);
      expect(await db.selectFrom('idempotency_keys').select('key').execute()).toEqual([{ key: 'key-1' }]);
      // Keys and unique constraints still hold.
      const duplicates = [
        `insert into session_events (id, session_id, seq, kind, data, created_at) values ('event-1', 'session-1', 9, 'k', '{}', 1)`,
        `insert into session_events (id, session_id, seq, kind, data, created_at) values ('event-9', 'session-1', 2, 'k', '{}', 1)`,
        `insert into spans (id, org_id, run_id, kind, name, status, seq, started_at, attributes) values ('span-2', 'org-1', 'run-1', 'agent', 'turn', 'ok', 1, 1, '{}')`,
        `insert into idempotency_keys (org_id, scope, key, request_hash, status_code, response_body, created_at) values ('org-1', 'messages', 'key-1', 'h', 202, '{}', 1)`,
      ];
      for (const statement of duplicates) await expect(sql.raw(statement).execute(db)).rejects.toThrow(/unique/i);
      // The session's events still go with it.
      await sql.raw(`delete from sessions where id = 'session-1'`).execute(db);
      expect(await db.selectFrom('session_events').select('id').execute()).toEqual([]);
      if (dialect === 'sqlite') {
        for (const table of ['session_events', 'spans', 'idempotency_keys']) {
          const { rows } = await sql<{ sql: string }>`
          select sql from sqlite_master where type = 'table' and name = ${table}`.execute(db);
          expect(rows[0]?.sql).toMatch(/without rowid$/i);
        }
        // No index of the primary key besides the table: only the other unique constraint and the indexes.
        expect(
          await count(
            db,
            // session_events_created is a later migration's (0035, retention).
            `select count(*) as n from sqlite_master where tbl_name = 'session_events' and type = 'index' and name <> 'session_events_created'`,
          ),
        ).toBe(1);
        expect(
          await count(db, `select count(*) as n from sqlite_master where tbl_name = 'spans' and type = 'index'`),
        ).toBe(1);
        expect(
          await count(
            db,
            `select count(*) as n from sqlite_master where tbl_name = 'idempotency_keys' and type = 'index'`,
          ),
        ).toBe(1);
        expect(await count(db, 'select count(*) as n from pragma_foreign_key_check')).toBe(0);
      }
    });
  });
});
