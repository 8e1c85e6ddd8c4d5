/**
 * An Agentry core in the bench's own process (storage and bus through buildDeps, the `default` organization
 * bootstrapped), on a throwaway data directory or Postgres schema, for the benches that skip HTTP.
 */
import { loadConfig } from '../src/config.ts';
import { buildDeps, type Deps } from '../src/deps.ts';
import { bootstrap } from '../src/domain/orgs/org-service.ts';
import { createLogger } from '../src/logger.ts';
import { type Defer, tempDir, throwawaySchema, type Variant } from './support.ts';

export interface Core {
  deps: Deps;
  /** The `default` organization's id. */
  orgId: string;
}

/**
 * Opens storage and the bus with `env` (logging off unless it says otherwise) plus the variant's database, and
 * bootstraps. `bench` names the temp dir and schema. Every cleanup step is deferred to the caller's withCleanup.
 */
export async function openCore(
  variant: Variant,
  bench: string,
  env: Record<string, string>,
  defer: Defer,
): Promise<Core> {
  const environment: Record<string, string> = { LOG_LEVEL: 'silent', ...env };
  // The data dir or schema is deferred first so it goes last, after the pool has been closed.
  if (variant.kind === 'sqlite') {
    environment.AGENTRY_DATA_DIR = await tempDir(bench, defer);
  } else {
    environment.DATABASE_URL = variant.databaseUrl;
    environment.AGENTRY_DATABASE_SCHEMA = throwawaySchema(variant.databaseUrl, bench, defer);
  }
  const config = loadConfig(environment);
  const deps = await buildDeps(config, createLogger(config));
  defer(() => deps.bus.close());
  defer(() => deps.storage.close());
  await bootstrap(deps.orgs, null);
  const org = await deps.orgs.requireByName('default');
  return { deps, orgId: org.id };
}
