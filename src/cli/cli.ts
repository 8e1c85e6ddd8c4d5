/**
 * What `agentry <command>` does with its command line: serve, migrate, orgs, keys, credits, export, apply, schedules, audit (the table
 * in commands.ts). Uses the same configuration as the server (AGENTRY_DATA_DIR or DATABASE_URL) and is safe to run
 * while it runs: every change is one transaction, and SQLite writers queue on the busy timeout. Every command names the database it used on
 * standard error (a path, or a URL without credentials), so a key made in the wrong data directory is noticed at
 * once; standard output carries only the result.
 *
 * Exit codes: 0 done (help, `--version`, and a group name alone, which lists that group's commands, included);
 * 1 the command failed (an unknown organization, an unreachable database); 2 the command line is wrong (an unknown
 * command or option, a missing argument), with the usage that fits on standard error.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { COMMANDS, type Command, type FlagName, type OptionName, type Output, UsageError } from './commands.ts';

const OPTION_NAMES: readonly OptionName[] = [
  'org',
  'scopes',
  'compat',
  'role',
  'file',
  'out',
  'agents',
  'sessions',
  'runs',
  'session-events',
  'files',
  'webhooks',
  'since',
  'until',
  'action',
  'actor',
  'limit',
  'key',
  'rpm',
  'turns',
];
const FLAG_NAMES: readonly FlagName[] = ['dry-run', 'force', 'read-only', 'json'];
/** Options with a one-letter form. */
const SHORT: Partial<Record<OptionName, string>> = { file: 'f' };
const COLUMN = 40;

function version(): string {
  const manifest: unknown = JSON.parse(readFileSync(join(import.meta.dirname, '..', '..', 'package.json'), 'utf8'));
  const value = typeof manifest === 'object' && manifest !== null && 'version' in manifest ? manifest.version : null;
  return `agentry ${String(value)} (Node.js ${process.versions.node})\n`;
}

function usageLine(command: Command): string {
  return ['agentry', ...command.words, command.synopsis].filter((part) => part !== '').join(' ');
}

/** Commands as a two-column list: words and arguments, then the summary (on its own line when the first is long). */
function commandList(commands: readonly Command[]): string {
  return commands
    .map((command) => {
      const left = `  ${usageLine(command).slice('agentry '.length)}`;
      return left.length < COLUMN - 1
        ? `${left.padEnd(COLUMN)}${command.summary}`
        : `${left}\n${' '.repeat(COLUMN)}${command.summary}`;
    })
    .join('\n');
}

function fullHelp(): string {
  return (
    `Usage: agentry <command> [options]\n\n${commandList(COMMANDS)}\n\n` +
    'agentry <command> --help describes a command; agentry --version prints the version.\n' +
    'Configuration comes from the environment, as for the server; see docs/configuration.md.\n'
  );
}

function groupHelp(group: string, commands: readonly Command[]): string {
  return `Usage: agentry ${group} <command>\n\n${commandList(commands)}\n\nagentry ${group} <command> --help describes one.\n`;
}

function commandHelp(command: Command): string {
  return `Usage: ${usageLine(command)}\n\n${command.details}\n`;
}

function groupOf(word: string | undefined): Command[] {
  return COMMANDS.filter((command) => command.words.length > 1 && command.words[0] === word);
}

function find(words: readonly string[]): Command | undefined {
  return COMMANDS.find((command) => command.words.every((word, index) => words[index] === word));
}

/** The help the words ask for (`help keys`, `keys --help`, `keys`), or null when they name nothing. */
function helpFor(words: readonly string[]): string | null {
  const command = find(words);
  if (command !== undefined) return commandHelp(command);
  if (words.length === 0) return fullHelp();
  const group = groupOf(words[0]);
  return group.length > 0 && words.length === 1 ? groupHelp(words[0] ?? '', group) : null;
}

function unknown(words: readonly string[]): UsageError {
  const group = groupOf(words[0]);
  const help = group.length > 0 ? groupHelp(words[0] ?? '', group) : fullHelp();
  return new UsageError(`unknown command: ${words.join(' ')}\n\n${help.trimEnd()}`);
}

function parse(argv: string[]): ReturnType<typeof parseOptions> {
  try {
    return parseOptions(argv);
  } catch (error) {
    // node:util's parseArgs names the option: "Unknown option '--orgs'", "Option '--org <value>' argument missing".
    throw new UsageError(error instanceof Error ? error.message : String(error));
  }
}

function parseOptions(argv: string[]) {
  return parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      ...Object.fromEntries(
        OPTION_NAMES.map((name) => {
          const short = SHORT[name];
          return [name, short === undefined ? { type: 'string' as const } : { type: 'string' as const, short }];
        }),
      ),
      ...Object.fromEntries(FLAG_NAMES.map((name) => [name, { type: 'boolean' as const }])),
      help: { type: 'boolean', short: 'h' },
      version: { type: 'boolean' },
    },
  });
}

/** Checks the command line against the command's table entry; the values it may run with. */
function inputFor(command: Command, values: Record<string, unknown>, positionals: string[]) {
  const options: Partial<Record<OptionName, string>> = {};
  for (const name of OPTION_NAMES) {
    const value = values[name];
    if (typeof value !== 'string') continue;
    if (!command.options.includes(name)) throw new UsageError(`${command.words.join(' ')} takes no --${name}`);
    options[name] = value;
  }
  for (const name of command.required) {
    if (options[name] === undefined) throw new UsageError(`--${name} is required`);
  }
  const flags: Partial<Record<FlagName, true>> = {};
  for (const name of FLAG_NAMES) {
    if (values[name] !== true) continue;
    if (!(command.flags ?? []).includes(name)) throw new UsageError(`${command.words.join(' ')} takes no --${name}`);
    flags[name] = true;
  }
  const args = positionals.slice(command.words.length);
  if (args.length < command.args.length) throw new UsageError(`${command.args[args.length]} is missing`);
  if (args.length > command.args.length) throw new UsageError(`unexpected argument: ${args[command.args.length]}`);
  return { args, options, flags };
}

/** Runs one command line, writing to `output`; resolves to the exit status. */
export async function runCommandLine(argv: string[], output: Output): Promise<number> {
  let command: Command | undefined;
  try {
    const { values, positionals } = parse(argv);
    if (values.version === true) {
      output.stdout.write(version());
      return 0;
    }
    const words = positionals[0] === 'help' ? positionals.slice(1) : positionals;
    command = find(words);
    if (values.help === true || positionals[0] === 'help' || (command === undefined && words.length <= 1)) {
      const help = helpFor(words);
      if (help === null) throw unknown(words);
      output.stdout.write(help);
      return 0;
    }
    if (command === undefined) throw unknown(words);
    await command.run({ ...inputFor(command, values, positionals), output });
    return 0;
  } catch (error) {
    const usage = error instanceof UsageError;
    const hint = usage && command !== undefined ? `\nUsage: ${usageLine(command)}` : '';
    output.stderr.write(`agentry: ${error instanceof Error ? error.message : String(error)}${hint}\n`);
    return usage ? 2 : 1;
  }
}
