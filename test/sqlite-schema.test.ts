/**
 * A new SQLite database is created from src/storage/sqlite-schema.json in one transaction instead of by every
 * migration in turn (src/storage/sqlite-fresh.ts). What must hold: the file is what the migrations make of an empty
 * database (else `npm run schema:sqlite` writes it again), a server's new database has exactly those objects and
 * records those migrations, two processes opening one new file at once do not both create it, and the columns
 * that partial indexes test against constants are known to the SQLite adapter.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { promisify } from 'node:util';
import { sql } from 'kysely';
import { afterAll, describe, expect, it } from 'vitest';
import { migratedSqliteSchema, readSqliteSchema } from '../scripts/sqlite-schema.ts';
import { openStorage, type Storage } from '../src/storage/db.ts';
import { PARTIAL_INDEX_COLUMNS } from '../src/storage/sqlite-adapter.ts';
import { SQLITE_SCHEMA_FILE, type SqliteSchema } from '../src/storage/sqlite-fresh.ts';
import { dataDirSecrets } from './helpers/migrations.ts';

const run = promisify(execFile);
const REPO = join(import.meta.dirname, '..');

describe('a new SQLite database from the schema file', () => {
  const dirs: string[] = [];
  const storages: Storage[] = [];
  const open = async (dir?: string) => {
    const dataDir = dir ?? mkdtempSync(join(tmpdir(), 'agentry-fresh-'));
    if (dir === undefined) dirs.push(dataDir);
    const storage = await openStorage({ databaseUrl: null, databaseSchema: null, dataDir });
    storages.push(storage);
    return { storage, dataDir };
  };
  afterAll(async () => {
    for (const storage of storages) await storage.close().catch(() => undefined);
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });
  const file = (): SqliteSchema => JSON.parse(readFileSync(SQLITE_SCHEMA_FILE, 'utf8'));

  it('is what the migrations make of an empty database', async () => {
    const migrated = await migratedSqliteSchema();
    const stale = 'src/storage/sqlite-schema.json no longer matches the migrations: run `npm run schema:sqlite`';
    expect(file().migrations, stale).toEqual(migrated.migrations);
    expect(file().statements, stale).toEqual(migrated.statements);
  });

  it("is a server's new database: the same objects, the migrations recorded, nothing run again", async () => {
    const { storage, dataDir } = await open();
    const applied = await storage.migrate(dataDirSecrets(dataDir));
    const expected = file();
    expect(applied).toEqual(expected.migrations);
    expect(await readSqliteSchema(storage.db)).toEqual(expected);
    const lock = await sql<{ id: string; is_locked: number }>`select id, is_locked from kysely_migration_lock`.execute(
      storage.db,
    );
    expect(lock.rows).toEqual([{ id: 'migration_lock', is_locked: 0 }]);
    expect(await storage.migrate(dataDirSecrets(dataDir))).toEqual([]);
    // The tables work: a row goes in and comes back.
    await storage.db
      .insertInto('orgs')
      .values({ id: 'org-1', name: 'default', project_id: 1, created_at: 1 })
      .execute();
    expect(await storage.db.selectFrom('orgs').select('name').execute()).toEqual([{ name: 'default' }]);
  });

  it("names every column a partial index tests against a constant in the adapter's list", () => {
    // `... where "status" = 'requires_action'`: a WHERE clause comparing that column with a bound value makes SQLite
    // plan the statement again at each execution (sqlite-adapter.ts PARTIAL_INDEX_COLUMNS).
    const tested = file()
      .statements.filter((statement) => /^create (unique )?index/i.test(statement))
      .flatMap((statement) => [...statement.matchAll(/"(\w+)"\s*=\s*('[^']*'|-?\d+)/g)].map((match) => match[1]));
    expect(tested.length).toBeGreaterThan(0);
    for (const column of tested) expect(PARTIAL_INDEX_COLUMNS).toContain(column);
  });

  it('writes the values compared with those columns into the statement, and binds every other value', async () => {
    const { storage } = await open();
    const compiled = storage.db
      .selectFrom('messages as waiting')
      .select('id')
      .where('waiting.session_id', '=', 'ses_1')
      .where('waiting.status', '=', 'requires_action')
      .where('agent_version', '=', 3)
      .compile();
    expect(compiled.sql).toContain(`"waiting"."status" = 'requires_action'`);
    expect(compiled.parameters).toEqual(['ses_1', 3]);
    // A value that is not a state's name stays bound (whatever its type claims).
    const notAName = "it's" as 'requires_action';
    const other = storage.db.selectFrom('messages').select('id').where('status', '=', notAName).compile();
    expect(other.parameters).toEqual(["it's"]);
  });

  it('plans a statement on those columns once, not at every execution', () => {
    // Measured where SQLite's re-planning shows: the same statement run 2,000 times with the value bound is many
    // times slower than with the value written in (15 µs against 1.5 µs here).
    const db = new DatabaseSync(':memory:');
    for (const statement of file().statements) db.exec(statement);
    const query = (status: string) =>
      `select "id" from "messages" where "session_id" = ? and "status" = ${status} and "seq" < ?`;
    const bound = db.prepare(query('?'));
    const written = db.prepare(query("'requires_action'"));
    const perRun = (run: () => void) => {
      const started = performance.now();
      for (let i = 0; i < 2000; i++) run();
      return performance.now() - started;
    };
    const times = { bound: [] as number[], written: [] as number[] };
    for (let round = 0; round < 3; round++) {
      times.bound.push(perRun(() => bound.all('ses_1', 'requires_action', 5)));
      times.written.push(perRun(() => written.all('ses_1', 5)));
    }
    db.close();
    // The premise of PARTIAL_INDEX_COLUMNS: if SQLite stops re-planning, this fails and the list can go.
    expect(Math.min(...times.bound)).toBeGreaterThan(3 * Math.min(...times.written));
  });

  it('is created once when two processes open one new file at once', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'agentry-fresh-'));
    dirs.push(dataDir);
    const env: NodeJS.ProcessEnv = { ...process.env, AGENTRY_DATA_DIR: dataDir };
    delete env.DATABASE_URL;
    delete env.AGENTRY_DATABASE_SCHEMA;
    const migrate = () => run(process.execPath, [join(REPO, 'bin', 'agentry.js'), 'migrate'], { env });
    const outputs = (await Promise.all([migrate(), migrate()])).map((result) => result.stdout);
    const applied = outputs.map((output) => output.split('\n').filter((line) => line.startsWith('applied migration')));
    expect(applied.map((lines) => lines.length).sort((x, y) => x - y)).toEqual([0, file().migrations.length]);
    const { storage } = await open(dataDir);
    expect(await readSqliteSchema(storage.db)).toEqual(file());
  });
});
