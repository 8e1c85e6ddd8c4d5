/**
 * DATABASE_URL as node-postgres and libpq read it: a URL that reaches a local Postgres through its Unix socket names
 * the socket's directory in its `host` parameter and may leave the host empty, user name and all
 * (`postgres://user@/db?host=/run/postgresql`). Such a URL is accepted as given and a server reached through it
 * works; what is not a URL, or not a Postgres one, is still refused by name.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.ts';
import { openStorage } from '../src/storage/db.ts';
import { dataDirSecrets } from './helpers/migrations.ts';

const dataDir = mkdtempSync(join(tmpdir(), 'agentry-database-url-'));
const BASE_ENV = { AGENTRY_DATA_DIR: dataDir };
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

function configured(databaseUrl: string): string | null {
  return loadConfig({ ...BASE_ENV, DATABASE_URL: databaseUrl }).databaseUrl;
}

describe('DATABASE_URL', () => {
  it('accepts a Unix socket URL with a user name and no host, unchanged', () => {
    for (const url of [
      'postgres://postgres@/test?host=/var/run/postgresql',
      'postgresql://agentry:secret@/agentry?host=%2Frun%2Fpostgresql',
      'postgresql:///test?host=/var/run/postgresql',
      'postgres://postgres@127.0.0.1:5432/test',
    ]) {
      expect(configured(url), url).toBe(url);
    }
  });

  it('still refuses what is not a Postgres URL, naming the variable', () => {
    for (const [url, message] of [
      ['postgres://[::1/test', /DATABASE_URL: is not a valid URL/],
      ['not a url', /DATABASE_URL: is not a valid URL/],
      ['mysql://root@localhost/test', /DATABASE_URL: must use postgres: or postgresql:/],
    ] as const) {
      expect(() => configured(url), url).toThrow(ConfigError);
      expect(() => configured(url), url).toThrow(message);
    }
  });
});

const tcpUrl = inject('postgresUrl');

describe.skipIf(tcpUrl === null)('a Postgres reached through its Unix socket', () => {
  it('migrates, answers and names the socket as where it is', async () => {
    const admin = new pg.Client({ connectionString: tcpUrl ?? '' });
    await admin.connect();
    const { rows } = await admin.query<{ unix_socket_directories: string }>('show unix_socket_directories');
    const socketDir = (rows[0]?.unix_socket_directories ?? '').split(',')[0]?.trim() ?? '';
    expect(socketDir).toMatch(/^\//);
    const database = new URL(tcpUrl ?? '').pathname.slice(1);
    const user = new URL(tcpUrl ?? '').username || 'postgres';
    const schema = `socket_url_${process.pid}_${Date.now()}`;
    const socketUrl = `postgres://${user}@/${database}?host=${encodeURIComponent(socketDir)}`;
    try {
      expect(configured(socketUrl)).toBe(socketUrl);
      const storage = await openStorage({
        databaseUrl: socketUrl,
        databaseSchema: schema,
        dataDir,
      });
      try {
        await storage.migrate(dataDirSecrets(dataDir));
        await storage.ping();
        expect(storage.location).toBe(`postgres:///${database} (socket ${socketDir}, schema ${schema})`);
        const address = await storage.db
          .selectNoFrom((eb) => eb.fn<string | null>('inet_client_addr', []).as('address'))
          .executeTakeFirstOrThrow();
        // No client address: the connection came through the socket, not TCP.
        expect(address.address).toBeNull();
      } finally {
        await storage.close();
      }
    } finally {
      await admin.query(`drop schema if exists "${schema}" cascade`);
      await admin.end();
    }
  });
});

describe('AGENTRY_DATABASE_PREPARED', () => {
  const prepared = (value: string | undefined) =>
    loadConfig({ ...BASE_ENV, ...(value === undefined ? {} : { AGENTRY_DATABASE_PREPARED: value }) }).databasePrepared;

  it('is on by default, and takes true, false and protocol', () => {
    expect(prepared(undefined)).toBe(true);
    expect(prepared('true')).toBe(true);
    expect(prepared('1')).toBe(true);
    expect(prepared('false')).toBe(false);
    expect(prepared('0')).toBe(false);
    expect(prepared('protocol')).toBe('protocol');
  });

  it('refuses anything else, naming the variable and the values it takes', () => {
    expect(() => prepared('yes')).toThrow(ConfigError);
    expect(() => prepared('yes')).toThrow(
      /AGENTRY_DATABASE_PREPARED: must be one of true, false, protocol, 1, 0, got "yes"/,
    );
  });
});
