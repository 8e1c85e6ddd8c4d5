/**
 * The operator's model catalogue entries: the file named by AGENTRY_MODEL_CATALOG (JSON, or YAML when the name
 * ends in .yaml / .yml) and the catalogue fields of AGENTRY_PROVIDERS entries. Both use the same entry fields,
 * snake_case: `context_window`, `max_output_tokens`, `prices` {`input`, `cached_input`, `output`} (USD per 1M
 * tokens) and `capabilities` {`tools`, `images`, `structured_output`}. A bad entry stops startup with a message
 * naming the entry and the field. `models/catalogue.ts` layers these over its built-in table.
 */
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';

export interface ModelPricesOverride {
  inputPerMTok?: number;
  cachedInputPerMTok?: number;
  outputPerMTok?: number;
}

export interface ModelCapabilitiesOverride {
  tools?: boolean;
  images?: boolean;
  structuredOutput?: boolean;
}

/** A model's partial description from the operator: any field left out keeps the built-in or default value. */
export interface ModelOverride {
  contextWindow?: number;
  maxOutputTokens?: number;
  prices?: ModelPricesOverride;
  capabilities?: ModelCapabilitiesOverride;
}

/** Entries for exact model ids (`provider/model`), and per-provider entries for every model of a provider. */
export interface OperatorCatalogue {
  models: Record<string, ModelOverride>;
  providers: Record<string, ModelOverride>;
}

/** A catalogue problem: `where` names the entry and field, e.g. `models["openai/gpt-5"].prices.input`. */
export class CatalogueEntryError extends Error {}

type Json = Record<string, unknown>;

const isObject = (value: unknown): value is Json =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

function objectAt(value: unknown, where: string): Json {
  if (!isObject(value)) throw new CatalogueEntryError(`${where} must be an object`);
  return value;
}

function onlyKeys(value: Json, keys: readonly string[], where: string): void {
  const unknown = Object.keys(value).find((key) => !keys.includes(key));
  if (unknown !== undefined) {
    throw new CatalogueEntryError(`${where}.${unknown} is not a catalogue field (expected one of ${keys.join(', ')})`);
  }
}

function tokens(value: unknown, where: string): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1) {
    throw new CatalogueEntryError(`${where} must be a positive integer (tokens)`);
  }
  return value;
}

function price(value: unknown, where: string): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || value > 1_000_000) {
    throw new CatalogueEntryError(`${where} must be a number of USD per 1M tokens, 0 or more`);
  }
  return value;
}

function flag(value: unknown, where: string): boolean | undefined {
  if (value === undefined || typeof value === 'boolean') return value;
  throw new CatalogueEntryError(`${where} must be true or false`);
}

/** Drops undefined fields, so that an override never erases a base value. */
function defined<T extends object>(fields: { [K in keyof T]-?: T[K] | undefined }): T {
  return Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined)) as T;
}

function pricesAt(value: unknown, where: string): ModelPricesOverride | undefined {
  if (value === undefined) return undefined;
  const prices = objectAt(value, where);
  onlyKeys(prices, ['input', 'cached_input', 'output'], where);
  return defined<ModelPricesOverride>({
    inputPerMTok: price(prices.input, `${where}.input`),
    cachedInputPerMTok: price(prices.cached_input, `${where}.cached_input`),
    outputPerMTok: price(prices.output, `${where}.output`),
  });
}

function capabilitiesAt(value: unknown, where: string): ModelCapabilitiesOverride | undefined {
  if (value === undefined) return undefined;
  const capabilities = objectAt(value, where);
  onlyKeys(capabilities, ['tools', 'images', 'structured_output'], where);
  return defined<ModelCapabilitiesOverride>({
    tools: flag(capabilities.tools, `${where}.tools`),
    images: flag(capabilities.images, `${where}.images`),
    structuredOutput: flag(capabilities.structured_output, `${where}.structured_output`),
  });
}

/** The catalogue fields of one entry; `extra` names other keys the entry may hold (AGENTRY_PROVIDERS' own). */
export function modelOverrideAt(value: unknown, where: string, extra: readonly string[] = []): ModelOverride {
  const entry = objectAt(value, where);
  onlyKeys(entry, ['context_window', 'max_output_tokens', 'prices', 'capabilities', ...extra], where);
  const override = defined<ModelOverride>({
    contextWindow: tokens(entry.context_window, `${where}.context_window`),
    maxOutputTokens: tokens(entry.max_output_tokens, `${where}.max_output_tokens`),
    prices: pricesAt(entry.prices, `${where}.prices`),
    capabilities: capabilitiesAt(entry.capabilities, `${where}.capabilities`),
  });
  const { contextWindow, maxOutputTokens } = override;
  if (contextWindow !== undefined && maxOutputTokens !== undefined && maxOutputTokens > contextWindow) {
    throw new CatalogueEntryError(`${where}.max_output_tokens must not exceed its context_window`);
  }
  return override;
}

function entriesAt(value: unknown, where: string, idPattern: RegExp, what: string): Record<string, ModelOverride> {
  if (value === undefined) return {};
  const result: Record<string, ModelOverride> = {};
  for (const [id, entry] of Object.entries(objectAt(value, where))) {
    const at = `${where}[${JSON.stringify(id)}]`;
    if (!idPattern.test(id)) throw new CatalogueEntryError(`${at}: ${what}`);
    result[id] = modelOverrideAt(entry, at);
  }
  return result;
}

/** A parsed catalogue document: `{models: {"provider/model": entry}, providers: {"name": entry}}`. */
export function operatorCatalogueOf(document: unknown): OperatorCatalogue {
  const root = objectAt(document ?? {}, 'the catalogue');
  onlyKeys(root, ['models', 'providers'], 'the catalogue');
  return {
    models: entriesAt(root.models, 'models', /^(scripted|[^/\s]+\/\S+)$/, 'a model id must look like provider/model'),
    providers: entriesAt(root.providers, 'providers', /^[a-z0-9][a-z0-9_-]{0,63}$/, 'not a provider name'),
  };
}

/** Reads and validates the operator's catalogue file; throws CatalogueEntryError naming the file and problem. */
export function readOperatorCatalogue(path: string): OperatorCatalogue {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new CatalogueEntryError(`cannot read ${path}: ${error instanceof Error ? error.message : String(error)}`);
  }
  let document: unknown;
  try {
    document = /\.ya?ml$/i.test(path) ? parseYaml(text) : JSON.parse(text);
  } catch (error) {
    throw new CatalogueEntryError(`${path} is not valid: ${error instanceof Error ? error.message : String(error)}`);
  }
  try {
    return operatorCatalogueOf(document);
  } catch (error) {
    if (error instanceof CatalogueEntryError) throw new CatalogueEntryError(`${path}: ${error.message}`);
    throw error;
  }
}
