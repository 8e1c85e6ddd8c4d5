/**
 * What the CLI's data commands open: the services over the configured database, or only the database for
 * `migrate`. commands.ts imports this module when such a command runs, never before, so that `--help`,
 * `--version` and the group listings load only the command table (test/startup-imports.test.ts).
 */
import { createLocalBus } from '../bus/bus.ts';
import { loadConfig } from '../config.ts';
import { buildDeps, type Deps } from '../deps.ts';
import { systemClock } from '../lib/clock.ts';
import { prepareDataDir } from '../lib/private-files.ts';
import { deploymentSecretBox } from '../lib/secret-box.ts';
import { createLogger } from '../logger.ts';
import { openStorage } from '../storage/db.ts';
import type { Output } from './commands.ts';

export { listAuditLog } from '../domain/audit/audit-log.ts';
export { listApiKeys } from '../domain/orgs/api-keys.ts';

export async function withDeps<T>(output: Output, run: (deps: Deps) => Promise<T>): Promise<T> {
  // Commands only change data, in one transaction each; workers pick changes up from the database, so the CLI
  // never connects to Redis.
  const deps = await buildDeps(loadConfig(), createLogger({ logLevel: 'warn' }, process.stderr), systemClock, {
    bus: createLocalBus(),
    detectSandbox: false,
  });
  output.stderr.write(`agentry: database ${deps.storage.location}\n`);
  try {
    return await run(deps);
  } finally {
    await deps.close();
    await deps.bus.close();
    await deps.storage.close();
  }
}

/**
 * Applies the pending migrations and returns their names, in order. Only the database is opened: none of the
 * services a server builds, which would migrate it on the way without saying what they applied.
 */
export async function migrateDatabase(output: Output): Promise<string[]> {
  const config = loadConfig();
  const unfixed = prepareDataDir(config.dataDir);
  for (const problem of unfixed) output.stderr.write(`agentry: the data directory is not private: ${problem}\n`);
  const storage = await openStorage(config, { logger: createLogger({ logLevel: 'warn' }, process.stderr) });
  output.stderr.write(`agentry: database ${storage.location}\n`);
  try {
    return await storage.migrate(deploymentSecretBox(config));
  } finally {
    await storage.close();
  }
}

export async function orgId(deps: Deps, name: string | undefined): Promise<string> {
  return (await deps.orgs.requireByName(name ?? '')).id;
}
