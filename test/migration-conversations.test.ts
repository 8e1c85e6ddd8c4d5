/**
 * Migration 0007 makes `sessions.agent_id` nullable; SQLite needs the sessions table rebuilt for that. A database
 * with sessions, messages, items and events written before it must keep every row (the rebuild runs with foreign
 * keys off, so dropping the old table cascades nowhere) and accept a session without an agent afterwards.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Kysely } from 'kysely';
import { type Migration, Migrator } from 'kysely/migration';
import { describe, expect, it } from 'vitest';
import { openStorage } from '../src/storage/db.ts';

import { NodeSqliteDialect, openSqlite } from '../src/storage/sqlite-adapter.ts';
import { allMigrations, dataDirSecrets } from './helpers/migrations.ts';

describe('migration 0007 on SQLite', () => {
  it('keeps every row of a database written before it and then takes sessions without an agent', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'agentry-migration-'));
    try {
      const all = await allMigrations(dir);
      const before: Record<string, Migration> = Object.fromEntries(
        Object.entries(all).filter(([name]) => name < '0007'),
      );
      const database = openSqlite({ path: join(dir, 'agentry.db') });
      const old = new Kysely<unknown>({ dialect: new NodeSqliteDialect({ database }) });
      const migrated = await new Migrator({
        db: old,
        provider: { getMigrations: async () => before },
      }).migrateToLatest();
      expect(migrated.error).toBeUndefined();
      const now = Date.now();
      const statements = [
        `insert into orgs (id, name, project_id, credit_balance_micros, created_at) values ('o1', 'org', 1, null, ${now})`,
        `insert into agents (id, org_id, name, description, instructions, model, max_steps, mcp_servers, client_tools, skills, network_policy, is_default, version, workspace_provisioned_at, created_at, updated_at) values ('a1', 'o1', 'agent', null, '', 'scripted', 32, '[]', '[]', '[]', null, 1, 1, null, ${now}, ${now})`,
        `insert into sessions (id, org_id, agent_id, title, status, created_at, updated_at) values ('s1', 'o1', 'a1', null, 'idle', ${now}, ${now})`,
        `insert into messages (id, org_id, session_id, seq, status, parts, agent_id, run_id, source, created_at, updated_at) values ('m1', 'o1', 's1', 1, 'completed', '[]', 'a1', 'r1', 'sessions', ${now}, ${now})`,
        `insert into items (id, org_id, session_id, message_id, seq, step, type, call_id, content, created_at) values ('i1', 'o1', 's1', 'm1', 1, 0, 'user_message', null, '{"type":"user_message","text":"hi"}', ${now})`,
        `insert into session_events (id, session_id, seq, kind, message_id, run_id, data, created_at) values ('e1', 's1', 1, 'message.created', 'm1', 'r1', '{}', ${now})`,
      ];
      for (const statement of statements) database.prepare(statement).run([]);
      await old.destroy();

      const storage = await openStorage({ databaseUrl: null, databaseSchema: null, dataDir: dir });
      try {
        expect(await storage.migrate(dataDirSecrets(dir))).toContain('0007-conversations');
        const db = storage.db;
        expect(await db.selectFrom('sessions').select(['id', 'agent_id']).execute()).toEqual([
          { id: 's1', agent_id: 'a1' },
        ]);
        expect((await db.selectFrom('messages').select('id').execute()).map((row) => row.id)).toEqual(['m1']);
        expect((await db.selectFrom('items').select('id').execute()).map((row) => row.id)).toEqual(['i1']);
        expect((await db.selectFrom('session_events').select('id').execute()).map((row) => row.id)).toEqual(['e1']);
        await db
          .insertInto('sessions')
          .values({
            id: 's2',
            org_id: 'o1',
            agent_id: null,
            title: null,
            status: 'idle',
            created_at: now,
            updated_at: now,
          })
          .execute();
        // Foreign keys hold again: a session of an unknown org is refused, and deleting a session cascades.
        await expect(
          db
            .insertInto('sessions')
            .values({
              id: 's3',
              org_id: 'nope',
              agent_id: null,
              title: null,
              status: 'idle',
              created_at: now,
              updated_at: now,
            })
            .execute(),
        ).rejects.toThrow(/FOREIGN KEY/);
        await db.deleteFrom('sessions').where('id', '=', 's1').execute();
        expect(await db.selectFrom('items').select('id').execute()).toEqual([]);
      } finally {
        await storage.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
