import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCommandLine } from './cli.ts';
import { COMMANDS } from './commands.ts';

async function run(...argv: string[]): Promise<{ status: number; stdout: string; stderr: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const status = await runCommandLine(argv, {
    stdout: { write: (text: string) => out.push(text) },
    stderr: { write: (text: string) => err.push(text) },
  });
  return { status, stdout: out.join(''), stderr: err.join('') };
}

const GROUPS = [...new Set(COMMANDS.filter((command) => command.words.length > 1).map((command) => command.words[0]))];

describe('the CLI command line', () => {
  it('--version prints the version of package.json and the Node.js running it', async () => {
    const { version } = JSON.parse(readFileSync(join(import.meta.dirname, '..', '..', 'package.json'), 'utf8'));
    expect(await run('--version')).toEqual({
      status: 0,
      stdout: `agentry ${version} (Node.js ${process.versions.node})\n`,
      stderr: '',
    });
  });

  it('lists every command with no arguments, --help or help', async () => {
    const help = await run();
    expect(help.status).toBe(0);
    for (const command of COMMANDS) expect(help.stdout).toContain(`\n  ${command.words.join(' ')} `);
    expect(help.stdout).toContain('--version');
    expect(await run('--help')).toEqual(help);
    expect(await run('help')).toEqual(help);
  });

  it.each(COMMANDS.map((command) => ({ name: command.words.join(' '), command })))(
    '$name --help explains the command',
    async ({ command }) => {
      const help = await run(...command.words, '--help');
      expect(help.status).toBe(0);
      expect(help.stdout).toBe(
        `Usage: ${['agentry', ...command.words, command.synopsis].join(' ').trim()}\n\n${command.details}\n`,
      );
      expect(command.details.length).toBeGreaterThan(40);
      expect(await run('help', ...command.words)).toEqual(help);
    },
  );

  it.each(GROUPS)('a group name alone (%s) lists that group’s commands, and exits 0', async (group) => {
    const listed = await run(group ?? '');
    expect(listed.status).toBe(0);
    expect(listed.stdout).toMatch(new RegExp(`^Usage: agentry ${group} <command>\\n`));
    for (const command of COMMANDS) {
      const line = `\n  ${command.words.join(' ')} `;
      if (command.words[0] === group) expect(listed.stdout).toContain(line);
      else expect(listed.stdout).not.toContain(line);
    }
    expect(await run(group ?? '', '--help')).toEqual(listed);
  });

  it('an unknown command exits 2 with a message and the commands there are', async () => {
    const top = await run('frob');
    expect(top.status).toBe(2);
    expect(top.stdout).toBe('');
    expect(top.stderr).toMatch(/^agentry: unknown command: frob\n\nUsage: agentry <command>/);
    const sub = await run('keys', 'frob', '--org', 'x');
    expect(sub.status).toBe(2);
    expect(sub.stderr).toMatch(/^agentry: unknown command: keys frob\n\nUsage: agentry keys <command>\n/);
    expect(sub.stderr).toContain('keys revoke');
    expect(sub.stderr).not.toContain('orgs create');
    expect((await run('help', 'frob')).status).toBe(2);
  });

  it.each([
    [['keys', 'create'], '--org is required', 'agentry keys create --org <name>'],
    [['keys', 'list', '--org', 'x', '--scopes', 'tasks:read'], 'keys list takes no --scopes', 'agentry keys list'],
    [['orgs', 'create'], '<name> is missing', 'agentry orgs create <name>'],
    [['orgs', 'create', 'a', 'b'], 'unexpected argument: b', 'agentry orgs create <name>'],
    [['migrate', 'now'], 'unexpected argument: now', 'agentry migrate'],
    [['serve', '--role', 'boss'], '--role must be api, worker or all', 'agentry serve [--role'],
    [['keys', 'create', '--org', 'x', '--scopes', 'root'], 'unknown scopes: root', 'agentry keys create'],
    [['keys', 'revoke', 'agk_'], 'the prefix needs at least 8 characters', 'agentry keys revoke <prefix|key>'],
    [['credits', 'set', '--org', 'x', 'lots'], 'the amount must be a number', 'agentry credits set'],
    [
      ['keys', 'create', '--org', 'x', '--read-only', '--scopes', 'files:read,files:write'],
      '--read-only takes no write scopes: files:write',
      'agentry keys create',
    ],
    [['keys', 'create', '--org', 'x', '--agents', ','], '--agents needs at least one agent id', 'agentry keys create'],
    [['retention', 'set', '--org', 'x'], 'give at least one of --sessions', 'agentry retention set'],
    [
      ['retention', 'set', '--org', 'x', '--files', 'week'],
      '--files must be a number of days (1 to 36500), "forever" or "default"',
      'agentry retention set',
    ],
    [['retention', 'set', '--org', 'x', '--runs', '0'], '--runs must be a number of days', 'agentry retention set'],
    [['retention', 'show', '--org', 'x', '--runs', '3'], 'retention show takes no --runs', 'agentry retention show'],
    [['orgs', 'list', '--orgs'], "Unknown option '--orgs'", null],
    [['keys', 'list', '--org'], "Option '--org <value>' argument missing", null],
    [['keys', 'list', '--org', 'x', '--json'], 'keys list takes no --json', 'agentry keys list'],
    [['audit', '--limit', '0'], '--limit must be a whole number from 1 to 1000', 'agentry audit [--org'],
    [['audit', '--since', 'soon'], '--since must be a duration back from now', 'agentry audit [--org'],
    [['audit', '--until', '2026-13-45'], '--until must be a duration back from now', 'agentry audit [--org'],
    [['audit', '--since', '1h', '--until', '2d'], '--until must be later than --since', 'agentry audit [--org'],
    [['audit', '--action', 'Agent Updated'], '--action must be an action', 'agentry audit [--org'],
  ])('%j is a usage error: exit 2, the message, the usage', async (argv, message, usage) => {
    const result = await run(...argv);
    expect(result.status).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain(`agentry: ${message}`);
    if (usage !== null) expect(result.stderr).toContain(`\nUsage: ${usage}`);
  });
});
