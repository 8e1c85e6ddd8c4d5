import type { Migration, MigrationProvider } from 'kysely/migration';
import { initial } from './0001-initial.ts';
import { engine } from './0002-engine.ts';
import { spans } from './0003-spans.ts';

/** Versioned migrations, applied in name order. Never edit a released one: add the next. */
const migrations: Record<string, Migration> = {
  '0001-initial': initial,
  '0002-engine': engine,
  '0003-spans': spans,
};

export const migrationProvider: MigrationProvider = {
  getMigrations: async () => migrations,
};
