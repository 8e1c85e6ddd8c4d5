/**
 * Every shell example of the README and docs/ runs, as printed, against a real server process (a temp data
 * directory, a key of our choosing), so the docs stay true. Placeholders a reader replaces are replaced here:
 * the address `http://127.0.0.1:8080`, the key `agk_...` (and `$KEY`), and the example key prefix. `curl` fails
 * on any HTTP error status, and a block fails on its first failing command. `bin/agentry.js` is this checkout's
 * CLI, run as printed (its own `#!/usr/bin/env node`) on the server's database. A block preceded by `<!-- not-run: reason -->` is skipped over (it
 * starts servers of its own or needs what a test cannot have); that list is kept short and checked here.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { START_TIMEOUT_MS } from './helpers/deadlines.ts';
import { testEnvironment, testKey } from './helpers/harness.ts';
import { runCli, type ServerProcess, startServerProcess } from './helpers/server-process.ts';

const ROOT = join(import.meta.dirname, '..');
const DOCS = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`),
];
const DOC_ADDRESS = 'http://127.0.0.1:8080';
const DOC_KEY = 'agk_...';
const DOC_PREFIX = 'agk_7Qm2xKp9';
/** What the README's model example configures; the server here is started with it. */
const PROVIDERS = '{"ollama":{"baseURL":"http://127.0.0.1:11434/v1"}}';

interface Example {
  file: string;
  line: number;
  script: string;
  notRun: string | null;
}

/** The ```sh (or bash, shell) blocks of a Markdown file, indented ones included, with a not-run reason if any. */
function examples(file: string): Example[] {
  const text = readFileSync(join(ROOT, file), 'utf8');
  const found: Example[] = [];
  const block = /^([ \t]*)```(?:sh|bash|shell)[ \t]*\n([\s\S]*?)^\1```[ \t]*$/gm;
  for (let match = block.exec(text); match !== null; match = block.exec(text)) {
    const indent = match[1] ?? '';
    const before = text.slice(0, match.index).trimEnd();
    const comment = /<!--\s*not-run:\s*([\s\S]*?)\s*-->$/.exec(before);
    found.push({
      file,
      line: text.slice(0, match.index).split('\n').length,
      script: (match[2] ?? '')
        .split('\n')
        .map((line) => (line.startsWith(indent) ? line.slice(indent.length) : line))
        .join('\n'),
      notRun: comment?.[1] ?? null,
    });
  }
  return found;
}

const ALL = DOCS.flatMap(examples);
const RUNNABLE = ALL.filter((example) => example.notRun === null);

describe('shell examples of the README and docs', () => {
  let environment: ReturnType<typeof testEnvironment>;
  let server: ServerProcess;
  let workDir: string;
  let prefix: string;
  const key = testKey();

  beforeAll(async () => {
    environment = testEnvironment('sqlite');
    server = await startServerProcess({ ...environment.env, AGENTRY_BOOTSTRAP_KEY: key, AGENTRY_PROVIDERS: PROVIDERS });
    // A key for the revoke example to revoke by its prefix.
    prefix = runCli(['keys', 'create', '--org', 'default', '--scopes', 'tasks:read'], environment.env).stdout.slice(
      0,
      12,
    );
    workDir = mkdtempSync(join(tmpdir(), 'agentry-docs-'));
  });
  afterAll(async () => {
    await server?.stop();
    await environment?.cleanup();
    rmSync(workDir, { recursive: true, force: true });
  });

  it('finds the examples, and skips only a few, each with its reason', () => {
    expect(RUNNABLE.length).toBeGreaterThanOrEqual(7);
    const skipped = ALL.filter((example) => example.notRun !== null);
    expect(skipped.length).toBeLessThanOrEqual(8);
    for (const example of skipped)
      expect((example.notRun ?? '').length, `${example.file}:${example.line}`).toBeGreaterThan(10);
    for (const file of ['README.md', 'docs/sessions.md', 'docs/files.md', 'docs/runs.md']) {
      expect(
        RUNNABLE.some((example) => example.file === file),
        file,
      ).toBe(true);
    }
    expect(JSON.stringify(ALL)).not.toContain('uuidgen');
  });

  it.each(RUNNABLE.map((example) => ({ ...example, name: `${example.file}:${example.line}` })))(
    '$name runs as printed',
    (example) => {
      const script = example.script
        .replaceAll(DOC_ADDRESS, server.url)
        .replaceAll(DOC_KEY, key)
        .replaceAll(DOC_PREFIX, prefix)
        // The examples run in a scratch folder; the docs say to run the CLI from the project folder.
        .replaceAll(/(^|[\s($])bin\/agentry\.js\b/gm, `$1${join(ROOT, 'bin/agentry.js')}`);
      const prelude = [
        'set -euo pipefail',
        'curl() { command curl --fail-with-body --show-error "$@"; }',
        'npx() { echo "npx $1 is not available here" >&2; return 1; }',
      ].join('\n');
      const result = spawnSync('bash', ['-c', `${prelude}\n${script}`], {
        cwd: workDir,
        encoding: 'utf8',
        // An example may start the CLI several times, each as slow to start on a loaded machine as a server.
        timeout: 2 * START_TIMEOUT_MS,
        env: {
          PATH: process.env.PATH ?? '/usr/bin:/bin',
          HOME: process.env.HOME ?? workDir,
          KEY: key,
          // The CLI runs with the server's configuration, as docs/operations.md asks.
          AGENTRY_PROVIDERS: PROVIDERS,
          ...environment.env,
        },
      });
      expect(result.status, `${example.file}:${example.line}\n${result.stdout}\n${result.stderr}`).toBe(0);
      // No error envelope slipped through (curl fails on error statuses; this also covers a 2xx that embeds one).
      expect(result.stdout).not.toMatch(/\{"error":\{"code"/);
    },
    // Examples that run the CLI start Node processes, which take seconds each on a loaded machine (the README's
    // administration block runs eight).
    3 * START_TIMEOUT_MS,
  );
});
