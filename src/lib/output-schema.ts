/**
 * JSON Schemas a client sends for structured output (Responses `text.format`, an agent's `outputFormat`): checked
 * for size and depth, compiled once by Ajv (JSON Schema 2020-12, no remote references) and kept in a bounded cache
 * keyed by the schema's hash, so a schema used by every request of a client is compiled once per process and a
 * flood of distinct schemas cannot grow memory without bound. A `pattern` that may backtrack catastrophically (a
 * quantified group holding a quantifier, as `(a+)+`) is refused when the schema compiles: checking a reply runs
 * on the event loop, and one such pattern could stop it for every tenant.
 */
import { createHash } from 'node:crypto';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import safeRegex from 'safe-regex2';

/** Characters of a schema's JSON text at most. */
export const MAX_SCHEMA_CHARS = 100_000;
/** Nesting of objects and arrays in a schema at most. */
export const MAX_SCHEMA_DEPTH = 32;
const CACHE_SIZE = 256;

/** Why a schema cannot be used: too big or too deep, or not a schema Ajv compiles. */
export class OutputSchemaError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** Ajv's RegExp engine for `pattern` and `patternProperties`: the built-in one, for patterns that are safe. */
function safeRegExp(pattern: string, flags: string): RegExp {
  if (!safeRegex(pattern)) {
    throw new OutputSchemaError(
      `has the pattern ${JSON.stringify(pattern.slice(0, 100))}, which may take exponential time to match (a repeated group that repeats inside); write it without nested repetition`,
    );
  }
  return new RegExp(pattern, flags);
}
safeRegExp.code = 'new RegExp';

// `addUsedSchema: false`: a schema's `$id` is not registered, so two clients' schemas with the same `$id` do not
// collide and nothing outlives the cache entry. No `loadSchema`: a reference Ajv cannot resolve locally fails.
const ajv = new Ajv2020({
  strict: false,
  allErrors: false,
  addUsedSchema: false,
  validateFormats: false,
  code: { regExp: safeRegExp },
});
const cache = new Map<string, { schema: Record<string, unknown>; validate: ValidateFunction }>();

/** The nesting of `value`, read no deeper than `limit` + 1 levels (a deeper value answers `limit` + 1). */
function depthOf(value: unknown, limit: number): number {
  if (typeof value !== 'object' || value === null) return 0;
  if (limit < 0) return 1;
  let deepest = 0;
  for (const child of Array.isArray(value) ? value : Object.values(value)) {
    deepest = Math.max(deepest, depthOf(child, limit - 1));
    if (deepest > limit) break;
  }
  return deepest + 1;
}

/** The schema without its `$schema` (the dialect is always 2020-12 here; zod and Pydantic name one or another). */
function withoutDialect(schema: Record<string, unknown>): Record<string, unknown> {
  const { $schema: _dialect, ...rest } = schema;
  return rest;
}

/** The compiled validator of `schema`, from the cache when seen before. Throws OutputSchemaError. */
export function compileOutputSchema(schema: Record<string, unknown>): ValidateFunction {
  const text = JSON.stringify(schema);
  if (text.length > MAX_SCHEMA_CHARS) {
    throw new OutputSchemaError(`is ${text.length} characters of JSON; at most ${MAX_SCHEMA_CHARS} are accepted`);
  }
  const key = createHash('sha256').update(text).digest('base64url');
  const hit = cache.get(key);
  if (hit !== undefined) {
    // Least recently used first: a hit moves to the end.
    cache.delete(key);
    cache.set(key, hit);
    return hit.validate;
  }
  if (depthOf(schema, MAX_SCHEMA_DEPTH) > MAX_SCHEMA_DEPTH) {
    throw new OutputSchemaError(`nests deeper than ${MAX_SCHEMA_DEPTH} levels`);
  }
  const compiled = withoutDialect(schema);
  let validate: ValidateFunction;
  try {
    validate = ajv.compile(compiled);
  } catch (error) {
    if (error instanceof OutputSchemaError) throw error;
    throw new OutputSchemaError(`is not a valid JSON Schema: ${error instanceof Error ? error.message : 'unknown'}`);
  }
  cache.set(key, { schema: compiled, validate });
  if (cache.size > CACHE_SIZE) {
    const [oldest] = cache.entries();
    if (oldest !== undefined) {
      ajv.removeSchema(oldest[1].schema);
      cache.delete(oldest[0]);
    }
  }
  return validate;
}

/**
 * Why `text` is not a JSON value matching `schema` (null for a JSON object when `schema` is null), or null when it
 * is one: the parse error, or the first violation with its JSON pointer (`/age must be integer`).
 */
export function outputViolation(text: string, schema: Record<string, unknown> | null): string | null {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return 'the reply is not valid JSON';
  }
  if (schema === null) {
    return typeof value === 'object' && value !== null && !Array.isArray(value)
      ? null
      : 'the reply is not a JSON object';
  }
  const validate = compileOutputSchema(schema);
  if (validate(value)) return null;
  const first = validate.errors?.[0];
  if (first === undefined) return 'the reply does not match the schema';
  const where = first.instancePath === '' ? 'the reply' : `the reply at ${first.instancePath}`;
  return `${where} ${first.message ?? 'does not match the schema'}`;
}
