/**
 * Sessions created by the open transaction. Nothing of theirs can exist yet (no message, item or event), so the
 * writes that follow in the same transaction (a new conversation's first Response) skip the reads that would
 * find nothing: the last sequence numbers, waiting tool calls, unattached items.
 */
import type { Executor } from '../../storage/db.ts';
import { transactionMemo } from '../../storage/transaction-memo.ts';

const created = transactionMemo<true>();

export function markCreated(trx: Executor, sessionId: string): void {
  created.set(trx, sessionId, true);
}

export function createdInTransaction(trx: Executor, sessionId: string): boolean {
  return created.get(trx, sessionId) === true;
}
