/**
 * The one writer of `memories` (docs/memory.md). Every function takes a database handle or an open transaction and
 * is confined to one scope: organization, agent and end user (null: the agent's own memories). It is the store the
 * `memory` tool reads and writes through (tools/builtin/memories.ts), and the memory service's for the API.
 */
import { type ExpressionBuilder, type SqlBool, sql } from 'kysely';
import { newId } from '../../lib/ids.ts';
import type { Executor } from '../../storage/db.ts';
import type { Database, MemoryRow } from '../../storage/schema.ts';
import {
  MAX_MEMORIES_PER_SCOPE,
  type MemoryEntry,
  type MemoryScope,
  type MemoryStore,
} from '../../tools/builtin/memories.ts';

/** The most words of a search query used; the rest are ignored. */
const MAX_QUERY_WORDS = 8;

type Memories = ExpressionBuilder<Database, 'memories'>;

/** The rows of one scope: `end_user is null` for the agent's own, never another user's. */
function inScope(eb: Memories, scope: MemoryScope) {
  return eb.and([
    eb('org_id', '=', scope.orgId),
    eb('agent_id', '=', scope.agentId),
    scope.endUser === null ? eb('end_user', 'is', null) : eb('end_user', '=', scope.endUser),
  ]);
}

/** `%word%` with LIKE's own characters taken literally (escape `\`). */
const likePattern = (word: string): string => `%${word.replace(/[\\%_]/g, (char) => `\\${char}`)}%`;

/** The words of a query, lower-cased, at most MAX_QUERY_WORDS. */
export function queryWords(query: string): string[] {
  return query
    .toLowerCase()
    .split(/\s+/)
    .filter((word) => word !== '')
    .slice(0, MAX_QUERY_WORDS);
}

const entryOf = (row: Pick<MemoryRow, 'id' | 'content' | 'updated_at'>): MemoryEntry => ({
  id: row.id,
  content: row.content,
  updatedAt: Number(row.updated_at),
});

export async function countInScope(db: Executor, scope: MemoryScope): Promise<number> {
  const row = await db
    .selectFrom('memories')
    .select((eb) => eb.fn.countAll<number>().as('count'))
    .where((eb) => inScope(eb, scope))
    .executeTakeFirstOrThrow();
  return Number(row.count);
}

/** Inserts a memory unless its scope is full (then null). */
export async function insertMemory(
  db: Executor,
  scope: MemoryScope,
  content: string,
  now: number,
): Promise<MemoryRow | null> {
  if ((await countInScope(db, scope)) >= MAX_MEMORIES_PER_SCOPE) return null;
  const row: MemoryRow = {
    id: newId(),
    org_id: scope.orgId,
    agent_id: scope.agentId,
    end_user: scope.endUser,
    content,
    created_at: now,
    updated_at: now,
  };
  await db.insertInto('memories').values(row).execute();
  return row;
}

/** A memory of the agent (any end user), for the API; undefined when the agent has none of that id. */
export async function findMemory(
  db: Executor,
  orgId: string,
  agentId: string,
  id: string,
): Promise<MemoryRow | undefined> {
  return db
    .selectFrom('memories')
    .selectAll()
    .where('org_id', '=', orgId)
    .where('agent_id', '=', agentId)
    .where('id', '=', id)
    .executeTakeFirst();
}

export async function updateMemoryContent(db: Executor, id: string, content: string, now: number): Promise<void> {
  await db.updateTable('memories').set({ content, updated_at: now }).where('id', '=', id).execute();
}

export async function deleteMemory(db: Executor, id: string): Promise<void> {
  await db.deleteFrom('memories').where('id', '=', id).execute();
}

export function createMemoryStore(clock: { now(): number }): MemoryStore {
  return {
    async save(db, scope, content) {
      const row = await insertMemory(db, scope, content, clock.now());
      return row === null ? null : entryOf(row);
    },

    async search(db, scope, query, limit) {
      const words = queryWords(query);
      const rows = await db
        .selectFrom('memories')
        .select(['id', 'content', 'updated_at'])
        .where((eb) =>
          eb.and([
            inScope(eb, scope),
            ...words.map((word) => sql<SqlBool>`lower(content) like ${likePattern(word)} escape '\\'`),
          ]),
        )
        .orderBy('updated_at', 'desc')
        .orderBy('id', 'desc')
        .limit(limit)
        .execute();
      return rows.map(entryOf);
    },

    async update(db, scope, id, content) {
      const now = clock.now();
      const result = await db
        .updateTable('memories')
        .set({ content, updated_at: now })
        .where((eb) => eb.and([inScope(eb, scope), eb('id', '=', id)]))
        .executeTakeFirst();
      return Number(result.numUpdatedRows) === 0 ? null : { id, content, updatedAt: now };
    },

    async remove(db, scope, id) {
      const result = await db
        .deleteFrom('memories')
        .where((eb) => eb.and([inScope(eb, scope), eb('id', '=', id)]))
        .executeTakeFirst();
      return Number(result.numDeletedRows) > 0;
    },
  };
}
