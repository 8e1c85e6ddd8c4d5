/**
 * What a model call costs, from the model catalogue's prices (`catalogue.ts`: built in, or the operator's). A
 * model whose prices are all 0 (the defaults of a model nobody priced) is unpriced: it costs nothing and credits do
 * not gate it. Input tokens read from the provider's prompt cache cost the cached input price.
 */
import { type ModelPrices, modelInfo } from './catalogue.ts';
import type { Usage } from './types.ts';

/** The prices of a model, or null when it is unpriced (all prices 0). */
export function priceOf(modelId: string): ModelPrices | null {
  const { prices } = modelInfo(modelId);
  const priced = prices.inputPerMTok > 0 || prices.cachedInputPerMTok > 0 || prices.outputPerMTok > 0;
  return priced ? prices : null;
}

/** True when calls to the model cost money, i.e. credits gate it. */
export function isPriced(modelId: string): boolean {
  return priceOf(modelId) !== null;
}

/** USD per 1M tokens → integer micro-USD per 1M tokens, exact for prices with up to 6 decimals. */
function microsPerMillion(usdPerMillion: number): bigint {
  return BigInt(Math.round(usdPerMillion * 1_000_000));
}

/**
 * Cost of `usage` on `modelId` in integer micro-USD, rounded up (a call is never free because of rounding).
 * `inputTokens` includes the cached ones; those cost the cached price, the rest the input price. Computed in
 * BigInt so that large token counts and fractional prices carry no float error. Unpriced → 0.
 */
export function costMicros(modelId: string, usage: Usage): number {
  const price = priceOf(modelId);
  if (price === null) return 0;
  const count = (value: number) => Math.max(0, Math.trunc(value));
  const input = count(usage.inputTokens);
  const cached = Math.min(input, count(usage.cachedInputTokens ?? 0));
  // tokens × (micro-USD per 1M tokens) / 1M = micro-USD.
  const scaled =
    BigInt(input - cached) * microsPerMillion(price.inputPerMTok) +
    BigInt(cached) * microsPerMillion(price.cachedInputPerMTok) +
    BigInt(count(usage.outputTokens)) * microsPerMillion(price.outputPerMTok);
  const million = 1_000_000n;
  return Number((scaled + million - 1n) / million);
}
