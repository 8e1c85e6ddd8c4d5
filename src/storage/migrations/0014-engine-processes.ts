import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

/**
 * The registry of live engine processes (src/engine/process-registry.ts). A process that runs turns keeps its row
 * alive with a heartbeat; a session leased by a process whose row has expired (killed, frozen, cut off) can be
 * claimed at once instead of after its whole lease, and the fencing token keeps the old owner from writing.
 */
export const engineProcesses: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable('engine_processes')
      // The owner string written into sessions.lease_owner.
      .addColumn('id', 'text', (col) => col.primaryKey())
      .addColumn('role', 'text', (col) => col.notNull())
      .addColumn('started_at', 'bigint', (col) => col.notNull())
      .addColumn('heartbeat_at', 'bigint', (col) => col.notNull())
      // Alive until then; the heartbeat moves it forward.
      .addColumn('expires_at', 'bigint', (col) => col.notNull())
      .execute();
  },
};
