/**
 * Usage reports (`GET /v1/usage`, docs/usage.md): an organization's runs in a time range, summed per group of day,
 * agent, API key, model, source and end user: turns, input, cached input and output tokens, cost. Read from the
 * runs table, which records each turn's key and end user when it is accepted (migration 0033); the time range is
 * a range of `runs_org_created` (of `runs_org_key_created` or `runs_org_end_user_created` when the report is of one
 * key or one end user).
 *
 * Groups are paged like the other lists (`after` = the previous page's `last_id`, OpenAI's list object), in a fixed
 * order: newest day first, then the other keys ascending. A group's id is its key, encoded: the cursor of the
 * keyset that follows it. CSV reads every group, a page at a time, so a long range is never held whole in memory.
 */
import { type RawBuilder, type SqlBool, sql } from 'kysely';
import { validationError } from '../../errors/app-error.ts';
import { type CsvCell, csvRecord } from '../../lib/csv.ts';
import type { RunSource } from '../../storage/column-values.ts';
import type { Executor } from '../../storage/db.ts';
import type { CursorPage } from '../pagination.ts';

/** What a report can be grouped by, in the order the `group_by` parameter names them. */
export const USAGE_GROUPS = ['day', 'agent', 'api_key', 'model', 'source', 'end_user'] as const;
export type UsageGroup = (typeof USAGE_GROUPS)[number];

const DAY_MS = 86_400_000;
/** Groups per query while writing CSV. */
const CSV_PAGE = 500;

export interface UsageFilter {
  /** Epoch ms, inclusive. */
  startMs?: number;
  /** Epoch ms, exclusive. */
  endMs?: number;
  agentId?: string;
  apiKeyId?: string;
  model?: string;
  source?: RunSource;
  endUser?: string;
}

export interface UsageQuery {
  groupBy: UsageGroup[];
  filter: UsageFilter;
}

/** One group's sums; a key field is present only when the report is grouped by it. */
export interface UsageGroupView {
  id: string;
  object: 'usage.group';
  /** UTC day, YYYY-MM-DD. */
  day?: string;
  agent_id?: string;
  /** null: turns no key submitted (scheduled turns, runs older than usage accounting). */
  api_key_id?: string | null;
  /** The key's displayed prefix; null without a key or when the key no longer exists. */
  api_key_prefix?: string | null;
  model?: string;
  source?: RunSource;
  end_user?: string | null;
  turns: number;
  input_tokens: number;
  cached_input_tokens: number;
  output_tokens: number;
  total_tokens: number;
  cost_usd: number;
}

/**
 * The SQL of each key: literal text (no parameters), so Postgres sees the same expression in the select list,
 * GROUP BY and ORDER BY. Missing key and end user group as '' (neither is ever empty text).
 */
const KEYS: Record<UsageGroup, { expression: RawBuilder<unknown>; order: 'asc' | 'desc' }> = {
  day: { expression: sql`(runs.created_at / ${sql.lit(DAY_MS)})`, order: 'desc' },
  agent: { expression: sql`runs.agent_id`, order: 'asc' },
  api_key: { expression: sql`coalesce(runs.api_key_id, '')`, order: 'asc' },
  model: { expression: sql`runs.model`, order: 'asc' },
  source: { expression: sql`runs.source`, order: 'asc' },
  end_user: { expression: sql`coalesce(runs.end_user, '')`, order: 'asc' },
};

type KeyValue = string | number;

/** Parses `group_by` (comma-separated dimensions, each once). */
export function parseGroupBy(text: string | undefined): UsageGroup[] {
  if (text === undefined || text.trim() === '') return [];
  const names = text.split(',').map((name) => name.trim());
  const groups: UsageGroup[] = [];
  for (const name of names) {
    if (!(USAGE_GROUPS as readonly string[]).includes(name)) {
      throw validationError(
        'group_by',
        `group_by names "${name.slice(0, 40)}"; it takes a comma-separated list of ${USAGE_GROUPS.join(', ')}`,
      );
    }
    if (groups.includes(name as UsageGroup)) throw validationError('group_by', `group_by names ${name} twice`);
    groups.push(name as UsageGroup);
  }
  return groups;
}

const encodeId = (groupBy: UsageGroup[], key: KeyValue[]): string =>
  Buffer.from(JSON.stringify({ g: groupBy.join(','), k: key }), 'utf8').toString('base64url');

/** The key a group id names; a 400 on `after` unless it is the id of a group of this grouping. */
function decodeId(groupBy: UsageGroup[], id: string): KeyValue[] {
  const invalid = () =>
    validationError('after', 'after is not the id of a usage group of this group_by; pass last_id unchanged');
  if (!/^[A-Za-z0-9_-]+$/.test(id)) throw invalid();
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(id, 'base64url').toString('utf8'));
  } catch {
    throw invalid();
  }
  if (typeof value !== 'object' || value === null || !('g' in value) || !('k' in value)) throw invalid();
  const { g, k } = value;
  if (g !== groupBy.join(',') || !Array.isArray(k) || k.length !== groupBy.length) throw invalid();
  const key: KeyValue[] = [];
  for (const [index, group] of groupBy.entries()) {
    const part: unknown = k[index];
    if (group === 'day' ? !Number.isSafeInteger(part) : typeof part !== 'string') throw invalid();
    key.push(part as KeyValue);
  }
  if (encodeId(groupBy, key) !== id) throw invalid();
  return key;
}

/** Rows that come after `key` in the report's order: (k0 past c0) or (k0 = c0 and k1 past c1) or … */
function after(groupBy: UsageGroup[], key: KeyValue[]): RawBuilder<SqlBool> {
  const alternatives = groupBy.map((group, index) => {
    const equal = groupBy.slice(0, index).map((earlier, e) => sql`${KEYS[earlier].expression} = ${key[e]}`);
    const { expression, order } = KEYS[group];
    const past = order === 'desc' ? sql`${expression} < ${key[index]}` : sql`${expression} > ${key[index]}`;
    return sql.join([...equal, past], sql` and `);
  });
  return sql<SqlBool>`(${sql.join(
    alternatives.map((alternative) => sql`(${alternative})`),
    sql` or `,
  )})`;
}

interface SumsRow {
  turns: unknown;
  input_tokens: unknown;
  cached_input_tokens: unknown;
  output_tokens: unknown;
  cost_micros: unknown;
  [key: `k${number}`]: unknown;
}

/** One page of groups (limit + 1 fetched, to know whether more follow). */
async function groupRows(
  db: Executor,
  orgId: string,
  query: UsageQuery,
  from: KeyValue[] | null,
  limit: number,
): Promise<SumsRow[]> {
  const { groupBy, filter } = query;
  let select = db.selectFrom('runs').where('runs.org_id', '=', orgId);
  if (filter.startMs !== undefined) select = select.where('runs.created_at', '>=', filter.startMs);
  if (filter.endMs !== undefined) select = select.where('runs.created_at', '<', filter.endMs);
  if (filter.agentId !== undefined) select = select.where('runs.agent_id', '=', filter.agentId);
  if (filter.apiKeyId !== undefined) select = select.where('runs.api_key_id', '=', filter.apiKeyId);
  if (filter.model !== undefined) select = select.where('runs.model', '=', filter.model);
  if (filter.source !== undefined) select = select.where('runs.source', '=', filter.source);
  if (filter.endUser !== undefined) select = select.where('runs.end_user', '=', filter.endUser);
  if (from !== null) select = select.where(after(groupBy, from));
  let sums = select.select([
    sql<unknown>`count(*)`.as('turns'),
    sql<unknown>`coalesce(sum(runs.input_tokens), 0)`.as('input_tokens'),
    sql<unknown>`coalesce(sum(runs.cached_input_tokens), 0)`.as('cached_input_tokens'),
    sql<unknown>`coalesce(sum(runs.output_tokens), 0)`.as('output_tokens'),
    sql<unknown>`coalesce(sum(runs.cost_micros), 0)`.as('cost_micros'),
  ]);
  for (const [index, group] of groupBy.entries()) {
    const { expression, order } = KEYS[group];
    sums = sums
      .select(expression.as(`k${index}`))
      .groupBy(expression)
      .orderBy(expression, order);
  }
  return (await sums.limit(limit).execute()) as SumsRow[];
}

const count = (value: unknown): number => Number(value ?? 0);

function keyOf(groupBy: UsageGroup[], row: SumsRow): KeyValue[] {
  return groupBy.map((group, index) => {
    const value = row[`k${index}`];
    return group === 'day' ? Number(value) : String(value ?? '');
  });
}

function viewOf(
  groupBy: UsageGroup[],
  row: SumsRow,
  prefixes: ReadonlyMap<string, string>,
): UsageGroupView & { key: KeyValue[] } {
  const key = keyOf(groupBy, row);
  const fields: Partial<UsageGroupView> = {};
  for (const [index, group] of groupBy.entries()) {
    const value = key[index] ?? '';
    if (group === 'day') fields.day = new Date(Number(value) * DAY_MS).toISOString().slice(0, 10);
    else if (group === 'agent') fields.agent_id = String(value);
    else if (group === 'api_key') {
      fields.api_key_id = value === '' ? null : String(value);
      fields.api_key_prefix = value === '' ? null : (prefixes.get(String(value)) ?? null);
    } else if (group === 'model') fields.model = String(value);
    else if (group === 'source') fields.source = String(value) as RunSource;
    else fields.end_user = value === '' ? null : String(value);
  }
  const input = count(row.input_tokens);
  const output = count(row.output_tokens);
  return {
    key,
    id: encodeId(groupBy, key),
    object: 'usage.group',
    ...fields,
    turns: count(row.turns),
    input_tokens: input,
    cached_input_tokens: count(row.cached_input_tokens),
    output_tokens: output,
    total_tokens: input + output,
    cost_usd: count(row.cost_micros) / 1_000_000,
  };
}

/** The displayed prefixes of the organization's keys among `ids`. */
async function keyPrefixes(db: Executor, orgId: string, ids: string[]): Promise<Map<string, string>> {
  if (ids.length === 0) return new Map();
  const rows = await db
    .selectFrom('api_keys')
    .select(['id', 'prefix'])
    .where('org_id', '=', orgId)
    .where('id', 'in', ids)
    .execute();
  return new Map(rows.map((row) => [row.id, row.prefix]));
}

/** The CSV columns of a report: its keys, then the sums. */
function csvHeader(groupBy: UsageGroup[]): string[] {
  const keys = groupBy.flatMap((group) =>
    group === 'api_key'
      ? ['api_key_id', 'api_key_prefix']
      : [group === 'agent' ? 'agent_id' : group === 'day' ? 'day' : group],
  );
  return [...keys, 'turns', 'input_tokens', 'cached_input_tokens', 'output_tokens', 'total_tokens', 'cost_usd'];
}

function csvCells(groupBy: UsageGroup[], view: UsageGroupView): CsvCell[] {
  const keys = groupBy.flatMap((group): CsvCell[] => {
    if (group === 'day') return [view.day ?? null];
    if (group === 'agent') return [view.agent_id ?? null];
    if (group === 'api_key') return [view.api_key_id ?? null, view.api_key_prefix ?? null];
    if (group === 'model') return [view.model ?? null];
    if (group === 'source') return [view.source ?? null];
    return [view.end_user ?? null];
  });
  return [
    ...keys,
    view.turns,
    view.input_tokens,
    view.cached_input_tokens,
    view.output_tokens,
    view.total_tokens,
    view.cost_usd,
  ];
}

export interface UsageServiceDeps {
  db: Executor;
}

export function createUsageService(deps: UsageServiceDeps) {
  const { db } = deps;

  /** A page of groups and the key of its last (for the next), `from` excluded. */
  async function page(
    orgId: string,
    query: UsageQuery,
    from: KeyValue[] | null,
    limit: number,
  ): Promise<{ data: (UsageGroupView & { key: KeyValue[] })[]; hasMore: boolean }> {
    // The report without groups is one row (its sums, zero when there is nothing); nothing follows it.
    if (query.groupBy.length === 0 && from !== null) return { data: [], hasMore: false };
    const rows = await groupRows(db, orgId, query, from, limit + 1);
    const shown = rows.slice(0, limit);
    const keyIds = query.groupBy.includes('api_key')
      ? [...new Set(shown.map((row) => keyOf(query.groupBy, row)[query.groupBy.indexOf('api_key')]))].filter(
          (id): id is string => typeof id === 'string' && id !== '',
        )
      : [];
    const prefixes = await keyPrefixes(db, orgId, keyIds);
    return { data: shown.map((row) => viewOf(query.groupBy, row, prefixes)), hasMore: rows.length > limit };
  }

  return {
    /** One page of the report, `after` the group it names. */
    async report(
      orgId: string,
      query: UsageQuery,
      paging: { limit: number; after?: string },
    ): Promise<CursorPage<UsageGroupView>> {
      const from = paging.after === undefined ? null : decodeId(query.groupBy, paging.after);
      const { data, hasMore } = await page(orgId, query, from, paging.limit);
      const views = data.map(({ key: _key, ...view }) => view);
      return {
        object: 'list',
        data: views,
        first_id: views[0]?.id ?? null,
        last_id: views.at(-1)?.id ?? null,
        has_more: hasMore,
      };
    },

    /**
     * The report as CSV records, header first, every group from `after` on: read a page at a time as the consumer
     * takes them. `after` is checked before the first record is made, so a bad one is a 400, not a broken stream.
     */
    csv(orgId: string, query: UsageQuery, paging: { after?: string }): AsyncIterable<string> {
      const start = paging.after === undefined ? null : decodeId(query.groupBy, paging.after);
      return (async function* records() {
        yield csvRecord(csvHeader(query.groupBy));
        let from = start;
        for (;;) {
          const { data, hasMore } = await page(orgId, query, from, CSV_PAGE);
          yield data.map((view) => csvRecord(csvCells(query.groupBy, view))).join('');
          const last = data.at(-1);
          if (!hasMore || last === undefined) return;
          from = last.key;
        }
      })();
    },
  };
}

export type UsageService = ReturnType<typeof createUsageService>;
