/**
 * LangGraph, the peer of the peer-langgraph bench: the LangGraph.js Agent Server (`@langchain/langgraph-api`, the
 * server `langgraph dev` runs: in-memory, its state written to a file in its folder now and then) installed from
 * the npm registry, pinned, into a folder under the OS temp dir, with one graph: the prebuilt ReAct agent
 * (`createReactAgent` of `@langchain/langgraph`, no tools) on `ChatOpenAI` pointed at the OpenAI-compatible stub
 * (its URL read from BENCH_STUB_BASE_URL when the server starts). It is started the way the CLI's entrypoint starts
 * it, `startServer` of `@langchain/langgraph-api/server` with the CLI's default of 10 jobs per worker, without the
 * CLI's file watcher (tsx) and its parent process. The folder is kept: the next run reuses the install.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type ServerProcess, startServer, stopProcess } from './children.ts';
import { freePort, peerEnv, readMarker, runCommand } from './peers.ts';
import type { Defer } from './support.ts';

/** The versions measured against (the server, and the packages the graph is written with); BENCH_LANGGRAPH_API_VERSION overrides the server's. */
const VERSIONS = {
  api: process.env.BENCH_LANGGRAPH_API_VERSION || '1.5.1',
  langgraph: '1.7.3',
  checkpoint: '1.2.2',
  sdk: '1.15.0',
  core: '1.4.0',
  openai: '1.6.0',
  // A peer dependency of the server (it type-checks graphs written in TypeScript; this one is JavaScript).
  typescript: '5.9.3',
};
const START_TIMEOUT_MS = 60_000;
/** The graph's id, which is also its assistant id in LangGraph's routes. */
export const LANGGRAPH_ASSISTANT = 'bench';
/** What `langgraph dev` runs per worker unless `--n-jobs-per-worker` says otherwise. */
const JOBS = 10;

const GRAPH_SOURCE = `import { ChatOpenAI } from '@langchain/openai';
import { createReactAgent } from '@langchain/langgraph/prebuilt';

const llm = new ChatOpenAI({
  model: 'model',
  apiKey: 'stub',
  configuration: { baseURL: process.env.BENCH_STUB_BASE_URL ?? 'http://127.0.0.1:9/v1' },
});

export const graph = createReactAgent({ llm, tools: [], prompt: 'You are a benchmark.' });
`;

const SERVER_SOURCE = `import { startServer } from '@langchain/langgraph-api/server';

const { host, cleanup } = await startServer({
  port: Number(process.env.PORT),
  host: '127.0.0.1',
  nWorkers: ${JOBS},
  // Where it keeps its state: the working directory, a fresh folder each run.
  cwd: process.cwd(),
  graphs: { ${LANGGRAPH_ASSISTANT}: import.meta.dirname + '/src/graph.mjs:graph' },
});
console.log('LangGraph API listening on http://' + host);
const stop = async () => {
  await cleanup();
  process.exit(0);
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
`;

function log(message: string): void {
  process.stderr.write(`[bench:peer-langgraph] ${message}\n`);
}

export function langgraphVersions(): string {
  return `@langchain/langgraph-api ${VERSIONS.api}, @langchain/langgraph ${VERSIONS.langgraph}, @langchain/openai ${VERSIONS.openai}`;
}

/**
 * The project's folder: BENCH_LANGGRAPH_DIR, or `agentry-bench-langgraph/<versions>` under the OS temp dir.
 * Installs only when the pinned versions changed (a marker records the finished install); the sources are written
 * every time.
 */
export async function prepareLangGraph(): Promise<string> {
  const dir =
    process.env.BENCH_LANGGRAPH_DIR ||
    join(tmpdir(), 'agentry-bench-langgraph', `api-${VERSIONS.api}_langgraph-${VERSIONS.langgraph}`);
  await mkdir(join(dir, 'src'), { recursive: true });
  const packageJson = {
    name: 'agentry-bench-langgraph',
    private: true,
    type: 'module',
    dependencies: {
      '@langchain/langgraph-api': VERSIONS.api,
      '@langchain/langgraph': VERSIONS.langgraph,
      '@langchain/langgraph-checkpoint': VERSIONS.checkpoint,
      '@langchain/langgraph-sdk': VERSIONS.sdk,
      '@langchain/core': VERSIONS.core,
      '@langchain/openai': VERSIONS.openai,
      typescript: VERSIONS.typescript,
    },
  };
  const installed = JSON.stringify(packageJson.dependencies);
  if ((await readMarker(join(dir, 'install.done'))) !== installed) {
    log(`installing ${langgraphVersions()} into ${dir} from the npm registry`);
    await writeFile(join(dir, 'package.json'), `${JSON.stringify(packageJson, null, 2)}\n`);
    await runCommand('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error'], dir, peerEnv());
    await writeFile(join(dir, 'install.done'), installed);
  } else {
    log(`reusing the install in ${dir}`);
  }
  await writeFile(join(dir, 'src', 'graph.mjs'), GRAPH_SOURCE);
  await writeFile(join(dir, 'server.mjs'), SERVER_SOURCE);
  return dir;
}

/**
 * Starts the server (its default logging, to a file) in `workDir`, a fresh folder, where it keeps its state, so
 * that nothing of an earlier run is read back; stopping it is deferred.
 */
export async function startLangGraph(
  dir: string,
  stubBaseUrl: string,
  workDir: string,
  defer: Defer,
): Promise<ServerProcess> {
  const port = await freePort();
  const server = await startServer({
    name: 'langgraph',
    args: [join(dir, 'server.mjs')],
    cwd: workDir,
    env: peerEnv({
      PORT: String(port),
      BENCH_STUB_BASE_URL: stubBaseUrl,
      // LangSmith tracing off, whatever this environment says: the bench measures the server alone.
      LANGSMITH_TRACING: 'false',
      LANGCHAIN_TRACING_V2: 'false',
    }),
    timeoutMs: START_TIMEOUT_MS,
    logFile: join(workDir, 'langgraph.log'),
    ready: { pattern: /LangGraph API listening on (http:\/\/[^\s]+)/ },
  });
  defer(() => stopProcess(server.child));
  return server;
}
