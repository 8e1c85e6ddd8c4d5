/**
 * `agentry migrate` as a user runs it: on a fresh database it names every migration it applies, on an up-to-date
 * one it says there was nothing to apply, and on a database an older version left it names only what was missing.
 */
import { describe, expect, it } from 'vitest';
import { dialects, testEnvironment } from './helpers/harness.ts';
import { allMigrations, olderDatabase } from './helpers/migrations.ts';
import { runCli, startsTimeout } from './helpers/server-process.ts';

describe.each(dialects())('agentry migrate (%s)', (dialect) => {
  it(
    'prints each migration it applies, then that the database is up to date',
    async () => {
      const environment = testEnvironment(dialect);
      try {
        const names = Object.keys(await allMigrations(environment.env.AGENTRY_DATA_DIR ?? '')).sort();
        expect(names.length).toBeGreaterThan(1);
        const fresh = runCli(['migrate'], environment.env);
        expect(fresh.status, fresh.stderr).toBe(0);
        expect(fresh.stdout).toBe(
          `${names.map((name) => `applied migration ${name}\n`).join('')}database is up to date: ${names.length} migrations applied\n`,
        );

        const again = runCli(['migrate'], environment.env);
        expect(again.status, again.stderr).toBe(0);
        expect(again.stdout).toBe('database is up to date: no migration to apply\n');
      } finally {
        await environment.cleanup();
      }
    },
    startsTimeout(2),
  );

  it(
    'applies only what an older version left out',
    async () => {
      const environment = testEnvironment(dialect);
      try {
        const names = Object.keys(await allMigrations(environment.env.AGENTRY_DATA_DIR ?? '')).sort();
        const newest = names.at(-1) ?? '';
        await (await olderDatabase(environment.env, newest)).destroy();
        const upgrade = runCli(['migrate'], environment.env);
        expect(upgrade.status, upgrade.stderr).toBe(0);
        expect(upgrade.stdout).toBe(`applied migration ${newest}\ndatabase is up to date: 1 migration applied\n`);
      } finally {
        await environment.cleanup();
      }
    },
    startsTimeout(1),
  );
});
