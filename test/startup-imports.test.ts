/**
 * A command loads only what it needs (docs/performance.md, start-up): `--help`, `--version` and a group's listing
 * load the command table and nothing else; a server loads none of what only turns, MCP servers, A2A, Redis or Postgres
 * need until they are used, and a `worker` none of the API's routes. Each process runs with a hook that records
 * every module it resolves (helpers/record-modules.ts), so these checks count modules, not milliseconds.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { MANIFEST as BUNDLE_MANIFEST, type BundleManifest } from '../scripts/dependency-bundles.ts';
import { spawnChild } from './helpers/children.ts';
import { START_TIMEOUT_MS } from './helpers/deadlines.ts';
import { testEnvironment } from './helpers/harness.ts';
import { listeningUrl, startsTimeout } from './helpers/server-process.ts';

const ROOT = join(import.meta.dirname, '..');
const BIN = join(ROOT, 'bin', 'agentry.js');
const HOOK = join(ROOT, 'test', 'helpers', 'record-modules.ts');

/** Packages no command line that only prints help may load. */
const HEAVY = [
  'fastify',
  '@fastify/',
  'kysely',
  'typebox',
  'ajv',
  'pino',
  'ai',
  '@ai-sdk/',
  '@modelcontextprotocol/',
  'undici',
  'ioredis',
  'pg',
  'linkedom',
  '@mozilla/readability',
  'turndown',
  '@opentelemetry/',
  'prom-client',
  'croner',
  'yaml',
  'zod',
];

/** What a server loads only when it is used: turns' models and tools, MCP servers, A2A, Redis, Postgres, a terminal. */
const LOADED_ON_USE = [
  'ai',
  '@ai-sdk/',
  '@modelcontextprotocol/',
  '@a2a-js/',
  'undici',
  'ioredis',
  'pg',
  'linkedom',
  '@mozilla/readability',
  'turndown',
  '@opentelemetry/',
  'pino-pretty',
  'zod',
  'typebox/build/value/',
  'typebox/build/schema/',
];

let scratch: string | null = null;
afterEach(() => {
  if (scratch !== null) rmSync(scratch, { recursive: true, force: true });
  scratch = null;
});

function recordFile(): string {
  scratch ??= mkdtempSync(join(tmpdir(), 'agentry-imports-'));
  return join(scratch, `modules-${Math.random().toString(36).slice(2)}.txt`);
}

/**
 * The recorded modules: `src/…` paths of the project's own files, `<package>/<path>` of installed ones, and
 * `internal:<path>` of Node's own internal modules.
 */
function recorded(file: string): string[] {
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((url) => url.startsWith('file:') || url.startsWith('internal:'))
    .map((url) => {
      if (url.startsWith('internal:')) return url;
      const path = fileURLToPath(url);
      const installed = path.lastIndexOf('/node_modules/');
      return installed >= 0 ? path.slice(installed + '/node_modules/'.length) : relative(ROOT, path);
    });
}

/** The modules of `packages` (a name, or a prefix ending in `/`) among `modules`. */
function from(packages: readonly string[], modules: readonly string[]): string[] {
  return modules.filter((module) =>
    packages.some((name) => (name.endsWith('/') ? module.startsWith(name) : module.startsWith(`${name}/`))),
  );
}

function childEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of Object.keys(env)) {
    if (name === 'DATABASE_URL' || name === 'REDIS_URL' || name.startsWith('AGENTRY_')) delete env[name];
  }
  return { ...env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'warn', ...extra };
}

describe('what a command line that only prints loads', () => {
  it.each([[['--help']], [['--version']], [['keys']], [['keys', 'create', '--help']]])(
    'agentry %j: the command table alone',
    (args) => {
      const file = recordFile();
      const result = spawnSync(process.execPath, ['--import', HOOK, BIN, ...args], {
        env: childEnv({ RECORD_MODULES_TO: file }),
        encoding: 'utf8',
        timeout: START_TIMEOUT_MS,
      });
      expect(result.status, result.stderr).toBe(0);
      const modules = recorded(file);
      expect(from(HEAVY, modules)).toEqual([]);
      const own = modules.filter((module) => module.startsWith('src/')).sort();
      expect(own).toEqual([
        'src/cli/cli.ts',
        'src/cli/commands.ts',
        'src/cli/main.ts',
        'src/cli/table.ts',
        'src/domain/auth/scopes.ts',
      ]);
    },
  );
});

describe('what a server loads by the time it is ready (sqlite)', () => {
  /** `agentry serve --role <role>` on a fresh data directory, until it is ready; then stopped. */
  async function serve(role: 'all' | 'worker', extra: Record<string, string> = {}): Promise<string[]> {
    const environment = testEnvironment('sqlite');
    const file = recordFile();
    try {
      const child = spawnChild(process.execPath, ['--import', HOOK, BIN, 'serve', '--role', role], {
        env: childEnv({ ...environment.env, RECORD_MODULES_TO: file, ...extra }),
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let output = '';
      child.stdout?.on('data', (chunk: Buffer) => {
        output += chunk.toString();
      });
      child.stderr?.on('data', (chunk: Buffer) => {
        output += chunk.toString();
      });
      // Printed once the server is ready (after migrating and the first-start bootstrap).
      await listeningUrl(child, 'the server', /listening on (http:\/\/[0-9.]+:\d+)/, () => output);
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
      expect({ code: child.exitCode, signal: child.signalCode }, output).toEqual({ code: 0, signal: null });
      return recorded(file);
    } finally {
      await environment.cleanup();
    }
  }

  it(
    'all: nothing that only turns, MCP servers, A2A, Redis, Postgres or a terminal need',
    async () => {
      const modules = await serve('all');
      expect(modules).toContain('src/http/api-routes.ts');
      expect(from(LOADED_ON_USE, modules)).toEqual([]);
      // Node's fetch (its bundled undici), which an ES import of node:http loads for the facade (lib/node-http.ts).
      expect(modules).toContain('internal:http');
      expect(modules.filter((module) => module.startsWith('internal:deps/undici/'))).toEqual([]);
    },
    startsTimeout(1),
  );

  it(
    'worker: none of the API routes either',
    async () => {
      const modules = await serve('worker');
      expect(modules).toContain('src/http/routes/system.ts');
      const routes = modules.filter(
        (module) => module.startsWith('src/http/routes/') && !module.endsWith('/system.ts'),
      );
      expect(routes).toEqual([]);
      expect(modules).not.toContain('src/http/api-routes.ts');
      expect(from(['@fastify/multipart', ...LOADED_ON_USE], modules)).toEqual([]);
    },
    startsTimeout(1),
  );

  it(
    'TypeBox and Kysely from the bundles `npm install` made of them (scripts/dependency-bundles.ts)',
    async () => {
      const manifest = JSON.parse(readFileSync(BUNDLE_MANIFEST, 'utf8')) as BundleManifest;
      const entries = new Set(
        manifest.packages
          .flatMap((entry) => Object.keys(entry.entries))
          .map((file) => file.slice('node_modules/'.length)),
      );
      const bundled = await serve('all');
      // The packages' entry files are resolved (then replaced by their bundles); none of the files they import is.
      expect(from(['typebox', 'kysely'], bundled).filter((module) => !entries.has(module))).toEqual([]);
      expect(
        from(['.cache/agentry/bundles/typebox/', '.cache/agentry/bundles/kysely/'], bundled).length,
      ).toBeGreaterThan(4);
      // Turned off, the packages load file by file, as installed.
      const installed = await serve('all', { AGENTRY_DEPENDENCY_BUNDLES: '0' });
      expect(from(['typebox', 'kysely'], installed).length).toBeGreaterThan(300);
      expect(from(['.cache/agentry/'], installed)).toEqual([]);
    },
    startsTimeout(2),
  );
});
