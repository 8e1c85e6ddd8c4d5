/**
 * The reads and writes of a session's conversation log (items.ts says what an item holds): appends numbered in
 * the session's order, items added outside any turn and adopted by the next one, removals with the marker that
 * tells kept logs to drop them, and the loads of a turn's context, a message's items and the whole log.
 */
import { AppError } from '../../errors/app-error.ts';
import { newId } from '../../lib/ids.ts';
import { ITEM_COLUMNS, qualified } from '../../storage/columns.ts';
import type { Executor } from '../../storage/db.ts';
import { prepare, prepareNumberedInsert } from '../../storage/prepared.ts';
import type { ItemRow } from '../../storage/schema.ts';
import { transactionMemo } from '../../storage/transaction-memo.ts';
import { createdInTransaction } from '../sessions/new-sessions.ts';
import { type Item, type ItemContent, itemFromRow, type NewItem } from './items.ts';
import { firstOpenMessage } from './open-messages.ts';

const insertItems = prepareNumberedInsert('items', 'session_id');

/** The last item seq a session got from the open transaction (which holds the session: no one else appends). */
const writtenSeqs = transactionMemo<number>();

const itemsAfter = prepare((db, p: { sessionId: string; afterSeq: number }) =>
  db
    .selectFrom('items')
    .leftJoin('messages', 'messages.id', 'items.message_id')
    .select(qualified('items', ITEM_COLUMNS))
    .select('messages.seq as message_seq')
    .where('items.session_id', '=', p.sessionId)
    .where('items.seq', '>', p.afterSeq)
    .orderBy('items.seq'),
);

/** The prefix of an item's random id, by its type. */
const PREFIX: Record<ItemContent['type'], string> = {
  user_message: 'msg',
  assistant_message: 'msg',
  function_call: 'fc',
  function_call_output: 'fco',
  tool_list: 'mcpl',
  approval_decision: 'mcpa',
  elicitation: 'elic',
  elicitation_response: 'elicr',
  item_removed: 'rm',
  compaction: 'cmp',
};

/** Appends items at the end of the session's log (callers hold the session's row lock or lease). */
export async function appendItems(
  trx: Executor,
  target: { orgId: string; sessionId: string; now: number },
  items: NewItem[],
): Promise<Item[]> {
  if (items.length === 0) return [];
  const known = writtenSeqs.get(trx, target.sessionId) ?? (createdInTransaction(trx, target.sessionId) ? 0 : undefined);
  const unnumbered = items.map((item) => ({
    id: item.id ?? `${PREFIX[item.content.type]}_${newId().replaceAll('-', '')}`,
    org_id: target.orgId,
    session_id: target.sessionId,
    message_id: item.messageId,
    step: item.step,
    type: item.content.type,
    call_id: item.callId ?? null,
    content: JSON.stringify(item.content),
    created_at: target.now,
  }));
  // Unknown to this transaction: numbered by the insert itself, with no read of the last seq before it.
  const base = await insertItems.run(trx, target.sessionId, unnumbered, known);
  const rows: ItemRow[] = unnumbered.map((row, index) => ({ ...row, seq: base + index + 1 }));
  writtenSeqs.set(trx, target.sessionId, base + rows.length);
  return rows.map(itemFromRow);
}

/**
 * `message_id` of items added to a conversation outside any turn (user and assistant messages, function calls and
 * outputs sent to POST /v1/conversations/{id}/items): the next accepted message adopts them as its history.
 */
export const UNATTACHED = '';

/** Steps of unattached items: far below any turn's own history steps, apart per batch (keyed by its first seq). */
export const unattachedStep = (firstSeq: number, step: number): number =>
  step === 0 ? 0 : -(1_000_000 + firstSeq * 64) + step + 1;

/** Makes the session's unattached items history of `messageId` (in the caller's transaction, session locked). */
export async function adoptUnattachedItems(trx: Executor, sessionId: string, messageId: string): Promise<void> {
  await adoptItems.run(trx, { sessionId, messageId, unattached: UNATTACHED });
}

const adoptItems = prepare((db, p: { sessionId: string; messageId: string; unattached: string }) =>
  db
    .updateTable('items')
    .set({ message_id: p.messageId })
    .where('session_id', '=', p.sessionId)
    .where('message_id', '=', p.unattached),
);

/**
 * Deletes items of the session's log (callers hold the session's row lock, and no turn of the session is
 * unfinished) and appends an `item_removed` marker naming them, with the session's last message (unattached when
 * it has none yet), so that a process that kept the session's log reads it at once and drops the items.
 */
export async function removeItems(
  trx: Executor,
  target: { orgId: string; sessionId: string; now: number },
  itemIds: string[],
): Promise<void> {
  if (itemIds.length === 0) return;
  await trx.deleteFrom('items').where('session_id', '=', target.sessionId).where('id', 'in', itemIds).execute();
  const last = await trx
    .selectFrom('messages')
    .select('id')
    .where('session_id', '=', target.sessionId)
    .orderBy('seq', 'desc')
    .limit(1)
    .executeTakeFirst();
  const marker: NewItem = { messageId: last?.id ?? UNATTACHED, step: 0, content: { type: 'item_removed', itemIds } };
  await appendItems(trx, target, [marker]);
}

/**
 * Deletes the item `itemId` of the session's log with the items that belong to it: a call, its output and the
 * decision on its approval (one call_id) go together, so the log never holds an output without its call. Callers
 * hold the session's row lock. 409 `conversation_busy` while a turn of the session is unfinished (its steps read
 * the log); false when the log has no such item.
 */
export async function removeLogItem(
  trx: Executor,
  target: { orgId: string; sessionId: string; now: number },
  itemId: string,
): Promise<boolean> {
  const row = await trx
    .selectFrom('items')
    .select(['id', 'call_id', 'type'])
    .where('session_id', '=', target.sessionId)
    .where('id', '=', itemId)
    .executeTakeFirst();
  if (row === undefined || row.type === 'item_removed') return false;
  if ((await firstOpenMessage(trx, target.sessionId)) !== undefined) {
    throw new AppError(
      'conversation_busy',
      'the conversation has an unfinished response (queued, running or waiting for tool outputs): delete items once it ended, or cancel it (POST /v1/responses/{id}/cancel)',
    );
  }
  const together =
    row.call_id === null
      ? [row]
      : await trx
          .selectFrom('items')
          .select('id')
          .where('session_id', '=', target.sessionId)
          .where('call_id', '=', row.call_id)
          .execute();
  await removeItems(
    trx,
    target,
    together.map((item) => item.id),
  );
  return true;
}

/** The whole log in order: every message's items, then the items added since the last message. */
export async function loadLogItems(db: Executor, sessionId: string): Promise<Item[]> {
  const attached = await loadContextItems(db, sessionId, 2_147_483_647);
  const unattached = await db
    .selectFrom('items')
    .selectAll()
    .where('session_id', '=', sessionId)
    .where('message_id', '=', UNATTACHED)
    .orderBy('seq')
    .execute();
  return [...attached, ...unattached.map(itemFromRow)];
}

/**
 * The log as a turn sees it: items of this message and of the messages before it, grouped by message in
 * submission order. A later message's input (already queued) is not part of an earlier turn, and an answer that
 * arrives after it still belongs to its own message.
 */
export async function loadContextItems(db: Executor, sessionId: string, upToMessageSeq: number): Promise<Item[]> {
  const rows = await contextItems.all(db, { sessionId, upToMessageSeq });
  return rows.map(itemFromRow);
}

const contextItems = prepare((db, p: { sessionId: string; upToMessageSeq: number }) =>
  db
    .selectFrom('items')
    .innerJoin('messages', 'messages.id', 'items.message_id')
    .selectAll('items')
    .where('items.session_id', '=', p.sessionId)
    .where('messages.seq', '<=', p.upToMessageSeq)
    .orderBy('messages.seq')
    .orderBy('items.seq'),
);

/** Items of a session past `afterSeq` in log order, each with its message's seq (null while not adopted yet). */
export async function loadItemsAfter(
  db: Executor,
  sessionId: string,
  afterSeq: number,
): Promise<(ItemRow & { message_seq: number | null })[]> {
  return itemsAfter.all(db, { sessionId, afterSeq });
}

export async function loadItem(db: Executor, itemId: string): Promise<Item | undefined> {
  const row = await db.selectFrom('items').selectAll().where('id', '=', itemId).executeTakeFirst();
  return row === undefined ? undefined : itemFromRow(row);
}

/** The output item of a tool call of the session, once stored. */
export async function loadCallOutput(db: Executor, sessionId: string, callId: string): Promise<Item | undefined> {
  const row = await db
    .selectFrom('items')
    .selectAll()
    .where('session_id', '=', sessionId)
    .where('call_id', '=', callId)
    .where('type', '=', 'function_call_output')
    .executeTakeFirst();
  return row === undefined ? undefined : itemFromRow(row);
}

export async function loadMessageItems(db: Executor, messageId: string): Promise<Item[]> {
  const rows = await messageItems.all(db, { messageId });
  return rows.map(itemFromRow);
}

const messageItems = prepare((db, p: { messageId: string }) =>
  db.selectFrom('items').selectAll().where('message_id', '=', p.messageId).orderBy('seq'),
);
