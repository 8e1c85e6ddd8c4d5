/**
 * Agentry as the HTTP benches run it: `node bin/agentry.js serve` child processes (on SQLite, on Postgres, or in
 * cluster mode: one `--role api` and N `--role worker` processes sharing Postgres and Redis) at the default log
 * level unless told otherwise, each logging to a file in its data directory; and a small HTTP client for them
 * (undici pools: keep-alive connections, no per-request setup, so the client costs as little CPU as possible on
 * the cores the servers use).
 */
import { join } from 'node:path';
import { Pool } from 'undici';
import { type ServerProcess, startServer, stopProcess } from './children.ts';
import { sleep } from './load.ts';
import {
  type Defer,
  generateApiKey,
  postgresUrl,
  REPO_ROOT,
  redisUrl,
  serverEnv,
  tempDir,
  throwawaySchema,
} from './support.ts';

export type Mode = 'sqlite' | 'postgres' | 'cluster';

export interface StartAgentryOptions {
  /** Names the temp dir and the Postgres schema. */
  bench: string;
  mode: Mode;
  /** Worker processes in cluster mode (default 2). */
  workers?: number;
  /** `default` (the default): the server's own level, info, as users run it. */
  logLevel?: 'default' | 'warn';
  /** More environment variables for every process. */
  env?: Record<string, string>;
  /** Node.js options before the script (e.g. --expose-gc). */
  nodeArgs?: readonly string[];
}

export interface Agentry {
  /** The URL clients use (the API process in cluster mode). */
  url: string;
  apiKey: string;
  processes: ServerProcess[];
  dataDir: string;
  /** Cluster mode: starts one more `--role worker` process (added to `processes`; stopped with the rest). */
  addWorker(): Promise<ServerProcess>;
}

const START_TIMEOUT_MS = 60_000;

/** Starts Agentry in `mode`; stopping the processes and dropping the data is deferred to the caller. */
export async function startAgentry(options: StartAgentryOptions, defer: Defer): Promise<Agentry> {
  const apiKey = generateApiKey();
  const dataDir = await tempDir(options.bench, defer);
  const env = serverEnv({
    dataDir,
    apiKey,
    redis: false,
    logLevel: options.logLevel ?? 'default',
    extra: options.env ?? {},
  });
  if (options.mode !== 'sqlite') {
    env.DATABASE_URL = postgresUrl();
    // Before any server starts, so that the drop runs after they have all been stopped.
    env.AGENTRY_DATABASE_SCHEMA = throwawaySchema(env.DATABASE_URL, options.bench.replaceAll('-', '_'), defer);
  }
  if (options.mode === 'cluster') env.REDIS_URL = redisUrl();

  const start = async (name: string, args: readonly string[]): Promise<ServerProcess> => {
    const server = await startServer({
      name,
      args: [...(options.nodeArgs ?? []), join(REPO_ROOT, 'bin/agentry.js'), 'serve', ...args],
      cwd: REPO_ROOT,
      env,
      timeoutMs: START_TIMEOUT_MS,
      logFile: join(dataDir, `${name.replaceAll(/[^a-z0-9-]/g, '-')}.log`),
    });
    defer(() => stopProcess(server.child));
    return server;
  };
  if (options.mode !== 'cluster') {
    const server = await start(`agentry-${options.mode}`, []);
    const addWorker = () => Promise.reject(new Error('workers are added only in cluster mode'));
    return { url: server.url, apiKey, processes: [server], dataDir, addWorker };
  }
  // The API process first: it migrates the fresh schema, which the workers would otherwise race for.
  const api = await start('agentry-api', ['--role', 'api']);
  const processes = [api];
  let started = 0;
  const addWorker = async () => {
    started += 1;
    const worker = await start(`agentry-worker-${started}`, ['--role', 'worker']);
    processes.push(worker);
    return worker;
  };
  for (let i = 1; i <= (options.workers ?? 2); i++) await addWorker();
  return { url: api.url, apiKey, processes, dataDir, addWorker };
}

/** `value.a.b…`, or undefined where the path does not exist; for reading JSON without casts. */
export function field(value: unknown, ...path: string[]): unknown {
  let current = value;
  for (const key of path) {
    if (typeof current !== 'object' || current === null) return undefined;
    current = Reflect.get(current, key);
  }
  return current;
}

export interface Answer {
  status: number;
  body: unknown;
  text: string;
}

/** An HTTP client of one server: a pool of keep-alive connections, JSON in and out. */
export class Client {
  readonly #pool: Pool;
  readonly #headers: Record<string, string>;

  constructor(url: string, apiKey: string | null, connections: number) {
    this.#pool = new Pool(url, { connections, pipelining: 1 });
    this.#headers = apiKey === null ? {} : { authorization: `Bearer ${apiKey}` };
  }

  async call(method: 'GET' | 'POST', path: string, body?: unknown, headers?: Record<string, string>): Promise<Answer> {
    const response = await this.#pool.request({
      method,
      path,
      headers: {
        ...this.#headers,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...headers,
      },
      body: body === undefined ? null : JSON.stringify(body),
    });
    const text = await response.body.text();
    let parsed: unknown;
    try {
      parsed = text === '' ? undefined : JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    return { status: response.statusCode, body: parsed, text };
  }

  /** `call`, failing unless the status is `expected`; returns the parsed body. */
  async expect(
    expected: number,
    method: 'GET' | 'POST',
    path: string,
    body?: unknown,
    headers?: Record<string, string>,
  ) {
    const answer = await this.call(method, path, body, headers);
    if (answer.status !== expected) {
      throw new Error(
        `${method} ${path} answered ${answer.status}, expected ${expected}: ${answer.text.slice(0, 500)}`,
      );
    }
    return answer.body;
  }

  close(): Promise<void> {
    return this.#pool.close();
  }
}

function stringAt(value: unknown, ...path: string[]): string {
  const found = field(value, ...path);
  if (typeof found !== 'string' || found === '') throw new Error(`no ${path.join('.')} in ${JSON.stringify(value)}`);
  return found;
}

/** Creates an agent (default model unless `body` names one) and returns its id. */
export async function createAgent(client: Client, body: Record<string, unknown> = {}): Promise<string> {
  const created = await client.expect(201, 'POST', '/v1/agents', {
    name: 'bench agent',
    instructions: 'You are a benchmark.',
    ...body,
  });
  return stringAt(created, 'agent', 'id');
}

export async function createSession(client: Client, agentId: string): Promise<string> {
  return stringAt(await client.expect(201, 'POST', '/v1/sessions', { agentId }), 'session', 'id');
}

const TERMINAL = new Set(['completed', 'failed', 'cancelled']);
const TURN_TIMEOUT_MS = 120_000;

/** What one turn took, as the client saw it. */
export interface PlayedTurn {
  /** From sending the POST to its 202. */
  acceptMs: number;
  /** GETs made until the message was terminal. */
  gets: number;
}

/**
 * One turn as a client plays it: POST the message with an Idempotency-Key, then wait for it to be terminal: with
 * `waitSeconds` > 0 by long-polling `GET …/messages/{id}?wait=<waitSeconds>` (asked again only if a wait ends
 * first), otherwise by GETting it every `pollMs` (0: again as soon as the previous GET answered). Fails unless it
 * completed.
 */
export async function playTurn(
  client: Client,
  sessionId: string,
  key: string,
  pollMs: number,
  waitSeconds = 0,
): Promise<PlayedTurn> {
  const path = `/v1/sessions/${sessionId}/messages`;
  const started = performance.now();
  const accepted = await client.expect(
    202,
    'POST',
    path,
    { parts: [{ type: 'text', text: 'ping' }] },
    { 'idempotency-key': key },
  );
  const acceptMs = performance.now() - started;
  const messagePath = `${path}/${stringAt(accepted, 'id')}`;
  const getPath = waitSeconds > 0 ? `${messagePath}?wait=${waitSeconds}` : messagePath;
  const deadline = performance.now() + TURN_TIMEOUT_MS;
  for (let gets = 1; ; gets++) {
    if (pollMs > 0 && waitSeconds <= 0) await sleep(pollMs);
    const status = field(await client.expect(200, 'GET', getPath), 'message', 'status');
    if (typeof status === 'string' && TERMINAL.has(status)) {
      if (status !== 'completed') throw new Error(`message ${messagePath} ended ${status}`);
      return { acceptMs, gets };
    }
    if (performance.now() > deadline)
      throw new Error(`message ${messagePath} not terminal after ${TURN_TIMEOUT_MS} ms`);
  }
}
