/**
 * Credits: the one place that reads and writes an organization's balance (`orgs.credit_balance_micros`, millionths
 * of a USD; null means unlimited). Turns are refused before they start when a priced model has nothing left to
 * spend, and each model step's cost is debited in the transaction that records the step; unpriced models (the
 * scripted model, AGENTRY_PROVIDERS providers) never need credits.
 */
import { AppError } from '../../errors/app-error.ts';
import { isPriced } from '../../models/pricing.ts';
import type { Executor } from '../../storage/db.ts';

const MICROS_PER_USD = 1_000_000;

/** The balance in USD, as the CLI and the API show it. */
export const balanceUsd = (micros: number | null): number | null => (micros === null ? null : micros / MICROS_PER_USD);

/** Refuses (402 insufficient_credits) a turn of a priced model when the organization's balance is used up. */
export async function requireCredits(trx: Executor, orgId: string, model: string): Promise<void> {
  if (!isPriced(model)) return;
  const org = await trx
    .selectFrom('orgs')
    .select('credit_balance_micros')
    .where('id', '=', orgId)
    .executeTakeFirstOrThrow();
  if (org.credit_balance_micros !== null && org.credit_balance_micros <= 0) {
    throw new AppError('insufficient_credits', `the organization has no credits left for model ${model}`);
  }
}

/** Takes a step's cost off a limited balance (it may go below zero: the step has run). */
export async function debitCredits(trx: Executor, orgId: string, costMicros: number): Promise<void> {
  if (costMicros <= 0) return;
  await trx
    .updateTable('orgs')
    .set((eb) => ({ credit_balance_micros: eb('credit_balance_micros', '-', costMicros) }))
    .where('id', '=', orgId)
    .where('credit_balance_micros', 'is not', null)
    .execute();
}

/** Sets the balance in USD; null means unlimited. */
export async function setCredits(db: Executor, orgId: string, usd: number | null): Promise<void> {
  await db
    .updateTable('orgs')
    .set({ credit_balance_micros: usd === null ? null : Math.round(usd * MICROS_PER_USD) })
    .where('id', '=', orgId)
    .execute();
}
