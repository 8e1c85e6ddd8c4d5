/**
 * Mastra, the peer of the peer-mastra bench: installed from the npm registry (pinned versions of the `mastra` CLI,
 * `@mastra/core` and zod) into a folder under the OS temp dir, with a minimal project of one agent whose model is
 * the OpenAI-compatible stub (through Mastra's model router: `{ id, url, apiKey, api: 'chat' }`, the URL read from
 * BENCH_STUB_BASE_URL when the server starts), built with `npx mastra build` (its in-memory store), and started
 * as `node .mastra/output/index.mjs`. The folder is kept: the next run reuses the install and, when the project
 * has not changed, the build.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type ServerProcess, startServer, stopProcess } from './children.ts';
import { freePort, peerEnv, readMarker, runCommand } from './peers.ts';
import type { Defer } from './support.ts';

/** The versions measured against; BENCH_MASTRA_VERSION and BENCH_MASTRA_CORE_VERSION override them. */
const VERSIONS = {
  cli: process.env.BENCH_MASTRA_VERSION || '1.31.0',
  core: process.env.BENCH_MASTRA_CORE_VERSION || '1.71.0',
  zod: '4.6.7',
};
const START_TIMEOUT_MS = 60_000;
/** The agent's id in Mastra's routes: POST /api/agents/{id}/generate. */
export const MASTRA_AGENT = 'bench';

const PROJECT_SOURCE = `import { Agent } from '@mastra/core/agent';
import { Mastra } from '@mastra/core/mastra';
import { InMemoryStore } from '@mastra/core/storage';

const ${MASTRA_AGENT} = new Agent({
  id: '${MASTRA_AGENT}',
  name: '${MASTRA_AGENT}',
  instructions: 'You are a benchmark.',
  model: {
    id: 'stub/model',
    url: process.env.BENCH_STUB_BASE_URL ?? 'http://127.0.0.1:9/v1',
    apiKey: 'stub',
    api: 'chat',
  },
});

export const mastra = new Mastra({ agents: { ${MASTRA_AGENT} }, storage: new InMemoryStore() });
`;

const TSCONFIG = {
  compilerOptions: {
    target: 'ES2022',
    module: 'ES2022',
    moduleResolution: 'bundler',
    esModuleInterop: true,
    strict: true,
    skipLibCheck: true,
    noEmit: true,
  },
  include: ['src/**/*'],
};

function log(message: string): void {
  process.stderr.write(`[bench:peer-mastra] ${message}\n`);
}

export function mastraVersions(): string {
  return `mastra ${VERSIONS.cli}, @mastra/core ${VERSIONS.core}`;
}

/** The environment of Mastra's commands and server. */
function childEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  // The CLI reports usage to a remote service by default; this machine may not reach it.
  return peerEnv({ MASTRA_TELEMETRY_DISABLED: '1', ...extra });
}

const run = (command: string, args: readonly string[], cwd: string): Promise<void> =>
  runCommand(command, args, cwd, childEnv());

/**
 * The built project's folder: BENCH_MASTRA_DIR, or `agentry-bench-mastra/<versions>` under the OS temp dir.
 * Installs and builds only what is missing or stale (markers record what was done).
 */
export async function prepareMastra(): Promise<string> {
  const dir =
    process.env.BENCH_MASTRA_DIR ||
    join(tmpdir(), 'agentry-bench-mastra', `cli-${VERSIONS.cli}_core-${VERSIONS.core}_zod-${VERSIONS.zod}`);
  await mkdir(join(dir, 'src', 'mastra'), { recursive: true });
  const packageJson = {
    name: 'agentry-bench-mastra',
    private: true,
    type: 'module',
    dependencies: { mastra: VERSIONS.cli, '@mastra/core': VERSIONS.core, zod: VERSIONS.zod },
  };
  const installed = JSON.stringify(packageJson.dependencies);
  if ((await readMarker(join(dir, 'install.done'))) !== installed) {
    log(`installing ${mastraVersions()} into ${dir} from the npm registry`);
    await writeFile(join(dir, 'package.json'), `${JSON.stringify(packageJson, null, 2)}\n`);
    await run('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error'], dir);
    await writeFile(join(dir, 'install.done'), installed);
  }
  const built = createHash('sha256').update(installed).update(PROJECT_SOURCE).digest('hex');
  const output = join(dir, '.mastra', 'output', 'index.mjs');
  if ((await readMarker(join(dir, 'build.done'))) !== built || !existsSync(output)) {
    log(`building the project with npx mastra build in ${dir}`);
    await writeFile(join(dir, 'tsconfig.json'), `${JSON.stringify(TSCONFIG, null, 2)}\n`);
    await writeFile(join(dir, 'src', 'mastra', 'index.ts'), PROJECT_SOURCE);
    await run('npx', ['mastra', 'build'], dir);
    if (!existsSync(output)) throw new Error(`npx mastra build made no ${output}`);
    await writeFile(join(dir, 'build.done'), built);
  } else {
    log(`reusing the install and build in ${dir}`);
  }
  return dir;
}

/**
 * Starts the built server as its build tells (`node .mastra/output/index.mjs`, default logging, to `logFile`);
 * stopping it is deferred. (With NODE_ENV=production it would not print the line that says it is ready.)
 */
export async function startMastra(
  dir: string,
  stubBaseUrl: string,
  logFile: string,
  defer: Defer,
): Promise<ServerProcess> {
  const port = await freePort();
  const server = await startServer({
    name: 'mastra',
    args: [join(dir, '.mastra', 'output', 'index.mjs')],
    cwd: dir,
    env: childEnv({
      PORT: String(port),
      MASTRA_HOST: '127.0.0.1',
      BENCH_STUB_BASE_URL: stubBaseUrl,
    }),
    timeoutMs: START_TIMEOUT_MS,
    logFile,
    ready: { pattern: /(Mastra API running)/, url: `http://127.0.0.1:${port}` },
  });
  defer(() => stopProcess(server.child));
  return server;
}
