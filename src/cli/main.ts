/**
 * `agentry <command>`: serve, migrate, orgs, keys, credits. Uses the same configuration as the server
 * (AGENTRY_DATA_DIR or DATABASE_URL) and is safe to run while it runs: every change is one transaction, and
 * SQLite writers queue on the busy timeout. Every command names the database it used on standard error (a path,
 * or a URL without credentials), so a key made in the wrong data directory is noticed at once; standard output
 * carries only the result.
 */
import { parseArgs } from 'node:util';
import { createLocalBus } from '../bus/bus.ts';
import { COMPAT_SETTINGS, type Config, ConfigError, loadConfig } from '../config.ts';
import { buildDeps, type Deps } from '../deps.ts';
import { parseScopes, SCOPES } from '../domain/auth/scopes.ts';
import { listApiKeys, revokeApiKeys } from '../domain/orgs/api-keys.ts';
import { AppError } from '../errors/app-error.ts';
import { systemClock } from '../lib/clock.ts';
import { createLogger } from '../logger.ts';
import { serve } from '../main.ts';
import { formatTable, formatTime } from './table.ts';

const USAGE = `Usage: agentry <command>

  serve [--role api|worker|all]          run the server (default role: all)
  migrate                                apply database migrations
  orgs create <name>                     create an organization (with its default agent)
  orgs list                              list organizations with their project ids
  keys create --org <name> [--scopes a,b] [--compat auto|strict|openai]
                                         create an API key; prints only the key (--compat fixes how its
                                         /v1/responses requests are validated; default: AGENTRY_RESPONSES_COMPAT)
  keys list --org <name>                 list an organization's keys: prefix, scopes, created, last used
  keys revoke <prefix|key>               revoke an API key by the prefix keys list shows, or the key itself
  credits set --org <name> <usd|unlimited>  set an organization's credit balance
  schedules list --org <name>            list an organization's schedules with their next runs

Scopes: ${SCOPES.join(', ')}
Configuration comes from the environment; see docs/configuration.md.`;

class UsageError extends Error {}

async function withDeps<T>(config: Config, run: (deps: Deps) => Promise<T>): Promise<T> {
  // Commands only change data, in one transaction each; workers pick changes up from the database, so the CLI
  // never connects to Redis.
  const deps = await buildDeps(config, createLogger({ logLevel: 'warn' }, process.stderr), systemClock, {
    bus: createLocalBus(),
    detectSandbox: false,
  });
  process.stderr.write(`agentry: database ${deps.storage.location}\n`);
  try {
    return await run(deps);
  } finally {
    await deps.close();
    await deps.bus.close();
    await deps.storage.close();
  }
}

async function main(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      org: { type: 'string' },
      scopes: { type: 'string' },
      compat: { type: 'string' },
      role: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const [command, sub, ...rest] = positionals;
  if (values.help === true || command === undefined || command === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  if (command === 'serve') {
    const role = values.role;
    if (role !== undefined && role !== 'api' && role !== 'worker' && role !== 'all') {
      throw new UsageError('--role must be api, worker or all');
    }
    await serve(role === undefined ? {} : { role });
    return;
  }
  const config = loadConfig();
  const requireOrg = (): string => {
    if (values.org === undefined) throw new UsageError('--org <name> is required');
    return values.org;
  };
  switch (`${command} ${sub ?? ''}`.trim()) {
    case 'migrate': {
      const applied = await withDeps(config, async () => []);
      process.stdout.write(`database is up to date${applied.length > 0 ? '' : ''}\n`);
      return;
    }
    case 'orgs create': {
      const name = sub === undefined ? undefined : rest[0];
      if (name === undefined) throw new UsageError('orgs create <name>');
      const org = await withDeps(config, (deps) => deps.orgs.create(name));
      process.stdout.write(`created organization ${org.name} (id ${org.id}, project ${org.projectId})\n`);
      return;
    }
    case 'orgs list': {
      const orgs = await withDeps(config, (deps) => deps.orgs.list());
      const rows = orgs.map((org) => [
        org.name,
        String(org.projectId),
        org.id,
        org.creditBalanceUsd === null ? 'unlimited' : `$${org.creditBalanceUsd}`,
        formatTime(org.createdAt),
      ]);
      process.stdout.write(formatTable(['NAME', 'PROJECT', 'ID', 'CREDITS', 'CREATED'], rows));
      return;
    }
    case 'keys list': {
      const orgName = requireOrg();
      const { keys, now } = await withDeps(config, async (deps) => ({
        keys: await listApiKeys(deps.storage.db, (await deps.orgs.requireByName(orgName)).id),
        now: deps.clock.now(),
      }));
      const rows = keys.map((key) => [
        key.prefix,
        key.scopes.join(','),
        formatTime(key.createdAt),
        key.lastUsedAt === null ? 'never' : formatTime(key.lastUsedAt),
        key.revokedAt !== null ? 'revoked' : key.expiresAt !== null && key.expiresAt <= now ? 'expired' : 'active',
      ]);
      process.stdout.write(formatTable(['PREFIX', 'SCOPES', 'CREATED', 'LAST USED', 'STATUS'], rows));
      return;
    }
    case 'schedules list': {
      const orgName = requireOrg();
      const schedules = await withDeps(config, async (deps) =>
        deps.schedules.all((await deps.orgs.requireByName(orgName)).id),
      );
      const rows = schedules.map((schedule) => [
        schedule.id,
        schedule.name,
        schedule.cron === null ? `every ${schedule.interval_seconds}s` : `${schedule.cron} (${schedule.timezone})`,
        schedule.enabled ? 'enabled' : 'paused',
        schedule.next_run_times
          .slice(0, 3)
          .map((at) => formatTime(at * 1000))
          .join(', ') || '-',
      ]);
      process.stdout.write(formatTable(['ID', 'NAME', 'WHEN', 'STATUS', 'NEXT RUNS'], rows));
      return;
    }
    case 'keys create': {
      const orgName = requireOrg();
      const parsed = values.scopes === undefined ? { scopes: [...SCOPES], unknown: [] } : parseScopes(values.scopes);
      if (parsed.unknown.length > 0) throw new UsageError(`unknown scopes: ${parsed.unknown.join(', ')}`);
      if (parsed.scopes.length === 0) throw new UsageError('--scopes needs at least one scope');
      const compat = COMPAT_SETTINGS.find((setting) => setting === values.compat) ?? null;
      if (values.compat !== undefined && compat === null) {
        throw new UsageError(`--compat must be one of ${COMPAT_SETTINGS.join(', ')}`);
      }
      const key = await withDeps(config, async (deps) => {
        const org = await deps.orgs.requireByName(orgName);
        return deps.orgs.createKey(org.id, parsed.scopes, undefined, compat);
      });
      process.stdout.write(`${key}\n`);
      return;
    }
    case 'keys revoke': {
      const target = rest[0];
      if (target === undefined || target.length < 8)
        throw new UsageError('keys revoke <prefix|key> (prefix at least 8 characters)');
      const result = await withDeps(config, (deps) => revokeApiKeys(deps.storage.db, target, deps.clock.now()));
      if (result.ambiguous > 0)
        throw new UsageError(`prefix ${target} matches ${result.ambiguous} keys; give more characters`);
      if (result.revoked.length === 0) throw new UsageError(`no active key matches ${target}`);
      process.stdout.write(`revoked ${result.revoked.join(', ')}\n`);
      return;
    }
    case 'credits set': {
      const orgName = requireOrg();
      const amount = rest[0];
      if (amount === undefined) throw new UsageError('credits set --org <name> <usd|unlimited>');
      const usd = amount === 'unlimited' ? null : Number(amount);
      if (usd !== null && (!Number.isFinite(usd) || usd < 0))
        throw new UsageError('the amount must be a number >= 0 or "unlimited"');
      await withDeps(config, async (deps) => {
        const org = await deps.orgs.requireByName(orgName);
        await deps.orgs.setCredits(org.id, usd);
      });
      process.stdout.write(`credits of ${orgName}: ${usd === null ? 'unlimited' : `$${usd}`}\n`);
      return;
    }
    default:
      throw new UsageError(`unknown command: ${positionals.join(' ')}\n\n${USAGE}`);
  }
}

try {
  await main(process.argv.slice(2));
} catch (error) {
  if (error instanceof UsageError || error instanceof ConfigError || error instanceof AppError) {
    process.stderr.write(`agentry: ${error.message}\n`);
  } else {
    process.stderr.write(`agentry: ${error instanceof Error ? error.message : String(error)}\n`);
  }
  process.exitCode = 1;
}
