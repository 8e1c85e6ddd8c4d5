/** The `budget` extension field of Agents, Sessions and Schedules (docs/budgets.md): its request and view shapes. */
import { Type } from 'typebox';
import { BUDGET_PERIODS, MAX_BUDGET_USD } from '../../domain/billing/budgets.ts';
import { StringEnum } from './common.ts';

const LIMIT = `The cap in USD (0 to ${MAX_BUDGET_USD}); the spend is the stored cost of the turns' model calls`;
const Limit = Type.Number({ minimum: 0, maximum: MAX_BUDGET_USD, description: LIMIT });
const Period = StringEnum(
  BUDGET_PERIODS,
  'month (default): the calendar month in UTC, the spend starting again at 0 each month; lifetime: never reset',
);
const LifetimePeriod = StringEnum(['lifetime'] as const, 'A session budget is for its whole life');

const NOTE =
  'Extension field: a spend cap (docs/budgets.md). A turn of a priced model is refused (402 budget_exceeded) once the cap is spent, and ends failed with budget_exceeded before a model call past it; budget.threshold and budget.exceeded webhooks announce 80 % and 100 %. null: no cap';

/** An agent's budget in a create or update (null removes it). */
export const AgentBudgetInput = Type.Union(
  [Type.Object({ limitUsd: Limit, period: Type.Optional(Period) }, { additionalProperties: false }), Type.Null()],
  { description: `${NOTE}. Not versioned: changing it alone keeps the agent's version` },
);
export const AgentBudget = Type.Union(
  [Type.Object({ limitUsd: Type.Number(), period: Period }, { additionalProperties: false }), Type.Null()],
  { description: `${NOTE}. Not versioned: it caps the turns of every version` },
);

export const SessionBudgetInput = Type.Union(
  [
    Type.Object({ limitUsd: Limit, period: Type.Optional(LifetimePeriod) }, { additionalProperties: false }),
    Type.Null(),
  ],
  { description: NOTE },
);
export const SessionBudget = Type.Union(
  [Type.Object({ limitUsd: Type.Number(), period: Period }, { additionalProperties: false }), Type.Null()],
  { description: `${NOTE}. A session's period is always lifetime` },
);

export const ScheduleBudgetInput = Type.Union(
  [Type.Object({ limit_usd: Limit, period: Type.Optional(Period) }, { additionalProperties: false }), Type.Null()],
  { description: `${NOTE}. The spend is that of all the schedule's runs; a run past it fails with budget_exceeded` },
);
export const ScheduleBudget = Type.Union(
  [Type.Object({ limit_usd: Type.Number(), period: Period }, { additionalProperties: false }), Type.Null()],
  { description: NOTE },
);
