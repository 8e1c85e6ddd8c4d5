/**
 * What the server keeps on disk is readable by its own user only, under the common umask 022: a real server
 * process creates its data directory 0700 (0711 when it runs as root, so that its sandbox user can reach
 * workspaces/), and the database with its -wal and -shm, secret.key and uploaded files 0600 in 0700 folders. A data
 * directory left group- and world-readable by an earlier version is tightened at the next start.
 */
import { chmodSync, existsSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dialects, testEnvironment, testKey } from './helpers/harness.ts';
import { type ServerProcess, startServerProcess } from './helpers/server-process.ts';

const DATA_DIR_MODE = process.getuid?.() === 0 ? 0o711 : 0o700;

/** Every file and folder below `root` with its permission bits, as `path: mode` in octal. */
function modes(root: string): Record<string, string> {
  const found: Record<string, string> = { '.': (statSync(root).mode & 0o777).toString(8) };
  const visit = (directory: string) => {
    for (const entry of readdirSync(directory, { withFileTypes: true })) {
      const path = join(directory, entry.name);
      found[relative(root, path)] = (statSync(path).mode & 0o777).toString(8);
      if (entry.isDirectory()) visit(path);
    }
  };
  visit(root);
  return found;
}

/** What an older version left: everything readable by group and others (umask 022 defaults). */
function loosen(root: string): void {
  chmodSync(root, 0o755);
  for (const entry of readdirSync(root, { withFileTypes: true, recursive: true })) {
    const path = join(entry.parentPath, entry.name);
    chmodSync(path, entry.isDirectory() ? 0o755 : 0o644);
  }
}

describe.each(dialects())('the data directory on disk (%s)', (dialect) => {
  const environment = testEnvironment(dialect);
  const dataDir = join(environment.env.AGENTRY_DATA_DIR ?? '', 'data');
  const key = testKey();
  const env = {
    ...environment.env,
    AGENTRY_DATA_DIR: dataDir,
    AGENTRY_BOOTSTRAP_KEY: key,
    AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true',
  };
  let server: ServerProcess | null = null;
  let previousUmask = 0;
  let fileId = '';

  const call = (path: string, init: RequestInit = {}) =>
    fetch(`${server?.url}${path}`, { ...init, headers: { authorization: `Bearer ${key}`, ...init.headers } });

  function expectPrivate(): Record<string, string> {
    const found = modes(dataDir);
    const expected = Object.fromEntries(
      Object.keys(found).map((path) => {
        if (path === '.') return [path, DATA_DIR_MODE.toString(8)];
        return [path, statSync(join(dataDir, path)).isDirectory() ? '700' : '600'];
      }),
    );
    expect(found).toEqual(expected);
    return found;
  }

  beforeAll(async () => {
    // The children inherit it: the usual default, under which files are created 0644.
    previousUmask = process.umask(0o022);
    server = await startServerProcess(env);
  });
  afterAll(async () => {
    await server?.stop('SIGKILL');
    process.umask(previousUmask);
    await environment.cleanup();
  });

  it('creates everything owner-only: the folders 0700, the database, its log, secret.key and uploads 0600', async () => {
    const form = new FormData();
    form.append('purpose', 'user_data');
    form.append('file', new Blob(['city,temperature\nParis,21\n'], { type: 'text/csv' }), 'report.csv');
    const uploaded = await call('/v1/files', { method: 'POST', body: form });
    expect(uploaded.status).toBe(201);
    fileId = ((await uploaded.json()) as { id: string }).id;
    // A stored secret: the key file is generated now.
    const endpoint = await call('/v1/webhook_endpoints', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'hook', url: 'http://127.0.0.1:9/hook', event_types: ['agent.session.idle'] }),
    });
    expect(endpoint.status).toBe(200);

    const found = expectPrivate();
    const stored = Object.keys(found).filter((path) => path.startsWith('files/') && path.endsWith(fileId));
    expect(stored).toHaveLength(1);
    expect(found).toHaveProperty('secret.key', '600');
    if (dialect === 'sqlite') {
      for (const name of ['agentry.db', 'agentry.db-wal', 'agentry.db-shm']) expect(found).toHaveProperty(name, '600');
    } else {
      expect(existsSync(join(dataDir, 'agentry.db'))).toBe(false);
    }
  });

  it("tightens an earlier version's group- and world-readable files at the next start", async () => {
    expect(await server?.stop('SIGTERM')).toBe(0);
    loosen(dataDir);
    expect(modes(dataDir)['secret.key']).toBe('644');
    server = await startServerProcess(env);
    expectPrivate();
    const content = await call(`/v1/files/${fileId}/content`);
    expect(content.status).toBe(200);
    expect(await content.text()).toBe('city,temperature\nParis,21\n');
  });
});
