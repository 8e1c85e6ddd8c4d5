/**
 * The CLI's commands, one entry each: the words that name it, its arguments and help, and what it does. main.ts
 * parses the command line against this table and prints every help text from it, so a command and its help
 * cannot part ways.
 */
import { isReadScope, parseScopes, READ_SCOPES, SCOPES } from '../domain/auth/scopes.ts';
import { formatTable, formatTime } from './table.ts';

export type OptionName =
  | 'org'
  | 'scopes'
  | 'compat'
  | 'role'
  | 'file'
  | 'out'
  | 'agents'
  | 'sessions'
  | 'runs'
  | 'session-events'
  | 'files'
  | 'webhooks'
  | 'since'
  | 'until'
  | 'action'
  | 'actor'
  | 'limit'
  | 'key'
  | 'rpm'
  | 'turns';
/** Options that take no value. */
export type FlagName = 'dry-run' | 'force' | 'read-only' | 'json';

/** The retention options of `retention set`, by the kind of data each sets (docs/retention.md). */
const RETENTION_OPTIONS = {
  sessions: 'sessions',
  runs: 'runs',
  'session-events': 'sessionEvents',
  files: 'files',
  webhooks: 'webhooks',
} as const;

/** `30` → 30 days, `forever` → 0, `default` → null; undefined for anything else. */
function retentionValue(text: string): number | null | undefined {
  if (text === 'forever') return 0;
  if (text === 'default') return null;
  if (!/^\d+$/.test(text)) return undefined;
  const days = Number(text);
  return days >= 1 && days <= 36_500 ? days : undefined;
}

const days = (value: number | null) => (value === null ? 'forever' : `${value} days`);

/** Where a command writes: the process's streams, or a test's. */
export interface Output {
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
  /** The command's environment, where `agentry apply` reads the values of `${NAME}` references. */
  env?: Record<string, string | undefined>;
}

export interface CommandInput {
  /** The positional arguments after the command's words, as many as `args` names. */
  args: string[];
  options: Partial<Record<OptionName, string>>;
  flags: Partial<Record<FlagName, true>>;
  output: Output;
}

export interface Command {
  /** `['keys', 'create']`, or `['migrate']` for a command without a group. */
  words: readonly string[];
  /** Its arguments and options as the usage line shows them. */
  synopsis: string;
  /** One line for the command lists. */
  summary: string;
  /** What `<command> --help` adds below the usage line. */
  details: string;
  options: readonly OptionName[];
  /** The flags it takes (none when absent). */
  flags?: readonly FlagName[];
  /** Options it cannot run without. */
  required: readonly OptionName[];
  /** Its positional arguments, by the names the synopsis uses; each is required. */
  args: readonly string[];
  run(input: CommandInput): Promise<void>;
}

/** A command line that cannot run as given: exit 2, with the message and the command's usage. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/**
 * The database side of the commands (and everything it imports), loaded when a command runs: the table and the
 * help texts need none of it.
 */
const database = () => import('./database.ts');

const ORG = '--org <name> is the organization, as `orgs list` shows it.';

const DURATION = /^(\d+)([smhd])$/;
const UNIT_MS = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** `--since 7d` (a duration back from now) or `--since 2026-11-01` (ISO 8601 time, UTC unless it says) in epoch ms. */
export function parseTimeOption(name: string, value: string, now: number): number {
  const duration = DURATION.exec(value);
  if (duration !== null) {
    const unit = duration[2] as keyof typeof UNIT_MS;
    return now - Number(duration[1]) * UNIT_MS[unit];
  }
  const at = /^\d{4}-\d{2}-\d{2}/.test(value) ? Date.parse(value) : Number.NaN;
  if (!Number.isFinite(at)) {
    throw new UsageError(`--${name} must be a duration back from now (30m, 24h, 7d) or an ISO time (2026-11-01)`);
  }
  return at;
}

/** What the CHANGES column shows of an entry: the fields it changed, or its summary. */
function changesOf(entry: { before: Record<string, unknown> | null; after: Record<string, unknown> | null }): string {
  const changed = entry.after?.changed_fields;
  if (Array.isArray(changed)) return changed.join(',') || '-';
  const text = JSON.stringify(entry.after ?? entry.before ?? {});
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

/** A limit on the command line: a positive integer, `unlimited` or `default` (null: back to the default). */
function limitArgument(name: 'rpm' | 'turns', value: string | undefined): number | null | undefined {
  if (value === undefined) return undefined;
  if (value === 'default') return null;
  if (!/^[1-9]\d{0,9}$/.test(value)) throw new UsageError(`--${name} must be a positive integer or "default"`);
  return Number(value);
}

/** A limit as `limits show` prints it: its value, or the default's, or unlimited. */
function describeLimit(own: number | null, effective: number | null): string {
  if (effective === null) return 'unlimited';
  return own === null ? `${effective} (default)` : String(effective);
}

export const COMMANDS: readonly Command[] = [
  {
    words: ['serve'],
    synopsis: '[--role api|worker|all]',
    summary: 'run the server (default role: all)',
    details:
      'Serves the API on HOST:PORT with the configuration of the environment (docs/configuration.md) until\n' +
      'SIGTERM or SIGINT. --role api serves HTTP only, worker runs turns only (cluster mode, docs/operations.md).',
    options: ['role'],
    required: [],
    args: [],
    async run({ options }) {
      const role = options.role;
      if (role !== undefined && role !== 'api' && role !== 'worker' && role !== 'all') {
        throw new UsageError('--role must be api, worker or all');
      }
      const { serve } = await import('../main.ts');
      await serve(role === undefined ? {} : { role });
    },
  },
  {
    words: ['migrate'],
    synopsis: '',
    summary: 'apply database migrations',
    details:
      'Brings the configured database up to date and exits, printing each migration it applies (none when the\n' +
      'database is up to date already); the server does the same when it starts.',
    options: [],
    required: [],
    args: [],
    async run({ output }) {
      const { migrateDatabase } = await database();
      const applied = await migrateDatabase(output);
      for (const name of applied) output.stdout.write(`applied migration ${name}\n`);
      output.stdout.write(
        applied.length === 0
          ? 'database is up to date: no migration to apply\n'
          : `database is up to date: ${applied.length} migration${applied.length === 1 ? '' : 's'} applied\n`,
      );
    },
  },
  {
    words: ['orgs', 'create'],
    synopsis: '<name>',
    summary: 'create an organization (with its default agent)',
    details: 'Creates the organization <name> with its default agent, and prints its id and project id.',
    options: [],
    required: [],
    args: ['<name>'],
    async run({ args: [name = ''], output }) {
      const { withDeps } = await database();
      const org = await withDeps(output, (deps) => deps.orgs.create(name));
      output.stdout.write(`created organization ${org.name} (id ${org.id}, project ${org.projectId})\n`);
    },
  },
  {
    words: ['orgs', 'list'],
    synopsis: '',
    summary: 'list organizations with their project ids',
    details: 'One line per organization: name, numeric project id, id, credit balance, creation time.',
    options: [],
    required: [],
    args: [],
    async run({ output }) {
      const { withDeps } = await database();
      const orgs = await withDeps(output, (deps) => deps.orgs.list());
      const rows = orgs.map((org) => [
        org.name,
        String(org.projectId),
        org.id,
        org.creditBalanceUsd === null ? 'unlimited' : `$${org.creditBalanceUsd}`,
        formatTime(org.createdAt),
      ]);
      output.stdout.write(formatTable(['NAME', 'PROJECT', 'ID', 'CREDITS', 'CREATED'], rows));
    },
  },
  {
    words: ['keys', 'create'],
    synopsis: '--org <name> [--scopes a,b] [--read-only] [--agents agt_1,agt_2] [--compat auto|strict|openai]',
    summary: 'create an API key; prints only the key',
    details:
      `Creates an API key of the organization and prints only the key on standard output.\n${ORG}\n` +
      `--scopes a,b gives it only those scopes (default: all of them):\n  ${SCOPES.join(' ')}\n` +
      `--read-only gives it the read scopes only (${READ_SCOPES.join(' ')}), or those of --scopes.\n` +
      '--agents a,b limits it to those agents of the organization: it sees and uses no other.\n' +
      '--compat fixes how its /v1/responses requests are validated (default: AGENTRY_RESPONSES_COMPAT).',
    options: ['org', 'scopes', 'compat', 'agents'],
    flags: ['read-only'],
    required: ['org'],
    args: [],
    async run({ options, flags, output }) {
      const parsed = options.scopes === undefined ? { scopes: [...SCOPES], unknown: [] } : parseScopes(options.scopes);
      if (parsed.unknown.length > 0) throw new UsageError(`unknown scopes: ${parsed.unknown.join(', ')}`);
      if (flags['read-only'] === true) {
        const writes = options.scopes === undefined ? [] : parsed.scopes.filter((scope) => !isReadScope(scope));
        if (writes.length > 0) throw new UsageError(`--read-only takes no write scopes: ${writes.join(', ')}`);
        parsed.scopes = parsed.scopes.filter(isReadScope);
      }
      if (parsed.scopes.length === 0) throw new UsageError('--scopes needs at least one scope');
      const agentIds =
        options.agents === undefined ? null : [...new Set(options.agents.split(/[\s,]+/).filter((id) => id !== ''))];
      if (agentIds !== null && agentIds.length === 0) throw new UsageError('--agents needs at least one agent id');
      const { COMPAT_SETTINGS } = await import('../config.ts');
      const compat = COMPAT_SETTINGS.find((setting) => setting === options.compat) ?? null;
      if (options.compat !== undefined && compat === null) {
        throw new UsageError(`--compat must be one of ${COMPAT_SETTINGS.join(', ')}`);
      }
      const { withDeps, orgId } = await database();
      const key = await withDeps(output, async (deps) =>
        deps.orgs.createKey(await orgId(deps, options.org), parsed.scopes, undefined, compat, agentIds),
      );
      output.stdout.write(`${key}\n`);
    },
  },
  {
    words: ['keys', 'list'],
    synopsis: '--org <name>',
    summary: "list an organization's keys: prefix, scopes, created, last used, agents",
    details: `One line per key: its prefix (never the key), scopes, creation, last use, status and the agents it is limited to. ${ORG}`,
    options: ['org'],
    required: ['org'],
    args: [],
    async run({ options, output }) {
      const { withDeps, orgId, listApiKeys } = await database();
      const { keys, now } = await withDeps(output, async (deps) => ({
        keys: await listApiKeys(deps.storage.db, await orgId(deps, options.org)),
        now: deps.clock.now(),
      }));
      const rows = keys.map((key) => [
        key.prefix,
        key.scopes.join(','),
        formatTime(key.createdAt),
        key.lastUsedAt === null ? 'never' : formatTime(key.lastUsedAt),
        key.revokedAt !== null ? 'revoked' : key.expiresAt !== null && key.expiresAt <= now ? 'expired' : 'active',
        key.agentIds === null ? 'all' : key.agentIds.join(','),
      ]);
      output.stdout.write(formatTable(['PREFIX', 'SCOPES', 'CREATED', 'LAST USED', 'STATUS', 'AGENTS'], rows));
    },
  },
  {
    words: ['keys', 'revoke'],
    synopsis: '<prefix|key>',
    summary: 'revoke an API key by the prefix keys list shows, or the key itself',
    details: 'Revokes the active key with that prefix (at least 8 characters; `keys list` shows 12) or that key.',
    options: [],
    required: [],
    args: ['<prefix|key>'],
    async run({ args: [target = ''], output }) {
      if (target.length < 8) throw new UsageError('the prefix needs at least 8 characters');
      const { withDeps } = await database();
      const result = await withDeps(output, (deps) => deps.orgs.revokeKeys(target));
      // Not usage errors: the command line was right, the database says no (exit 1).
      if (result.ambiguous > 0)
        throw new Error(`prefix ${target} matches ${result.ambiguous} keys; give more characters`);
      if (result.revoked.length === 0) throw new Error(`no active key matches ${target}`);
      output.stdout.write(`revoked ${result.revoked.join(', ')}\n`);
    },
  },
  {
    words: ['credits', 'set'],
    synopsis: '--org <name> <usd|unlimited>',
    summary: "set an organization's credit balance",
    details: `Sets the balance priced model calls draw from, in USD, or "unlimited". ${ORG}`,
    options: ['org'],
    required: ['org'],
    args: ['<usd|unlimited>'],
    async run({ args: [amount = ''], options, output }) {
      const usd = amount === 'unlimited' ? null : Number(amount);
      if (usd !== null && (amount.trim() === '' || !Number.isFinite(usd) || usd < 0))
        throw new UsageError('the amount must be a number >= 0 or "unlimited"');
      const { withDeps, orgId } = await database();
      await withDeps(output, async (deps) => deps.orgs.setCredits(await orgId(deps, options.org), usd));
      output.stdout.write(`credits of ${options.org}: ${usd === null ? 'unlimited' : `$${usd}`}\n`);
    },
  },
  {
    words: ['retention', 'show'],
    synopsis: '--org <name>',
    summary: "show an organization's data retention",
    details:
      'One line per kind of data: the days it is kept (or forever), and whether the organization set it or it\n' +
      `follows the deployment default (AGENTRY_RETENTION_*_DAYS; docs/retention.md). ${ORG}`,
    options: ['org'],
    required: ['org'],
    args: [],
    async run({ options, output }) {
      const { withDeps, orgId } = await database();
      const retention = await withDeps(output, async (deps) => deps.retention.get(await orgId(deps, options.org)));
      const rows = Object.entries(RETENTION_OPTIONS).map(([name, kind]) => [
        name,
        days(retention.effective[kind]),
        retention.own[kind] === null ? 'default' : 'organization',
      ]);
      output.stdout.write(formatTable(['DATA', 'KEPT', 'SET BY'], rows));
    },
  },
  {
    words: ['retention', 'set'],
    synopsis:
      '--org <name> [--sessions N] [--runs N] [--session-events N] [--files N] [--webhooks N] (N: days|forever|default)',
    summary: "set how long an organization's data is kept",
    details:
      'Sets the days each kind given is kept before the retention sweeper deletes it: sessions (with their\n' +
      'messages, items, events), runs (with their traces), session events, files (rows and bytes), webhook\n' +
      `delivery history. "forever" keeps it; "default" follows AGENTRY_RETENTION_*_DAYS. ${ORG}`,
    options: ['org', 'sessions', 'runs', 'session-events', 'files', 'webhooks'],
    required: ['org'],
    args: [],
    async run({ options, output }) {
      const change: Partial<Record<(typeof RETENTION_OPTIONS)[keyof typeof RETENTION_OPTIONS], number | null>> = {};
      for (const [name, kind] of Object.entries(RETENTION_OPTIONS)) {
        const text = options[name as keyof typeof RETENTION_OPTIONS];
        if (text === undefined) continue;
        const value = retentionValue(text);
        if (value === undefined) {
          throw new UsageError(`--${name} must be a number of days (1 to 36500), "forever" or "default"`);
        }
        change[kind] = value;
      }
      if (Object.keys(change).length === 0) {
        throw new UsageError('give at least one of --sessions, --runs, --session-events, --files, --webhooks');
      }
      const { withDeps, orgId } = await database();
      const retention = await withDeps(output, async (deps) =>
        deps.retention.update(await orgId(deps, options.org), change),
      );
      const summary = Object.entries(RETENTION_OPTIONS).map(
        ([name, kind]) => `${name} ${days(retention.effective[kind])}`,
      );
      output.stdout.write(`retention of ${options.org}: ${summary.join(', ')}\n`);
    },
  },
  {
    words: ['export'],
    synopsis: '--org <name> --out <dir>',
    summary: "write the organization's agents, connectors, schedules and webhook endpoints as YAML files",
    details:
      'Writes one <name>.<kind>.yaml per agent, MCP connector, schedule and webhook endpoint into the folder (made\n' +
      `if missing), the lock of their state (agentry.lock.json) and the JSON Schema editors validate the files with.\n${ORG}\n` +
      `Secrets are never written: connector secrets appear as \${NAME} references. Applying the folder back\n` +
      '(agentry apply -f <dir>) changes nothing. See docs/agents-as-code.md.',
    options: ['org', 'out'],
    required: ['org', 'out'],
    args: [],
    async run({ options, output }) {
      const { withDeps, orgId } = await database();
      const { exportAgents } = await import('./agents-as-code.ts');
      const files = await withDeps(output, async (deps) =>
        exportAgents(deps, await orgId(deps, options.org), options.out ?? ''),
      );
      output.stdout.write(`exported ${files.length} agent${files.length === 1 ? '' : 's'} to ${options.out}\n`);
    },
  },
  {
    words: ['apply'],
    synopsis: '--org <name> -f <dir|file> [--dry-run] [--force]',
    summary: 'create or update agents, connectors, schedules and webhook endpoints from YAML files',
    details:
      'Applies the documents of a YAML file, or of every .yaml/.yml file of a folder, matching each resource by\n' +
      `kind and name, and prints what it did. ${ORG}\n` +
      '--dry-run prints the plan and writes nothing. What was applied is kept in agentry.lock.json next to the\n' +
      `documents; a resource changed since (in the console or the API) is refused unless --force. The \${NAME}\n` +
      'references of connector secrets are read from the environment. See docs/agents-as-code.md.',
    options: ['org', 'file'],
    flags: ['dry-run', 'force'],
    required: ['org', 'file'],
    args: [],
    async run({ options, flags, output }) {
      const { withDeps, orgId } = await database();
      const { applyDocuments, planLines } = await import('./agents-as-code.ts');
      const dryRun = flags['dry-run'] === true;
      const result = await withDeps(output, async (deps) =>
        applyDocuments(deps, await orgId(deps, options.org), options.file ?? '', {
          dryRun,
          force: flags.force === true,
          env: output.env ?? {},
        }),
      );
      output.stdout.write(planLines(result.plan, dryRun));
    },
  },
  {
    words: ['limits', 'show'],
    synopsis: '--org <name> [--key <prefix>]',
    summary: "show an organization's rate and concurrency limits, and its keys'",
    details:
      'One line for the organization and one per active key (or only the key of --key <prefix>): requests\n' +
      'per minute and concurrent turns, "(default)" where AGENTRY_DEFAULT_RPM or AGENTRY_DEFAULT_CONCURRENT_TURNS\n' +
      `applies. ${ORG}`,
    options: ['org', 'key'],
    required: ['org'],
    args: [],
    async run({ options, output }) {
      const { withDeps, orgId } = await database();
      const rows = await withDeps(output, async (deps) => {
        const org = await orgId(deps, options.org);
        const keys = await deps.limits.keysByPrefix(org, options.key ?? '');
        if (options.key !== undefined && keys.length === 0) throw new Error(`no active key matches ${options.key}`);
        const subjects = [
          ...(options.key === undefined ? [{ name: 'organization', view: await deps.limits.organization(org) }] : []),
          ...(await Promise.all(
            keys.map(async (key) => ({ name: `key ${key.prefix}`, view: await deps.limits.apiKey(key.id) })),
          )),
        ];
        return subjects.map(({ name, view }) => [
          name,
          describeLimit(view.own.requestsPerMinute, view.effective.requestsPerMinute),
          describeLimit(view.own.concurrentTurns, view.effective.concurrentTurns),
        ]);
      });
      output.stdout.write(formatTable(['SUBJECT', 'REQUESTS/MIN', 'CONCURRENT TURNS'], rows));
    },
  },
  {
    words: ['limits', 'set'],
    synopsis: '--org <name> [--key <prefix>] [--rpm <n|default>] [--turns <n|default>]',
    summary: 'set the rate and concurrency limits of an organization or of one key',
    details:
      'Sets the requests per minute (--rpm) and concurrent turns (--turns) of the organization, or of its key\n' +
      'with that prefix (--key, as `keys list` shows it). "default" clears a limit: AGENTRY_DEFAULT_RPM or\n' +
      'AGENTRY_DEFAULT_CONCURRENT_TURNS applies again (unlimited when unset). Every process of the deployment\n' +
      `applies the change at once (docs/operations.md, Limits). ${ORG}`,
    options: ['org', 'key', 'rpm', 'turns'],
    required: ['org'],
    args: [],
    async run({ options, output }) {
      const rpm = limitArgument('rpm', options.rpm);
      const turns = limitArgument('turns', options.turns);
      if (rpm === undefined && turns === undefined) throw new UsageError('give --rpm, --turns or both');
      const patch = {
        ...(rpm === undefined ? {} : { requestsPerMinute: rpm }),
        ...(turns === undefined ? {} : { concurrentTurns: turns }),
      };
      const { withDeps, orgId } = await database();
      const { subject, view } = await withDeps(output, async (deps) => {
        const org = await orgId(deps, options.org);
        if (options.key === undefined) {
          return { subject: `organization ${options.org}`, view: await deps.limits.setOrganization(org, patch) };
        }
        if (options.key.length < 8) throw new UsageError('the key prefix needs at least 8 characters');
        const keys = await deps.limits.keysByPrefix(org, options.key);
        // Not usage errors: the command line was right, the database says no (exit 1).
        if (keys.length > 1) throw new Error(`prefix ${options.key} matches ${keys.length} keys; give more characters`);
        const [key] = keys;
        if (key === undefined) throw new Error(`no active key of ${options.org} matches ${options.key}`);
        return { subject: `key ${key.prefix}`, view: await deps.limits.setApiKey(key.id, patch) };
      });
      output.stdout.write(
        `limits of ${subject}: ${describeLimit(view.own.requestsPerMinute, view.effective.requestsPerMinute)} requests/min, ` +
          `${describeLimit(view.own.concurrentTurns, view.effective.concurrentTurns)} concurrent turns\n`,
      );
    },
  },
  {
    words: ['schedules', 'list'],
    synopsis: '--org <name>',
    summary: "list an organization's schedules with their next runs",
    details: `One line per schedule: id, name, cron or interval, status and its next three runs. ${ORG}`,
    options: ['org'],
    required: ['org'],
    args: [],
    async run({ options, output }) {
      const { withDeps, orgId } = await database();
      const schedules = await withDeps(output, async (deps) => deps.schedules.all(await orgId(deps, options.org)));
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
      output.stdout.write(formatTable(['ID', 'NAME', 'WHEN', 'STATUS', 'NEXT RUNS'], rows));
    },
  },
  {
    words: ['audit'],
    synopsis:
      '[--org <name>] [--since <when>] [--until <when>] [--action <action>] [--actor <who>] [--limit <n>] [--json]',
    summary: 'read the audit log: who changed what, newest first',
    details:
      'One line per change (time, actor, action, target, request id, fields changed), newest first; every\n' +
      `organization's without --org. ${ORG}\n` +
      '--since and --until take a duration back from now (30m, 24h, 7d) or an ISO time (2026-11-01T09:00Z).\n' +
      '--action agent.updated names one action, --action agent every action on agents. --actor is cli, system,\n' +
      'api_key, or a key by its id or prefix. --limit (default 50, at most 1000). --json prints the entries as JSON\n' +
      'lines. Secrets are never in the log (docs/audit-log.md).',
    options: ['org', 'since', 'until', 'action', 'actor', 'limit'],
    flags: ['json'],
    required: [],
    args: [],
    async run({ options, flags, output }) {
      const limit = options.limit === undefined ? 50 : Number(options.limit);
      if (!Number.isInteger(limit) || limit < 1 || limit > 1000) {
        throw new UsageError('--limit must be a whole number from 1 to 1000');
      }
      if (options.action !== undefined && !/^[a-z][a-z0-9_]*(\.([a-z][a-z0-9_]*|\*))?$/.test(options.action)) {
        throw new UsageError('--action must be an action (agent.updated) or a target type (agent)');
      }
      const now = Date.now();
      const since = options.since === undefined ? undefined : parseTimeOption('since', options.since, now);
      const until = options.until === undefined ? undefined : parseTimeOption('until', options.until, now);
      if (since !== undefined && until !== undefined && until <= since) {
        throw new UsageError('--until must be later than --since');
      }
      const { withDeps, orgId, listAuditLog } = await database();
      const { entries, names } = await withDeps(output, async (deps) => {
        const org = options.org === undefined ? null : await orgId(deps, options.org);
        const page = await listAuditLog(deps.storage.db, org, {
          limit,
          ...(options.action === undefined ? {} : { action: options.action }),
          ...(options.actor === undefined ? {} : { actor: options.actor }),
          ...(since === undefined ? {} : { since }),
          ...(until === undefined ? {} : { until }),
        });
        const orgs = new Map((await deps.orgs.list()).map((each) => [each.id, each.name]));
        return { entries: page.data, names: orgs };
      });
      if (flags.json === true) {
        for (const entry of entries) {
          output.stdout.write(`${JSON.stringify({ ...entry, org: names.get(entry.org_id) ?? null })}\n`);
        }
        return;
      }
      const rows = entries.map((entry) => [
        formatTime(entry.created_at * 1000),
        ...(options.org === undefined ? [names.get(entry.org_id) ?? entry.org_id] : []),
        entry.actor.type === 'api_key' ? (entry.actor.api_key_prefix ?? 'api_key') : entry.actor.type,
        entry.action,
        `${entry.target.type} ${entry.target.id}`,
        entry.request_id ?? '-',
        changesOf(entry),
      ]);
      const header = ['TIME', ...(options.org === undefined ? ['ORG'] : []), 'ACTOR', 'ACTION', 'TARGET', 'REQUEST'];
      output.stdout.write(formatTable([...header, 'CHANGES'], rows));
    },
  },
];
