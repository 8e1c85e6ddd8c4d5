/** Migrations for tests that build a database as an older version left it (run part of them, then the server). */
import type { Migration } from 'kysely/migration';
import { deploymentSecretBox, type SecretBox } from '../../src/lib/secret-box.ts';
import { migrationProvider } from '../../src/storage/migrations/index.ts';

/** The secret box of a server on this data directory without AGENTRY_SECRET_KEY. */
export const dataDirSecrets = (dataDir: string): SecretBox => deploymentSecretBox({ secretKey: null, dataDir });

/** Every migration, by name, as a server on this data directory runs them. */
export function allMigrations(dataDir: string): Promise<Record<string, Migration>> {
  const secrets = dataDirSecrets(dataDir);
  return migrationProvider({ seal: (plain) => secrets.seal(plain), replacedSecrets: () => undefined }).getMigrations();
}
