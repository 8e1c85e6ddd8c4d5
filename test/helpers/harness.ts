/**
 * Builds a real server (real storage, real routes) per test file, on SQLite in a temp directory or on
 * Postgres in a schema of its own, and talks to it over `inject` (or a real port when asked).
 */
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import type { Logger } from 'pino';
import { inject } from 'vitest';
import { buildApp } from '../../src/app.ts';
import type { StreamHub } from '../../src/bus/live-hub.ts';
import { type Config, loadConfig } from '../../src/config.ts';
import { type BuildDepsOptions, buildDeps, buildEngine, type Deps } from '../../src/deps.ts';
import { bootstrap } from '../../src/domain/orgs/org-service.ts';
import type { Engine } from '../../src/engine/engine.ts';
import type { Lifecycle } from '../../src/http/lifecycle.ts';
import type { App } from '../../src/http/types.ts';
import type { Clock } from '../../src/lib/clock.ts';
import { createLogger } from '../../src/logger.ts';

export type DialectName = 'sqlite' | 'postgres';

/** The dialects this run covers; Postgres only when global setup found it. */
export function dialects(): DialectName[] {
  return inject('postgresUrl') === null ? ['sqlite'] : ['sqlite', 'postgres'];
}

export interface Response {
  status: number;
  headers: Record<string, string | string[] | number | undefined>;
  body: unknown;
  text: string;
}

export interface RequestOptions {
  body?: unknown;
  rawBody?: string;
  headers?: Record<string, string>;
  /** API key to send as Bearer; defaults to the harness admin key; null sends none. */
  key?: string | null;
}

export interface Harness {
  app: App;
  hub: StreamHub;
  /** The server's lifecycle flag (false: shutting down). */
  lifecycle: Lifecycle;
  /** Listens on a free loopback port (for streaming tests) and returns the base URL. */
  listen(): Promise<string>;
  deps: Deps;
  engine: Engine;
  dialect: DialectName;
  /** Admin key (all scopes) of the `default` organization. */
  key: string;
  request(method: string, url: string, options?: RequestOptions): Promise<Response>;
  /** A second organization with its own admin key, for isolation tests. */
  createOrg(name: string): Promise<{ orgId: string; key: string }>;
  close(): Promise<void>;
}

export const testKey = (): string =>
  `agk_${randomBytes(30)
    .toString('base64')
    .replace(/[^A-Za-z0-9]/g, '')
    .padEnd(40, 'x')
    .slice(0, 40)}`;

/**
 * Environment for a server of this dialect: a fresh data dir (files, workspaces, the secret key), plus a fresh
 * Postgres schema for postgres.
 */
export function testEnvironment(dialect: DialectName): { env: Record<string, string>; cleanup: () => Promise<void> } {
  const dir = mkdtempSync(join(tmpdir(), 'agentry-test-'));
  // Searchable (not readable) by others, as a real data directory must be for the sandbox user (docs/sandbox.md).
  chmodSync(dir, 0o711);
  const removeDir = async () => rmSync(dir, { recursive: true, force: true });
  if (dialect === 'sqlite') return { env: { AGENTRY_DATA_DIR: dir }, cleanup: removeDir };
  const url = inject('postgresUrl');
  if (url === null) throw new Error('Postgres is not available in this run');
  const schema = `t_${randomBytes(6).toString('hex')}`;
  return {
    env: { DATABASE_URL: url, AGENTRY_DATABASE_SCHEMA: schema, AGENTRY_DATA_DIR: dir },
    cleanup: async () => {
      await removeDir();
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      } finally {
        await client.end();
      }
    },
  };
}

export async function createHarness(
  dialect: DialectName,
  env: Record<string, string> = {},
  options: BuildDepsOptions & { clock?: Clock; logger?: Logger } = {},
): Promise<Harness> {
  const environment = testEnvironment(dialect);
  // A restart over the same data keeps the key it was bootstrapped with.
  const key = env.AGENTRY_BOOTSTRAP_KEY ?? testKey();
  const config: Config = loadConfig({
    LOG_LEVEL: 'silent',
    AGENTRY_POLL_MS: '200',
    AGENTRY_BOOTSTRAP_KEY: key,
    ...environment.env,
    ...env,
  });
  const deps = await buildDeps(config, options.logger ?? createLogger(config), options.clock, options);
  await bootstrap(deps.orgs, config.bootstrapKey);
  const { app, hub, lifecycle } = await buildApp(deps);
  const engine = buildEngine(deps);
  await engine.start();
  let url: string | null = null;
  return {
    app,
    hub,
    lifecycle,
    async listen() {
      url ??= await app.listen({ host: '127.0.0.1', port: 0 });
      return url;
    },
    deps,
    engine,
    dialect,
    key,
    async request(method, url, options = {}) {
      const headers: Record<string, string> = { ...options.headers };
      const useKey = options.key === undefined ? key : options.key;
      if (useKey !== null && headers.authorization === undefined) headers.authorization = `Bearer ${useKey}`;
      let payload: string | undefined;
      if (options.rawBody !== undefined) payload = options.rawBody;
      else if (options.body !== undefined) {
        payload = JSON.stringify(options.body);
        headers['content-type'] ??= 'application/json';
      }
      const response = await app.inject({
        method: method as 'GET',
        url,
        headers,
        ...(payload === undefined ? {} : { payload }),
      });
      const type = String(response.headers['content-type'] ?? '');
      return {
        status: response.statusCode,
        headers: response.headers,
        text: response.body,
        body: type.includes('json') && response.body !== '' ? JSON.parse(response.body) : response.body,
      };
    },
    async createOrg(name) {
      const org = await deps.orgs.create(name);
      return { orgId: org.id, key: await deps.orgs.createKey(org.id) };
    },
    async close() {
      await engine.stop(5000);
      await app.close();
      await deps.close();
      await deps.storage.close();
      await environment.cleanup();
    },
  };
}

/** Narrows a JSON body for assertions without casts in every test. */
export function json(response: Response): Record<string, any> {
  if (typeof response.body !== 'object' || response.body === null) {
    throw new Error(`expected a JSON body, got ${response.status}: ${response.text.slice(0, 200)}`);
  }
  return response.body as Record<string, any>;
}
