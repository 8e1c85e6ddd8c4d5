import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

/**
 * Spend caps below the organization (docs/budgets.md). An agent, a session and a schedule may carry a budget: its
 * limit in micro-dollars (`budget_limit_micros`, null: none) and, for agents and schedules, its period
 * (`budget_period`: `month`, a calendar month in UTC, or `lifetime`; sessions are lifetime only). Budgets are not
 * part of an agent's versioned config: a cap applies to every version a turn may run.
 *
 * `budget_spend` keeps the running total of each budgeted scope per period (`period_key`: `YYYY-MM`, or '' for
 * lifetime), added to in the transaction that records a step's cost, with the largest step seen (the estimate
 * that admits concurrent model calls) and the limits whose 80 % and 100 % crossings were announced (each webhook
 * is recorded once per crossing of a limit). `budget_holds` are the model calls in flight under a budgeted scope
 * (one per message), so concurrent turns near a cap wait instead of all passing it; a hold left by a dead worker
 * expires.
 */
export const budgets: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema.alterTable('agents').addColumn('budget_limit_micros', 'bigint').execute();
    await db.schema.alterTable('agents').addColumn('budget_period', 'text').execute();
    await db.schema.alterTable('sessions').addColumn('budget_limit_micros', 'bigint').execute();
    // Migrations may be applied out of order (storage/db.ts allows it): a database that lacks 0011 (the schedules
    // table) is not refused here, as 0026 does not refuse it. Every released database has had 0011 for long.
    const tables = await db.introspection.getTables();
    if (tables.some((table) => table.name === 'schedules')) {
      await db.schema.alterTable('schedules').addColumn('budget_limit_micros', 'bigint').execute();
      await db.schema.alterTable('schedules').addColumn('budget_period', 'text').execute();
    }
    await db.schema
      .createTable('budget_spend')
      .addColumn('scope', 'text', (col) => col.notNull())
      .addColumn('scope_id', 'text', (col) => col.notNull())
      .addColumn('period_key', 'text', (col) => col.notNull())
      .addColumn('org_id', 'text', (col) => col.notNull().references('orgs.id').onDelete('cascade'))
      .addColumn('spent_micros', 'bigint', (col) => col.notNull().defaultTo(0))
      .addColumn('max_step_micros', 'bigint', (col) => col.notNull().defaultTo(0))
      .addColumn('threshold_limit_micros', 'bigint')
      .addColumn('exceeded_limit_micros', 'bigint')
      .addColumn('updated_at', 'bigint', (col) => col.notNull())
      .addPrimaryKeyConstraint('budget_spend_pk', ['scope', 'scope_id', 'period_key'])
      .execute();
    await db.schema
      .createTable('budget_holds')
      .addColumn('scope', 'text', (col) => col.notNull())
      .addColumn('scope_id', 'text', (col) => col.notNull())
      .addColumn('holder', 'text', (col) => col.notNull())
      .addColumn('expires_at', 'bigint', (col) => col.notNull())
      .addPrimaryKeyConstraint('budget_holds_pk', ['scope', 'scope_id', 'holder'])
      .execute();
    // A step's end drops its message's holds.
    await db.schema.createIndex('budget_holds_holder').on('budget_holds').column('holder').execute();
  },
};
