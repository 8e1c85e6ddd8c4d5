/**
 * Threads of the older API (`/api/sdk/threads`; spec 4.7 and 8; docs/legacy.md): message lists with metadata
 * that tool runs read as their conversation and append their replies to. Thread ids are opaque strings
 * (`thread_…`), times Unix seconds. This module is the one writer of `threads` and `thread_messages`.
 */
import { notFound, validationError } from '../../errors/app-error.ts';
import { type Clock, unixSeconds } from '../../lib/clock.ts';
import { newId } from '../../lib/ids.ts';
import type { ThreadRole } from '../../storage/column-values.ts';
import type { Executor } from '../../storage/db.ts';
import type { ThreadMessageRow, ThreadRow } from '../../storage/schema.ts';

export { THREAD_ROLES, type ThreadRole } from '../../storage/column-values.ts';

/** Spec section 8. */
export const MAX_METADATA_PAIRS = 16;
export const MAX_METADATA_KEY = 64;
export const MAX_METADATA_VALUE = 512;
export const MAX_THREAD_FILE_IDS = 10;

export type Metadata = Record<string, string>;

export interface Thread {
  id: string;
  object: 'thread';
  created_at: number;
  metadata: Metadata;
}

export interface ThreadMessage {
  id: string;
  object: 'thread.message';
  created_at: number;
  thread_id: string;
  role: ThreadRole;
  content: string;
  metadata: Metadata;
  file_ids: string[];
  agent_id?: string;
  name?: string;
  run_id?: string;
}

export interface NewThreadMessage {
  role: ThreadRole;
  content: string;
  metadata?: Metadata;
  file_ids?: string[];
}

export interface ThreadListQuery {
  limit: number;
  order: 'asc' | 'desc';
  after?: string;
  before?: string;
}

function parseObject(text: string | null): Metadata {
  if (text === null) return {};
  try {
    const value: unknown = JSON.parse(text);
    if (typeof value === 'object' && value !== null && !Array.isArray(value)) {
      return Object.fromEntries(Object.entries(value).map(([key, entry]) => [key, String(entry)]));
    }
  } catch {
    // Written by this module as JSON; unreadable metadata reads as none.
  }
  return {};
}

function parseIds(text: string | null): string[] {
  if (text === null) return [];
  try {
    const value: unknown = JSON.parse(text);
    if (Array.isArray(value)) return value.map(String);
  } catch {
    // As above.
  }
  return [];
}

/** Checks the limits of spec section 8; the schema bounds them too, this names the offending key. */
export function checkMetadata(metadata: Metadata | undefined, param: string): void {
  if (metadata === undefined) return;
  const entries = Object.entries(metadata);
  if (entries.length > MAX_METADATA_PAIRS) {
    throw validationError(param, `${param} may hold at most ${MAX_METADATA_PAIRS} key-value pairs`);
  }
  for (const [key, value] of entries) {
    if (key.length > MAX_METADATA_KEY) {
      throw validationError(param, `${param} keys may be at most ${MAX_METADATA_KEY} characters`);
    }
    if (typeof value !== 'string' || value.length > MAX_METADATA_VALUE) {
      throw validationError(
        `${param}.${key}`,
        `${param}.${key} must be a string of at most ${MAX_METADATA_VALUE} characters`,
      );
    }
  }
}

const metadataText = (metadata: Metadata | undefined): string | null =>
  metadata === undefined || Object.keys(metadata).length === 0 ? null : JSON.stringify(metadata);

export function threadFromRow(row: ThreadRow): Thread {
  return { id: row.id, object: 'thread', created_at: unixSeconds(row.created_at), metadata: parseObject(row.metadata) };
}

export function threadMessageFromRow(row: ThreadMessageRow): ThreadMessage {
  const role: ThreadRole = row.role;
  return {
    id: row.id,
    object: 'thread.message',
    created_at: unixSeconds(row.created_at),
    thread_id: row.thread_id,
    role,
    content: row.content,
    metadata: parseObject(row.metadata),
    file_ids: parseIds(row.file_ids),
    ...(row.agent_id === null ? {} : { agent_id: row.agent_id }),
    ...(row.name === null ? {} : { name: row.name }),
    ...(row.run_id === null ? {} : { run_id: row.run_id }),
  };
}

const newThreadId = () => `thread_${newId().replaceAll('-', '')}`;
const newMessageId = () => `msg_${newId().replaceAll('-', '')}`;

export interface ThreadServiceDeps {
  db: Executor;
  clock: Clock;
}

export function createThreadService(deps: ThreadServiceDeps) {
  const { db, clock } = deps;

  async function find(orgId: string, id: string, executor: Executor = db): Promise<ThreadRow> {
    const row = await executor
      .selectFrom('threads')
      .selectAll()
      .where('org_id', '=', orgId)
      .where('id', '=', id)
      .executeTakeFirst();
    if (row === undefined) throw notFound('thread', id);
    return row;
  }

  async function checkFiles(executor: Executor, orgId: string, ids: string[] | undefined, param: string) {
    for (const [index, id] of (ids ?? []).entries()) {
      const file = await executor
        .selectFrom('files')
        .select('id')
        .where('org_id', '=', orgId)
        .where('id', '=', id.toLowerCase())
        .where('deleted_at', 'is', null)
        .executeTakeFirst();
      if (file === undefined) throw notFound('file', `${id} (${param}[${index}])`);
    }
  }

  /** Appends messages at the end of a thread (in the caller's transaction when given one). */
  async function append(
    executor: Executor,
    thread: { id: string; orgId: string },
    messages: (NewThreadMessage & { agent_id?: string; name?: string; run_id?: string })[],
  ): Promise<ThreadMessage[]> {
    if (messages.length === 0) return [];
    const last = await executor
      .selectFrom('thread_messages')
      .select((eb) => eb.fn.max<number | null>('seq').as('seq'))
      .where('thread_id', '=', thread.id)
      .executeTakeFirst();
    let seq = Number(last?.seq ?? 0);
    const now = clock.now();
    const rows: ThreadMessageRow[] = messages.map((message) => {
      seq += 1;
      return {
        id: newMessageId(),
        org_id: thread.orgId,
        thread_id: thread.id,
        seq,
        role: message.role,
        content: message.content,
        metadata: metadataText(message.metadata),
        file_ids:
          message.file_ids === undefined || message.file_ids.length === 0 ? null : JSON.stringify(message.file_ids),
        agent_id: message.agent_id ?? null,
        name: message.name ?? null,
        run_id: message.run_id ?? null,
        created_at: now,
      };
    });
    await executor.insertInto('thread_messages').values(rows).execute();
    return rows.map(threadMessageFromRow);
  }

  return {
    find,
    append,

    async create(orgId: string, input: { messages?: NewThreadMessage[]; metadata?: Metadata }): Promise<Thread> {
      checkMetadata(input.metadata, 'metadata');
      for (const [index, message] of (input.messages ?? []).entries()) {
        checkMetadata(message.metadata, `messages[${index}].metadata`);
      }
      return db.transaction().execute(async (trx) => {
        for (const [index, message] of (input.messages ?? []).entries()) {
          await checkFiles(trx, orgId, message.file_ids, `messages[${index}].file_ids`);
        }
        const row: ThreadRow = {
          id: newThreadId(),
          org_id: orgId,
          metadata: metadataText(input.metadata),
          created_at: clock.now(),
        };
        await trx.insertInto('threads').values(row).execute();
        await append(trx, { id: row.id, orgId }, input.messages ?? []);
        return threadFromRow(row);
      });
    },

    async get(orgId: string, id: string): Promise<Thread> {
      return threadFromRow(await find(orgId, id));
    },

    /** Replaces the thread's metadata (an empty object clears it). */
    async update(orgId: string, id: string, metadata: Metadata): Promise<Thread> {
      checkMetadata(metadata, 'metadata');
      const row = await db
        .updateTable('threads')
        .set({ metadata: metadataText(metadata) })
        .where('org_id', '=', orgId)
        .where('id', '=', id)
        .returningAll()
        .executeTakeFirst();
      if (row === undefined) throw notFound('thread', id);
      return threadFromRow(row);
    },

    /**
     * Threads in `order` of creation; `after` / `before` name a thread of the previous page (the list continues
     * after it, or ends before it, in that order). `has_more` says whether more lie beyond this page.
     */
    async list(orgId: string, query: ThreadListQuery): Promise<{ list: Thread[]; has_more: boolean }> {
      const anchorOf = async (id: string | undefined, param: string) => {
        if (id === undefined) return null;
        const row = await db
          .selectFrom('threads')
          .select(['id', 'created_at'])
          .where('org_id', '=', orgId)
          .where('id', '=', id)
          .executeTakeFirst();
        if (row === undefined) throw validationError(param, `${param}: no thread ${id} in this organization`);
        return row;
      };
      const after = await anchorOf(query.after, 'after');
      const before = await anchorOf(query.before, 'before');
      const forward = query.order === 'asc';
      let base = db.selectFrom('threads').selectAll().where('org_id', '=', orgId);
      // "Later in the list" is newer for asc and older for desc.
      if (after !== null) {
        base = base.where((eb) =>
          eb.or([
            eb('created_at', forward ? '>' : '<', after.created_at),
            eb.and([eb('created_at', '=', after.created_at), eb('id', forward ? '>' : '<', after.id)]),
          ]),
        );
      }
      if (before !== null) {
        base = base.where((eb) =>
          eb.or([
            eb('created_at', forward ? '<' : '>', before.created_at),
            eb.and([eb('created_at', '=', before.created_at), eb('id', forward ? '<' : '>', before.id)]),
          ]),
        );
      }
      // With only `before`, the page is the one just before the anchor: read backwards, then restore the order.
      const backwards = before !== null && after === null;
      const direction = forward !== backwards ? 'asc' : 'desc';
      const rows = await base
        .orderBy('created_at', direction)
        .orderBy('id', direction)
        .limit(query.limit + 1)
        .execute();
      const page = rows.slice(0, query.limit);
      if (backwards) page.reverse();
      return { list: page.map(threadFromRow), has_more: rows.length > query.limit };
    },

    async addMessage(orgId: string, threadId: string, message: NewThreadMessage): Promise<ThreadMessage> {
      checkMetadata(message.metadata, 'metadata');
      return db.transaction().execute(async (trx) => {
        await find(orgId, threadId, trx);
        await checkFiles(trx, orgId, message.file_ids, 'file_ids');
        const [created] = await append(trx, { id: threadId, orgId }, [message]);
        if (created === undefined) throw new Error('append returned nothing');
        return created;
      });
    },

    async messages(orgId: string, threadId: string, executor: Executor = db): Promise<ThreadMessage[]> {
      await find(orgId, threadId, executor);
      const rows = await executor
        .selectFrom('thread_messages')
        .selectAll()
        .where('thread_id', '=', threadId)
        .orderBy('seq')
        .execute();
      return rows.map(threadMessageFromRow);
    },
  };
}

export type ThreadService = ReturnType<typeof createThreadService>;
