/**
 * Budgets: spend caps of an agent, a session or a schedule below the organization's credits (docs/budgets.md).
 * A budget is a limit in micro-dollars and a period (`month`: the calendar month in UTC; `lifetime`). Its spend is
 * the sum of stored cost, kept as a running total per scope and period (`budget_spend`), added to in the
 * transaction that records a step's cost and recomputed from the stored cost whenever the budget is set.
 *
 * Before each model call of a priced model the turn is admitted under each of its budgets: refused once a budget
 * is spent, and made to wait while other model calls in flight under the same budget (`budget_holds`) could pass
 * it, estimating each at the largest step seen; so concurrent turns on any number of workers pass a cap by at most
 * about one step's cost. The crossings of 80 % and 100 % of a limit are announced once per limit and period
 * (`budget.threshold`, `budget.exceeded`).
 */
import { AppError, validationError } from '../../errors/app-error.ts';
import { isPriced } from '../../models/pricing.ts';
import type { Executor } from '../../storage/db.ts';
import type { WebhookEventInput } from '../webhooks/webhook-events.ts';

export const BUDGET_SCOPES = ['agent', 'session', 'schedule'] as const;
export type BudgetScope = (typeof BUDGET_SCOPES)[number];
export const BUDGET_PERIODS = ['month', 'lifetime'] as const;
export type BudgetPeriod = (typeof BUDGET_PERIODS)[number];

/** The largest limit: its micro-dollars stay an exact integer (below 2^53). */
export const MAX_BUDGET_USD = 9_000_000_000;
/** The fraction of the limit whose crossing sends `budget.threshold`. */
export const THRESHOLD_FRACTION = 0.8;
/** How long a model call's hold lasts when its worker dies before storing the step. */
const HOLD_MS = 10 * 60_000;
const MICROS_PER_USD = 1_000_000;

export interface Budget {
  limitMicros: number;
  period: BudgetPeriod;
}

export interface ScopedBudget extends Budget {
  scope: BudgetScope;
  id: string;
}

/** A budget as the camelCase resources (Agents, Sessions) speak it. */
export interface BudgetView {
  limitUsd: number;
  period: BudgetPeriod;
}

/** A budget as a request gives it: the period is optional. */
export interface BudgetInput {
  limitUsd: number;
  period?: BudgetPeriod;
}

const usd = (micros: number): number => micros / MICROS_PER_USD;

/** The budget stored in a resource's columns; null when it has none. */
export function budgetOf(limitMicros: number | null | undefined, period: string | null | undefined): Budget | null {
  if (limitMicros === null || limitMicros === undefined) return null;
  return { limitMicros: Number(limitMicros), period: period === 'month' ? 'month' : 'lifetime' };
}

export function budgetView(budget: Budget | null): BudgetView | null {
  return budget === null ? null : { limitUsd: usd(budget.limitMicros), period: budget.period };
}

/** The columns a resource stores its budget in. */
export function budgetColumns(budget: Budget | null): {
  budget_limit_micros: number | null;
  budget_period: BudgetPeriod | null;
} {
  return { budget_limit_micros: budget?.limitMicros ?? null, budget_period: budget?.period ?? null };
}

/**
 * A budget from a request: null clears it, undefined leaves it. The schema has checked the types; the limit is
 * checked here too (finite, 0 to MAX_BUDGET_USD) so that every caller answers a 400 naming `field.limitUsd`.
 */
export function parseBudget(
  input: { limit: number; period?: string | undefined } | null | undefined,
  names: { field: string; limit: string; periods: readonly BudgetPeriod[]; defaultPeriod: BudgetPeriod },
): Budget | null | undefined {
  if (input === undefined || input === null) return input;
  const { limit } = input;
  const param = `${names.field}.${names.limit}`;
  if (typeof limit !== 'number' || !Number.isFinite(limit) || limit < 0 || limit > MAX_BUDGET_USD) {
    throw validationError(param, `${param} must be a number of USD from 0 to ${MAX_BUDGET_USD}`);
  }
  const period = input.period ?? names.defaultPeriod;
  if (!(names.periods as readonly string[]).includes(period)) {
    throw validationError(`${names.field}.period`, `${names.field}.period must be one of ${names.periods.join(', ')}`);
  }
  return { limitMicros: Math.round(limit * MICROS_PER_USD), period: period as BudgetPeriod };
}

/** The key of the period `now` falls in: `YYYY-MM` (UTC) for a monthly budget, '' for a lifetime one. */
export const periodKey = (period: BudgetPeriod, now: number): string =>
  period === 'lifetime' ? '' : new Date(now).toISOString().slice(0, 7);

/** The first millisecond of the period `now` falls in (0 for lifetime). */
function periodStart(period: BudgetPeriod, now: number): number {
  if (period === 'lifetime') return 0;
  const date = new Date(now);
  return Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), 1);
}

function describe(budget: ScopedBudget, now: number): string {
  const period = budget.period === 'month' ? `monthly budget (${periodKey('month', now)})` : 'budget';
  return `the ${period} of ${budget.scope} ${budget.id}`;
}

const money = (micros: number): string => `$${usd(micros).toFixed(usd(micros) < 1 ? 6 : 2)}`;

export function budgetExceeded(budget: ScopedBudget, spentMicros: number, now: number): AppError {
  return new AppError(
    'budget_exceeded',
    `${describe(budget, now)} is spent: ${money(spentMicros)} of ${money(budget.limitMicros)}`,
    { details: { scope: budget.scope, id: budget.id, limitUsd: usd(budget.limitMicros), spentUsd: usd(spentMicros) } },
  );
}

/** The budgets a turn of this agent, session (and schedule, by id or by the scheduled message) runs under. */
export async function budgetsOf(
  db: Executor,
  target: { agentId: string; sessionId: string; scheduleId?: string | null; messageId?: string },
): Promise<ScopedBudget[]> {
  const rows = await db
    .selectFrom('agents')
    .select((eb) => [
      eb.val('agent').as('scope'),
      'id',
      'budget_limit_micros as limit_micros',
      'budget_period as period',
    ])
    .where('id', '=', target.agentId)
    .where('budget_limit_micros', 'is not', null)
    .unionAll((eb) =>
      eb
        .selectFrom('sessions')
        .select((inner) => [
          inner.val('session').as('scope'),
          'id',
          'budget_limit_micros as limit_micros',
          inner.val('lifetime').as('period'),
        ])
        .where('id', '=', target.sessionId)
        .where('budget_limit_micros', 'is not', null),
    )
    .unionAll((eb) =>
      eb
        .selectFrom('schedules')
        .select((inner) => [
          inner.val('schedule').as('scope'),
          'id',
          'budget_limit_micros as limit_micros',
          'budget_period as period',
        ])
        .where('budget_limit_micros', 'is not', null)
        .where((inner) =>
          target.scheduleId != null
            ? inner('id', '=', target.scheduleId)
            : inner(
                'id',
                'in',
                inner
                  .selectFrom('schedule_runs')
                  .select('schedule_id')
                  .where('message_id', '=', target.messageId ?? ''),
              ),
        ),
    )
    .execute();
  return rows.flatMap((row) => {
    const budget = budgetOf(row.limit_micros, row.period);
    const scope = BUDGET_SCOPES.find((known) => known === row.scope);
    return budget === null || scope === undefined ? [] : [{ ...budget, scope, id: row.id }];
  });
}

/** The spend of each budget in the period `now` falls in, by `scope/id`. */
async function spendOf(db: Executor, budgets: ScopedBudget[], now: number): Promise<Map<string, number>> {
  const spent = new Map<string, number>();
  if (budgets.length === 0) return spent;
  const rows = await db
    .selectFrom('budget_spend')
    .select(['scope', 'scope_id', 'spent_micros'])
    .where((eb) =>
      eb.or(
        budgets.map((budget) =>
          eb.and([
            eb('scope', '=', budget.scope),
            eb('scope_id', '=', budget.id),
            eb('period_key', '=', periodKey(budget.period, now)),
          ]),
        ),
      ),
    )
    .execute();
  for (const row of rows) spent.set(`${row.scope}/${row.scope_id}`, Number(row.spent_micros));
  return spent;
}

/**
 * Refuses (402 budget_exceeded) a new turn of a priced model when one of its budgets is already spent: the check
 * of accept, beside the organization's credits.
 */
export async function requireBudgets(
  trx: Executor,
  target: { model: string; agentId: string; sessionId: string; scheduleId?: string | null; now: number },
): Promise<void> {
  if (!isPriced(target.model)) return;
  const budgets = await budgetsOf(trx, target);
  if (budgets.length === 0) return;
  const spent = await spendOf(trx, budgets, target.now);
  for (const budget of budgets) {
    const used = spent.get(`${budget.scope}/${budget.id}`) ?? 0;
    if (used >= budget.limitMicros) throw budgetExceeded(budget, used, target.now);
  }
}

/** Budgets in one order, so that transactions locking several spend rows never wait on each other in a cycle. */
const ordered = (budgets: ScopedBudget[]): ScopedBudget[] =>
  [...budgets].sort((a, b) => `${a.scope}/${a.id}`.localeCompare(`${b.scope}/${b.id}`));

export type Admission = { admitted: true } | { admitted: false; exceeded: AppError | null };

/**
 * Admits one model call of message `holder` under its budgets, in one transaction: refused (with the error) once a
 * budget is spent; not yet (exceeded null: wait and ask again) while the calls already in flight under a budget,
 * each estimated at the largest step seen, could pass it together with this one; otherwise a hold is taken under
 * every budget until the step is recorded.
 */
export async function admitModelCall(
  db: Executor,
  call: { orgId: string; holder: string; budgets: ScopedBudget[]; now: number },
): Promise<Admission> {
  const { orgId, holder, now } = call;
  const budgets = ordered(call.budgets);
  return db.transaction().execute(async (trx) => {
    for (const budget of budgets) {
      // Locks the spend row (Postgres; SQLite serializes writers): admissions under one budget go one at a time.
      const row = await trx
        .insertInto('budget_spend')
        .values({
          scope: budget.scope,
          scope_id: budget.id,
          period_key: periodKey(budget.period, now),
          org_id: orgId,
          updated_at: now,
        })
        .onConflict((oc) =>
          oc
            .columns(['scope', 'scope_id', 'period_key'])
            .doUpdateSet((eb) => ({ updated_at: eb.ref('excluded.updated_at') })),
        )
        .returning(['spent_micros', 'max_step_micros'])
        .executeTakeFirstOrThrow();
      const spent = Number(row.spent_micros);
      if (spent >= budget.limitMicros) return { admitted: false, exceeded: budgetExceeded(budget, spent, now) };
      const inFlight = await trx
        .selectFrom('budget_holds')
        .select((eb) => eb.fn.countAll<number>().as('count'))
        .where('scope', '=', budget.scope)
        .where('scope_id', '=', budget.id)
        .where('holder', '<>', holder)
        .where('expires_at', '>', now)
        .executeTakeFirstOrThrow();
      const others = Number(inFlight.count);
      const estimate = Number(row.max_step_micros);
      // With no step seen yet there is no estimate: the calls under this budget go one at a time until there is.
      if (others > 0 && (estimate === 0 || spent + (others + 1) * estimate > budget.limitMicros)) {
        return { admitted: false, exceeded: null };
      }
    }
    for (const budget of budgets) {
      await trx
        .insertInto('budget_holds')
        .values({ scope: budget.scope, scope_id: budget.id, holder, expires_at: now + HOLD_MS })
        .onConflict((oc) =>
          oc
            .columns(['scope', 'scope_id', 'holder'])
            .doUpdateSet((eb) => ({ expires_at: eb.ref('excluded.expires_at') })),
        )
        .execute();
    }
    return { admitted: true };
  });
}

/** Drops the holds of message `holder` (its model call ended without a step to record). */
export async function releaseHolds(db: Executor, holder: string): Promise<void> {
  await db.deleteFrom('budget_holds').where('holder', '=', holder).execute();
}

/**
 * Adds a step's cost to the spend of each budget it ran under, in the transaction that records the step, and drops
 * the message's holds (`release`; a compaction's calls are recorded while the step's call still holds them).
 * Returns the `budget.threshold` and `budget.exceeded` webhooks of the limits this cost crossed for the first time.
 */
export async function recordSpend(
  trx: Executor,
  step: { orgId: string; holder: string; budgets: ScopedBudget[]; costMicros: number; now: number; release: boolean },
): Promise<WebhookEventInput[]> {
  const { orgId, costMicros, now } = step;
  const notices: WebhookEventInput[] = [];
  for (const budget of costMicros > 0 ? ordered(step.budgets) : []) {
    const key = periodKey(budget.period, now);
    const row = await trx
      .insertInto('budget_spend')
      .values({
        scope: budget.scope,
        scope_id: budget.id,
        period_key: key,
        org_id: orgId,
        spent_micros: costMicros,
        max_step_micros: costMicros,
        updated_at: now,
      })
      .onConflict((oc) =>
        oc.columns(['scope', 'scope_id', 'period_key']).doUpdateSet((eb) => ({
          spent_micros: eb('budget_spend.spent_micros', '+', eb.ref('excluded.spent_micros')),
          max_step_micros: eb
            .case()
            .when('budget_spend.max_step_micros', '<', eb.ref('excluded.max_step_micros'))
            .then(eb.ref('excluded.max_step_micros'))
            .else(eb.ref('budget_spend.max_step_micros'))
            .end(),
          updated_at: eb.ref('excluded.updated_at'),
        })),
      )
      .returning(['spent_micros', 'threshold_limit_micros', 'exceeded_limit_micros'])
      .executeTakeFirstOrThrow();
    const spent = Number(row.spent_micros);
    const limit = budget.limitMicros;
    // The row is locked by the update above until commit: of two steps crossing together, one announces.
    const threshold = spent >= limit * THRESHOLD_FRACTION && row.threshold_limit_micros !== limit;
    const exceeded = spent >= limit && row.exceeded_limit_micros !== limit;
    if (!threshold && !exceeded) continue;
    await trx
      .updateTable('budget_spend')
      .set({
        ...(threshold ? { threshold_limit_micros: limit } : {}),
        ...(exceeded ? { exceeded_limit_micros: limit } : {}),
      })
      .where('scope', '=', budget.scope)
      .where('scope_id', '=', budget.id)
      .where('period_key', '=', key)
      .execute();
    const data = {
      scope: budget.scope,
      id: budget.id,
      period: budget.period,
      period_key: budget.period === 'month' ? key : null,
      limit_usd: usd(limit),
      spent_usd: usd(spent),
    };
    if (threshold) notices.push({ type: 'budget.threshold', data: { ...data, threshold: THRESHOLD_FRACTION } });
    if (exceeded) notices.push({ type: 'budget.exceeded', data: { ...data, threshold: 1 } });
  }
  if (step.release) await releaseHolds(trx, step.holder);
  return notices;
}

/**
 * Sets the running total of a budget's current period to the stored cost of its scope (runs and messages), so a
 * budget set on an agent, session or schedule that already spent starts from what it spent. Called when a budget
 * is set.
 */
export async function resetSpend(trx: Executor, target: ScopedBudget & { orgId: string; now: number }): Promise<void> {
  const since = periodStart(target.period, target.now);
  let spent: number;
  if (target.scope === 'session') {
    const row = await trx
      .selectFrom('messages')
      .select((eb) => eb.fn.coalesce(eb.fn.sum<number>('cost_micros'), eb.val(0)).as('spent'))
      .where('session_id', '=', target.id)
      .executeTakeFirstOrThrow();
    spent = Number(row.spent);
  } else {
    let query = trx
      .selectFrom('runs')
      .select((eb) => eb.fn.coalesce(eb.fn.sum<number>('cost_micros'), eb.val(0)).as('spent'))
      .where('created_at', '>=', since);
    query =
      target.scope === 'agent'
        ? query.where('agent_id', '=', target.id)
        : query.where('message_id', 'in', (eb) =>
            eb.selectFrom('schedule_runs').select('message_id').where('schedule_id', '=', target.id),
          );
    spent = Number((await query.executeTakeFirstOrThrow()).spent);
  }
  await trx
    .insertInto('budget_spend')
    .values({
      scope: target.scope,
      scope_id: target.id,
      period_key: periodKey(target.period, target.now),
      org_id: target.orgId,
      spent_micros: spent,
      updated_at: target.now,
    })
    .onConflict((oc) =>
      oc.columns(['scope', 'scope_id', 'period_key']).doUpdateSet((eb) => ({
        spent_micros: eb.ref('excluded.spent_micros'),
        updated_at: eb.ref('excluded.updated_at'),
      })),
    )
    .execute();
}

/** The spend of one scope's budget in its current period, in USD (the resource views' `spentUsd`). */
export async function spentUsd(db: Executor, budget: ScopedBudget, now: number): Promise<number> {
  return usd((await spendOf(db, [budget], now)).get(`${budget.scope}/${budget.id}`) ?? 0);
}
