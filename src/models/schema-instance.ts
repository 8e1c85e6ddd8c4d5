/**
 * The smallest value a JSON Schema accepts, built deterministically: what the scripted model answers a request for
 * structured output with, so that structured outputs can be tried and tested without a provider. Covers what
 * structured-output schemas use: `const`, `enum`, types (the first non-null one of a list), required properties,
 * `minItems`, `minLength`, bounds, common string formats, local `$ref`s, `anyOf`/`oneOf` (first branch) and
 * `allOf` (objects merged). Anything else yields a value the final validation may still refuse.
 */
import { isJsonObject } from '../lib/guards.ts';

type Schema = Record<string, unknown>;

/** Recursion stops here (self-referencing schemas): deeper values are null. */
const MAX_DEPTH = 16;
/** Arrays and strings never grow past this, whatever minItems or minLength ask. */
const MAX_SIZE = 64;

const FORMATS: Record<string, string> = {
  'date-time': '1970-01-01T00:00:00Z',
  date: '1970-01-01',
  time: '00:00:00Z',
  email: 'user@example.com',
  uri: 'https://example.com/',
  uuid: '00000000-0000-4000-8000-000000000000',
  hostname: 'example.com',
  ipv4: '127.0.0.1',
  ipv6: '::1',
};

/** `#/$defs/x`-style references within the root schema; others resolve to the empty schema. */
function resolveRef(root: Schema, ref: string): Schema {
  if (!ref.startsWith('#')) return {};
  let node: unknown = root;
  for (const raw of ref
    .slice(1)
    .split('/')
    .filter((part) => part !== '')) {
    const key = decodeURIComponent(raw).replaceAll('~1', '/').replaceAll('~0', '~');
    node = isJsonObject(node) ? node[key] : undefined;
  }
  return isJsonObject(node) ? node : {};
}

function merged(parts: unknown[]): Schema {
  const out: Schema = {};
  const properties: Schema = {};
  const required: unknown[] = [];
  for (const part of parts.filter(isJsonObject)) {
    Object.assign(out, part);
    if (isJsonObject(part.properties)) Object.assign(properties, part.properties);
    if (Array.isArray(part.required)) required.push(...part.required);
  }
  return { ...out, properties, required, type: 'object' };
}

function typeOf(schema: Schema): string {
  const { type } = schema;
  if (typeof type === 'string') return type;
  if (Array.isArray(type)) return type.find((t) => t !== 'null') ?? 'null';
  if (isJsonObject(schema.properties)) return 'object';
  if (schema.items !== undefined || schema.prefixItems !== undefined) return 'array';
  return 'null';
}

/** 0 when the bounds allow it, else the bound nearest to it. */
function numberOf(schema: Schema, integer: boolean): number {
  const { minimum, exclusiveMinimum, maximum, exclusiveMaximum } = schema;
  const step = integer ? 1 : 0.5;
  if (typeof minimum === 'number' && minimum > 0) return integer ? Math.ceil(minimum) : minimum;
  if (typeof exclusiveMinimum === 'number' && exclusiveMinimum >= 0) {
    return integer ? Math.floor(exclusiveMinimum) + 1 : exclusiveMinimum + step;
  }
  if (typeof maximum === 'number' && maximum < 0) return integer ? Math.floor(maximum) : maximum;
  if (typeof exclusiveMaximum === 'number' && exclusiveMaximum <= 0) {
    return integer ? Math.ceil(exclusiveMaximum) - 1 : exclusiveMaximum - step;
  }
  return 0;
}

function stringOf(schema: Schema): string {
  const format = typeof schema.format === 'string' ? FORMATS[schema.format] : undefined;
  if (format !== undefined) return format;
  const min = typeof schema.minLength === 'number' ? Math.min(schema.minLength, MAX_SIZE) : 0;
  return 'a'.repeat(min);
}

function arrayOf(schema: Schema, root: Schema, depth: number): unknown[] {
  const prefix = Array.isArray(schema.prefixItems) ? schema.prefixItems : [];
  const min = typeof schema.minItems === 'number' ? Math.min(schema.minItems, MAX_SIZE) : 0;
  const out: unknown[] = [];
  for (let index = 0; index < Math.max(min, 0); index++) {
    const item = index < prefix.length ? prefix[index] : schema.items;
    out.push(instanceAt(isJsonObject(item) ? item : {}, root, depth + 1));
  }
  return out;
}

function objectOf(schema: Schema, root: Schema, depth: number): Schema {
  const properties = isJsonObject(schema.properties) ? schema.properties : {};
  const required = Array.isArray(schema.required) ? schema.required : [];
  const out: Schema = {};
  for (const name of required) {
    if (typeof name !== 'string') continue;
    const property = properties[name];
    out[name] = instanceAt(isJsonObject(property) ? property : {}, root, depth + 1);
  }
  return out;
}

function instanceAt(schema: Schema, root: Schema, depth: number): unknown {
  if (depth > MAX_DEPTH) return null;
  if (typeof schema.$ref === 'string') return instanceAt(resolveRef(root, schema.$ref), root, depth + 1);
  if ('const' in schema) return schema.const;
  if (Array.isArray(schema.enum) && schema.enum.length > 0) return schema.enum[0];
  for (const key of ['anyOf', 'oneOf'] as const) {
    const branches = schema[key];
    if (Array.isArray(branches) && isJsonObject(branches[0])) return instanceAt(branches[0], root, depth + 1);
  }
  if (Array.isArray(schema.allOf)) {
    const { allOf, ...rest } = schema;
    return instanceAt(merged([rest, ...allOf]), root, depth + 1);
  }
  switch (typeOf(schema)) {
    case 'object':
      return objectOf(schema, root, depth);
    case 'array':
      return arrayOf(schema, root, depth);
    case 'string':
      return stringOf(schema);
    case 'integer':
      return numberOf(schema, true);
    case 'number':
      return numberOf(schema, false);
    case 'boolean':
      return false;
    default:
      return null;
  }
}

/** The smallest instance of `schema` (see the file header). */
export function schemaInstance(schema: Schema): unknown {
  return instanceAt(schema, schema, 0);
}
