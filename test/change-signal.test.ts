/**
 * The API-key and agent caches (storage/change-signal.ts) stay exact when something else writes: another
 * connection (another process: the CLI, a second server, an operator's SQL) revokes a key or changes an agent,
 * and the server's next requests see it, on SQLite through data_version and on Postgres through the
 * notification triggers. While the Postgres listener is down, requests read through instead of trusting a cache.
 */
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { revokeApiKeys } from '../src/domain/orgs/api-keys.ts';
import { flows, waitUntil } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';

interface Connection {
  exec(sql: string, params?: unknown[]): Promise<void>;
  close(): Promise<void>;
}

/** A connection of its own to the harness's database, as another process would have. */
async function otherConnection(h: Harness): Promise<Connection> {
  const { config } = h.deps;
  if (config.databaseUrl === null) {
    const db = new DatabaseSync(join(config.dataDir, 'agentry.db'));
    return {
      exec: async (sql, params = []) => {
        db.prepare(sql).run(...(params as never[]));
      },
      close: async () => db.close(),
    };
  }
  const client = new pg.Client({
    connectionString: config.databaseUrl,
    options: `-c search_path=${config.databaseSchema ?? 'public'}`,
  });
  await client.connect();
  return {
    exec: async (sql, params = []) => {
      await client.query(
        sql.replace(
          /\?/g,
          (() => {
            let n = 0;
            return () => `$${++n}`;
          })(),
        ),
        params,
      );
    },
    close: () => client.end(),
  };
}

describe.each(dialects())('caches and writes by other processes (%s)', (dialect) => {
  let h: Harness;
  let other: Connection;
  const flow = flows(() => h);
  beforeAll(async () => {
    h = await createHarness(dialect);
    other = await otherConnection(h);
    // Caching is on (on Postgres, once the listener is connected): otherwise these tests would pass by reading through.
    await waitUntil(async () => (h.deps.storage.changeVersion() === null ? null : true), {
      what: 'the change version to be known',
      everyMs: 20,
    });
  });
  afterAll(async () => {
    await other.close();
    await h.close();
  });

  it('refuses a key revoked by another connection from the next requests on', async () => {
    const org = await h.deps.orgs.requireByName('default');
    const key = await h.deps.orgs.createKey(org.id);
    // Used twice, so it is cached.
    for (let i = 0; i < 2; i++) expect((await h.request('GET', '/v1/agents', { key })).status).toBe(200);
    await other.exec('update api_keys set revoked_at = ? where prefix = ?', [Date.now(), key.slice(0, 12)]);
    // SQLite sees it at once; a Postgres notification arrives within milliseconds of the commit.
    // (These caches have no expiry: a missed change would be served stale for good, which the wait's deadline catches.)
    await waitUntil(async () => ((await h.request('GET', '/v1/agents', { key })).status === 401 ? true : null), {
      what: 'the revoked key to be refused',
      everyMs: 5,
    });
    expect((await h.request('GET', '/v1/agents', { key })).status).toBe(401);
  });

  it('shows an agent changed by another connection', async () => {
    const agentId = await flow.createAgent({ name: 'before' });
    for (let i = 0; i < 2; i++) expect(json(await h.request('GET', `/v1/agents/${agentId}`)).agent.name).toBe('before');
    await other.exec('update agents set name = ? where id = ?', ['after', agentId]);
    await waitUntil(
      async () => (json(await h.request('GET', `/v1/agents/${agentId}`)).agent.name === 'after' ? true : null),
      { what: 'the new name', everyMs: 5 },
    );
  });

  it('shows an agent changed and a key revoked through this process at once', async () => {
    const agentId = await flow.createAgent({ name: 'mine' });
    expect(json(await h.request('GET', `/v1/agents/${agentId}`)).agent.name).toBe('mine');
    const updated = await h.request('PATCH', `/v1/agents/${agentId}`, { body: { name: 'renamed' } });
    expect(updated.status, updated.text).toBe(200);
    expect(json(await h.request('GET', `/v1/agents/${agentId}`)).agent.name).toBe('renamed');
    const deleted = await h.request('DELETE', `/v1/agents/${agentId}`);
    expect(deleted.status, deleted.text).toBe(204);
    expect((await h.request('GET', `/v1/agents/${agentId}`)).status).toBe(404);
    const org = await h.deps.orgs.requireByName('default');
    const key = await h.deps.orgs.createKey(org.id);
    expect((await h.request('GET', '/v1/agents', { key })).status).toBe(200);
    // As `agentry keys revoke` does it.
    expect((await revokeApiKeys(h.deps.storage.db, key.slice(0, 12), Date.now())).revoked).toHaveLength(1);
    expect((await h.request('GET', '/v1/agents', { key })).status).toBe(401);
  });

  // Postgres only: SQLite has no listener to lose.
  if (dialect === 'postgres')
    it('reads through while the change listener is down, then caches again', async () => {
      const org = await h.deps.orgs.requireByName('default');
      const key = await h.deps.orgs.createKey(org.id);
      expect((await h.request('GET', '/v1/agents', { key })).status).toBe(200);
      // Cut the listening connection, then revoke at once: no cached answer may survive the gap.
      await other.exec("select pg_terminate_backend(pid) from pg_stat_activity where query = 'LISTEN agentry_changes'");
      await other.exec('update api_keys set revoked_at = ? where prefix = ?', [Date.now(), key.slice(0, 12)]);
      await waitUntil(async () => ((await h.request('GET', '/v1/agents', { key })).status === 401 ? true : null), {
        what: 'the revoked key to be refused',
        everyMs: 5,
      });
      // The listener comes back by itself (within about a second) and the version is known again.
      await waitUntil(async () => (h.deps.storage.changeVersion() === null ? null : true), {
        what: 'the change listener to reconnect',
        everyMs: 100,
      });
    });
});
