/**
 * The conversation log of one session, kept by the worker that holds its lease. The log is append-only and its
 * item sequence numbers are assigned under the session's row lock, so each step only reads the items added since
 * the last one instead of the whole history (which made turns slower as sessions grew).
 */
import { type Item, itemFromRow } from '../domain/messages/items.ts';
import type { Executor } from '../storage/db.ts';

export interface ContextCache {
  /** Items of messages up to `upToMessageSeq`, in context order (message order, then log order). */
  load(db: Executor, upToMessageSeq: number): Promise<Item[]>;
}

export function createContextCache(sessionId: string): ContextCache {
  const items: (Item & { messageSeq: number })[] = [];
  let lastSeq = 0;
  return {
    async load(db, upToMessageSeq) {
      const rows = await db
        .selectFrom('items')
        .innerJoin('messages', 'messages.id', 'items.message_id')
        .selectAll('items')
        .select('messages.seq as message_seq')
        .where('items.session_id', '=', sessionId)
        .where('items.seq', '>', lastSeq)
        .orderBy('items.seq')
        .execute();
      if (rows.length > 0) {
        for (const row of rows) {
          items.push({ ...itemFromRow(row), messageSeq: row.message_seq });
          lastSeq = Math.max(lastSeq, row.seq);
        }
        // An answer to an earlier turn can arrive after a later message's input: keep message order first.
        items.sort((a, b) => a.messageSeq - b.messageSeq || a.seq - b.seq);
      }
      return items.filter((item) => item.messageSeq <= upToMessageSeq);
    },
  };
}
