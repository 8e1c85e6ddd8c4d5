import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

/**
 * `engine_processes.slots`: how many turns the process runs at once. Their sum over the registry bounds the turns
 * the deployment can be running, so a limit of concurrent turns above it is settled without counting
 * (domain/turns/claim-limits.ts). Null for a row written before this migration: such a row bounds nothing.
 * `limits_concurrent_turns`: the smallest limit of concurrent turns, read by every claim under limits, in one look.
 */
export const engineProcessSlots: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema.alterTable('engine_processes').addColumn('slots', 'integer').execute();
    await db.schema.createIndex('limits_concurrent_turns').on('limits').column('concurrent_turns').execute();
  },
  async down(db: Kysely<unknown>): Promise<void> {
    await db.schema.dropIndex('limits_concurrent_turns').execute();
    await db.schema.alterTable('engine_processes').dropColumn('slots').execute();
  },
};
