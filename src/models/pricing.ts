/**
 * What a model call costs, in USD per 1M input / output tokens, keyed by full model id. The `openai/…` and
 * `anthropic/…` entries are the providers' published list prices (standard tier, no caching or batch
 * discounts) as of November 2026; operators will be able to override them later. Providers from
 * AGENTRY_PROVIDERS and models missing here are unpriced: they cost nothing and credits do not gate them.
 * `docs/models.md` shows this table; `pricing.test.ts` keeps the two equal.
 */
import type { Usage } from './types.ts';

export interface ModelPrice {
  inputPerMillion: number;
  outputPerMillion: number;
}

export const PRICES: Readonly<Record<string, ModelPrice>> = {
  scripted: { inputPerMillion: 0, outputPerMillion: 0 },
  'scripted/priced': { inputPerMillion: 1, outputPerMillion: 1 },
  'openai/gpt-5.5': { inputPerMillion: 5, outputPerMillion: 30 },
  'openai/gpt-5.4': { inputPerMillion: 2.5, outputPerMillion: 15 },
  'openai/gpt-5.4-mini': { inputPerMillion: 0.75, outputPerMillion: 4.5 },
  'openai/gpt-5.4-nano': { inputPerMillion: 0.2, outputPerMillion: 1.25 },
  'openai/gpt-5': { inputPerMillion: 1.25, outputPerMillion: 10 },
  'openai/gpt-5-mini': { inputPerMillion: 0.25, outputPerMillion: 2 },
  'openai/gpt-5-nano': { inputPerMillion: 0.05, outputPerMillion: 0.4 },
  'openai/gpt-4.1': { inputPerMillion: 2, outputPerMillion: 8 },
  'openai/gpt-4.1-mini': { inputPerMillion: 0.4, outputPerMillion: 1.6 },
  'openai/gpt-4o': { inputPerMillion: 2.5, outputPerMillion: 10 },
  'openai/gpt-4o-mini': { inputPerMillion: 0.15, outputPerMillion: 0.6 },
  'anthropic/claude-fable-5-1': { inputPerMillion: 10, outputPerMillion: 50 },
  'anthropic/claude-opus-5-5': { inputPerMillion: 4, outputPerMillion: 20 },
  'anthropic/claude-opus-5': { inputPerMillion: 5, outputPerMillion: 25 },
  'anthropic/claude-sonnet-5-5': { inputPerMillion: 2, outputPerMillion: 10 },
  'anthropic/claude-sonnet-5': { inputPerMillion: 2, outputPerMillion: 10 },
  'anthropic/claude-opus-4-5': { inputPerMillion: 5, outputPerMillion: 25 },
  'anthropic/claude-sonnet-4-5': { inputPerMillion: 3, outputPerMillion: 15 },
  'anthropic/claude-haiku-4-5': { inputPerMillion: 1, outputPerMillion: 5 },
};

/** The price of a model, or null when it is unpriced (configured providers, unknown models). */
export function priceOf(modelId: string): ModelPrice | null {
  return Object.hasOwn(PRICES, modelId) ? (PRICES[modelId] ?? null) : null;
}

/** True when calls to the model cost money, i.e. credits gate it. */
export function isPriced(modelId: string): boolean {
  const price = priceOf(modelId);
  return price !== null && (price.inputPerMillion > 0 || price.outputPerMillion > 0);
}

/** USD per 1M tokens → integer micro-USD per 1M tokens, exact for prices with up to 6 decimals. */
function microsPerMillion(usdPerMillion: number): bigint {
  return BigInt(Math.round(usdPerMillion * 1_000_000));
}

/**
 * Cost of `usage` on `modelId` in integer micro-USD, rounded up (a call is never free because of rounding).
 * Computed in BigInt so that large token counts and fractional prices carry no float error. Unpriced → 0.
 */
export function costMicros(modelId: string, usage: Usage): number {
  const price = priceOf(modelId);
  if (price === null) return 0;
  const tokens = (count: number) => BigInt(Math.max(0, Math.trunc(count)));
  // tokens × (micro-USD per 1M tokens) / 1M = micro-USD.
  const scaled =
    tokens(usage.inputTokens) * microsPerMillion(price.inputPerMillion) +
    tokens(usage.outputTokens) * microsPerMillion(price.outputPerMillion);
  const million = 1_000_000n;
  return Number((scaled + million - 1n) / million);
}
