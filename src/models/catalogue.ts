/**
 * What Agentry knows about each model: its context window, the most output tokens one call may produce, its
 * prices and what it can do. Three layers, the later winning field by field: the built-in table below (the
 * models Agentry ships), the operator's catalogue file (AGENTRY_MODEL_CATALOG) and per-provider entries in
 * AGENTRY_PROVIDERS (`operator-catalogue.ts` reads both). Any other model gets the defaults (`source: 'default'`).
 *
 * The built-in prices are the providers' published list prices (standard tier, no batch discounts) as of
 * November 2026, in USD per 1M tokens; `cachedInputPerMTok` is the price of an input token read from the
 * provider's prompt cache. `docs/models.md` shows this table; `catalogue.test.ts` keeps the two equal.
 */
import type { ModelOverride, OperatorCatalogue } from '../config/model-catalog.ts';

export interface ModelPrices {
  /** USD per 1M input tokens not read from the provider's cache. */
  inputPerMTok: number;
  /** USD per 1M input tokens read from the provider's prompt cache. */
  cachedInputPerMTok: number;
  /** USD per 1M output tokens. */
  outputPerMTok: number;
}

export interface ModelCapabilities {
  tools: boolean;
  images: boolean;
  structuredOutput: boolean;
}

export type ModelInfoSource = 'builtin' | 'operator' | 'default';

export interface ModelInfo {
  id: string;
  /** Tokens the model reads and writes in one call (input plus output). */
  contextWindow: number;
  /** The most output tokens one call may produce. */
  maxOutputTokens: number;
  prices: ModelPrices;
  capabilities: ModelCapabilities;
  /** Where the entry came from: the built-in table, the operator's configuration, or the defaults. */
  source: ModelInfoSource;
}

/** One entry's fields, as the built-in table and the operator's configuration give them. */
export type ModelEntry = Omit<ModelInfo, 'id' | 'source'>;

/** What a model nobody described gets: unpriced, a 128k window, 4k of output, every capability. */
export const DEFAULT_MODEL_ENTRY: Readonly<ModelEntry> = {
  contextWindow: 128_000,
  maxOutputTokens: 4_096,
  prices: { inputPerMTok: 0, cachedInputPerMTok: 0, outputPerMTok: 0 },
  capabilities: { tools: true, images: true, structuredOutput: true },
};

const ALL = { tools: true, images: true, structuredOutput: true } as const;

function entry(
  contextWindow: number,
  maxOutputTokens: number,
  [inputPerMTok, cachedInputPerMTok, outputPerMTok]: [number, number, number],
): ModelEntry {
  return {
    contextWindow,
    maxOutputTokens,
    prices: { inputPerMTok, cachedInputPerMTok, outputPerMTok },
    capabilities: ALL,
  };
}

/** The models Agentry ships, keyed by full model id. */
export const BUILTIN_MODELS: Readonly<Record<string, ModelEntry>> = {
  scripted: entry(128_000, 4_096, [0, 0, 0]),
  'scripted/priced': entry(128_000, 4_096, [1, 0.1, 1]),
  'openai/gpt-5.5': entry(1_050_000, 128_000, [5, 0.5, 30]),
  'openai/gpt-5.4': entry(1_050_000, 128_000, [2.5, 0.25, 15]),
  'openai/gpt-5.4-mini': entry(400_000, 128_000, [0.75, 0.075, 4.5]),
  'openai/gpt-5.4-nano': entry(400_000, 128_000, [0.2, 0.02, 1.25]),
  'openai/gpt-5': entry(400_000, 128_000, [1.25, 0.125, 10]),
  'openai/gpt-5-mini': entry(400_000, 128_000, [0.25, 0.025, 2]),
  'openai/gpt-5-nano': entry(400_000, 128_000, [0.05, 0.005, 0.4]),
  'openai/gpt-4.1': entry(1_047_576, 32_768, [2, 0.5, 8]),
  'openai/gpt-4.1-mini': entry(1_047_576, 32_768, [0.4, 0.1, 1.6]),
  'openai/gpt-4o': entry(128_000, 16_384, [2.5, 1.25, 10]),
  'openai/gpt-4o-mini': entry(128_000, 16_384, [0.15, 0.075, 0.6]),
  'anthropic/claude-fable-5-1': entry(1_000_000, 128_000, [10, 1, 50]),
  'anthropic/claude-opus-5-5': entry(1_000_000, 128_000, [4, 0.4, 20]),
  'anthropic/claude-opus-5': entry(200_000, 64_000, [5, 0.5, 25]),
  'anthropic/claude-sonnet-5-5': entry(1_000_000, 64_000, [2, 0.2, 10]),
  'anthropic/claude-sonnet-5': entry(200_000, 64_000, [2, 0.2, 10]),
  'anthropic/claude-opus-4-5': entry(200_000, 64_000, [5, 0.5, 25]),
  'anthropic/claude-sonnet-4-5': entry(200_000, 64_000, [3, 0.3, 15]),
  'anthropic/claude-haiku-4-5': entry(200_000, 64_000, [1, 0.1, 5]),
};

export const EMPTY_OPERATOR_CATALOGUE: OperatorCatalogue = { models: {}, providers: {} };

function apply(base: ModelEntry, override: ModelOverride): ModelEntry {
  return {
    contextWindow: override.contextWindow ?? base.contextWindow,
    maxOutputTokens: override.maxOutputTokens ?? base.maxOutputTokens,
    prices: { ...base.prices, ...override.prices },
    capabilities: { ...base.capabilities, ...override.capabilities },
  };
}

export interface ModelCatalogue {
  info(modelId: string): ModelInfo;
  /** True when the built-in table or the operator describes the model (not only the defaults). */
  knows(modelId: string): boolean;
  /** Every model id the built-in table or the operator's entries name, built-in ones first. */
  modelIds(): string[];
}

export function createModelCatalogue(operator: OperatorCatalogue = EMPTY_OPERATOR_CATALOGUE): ModelCatalogue {
  const info = (modelId: string): ModelInfo => {
    const builtin = Object.hasOwn(BUILTIN_MODELS, modelId) ? BUILTIN_MODELS[modelId] : undefined;
    const slash = modelId.indexOf('/');
    const provider = slash > 0 ? modelId.slice(0, slash) : modelId;
    const byProvider = Object.hasOwn(operator.providers, provider) ? operator.providers[provider] : undefined;
    const byModel = Object.hasOwn(operator.models, modelId) ? operator.models[modelId] : undefined;
    let fields = builtin ?? DEFAULT_MODEL_ENTRY;
    if (byProvider !== undefined) fields = apply(fields, byProvider);
    if (byModel !== undefined) fields = apply(fields, byModel);
    const operated = byProvider !== undefined || byModel !== undefined;
    const source: ModelInfoSource = operated ? 'operator' : builtin !== undefined ? 'builtin' : 'default';
    return { id: modelId, ...fields, source };
  };
  const ids = [...new Set([...Object.keys(BUILTIN_MODELS), ...Object.keys(operator.models)])];
  return { info, knows: (modelId) => info(modelId).source !== 'default', modelIds: () => [...ids] };
}

let active: ModelCatalogue = createModelCatalogue();

/**
 * Makes `catalogue` the one `modelInfo` answers from; the process's startup installs the operator's catalogue
 * (`deps.ts`). Until then, and in processes that never install one, the built-in table and defaults answer.
 */
export function installModelCatalogue(catalogue: ModelCatalogue): void {
  active = catalogue;
}

/** Everything known about a model id: built-in, operator-configured, or the defaults. */
export function modelInfo(modelId: string): ModelInfo {
  return active.info(modelId);
}
