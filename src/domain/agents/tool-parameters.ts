/**
 * Checks the `parameters` JSON Schema of an agent's client tools. Providers only honour a small JSON Schema subset
 * reliably (and strict function calling needs closed objects with every property required), and the schema is
 * stored and sent with every model call, so we accept a bounded subset and name the first thing outside it rather
 * than letting a provider reject the run later.
 */
import { Buffer } from 'node:buffer';

export interface SchemaProblem {
  path: string;
  message: string;
}

export const TOOL_PARAMETERS_LIMITS: {
  readonly maxDepth: number;
  readonly maxBytes: number;
  readonly maxProperties: number;
  readonly maxEnumValues: number;
} = Object.freeze({ maxDepth: 8, maxBytes: 32_768, maxProperties: 256, maxEnumValues: 256 });

// Grouped by what they constrain; everything else (references, composition, conditionals) is rejected.
export const ALLOWED_KEYWORDS: readonly string[] = Object.freeze([
  ...['type', 'properties', 'required', 'additionalProperties', 'items', 'anyOf', 'enum', 'const'],
  ...['description', 'title', 'default', 'examples'],
  ...['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf'],
  ...['minLength', 'maxLength', 'pattern', 'format', 'minItems', 'maxItems', 'uniqueItems'],
]);

const TYPE_NAMES = new Set(['string', 'number', 'integer', 'boolean', 'object', 'array', 'null']);
const FORMATS = new Set(['date-time', 'date', 'time', 'email', 'uri', 'uuid', 'hostname', 'ipv4', 'ipv6']);
const MAX_ANY_OF = 16;
const MAX_DESCRIPTION_CHARS = 2000;
const MAX_PROPERTY_NAME_CHARS = 64;
const ALLOWED_LIST = ALLOWED_KEYWORDS.join(', ');

type JsonObject = Record<string, unknown>;

/** Counts shared across the whole walk, because the property bound is per schema, not per object. */
interface WalkState {
  properties: number;
}

export function checkToolParameters(schema: unknown, strict: boolean, path: string): SchemaProblem | null {
  try {
    return checkRoot(schema, strict, path);
  } catch {
    // Only reachable with non-JSON input such as proxies or throwing getters; the contract is to never throw.
    return { path, message: 'schema is not plain JSON data' };
  }
}

function checkRoot(schema: unknown, strict: boolean, path: string): SchemaProblem | null {
  // Size first: it bounds every later walk, and the serialized form is what gets stored and sent to the model.
  let json: string | undefined;
  try {
    json = JSON.stringify(schema);
  } catch {
    // Cycles and BigInt cannot come from JSON.parse, but nesting a few thousand levels deep (inside default, const or
    // examples, which are not walked) can, and would also break storing the schema later.
    return { path, message: 'schema cannot be serialized as JSON (too deeply nested, cyclic or not plain data)' };
  }
  if (json === undefined) return { path, message: `schema must be a JSON object, got ${kindOf(schema)}` };
  const bytes = Buffer.byteLength(json, 'utf8');
  if (bytes > TOOL_PARAMETERS_LIMITS.maxBytes) {
    return {
      path,
      message: `schema is ${bytes} bytes when serialized; the maximum is ${TOOL_PARAMETERS_LIMITS.maxBytes}`,
    };
  }
  if (!isPlainObject(schema)) return { path, message: `schema must be a JSON object, got ${kindOf(schema)}` };
  if (schema.type !== 'object') {
    return { path: `${path}.type`, message: 'the root schema must have type "object"' };
  }
  if (schema.additionalProperties !== false) {
    return { path: `${path}.additionalProperties`, message: 'the root schema must set additionalProperties to false' };
  }
  const found = checkSchema(schema, path, 1, { properties: 0 });
  if (found !== null || !strict || !isPlainObject(schema.properties)) return found;
  // Strict function calling makes the model fill every argument; optional ones are expressed with a "null" type.
  const required = Array.isArray(schema.required) ? schema.required : [];
  for (const name of Object.keys(schema.properties)) {
    if (!required.includes(name)) {
      return {
        path: `${path}.required`,
        message: `strict tools must list every property in required; "${clip(name)}" is missing`,
      };
    }
  }
  return null;
}

function checkSchema(schema: unknown, path: string, depth: number, state: WalkState): SchemaProblem | null {
  if (!isPlainObject(schema)) return { path, message: `schema must be a JSON object, got ${kindOf(schema)}` };
  if (depth > TOOL_PARAMETERS_LIMITS.maxDepth) {
    return { path, message: `schema nesting exceeds the maximum depth of ${TOOL_PARAMETERS_LIMITS.maxDepth}` };
  }
  // Document order, so "the first problem" is the one a reader meets first.
  for (const [key, value] of Object.entries(schema)) {
    const found = checkKeyword(schema, key, value, `${path}.${key}`, depth, state);
    if (found !== null) return found;
  }
  return null;
}

function checkKeyword(
  schema: JsonObject,
  key: string,
  value: unknown,
  path: string,
  depth: number,
  state: WalkState,
): SchemaProblem | null {
  const fail = (message: string): SchemaProblem => ({ path, message });
  switch (key) {
    case 'type':
      return checkType(value, path);
    case 'properties':
      return checkProperties(value, path, depth, state);
    case 'required':
      return checkRequired(value, schema.properties, path);
    case 'additionalProperties':
      return typeof value === 'boolean'
        ? null
        : fail('additionalProperties must be true or false (schemas are not supported)');
    case 'items':
      return Array.isArray(value)
        ? fail('items must be a single schema, not an array (tuple form is not supported)')
        : checkSchema(value, path, depth + 1, state);
    case 'anyOf':
      return checkAnyOf(value, path, depth, state);
    case 'enum':
      return checkEnum(value, path);
    case 'const':
    case 'default':
      // Any JSON value is meaningful here; the byte bound already limits them.
      return null;
    case 'examples':
      return Array.isArray(value) ? null : fail(`examples must be an array, got ${kindOf(value)}`);
    case 'description':
      if (typeof value !== 'string') return fail(`description must be a string, got ${kindOf(value)}`);
      return value.length > MAX_DESCRIPTION_CHARS
        ? fail(`description is ${value.length} characters; the maximum is ${MAX_DESCRIPTION_CHARS}`)
        : null;
    case 'title':
      return typeof value === 'string' ? null : fail(`title must be a string, got ${kindOf(value)}`);
    case 'minimum':
    case 'maximum':
    case 'exclusiveMinimum':
    case 'exclusiveMaximum':
      return isFiniteNumber(value) ? null : fail(`${key} must be a finite number, got ${kindOf(value)}`);
    case 'multipleOf':
      return isFiniteNumber(value) && value > 0 ? null : fail('multipleOf must be a number greater than 0');
    case 'minLength':
    case 'maxLength':
    case 'minItems':
    case 'maxItems':
      return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0
        ? null
        : fail(`${key} must be a non-negative integer`);
    case 'uniqueItems':
      return typeof value === 'boolean' ? null : fail(`uniqueItems must be true or false, got ${kindOf(value)}`);
    case 'pattern':
      return checkPattern(value, path);
    case 'format':
      return typeof value === 'string' && FORMATS.has(value)
        ? null
        : fail(`format must be one of ${[...FORMATS].join(', ')}`);
    default: {
      const hint = key === 'nullable' ? '; use a type array that includes "null" instead' : '';
      return fail(`keyword "${clip(key)}" is not supported (allowed: ${ALLOWED_LIST})${hint}`);
    }
  }
}

function checkType(value: unknown, path: string): SchemaProblem | null {
  const expected = `type must be one of ${[...TYPE_NAMES].join(', ')}, or a non-empty array of them`;
  if (typeof value === 'string') {
    return TYPE_NAMES.has(value) ? null : { path, message: `unknown type "${clip(value)}"; ${expected}` };
  }
  if (!Array.isArray(value) || value.length === 0) return { path, message: expected };
  const seen = new Set<string>();
  for (const [i, item] of value.entries()) {
    if (typeof item !== 'string' || !TYPE_NAMES.has(item)) return { path: `${path}[${i}]`, message: expected };
    if (seen.has(item)) return { path: `${path}[${i}]`, message: `type "${item}" is listed more than once` };
    seen.add(item);
  }
  return null;
}

function checkProperties(value: unknown, path: string, depth: number, state: WalkState): SchemaProblem | null {
  if (!isPlainObject(value)) return { path, message: `properties must be an object, got ${kindOf(value)}` };
  for (const [name, child] of Object.entries(value)) {
    // Reported on the properties object itself: an empty or huge name makes a useless path.
    if (name.length === 0 || name.length > MAX_PROPERTY_NAME_CHARS) {
      return { path, message: `property name "${clip(name)}" must be 1 to ${MAX_PROPERTY_NAME_CHARS} characters` };
    }
    state.properties += 1;
    if (state.properties > TOOL_PARAMETERS_LIMITS.maxProperties) {
      return {
        path: `${path}.${name}`,
        message: `schema declares more than ${TOOL_PARAMETERS_LIMITS.maxProperties} properties in total`,
      };
    }
    const found = checkSchema(child, `${path}.${name}`, depth + 1, state);
    if (found !== null) return found;
  }
  return null;
}

function checkRequired(value: unknown, properties: unknown, path: string): SchemaProblem | null {
  if (!Array.isArray(value)) {
    return { path, message: `required must be an array of property names, got ${kindOf(value)}` };
  }
  const declared = isPlainObject(properties) ? properties : {};
  const seen = new Set<string>();
  for (const [i, name] of value.entries()) {
    const at = `${path}[${i}]`;
    if (typeof name !== 'string') return { path: at, message: `required entries must be strings, got ${kindOf(name)}` };
    if (seen.has(name)) return { path: at, message: `required lists "${clip(name)}" more than once` };
    if (!Object.hasOwn(declared, name)) {
      return { path: at, message: `required names "${clip(name)}", which is not declared in properties` };
    }
    seen.add(name);
  }
  return null;
}

function checkAnyOf(value: unknown, path: string, depth: number, state: WalkState): SchemaProblem | null {
  if (!Array.isArray(value) || value.length === 0 || value.length > MAX_ANY_OF) {
    return { path, message: `anyOf must be an array of 1 to ${MAX_ANY_OF} schemas` };
  }
  for (const [i, branch] of value.entries()) {
    const found = checkSchema(branch, `${path}[${i}]`, depth + 1, state);
    if (found !== null) return found;
  }
  return null;
}

function checkEnum(value: unknown, path: string): SchemaProblem | null {
  const max = TOOL_PARAMETERS_LIMITS.maxEnumValues;
  if (!Array.isArray(value) || value.length === 0 || value.length > max) {
    return { path, message: `enum must be an array of 1 to ${max} values` };
  }
  for (const [i, item] of value.entries()) {
    const scalar = item === null || typeof item === 'string' || typeof item === 'boolean' || isFiniteNumber(item);
    if (!scalar) return { path: `${path}[${i}]`, message: `enum values must be strings, numbers, booleans or null` };
  }
  return null;
}

function checkPattern(value: unknown, path: string): SchemaProblem | null {
  if (typeof value !== 'string') return { path, message: `pattern must be a string, got ${kindOf(value)}` };
  try {
    new RegExp(value, 'u');
    return null;
  } catch (error) {
    // V8 messages repeat the whole pattern before the reason; keep only the reason so messages stay short.
    const reason = error instanceof Error ? (error.message.split(': ').at(-1) ?? '') : '';
    return { path, message: `pattern is not a valid regular expression with the u flag: ${reason}` };
  }
}

function isPlainObject(value: unknown): value is JsonObject {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

function isFiniteNumber(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value);
}

function kindOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return 'an object';
  if (typeof value === 'undefined') return 'nothing';
  return `a ${typeof value}`;
}

/** Keeps messages short when untrusted names are long. */
function clip(text: string): string {
  return text.length > MAX_PROPERTY_NAME_CHARS ? `${text.slice(0, MAX_PROPERTY_NAME_CHARS)}...` : text;
}
