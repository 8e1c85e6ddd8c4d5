/**
 * Values a transaction wrote and may read again before it ends (the last event seq of a session, a session's
 * status): kept per open transaction, so that a second write in the same transaction need not read them back.
 * Only for rows the transaction holds (locked or leased), which no one else changes before it commits. Outside a
 * transaction nothing is kept.
 */
import type { Executor } from './db.ts';

export interface TransactionMemo<V> {
  get(trx: Executor, key: string): V | undefined;
  set(trx: Executor, key: string, value: V): void;
}

export function transactionMemo<V>(): TransactionMemo<V> {
  const values = new WeakMap<Executor, Map<string, V>>();
  return {
    get: (trx, key) => (trx.isTransaction ? values.get(trx)?.get(key) : undefined),
    set(trx, key, value) {
      if (!trx.isTransaction) return;
      let held = values.get(trx);
      if (held === undefined) {
        held = new Map();
        values.set(trx, held);
      }
      held.set(key, value);
    },
  };
}
