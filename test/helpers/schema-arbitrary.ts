/**
 * fast-check arbitraries built from the JSON Schemas of an OpenAPI document: values a schema accepts (kept
 * small: short strings and arrays, shallow free-form JSON), and hostile values that break it. Covers what the
 * route schemas use: $ref, enum, const, anyOf/oneOf, type lists, patterns, uuid/uri/date-time formats, bounds.
 */
import fc from 'fast-check';

export type Schema = Record<string, any>;

/** Longest string or array a valid value gets; schemas with larger minimums get their minimum. */
const SMALL = 24;
/** Below this depth, schemas without structure get scalar JSON only. */
const MAX_DEPTH = 6;

export interface ArbitraryContext {
  /** Resolves `#/components/schemas/…` references. */
  document: Schema;
  /** Values known to the server (ids of fixtures) offered where the schema accepts them. */
  known: (schema: Schema) => string[];
}

function resolve(schema: Schema, context: ArbitraryContext): Schema {
  let current = schema;
  for (let hops = 0; typeof current.$ref === 'string' && hops < 10; hops++) {
    const path = current.$ref.replace(/^#\//, '').split('/');
    current = path.reduce<Schema>(
      (node, key) => node?.[key.replaceAll('~1', '/').replaceAll('~0', '~')],
      context.document,
    );
  }
  return current ?? {};
}

/**
 * URLs that never leave the machine and need no DNS (whose answer time is not ours to decide): the loopback
 * address on port 1, where nothing listens, so a call to it is refused at once. A server allows them only with
 * AGENTRY_ALLOW_INSECURE_DESTINATIONS; otherwise they are refused without any lookup.
 */
const localUrl = fc.stringMatching(/^[A-Za-z0-9/_.-]{0,20}$/).map((path) => `https://127.0.0.1:1/${path}`);

function stringArbitrary(schema: Schema, context: ArbitraryContext): fc.Arbitrary<string> {
  const min = typeof schema.minLength === 'number' ? schema.minLength : 0;
  const max = typeof schema.maxLength === 'number' ? schema.maxLength : Number.POSITIVE_INFINITY;
  const fits = (value: string) => value.length >= min && value.length <= max;
  let generated: fc.Arbitrary<string>;
  if (schema.format === 'uuid') generated = fc.uuid();
  else if (schema.format === 'uri') generated = localUrl;
  else if (schema.format === 'date-time') generated = fc.date({ noInvalidDate: true }).map((d) => d.toISOString());
  else if (typeof schema.pattern === 'string') {
    generated = fc.stringMatching(new RegExp(schema.pattern)).filter(fits);
  } else {
    generated = fc.string({ minLength: min, maxLength: Math.max(min, Math.min(max, SMALL)) });
  }
  const known = context.known(schema);
  return known.length === 0 ? generated : fc.oneof({ arbitrary: fc.constantFrom(...known), weight: 3 }, generated);
}

function numberArbitrary(schema: Schema, integer: boolean): fc.Arbitrary<number> {
  const min = typeof schema.minimum === 'number' ? schema.minimum : integer ? -1000 : -1e6;
  const max = typeof schema.maximum === 'number' ? schema.maximum : integer ? 1000 : 1e6;
  if (!integer) return fc.double({ min, max, noNaN: true, noDefaultInfinity: true });
  // Mostly small values, and the bounds themselves (the safe-integer edge included).
  const small = fc.integer({ min: Math.max(min, -1000), max: Math.min(max, Math.max(min, -1000) + 2000) });
  return fc.oneof({ arbitrary: small, weight: 4 }, fc.constantFrom(min, max));
}

/**
 * The required properties, and up to three optional ones: a body with every optional field set is rarely one the
 * server accepts as a whole (each field has rules the schema cannot state), so most values stay small.
 */
function objectArbitrary(schema: Schema, context: ArbitraryContext, depth: number): fc.Arbitrary<Schema> {
  const properties: Schema = schema.properties ?? {};
  const required = new Set<string>(Array.isArray(schema.required) ? schema.required : []);
  const model: Record<string, fc.Arbitrary<unknown>> = {};
  for (const [name, property] of Object.entries(properties)) model[name] = validValue(property, context, depth + 1);
  const optional = Object.keys(model).filter((name) => !required.has(name));
  const minimum = typeof schema.minProperties === 'number' ? schema.minProperties : 0;
  const chosen = fc.subarray(optional, {
    minLength: Math.min(optional.length, Math.max(0, minimum - required.size)),
    maxLength: Math.min(optional.length, 3),
  });
  return fc.tuple(fc.record(model), chosen).map(([all, names]) => {
    const value: Schema = {};
    for (const name of Object.keys(model)) if (required.has(name) || names.includes(name)) value[name] = all[name];
    return value;
  });
}

/** Values the schema accepts (as far as the generator can tell; the server may still refuse for other reasons). */
export function validValue(raw: Schema, context: ArbitraryContext, depth = 0): fc.Arbitrary<unknown> {
  const schema = resolve(raw, context);
  if ('const' in schema) return fc.constant(schema.const);
  if (Array.isArray(schema.enum)) return fc.constantFrom(...schema.enum);
  const options = schema.anyOf ?? schema.oneOf;
  if (Array.isArray(options))
    return fc.oneof(...options.map((option: Schema) => validValue(option, context, depth + 1)));
  if (Array.isArray(schema.type)) {
    return fc.oneof(...schema.type.map((type: string) => validValue({ ...schema, type }, context, depth)));
  }
  switch (schema.type) {
    case 'string':
      return stringArbitrary(schema, context);
    case 'integer':
      return numberArbitrary(schema, true);
    case 'number':
      return numberArbitrary(schema, false);
    case 'boolean':
      return fc.boolean();
    case 'null':
      return fc.constant(null);
    case 'array': {
      const min = typeof schema.minItems === 'number' ? schema.minItems : 0;
      const max = Math.max(min, Math.min(typeof schema.maxItems === 'number' ? schema.maxItems : 3, min + 3));
      const items = validValue(schema.items ?? {}, context, depth + 1);
      return schema.uniqueItems === true
        ? fc.uniqueArray(items, { minLength: min, maxLength: max, selector: (value) => JSON.stringify(value) })
        : fc.array(items, { minLength: min, maxLength: max });
    }
    case 'object':
      return objectArbitrary(schema, context, depth);
    default:
      return fc.jsonValue({ maxDepth: depth >= MAX_DEPTH ? 0 : 2 });
  }
}

/** Strings a storage layer may choke on (NUL and lone surrogates above all), and a few other oddities. */
export const hostileString = fc.oneof(
  { arbitrary: fc.constantFrom('a\u0000b', '\u0000', 'x\ud800', '\udfffy'), weight: 4 },
  { arbitrary: fc.constantFrom('', ' ', '\t\n', '💥'.repeat(3), 'ask ?', "' OR 1=1 --"), weight: 2 },
  { arbitrary: fc.string({ unit: 'binary', maxLength: 12 }), weight: 1 },
);

/** Numbers at and beyond the edges a server tends to mishandle (past 64 bits and the safe range above all). */
export const hostileNumber = fc.oneof(
  { arbitrary: fc.constantFrom(2 ** 63, -(2 ** 63), 1e308, 2 ** 53 + 2), weight: 4 },
  { arbitrary: fc.constantFrom(-1, 0, 1.5, 2 ** 31, Number.MAX_SAFE_INTEGER), weight: 1 },
);

/** Any JSON, including the hostile strings and numbers above. */
export const hostileJson: fc.Arbitrary<unknown> = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }),
  hostileString,
  hostileNumber,
  fc.dictionary(hostileString, fc.oneof(hostileString, hostileNumber), { maxKeys: 3 }),
);

/** The value with its `index`-th leaf of the given kind (modulo their count) replaced; unchanged when it has none. */
function replaceLeaf(value: unknown, kind: 'string' | 'number', index: number, replacement: unknown): unknown {
  const leaves: { parent: Record<string, unknown> | unknown[]; key: string | number }[] = [];
  const visit = (node: unknown) => {
    if (Array.isArray(node)) {
      for (const [key, child] of node.entries()) {
        if (typeof child === kind) leaves.push({ parent: node, key });
        else visit(child);
      }
    } else if (typeof node === 'object' && node !== null) {
      for (const [key, child] of Object.entries(node)) {
        if (typeof child === kind) leaves.push({ parent: node as Record<string, unknown>, key });
        else visit(child);
      }
    }
  };
  const copy: unknown = structuredClone(value);
  visit(copy);
  const leaf = leaves[index % Math.max(1, leaves.length)];
  if (leaf === undefined) return copy;
  Reflect.set(leaf.parent, leaf.key, replacement);
  return copy;
}

/**
 * A value that breaks the schema in one of a few ways: a string deep inside made hostile (NUL, a lone surrogate),
 * a number made huge, anything in place of a property, a required field dropped, or any JSON at all.
 */
export function invalidValue(raw: Schema, context: ArbitraryContext): fc.Arbitrary<unknown> {
  const schema = resolve(raw, context);
  const valid = validValue(schema, context);
  const mutations: fc.Arbitrary<unknown>[] = [
    hostileJson,
    fc.tuple(valid, fc.nat(), hostileString).map(([value, index, text]) => replaceLeaf(value, 'string', index, text)),
    fc
      .tuple(valid, fc.nat(), hostileNumber)
      .map(([value, index, number]) => replaceLeaf(value, 'number', index, number)),
  ];
  if (schema.type === 'object' && schema.properties !== undefined) {
    const names = Object.keys(schema.properties);
    if (names.length > 0) {
      // One property replaced by something hostile; or a required one left out.
      mutations.push(
        fc
          .tuple(valid, fc.constantFrom(...names), hostileJson)
          .map(([value, name, replacement]) => ({ ...(value as Schema), [name]: replacement })),
      );
    }
    const required: string[] = schema.required ?? [];
    if (required.length > 0) {
      mutations.push(
        fc.tuple(valid, fc.constantFrom(...required)).map(([value, name]) => {
          const copy = { ...(value as Schema) };
          delete copy[name];
          return copy;
        }),
      );
    }
  }
  return fc.oneof(...mutations);
}
