import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

/**
 * Of a message's and a run's input tokens, those the provider read from its prompt cache (OpenAI's
 * `cached_tokens`, Anthropic's cache reads): shown in the usage and priced at the model's cached input price.
 */
export const cachedInputTokens: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    for (const table of ['messages', 'runs']) {
      await db.schema
        .alterTable(table)
        .addColumn('cached_input_tokens', 'integer', (col) => col.notNull().defaultTo(0))
        .execute();
    }
  },
};
