/**
 * The budgets' gate before each model call of a priced model (docs/budgets.md): the turn is admitted under the
 * budgets of its agent, session and schedule (domain/billing/budgets.ts), waits while the calls in flight under a
 * budget could pass it together, and ends failed with `budget_exceeded` once one is spent. The step that follows
 * adds its cost to the budgets it was admitted under (step.ts, compaction.ts).
 */

import { admitModelCall, budgetsOf, recordSpend, releaseHolds } from '../domain/billing/budgets.ts';
import { recordWebhookEvents } from '../domain/outbox.ts';
import { ownItems } from '../domain/turns/items.ts';
import { turnText } from '../domain/turns/message-service.ts';
import { failTurn } from '../domain/turns/transitions.ts';
import type { AppError } from '../errors/app-error.ts';
import { abortableSleep } from '../lib/retry.ts';
import { isPriced } from '../models/pricing.ts';
import type { Executor } from '../storage/db.ts';
import { change, type Turn, type TurnContext, turnChange } from './turn-context.ts';
import { ensureStarted } from './turn-start.ts';

/** How long a call waits before asking again while others in flight hold the budget. */
const WAIT_MS = 200;

/**
 * Admits the turn's next model call under its budgets. False when a budget is spent: the turn has then ended
 * failed with budget_exceeded (naming the budget), keeping the text it produced.
 */
export async function admitUnderBudgets(turn: Turn): Promise<boolean> {
  const exceeded = await admitCall(turn);
  if (exceeded === null) return true;
  await failOverBudget(turn, exceeded);
  return false;
}

/**
 * Admits one model call of the turn under its budgets, waiting while others in flight hold them: null when
 * admitted (or unpriced), else the error naming the budget that is spent. A step's call fails the turn on it
 * (above); a sampling call is refused to its server (sampling.ts).
 */
export async function admitCall(turn: Turn): Promise<AppError | null> {
  turn.budgets = [];
  if (!isPriced(turn.agent.model)) return null;
  const { deps, message } = turn;
  const scope = {
    agentId: message.agent_id,
    sessionId: message.session_id,
    ...(message.source === 'schedule' ? { messageId: message.id } : { scheduleId: null }),
  };
  for (;;) {
    // Read at every call: a budget set, raised or lowered meanwhile applies to the next call of a running turn.
    const budgets = await budgetsOf(deps.db, scope);
    if (budgets.length === 0) return null;
    const admission = await admitModelCall(deps.db, {
      orgId: message.org_id,
      holder: message.id,
      budgets,
      now: deps.clock.now(),
    });
    if (admission.admitted) {
      turn.budgets = budgets;
      return null;
    }
    if (admission.exceeded !== null) return admission.exceeded;
    await abortableSleep(WAIT_MS, turn.signal);
  }
}

async function failOverBudget(turn: Turn, error: AppError): Promise<void> {
  if (!(await ensureStarted(turn))) return;
  const { deps } = turn;
  const text = turnText(await turn.log.load(deps.db, turn.message.seq).then((all) => ownItems(all, turn.initial.id)));
  await change(turn, ['running'], (trx, current, now) =>
    failTurn(
      turnChange(turn, trx, current, now),
      { code: 'budget_exceeded', message: error.message },
      text === '' ? null : text,
    ),
  );
}

/**
 * Adds the cost of a step (or of a compaction's calls) to the budgets its model call was admitted under, in the
 * transaction that records it, with the webhooks of the limits it crossed; `release` drops the call's holds.
 */
export async function recordBudgetSpend(
  turn: TurnContext,
  trx: Executor,
  step: { costMicros: number; now: number; release: boolean },
): Promise<void> {
  if (turn.budgets.length === 0) return;
  const orgId = turn.initial.org_id;
  const events = await recordSpend(trx, { orgId, holder: turn.initial.id, budgets: turn.budgets, ...step });
  await recordWebhookEvents(trx, { orgId, now: step.now }, { subscriptions: turn.deps.subscriptions, events });
}

/** Drops the holds of a turn whose admitted model call ended without a stored step (an error, an interrupt). */
export async function releaseBudgetHolds(turn: TurnContext): Promise<void> {
  if (turn.budgets.length === 0) return;
  turn.budgets = [];
  await releaseHolds(turn.deps.db, turn.initial.id);
}
