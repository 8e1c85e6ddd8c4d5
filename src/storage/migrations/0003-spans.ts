import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

/**
 * Execution traces: one row per agent step, model call and tool call of a run. No foreign key to sessions or
 * runs' sessions: runs and their traces outlive a deleted session.
 */
export const spans: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable('spans')
      .addColumn('id', 'text', (col) => col.primaryKey())
      .addColumn('org_id', 'text', (col) => col.notNull())
      .addColumn('run_id', 'text', (col) => col.notNull())
      .addColumn('parent_id', 'text')
      .addColumn('kind', 'text', (col) => col.notNull())
      .addColumn('name', 'text', (col) => col.notNull())
      .addColumn('status', 'text', (col) => col.notNull())
      // Pre-order position within the run (a parent before its children); see domain/runs/span-repo.ts.
      .addColumn('seq', 'integer', (col) => col.notNull())
      .addColumn('started_at', 'bigint', (col) => col.notNull())
      .addColumn('ended_at', 'bigint')
      .addColumn('input_preview', 'text')
      .addColumn('output_preview', 'text')
      .addColumn('input_tokens', 'integer', (col) => col.notNull().defaultTo(0))
      .addColumn('output_tokens', 'integer', (col) => col.notNull().defaultTo(0))
      .addColumn('cost_micros', 'bigint', (col) => col.notNull().defaultTo(0))
      .addColumn('attributes', 'text', (col) => col.notNull())
      .execute();
    await db.schema.createIndex('spans_run_seq').on('spans').columns(['run_id', 'seq']).unique().execute();
  },
};
