/**
 * The API of an agent's memories (`/v1/agents/{id}/memories`, docs/memory.md): list (newest first, optionally one end
 * user's), create, read, change and delete, within one organization (another organization's agent is not found).
 * Writes go through memory-store.ts, as the `memory` tool's do.
 */

import { AppError, notFound } from '../../errors/app-error.ts';
import { type Clock, iso } from '../../lib/clock.ts';
import type { Executor } from '../../storage/db.ts';
import type { MemoryRow } from '../../storage/schema.ts';
import { MAX_MEMORIES_PER_SCOPE } from '../../tools/builtin/memories.ts';
import { type AuditContext, type AuditSummary, appendAudit, SYSTEM_AUDIT } from '../audit/audit-log.ts';
import { type CursorPage, type CursorQuery, newestFirstPage } from '../pagination.ts';
import { deleteMemory, findMemory, insertMemory, updateMemoryContent } from './memory-store.ts';

export interface Memory {
  id: string;
  object: 'memory';
  agentId: string;
  /** The end user the memory belongs to; null for the agent's own. */
  endUser: string | null;
  content: string;
  createdAt: string;
  updatedAt: string;
}

export function memoryFromRow(row: MemoryRow): Memory {
  return {
    id: row.id,
    object: 'memory',
    agentId: row.agent_id,
    endUser: row.end_user,
    content: row.content,
    createdAt: iso(Number(row.created_at)),
    updatedAt: iso(Number(row.updated_at)),
  };
}

export interface MemoryServiceDeps {
  db: Executor;
  clock: Clock;
}

export function createMemoryService({ db, clock }: MemoryServiceDeps) {
  async function agentOf(orgId: string, agentId: string): Promise<string> {
    const id = agentId.toLowerCase();
    const row = await db
      .selectFrom('agents')
      .select('id')
      .where('org_id', '=', orgId)
      .where('id', '=', id)
      .executeTakeFirst();
    if (row === undefined) throw notFound('agent', agentId);
    return row.id;
  }

  async function mustFind(orgId: string, agentId: string, id: string): Promise<MemoryRow> {
    const row = await findMemory(db, orgId, await agentOf(orgId, agentId), id.toLowerCase());
    if (row === undefined) throw notFound('memory', id);
    return row;
  }

  return {
    /** Newest first; `endUser` keeps one end user's memories only. */
    async list(orgId: string, agentId: string, query: CursorQuery & { endUser?: string }): Promise<CursorPage<Memory>> {
      const agent = await agentOf(orgId, agentId);
      let select = db.selectFrom('memories').selectAll().where('org_id', '=', orgId).where('agent_id', '=', agent);
      if (query.endUser !== undefined) select = select.where('end_user', '=', query.endUser);
      const page = query.after === undefined ? { limit: query.limit } : { limit: query.limit, after: query.after };
      return newestFirstPage(select, page, {
        createdAt: 'created_at',
        id: 'id',
        anchor: (after) => findMemory(db, orgId, agent, after.toLowerCase()),
        unknownAfter: (after) => `after names no memory of this agent: ${after}`,
        view: memoryFromRow,
      });
    },

    async create(
      orgId: string,
      agentId: string,
      input: { content: string; endUser?: string | null },
      audit: AuditContext = SYSTEM_AUDIT,
    ): Promise<Memory> {
      const agent = await agentOf(orgId, agentId);
      const scope = { orgId, agentId: agent, endUser: input.endUser ?? null };
      const row = await db.transaction().execute(async (trx) => {
        const inserted = await insertMemory(trx, scope, input.content, clock.now());
        if (inserted !== null) {
          await appendAudit(trx, audit, entry(inserted, 'memory.created', null, summaryOf(inserted)), clock);
        }
        return inserted;
      });
      if (row === null) {
        throw new AppError(
          'limit_exceeded',
          `the agent already keeps ${MAX_MEMORIES_PER_SCOPE} memories for this end user; delete some first`,
          { param: 'content' },
        );
      }
      return memoryFromRow(row);
    },

    async get(orgId: string, agentId: string, id: string): Promise<Memory> {
      return memoryFromRow(await mustFind(orgId, agentId, id));
    },

    async update(
      orgId: string,
      agentId: string,
      id: string,
      input: { content: string },
      audit: AuditContext = SYSTEM_AUDIT,
    ): Promise<Memory> {
      const row = await mustFind(orgId, agentId, id);
      const now = clock.now();
      const updated = { ...row, content: input.content, updated_at: now };
      await db.transaction().execute(async (trx) => {
        await updateMemoryContent(trx, row.id, input.content, now);
        await appendAudit(trx, audit, entry(row, 'memory.updated', summaryOf(row), summaryOf(updated)), clock);
      });
      return memoryFromRow(updated);
    },

    async delete(
      orgId: string,
      agentId: string,
      id: string,
      audit: AuditContext = SYSTEM_AUDIT,
    ): Promise<{ id: string; object: 'memory.deleted'; deleted: true }> {
      const row = await mustFind(orgId, agentId, id);
      await db.transaction().execute(async (trx) => {
        await deleteMemory(trx, row.id);
        await appendAudit(trx, audit, entry(row, 'memory.deleted', summaryOf(row), null), clock);
      });
      return { id: row.id, object: 'memory.deleted', deleted: true };
    },
  };
}

/** What the audit log keeps of a memory: whose it is and its size, not its text. */
const summaryOf = (row: MemoryRow) => ({
  agent_id: row.agent_id,
  end_user: row.end_user,
  content_chars: row.content.length,
});

const entry = (row: MemoryRow, action: string, before: AuditSummary | null, after: AuditSummary | null) => ({
  orgId: row.org_id,
  action,
  targetType: 'memory',
  targetId: row.id,
  before,
  after,
});

export type MemoryService = ReturnType<typeof createMemoryService>;
