/**
 * The turn wing (src/domain/turns/) is the only writer of the tables a turn lives in: `sessions`, `messages`,
 * `runs` and `items`. Features (conversations, tasks, tool runs, schedules, approvals, the Sessions API) call its
 * operations instead (src/engine/ARCHITECTURE.md, "Parts"). This reads every source file under src/ and fails on
 * a write to one of those tables anywhere else: a query-builder write (insertInto, updateTable, deleteFrom,
 * replaceInto, mergeInto), a prepared write (storage/prepared.ts prepareInsert, prepareUpdate), or SQL text
 * (INSERT INTO, UPDATE, DELETE FROM, REPLACE INTO). Migrations are the schema's history and are not scanned.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..');
const SRC = join(ROOT, 'src');
const TABLES = ['sessions', 'messages', 'runs', 'items'];
const OWNER = 'src/domain/turns/';
const MIGRATIONS = 'src/storage/migrations/';

const table = `(${TABLES.join('|')})`;
/** Writes through the query builder or storage/prepared.ts, the table named by a string literal (aliases too). */
const BUILDER_WRITE = new RegExp(
  `\\b(insertInto|updateTable|deleteFrom|replaceInto|mergeInto|prepareInsert|prepareUpdate)\\s*\\(\\s*['"\`]${table}(\\s+as\\s+\\w+)?['"\`]`,
  'g',
);
/** Writes as SQL text (`sql` templates, sql.raw, strings), the table quoted or not. */
const SQL_WRITE = new RegExp(
  `\\b(insert\\s+(or\\s+\\w+\\s+)?into|update|delete\\s+from|replace\\s+into|truncate(\\s+table)?)\\s+["\`]?${table}["\`]?(?![\\w.-])`,
  'gi',
);

interface TableWrite {
  file: string;
  line: number;
  table: string;
  text: string;
}

/** The source with its comments blanked (same length and lines), so prose about SQL is not taken for it. */
function withoutComments(source: string): string {
  const blank = (text: string) => text.replace(/[^\n]/g, ' ');
  return source
    .replace(/\/\*[\s\S]*?\*\//g, blank)
    .replace(/(^|[^:'"`\\])\/\/[^\n]*/g, (match, before: string) => before + blank(match.slice(before.length)));
}

/** The writes to the turn tables in one source file. */
function tableWrites(file: string, source: string): TableWrite[] {
  const code = withoutComments(source);
  const found: TableWrite[] = [];
  for (const pattern of [BUILDER_WRITE, SQL_WRITE]) {
    for (const match of code.matchAll(pattern)) {
      const index = match.index ?? 0;
      const line = code.slice(0, index).split('\n').length;
      const name = TABLES.find((candidate) => new RegExp(`\\b${candidate}\\b`).test(match[0])) ?? '';
      found.push({ file, line, table: name, text: (source.split('\n')[line - 1] ?? '').trim() });
    }
  }
  return found;
}

function sourceFiles(): string[] {
  return readdirSync(SRC, { recursive: true, encoding: 'utf8' })
    .filter((path) => path.endsWith('.ts') && !path.endsWith('.test.ts') && !path.endsWith('.d.ts'))
    .map((path) => relative(ROOT, join(SRC, path)).split('\\').join('/'))
    .filter((path) => !path.startsWith(MIGRATIONS))
    .sort();
}

function allWrites(): TableWrite[] {
  return sourceFiles().flatMap((file) => tableWrites(file, readFileSync(join(ROOT, file), 'utf8')));
}

describe('the turn tables have one writer', () => {
  it('no file outside src/domain/turns/ writes sessions, messages, runs or items', () => {
    const outside = allWrites().filter((write) => !write.file.startsWith(OWNER));
    const report = outside.map((write) => `${write.file}:${write.line} writes ${write.table}: ${write.text}`);
    expect(report, 'call an operation of src/domain/turns/ instead').toEqual([]);
  });

  it('sees the writes that src/domain/turns/ makes (the scan is not blind)', () => {
    const inside = allWrites().filter((write) => write.file.startsWith(OWNER));
    expect(new Set(inside.map((write) => write.table))).toEqual(new Set(TABLES));
  });

  it('recognises each form of write, and not prose or reads', () => {
    const forms = [
      "await trx.insertInto('sessions').values(row).execute();",
      "await db\n  .updateTable(\n    'messages'\n  )\n  .set({ status })",
      "db.deleteFrom('items as i').where('i.id', '=', id)",
      "const insertRun = prepareInsert('runs');",
      "const update = prepareUpdate('sessions');",
      'await sql`update sessions set work_pending = 1 where id = $\u007Bid}`.execute(db);',
      'await sql.raw(\'INSERT INTO "messages" (id) VALUES (1)\').execute(db);',
      'await sql`delete from items where session_id = $\u007Bid}`.execute(db);',
    ];
    for (const form of forms) expect(tableWrites('probe.ts', form), form).toHaveLength(1);
    const harmless = [
      "db.selectFrom('sessions').selectAll()",
      "db.updateTable('sessions_archive').set({})",
      "db.insertInto('schedule_runs').values(row)",
      '// UPDATE sessions SET lease_expires_at = ... (a comment)',
      '/* insert into messages */',
      'sql`select * from runs where id = $\u007Bid}`',
    ];
    for (const text of harmless) expect(tableWrites('probe.ts', text), text).toEqual([]);
  });

  it('names the file and line of a write', () => {
    expect(tableWrites('src/x.ts', "const a = 1;\nawait db.updateTable('runs').set({}).execute();")).toEqual([
      { file: 'src/x.ts', line: 2, table: 'runs', text: "await db.updateTable('runs').set({}).execute();" },
    ]);
  });
});
