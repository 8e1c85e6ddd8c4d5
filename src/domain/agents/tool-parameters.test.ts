import { describe, expect, it } from 'vitest';
import { ALLOWED_KEYWORDS, checkToolParameters, TOOL_PARAMETERS_LIMITS } from './tool-parameters.ts';

const P = 'clientTools[0].parameters';

/** A root schema that is valid apart from whatever `extra` changes. */
function root(properties: Record<string, unknown>, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { type: 'object', properties, required: Object.keys(properties), additionalProperties: false, ...extra };
}

/** A schema whose innermost object sits at `depth` (root = 1), nested through `properties.child`. */
function nestedTo(depth: number): Record<string, unknown> {
  let schema: Record<string, unknown> = { type: 'object', properties: {}, additionalProperties: false };
  for (let level = depth; level > 1; level--) {
    schema = { type: 'object', properties: { child: schema }, required: ['child'], additionalProperties: false };
  }
  return schema;
}

function manyProperties(count: number, prefix = 'p'): Record<string, unknown> {
  const properties: Record<string, unknown> = {};
  for (let i = 0; i < count; i++) properties[`${prefix}${i}`] = { type: 'string' };
  return properties;
}

function expectProblem(schema: unknown, path: string, fragment: string, strict = true): void {
  const problem = checkToolParameters(schema, strict, P);
  expect(problem).not.toBeNull();
  expect(problem?.path).toBe(path);
  expect(problem?.message).toContain(fragment);
}

describe('exported constants', () => {
  it('publishes the limits from the contract', () => {
    expect(TOOL_PARAMETERS_LIMITS).toEqual({ maxDepth: 8, maxBytes: 32768, maxProperties: 256, maxEnumValues: 256 });
  });

  it('lists exactly the supported keywords and not nullable', () => {
    expect([...ALLOWED_KEYWORDS].sort()).toEqual(
      [
        'type',
        'properties',
        'required',
        'additionalProperties',
        'items',
        'enum',
        'const',
        'description',
        'title',
        'default',
        'examples',
        'minimum',
        'maximum',
        'exclusiveMinimum',
        'exclusiveMaximum',
        'multipleOf',
        'minLength',
        'maxLength',
        'pattern',
        'format',
        'minItems',
        'maxItems',
        'uniqueItems',
        'anyOf',
      ].sort(),
    );
    expect(ALLOWED_KEYWORDS).not.toContain('nullable');
  });
});

describe('checkToolParameters accepts', () => {
  const accepted: Array<[string, unknown, boolean]> = [
    [
      'a flat schema',
      root({ city: { type: 'string', description: 'City name' }, units: { type: 'string', enum: ['c', 'f'] } }),
      true,
    ],
    ['a schema without properties', { type: 'object', additionalProperties: false }, true],
    ['an empty properties object', root({}), true],
    [
      'a nested object with additionalProperties false',
      root({
        address: {
          type: 'object',
          properties: { street: { type: 'string' }, zip: { type: 'string', pattern: '^[0-9]{5}$' } },
          required: ['street'],
          additionalProperties: false,
        },
      }),
      true,
    ],
    [
      'arrays of scalars and objects',
      root({
        tags: { type: 'array', items: { type: 'string', minLength: 1 }, minItems: 0, maxItems: 10, uniqueItems: true },
        points: {
          type: 'array',
          items: { type: 'object', properties: { x: { type: 'number' } }, additionalProperties: false },
        },
      }),
      true,
    ],
    [
      'anyOf branches',
      root({ id: { anyOf: [{ type: 'string', format: 'uuid' }, { type: 'integer', minimum: 1 }, { type: 'null' }] } }),
      true,
    ],
    ['enums of mixed scalars', root({ level: { enum: ['low', 2, 3.5, true, null] } }), true],
    ['a type array with null', root({ note: { type: ['string', 'null'] } }), true],
    [
      'every other keyword',
      root({
        n: {
          type: 'number',
          title: 'N',
          description: 'd'.repeat(2000),
          default: 1,
          examples: [1, 2],
          const: 4,
          minimum: -1.5,
          maximum: 10,
          exclusiveMinimum: -2,
          exclusiveMaximum: 11,
          multipleOf: 0.5,
        },
        s: { type: 'string', minLength: 0, maxLength: 5, pattern: '\\p{L}+', format: 'date-time' },
        o: { type: 'object', additionalProperties: true, default: { any: ['json', { value: 1 }] } },
      }),
      true,
    ],
    [
      'strict false with a partial required',
      root({ a: { type: 'string' }, b: { type: 'string' } }, { required: ['b'] }),
      false,
    ],
    [
      'strict false with required omitted',
      { type: 'object', properties: { a: {} }, additionalProperties: false },
      false,
    ],
    ['property names that are not identifiers', root({ 'first name': { type: 'string' }, 'a.b': {} }), true],
    ['nesting at exactly the maximum depth', nestedTo(8), true],
    ['exactly the maximum number of properties', root(manyProperties(256)), true],
    [
      'exactly the maximum number of enum values',
      root({ e: { enum: Array.from({ length: 256 }, (_, i) => i) } }),
      true,
    ],
    ['a 64-character property name', root({ ['x'.repeat(64)]: { type: 'string' } }), true],
    [
      'a property named __proto__ from JSON.parse',
      JSON.parse(
        '{"type":"object","properties":{"__proto__":{"type":"string"}},"required":["__proto__"],"additionalProperties":false}',
      ),
      true,
    ],
    [
      'a null-prototype root',
      Object.assign(Object.create(null), { type: 'object', additionalProperties: false }),
      true,
    ],
  ];

  it.each(accepted)('%s', (_name, schema, strict) => {
    expect(checkToolParameters(schema, strict, P)).toBeNull();
  });

  it('counts nesting through items and anyOf up to the maximum', () => {
    // root(1) -> properties.a(2) -> items(3) -> items(4) -> anyOf[0](5) -> items(6) -> anyOf[0](7) -> items(8)
    const leaf = { anyOf: [{ items: { anyOf: [{ items: { type: 'string' } }] } }] };
    expect(checkToolParameters(root({ a: { type: 'array', items: { items: leaf } } }), true, P)).toBeNull();
  });
});

describe('checkToolParameters rejects the root', () => {
  it.each([
    ['null', null, 'got null'],
    ['an array', [], 'got an array'],
    ['a string', 'object', 'got a string'],
    ['a number', 3, 'got a number'],
    ['a boolean schema', true, 'got a boolean'],
    ['undefined', undefined, 'got nothing'],
    ['a Date', new Date(0), 'must be a JSON object'],
    ['a Map', new Map(), 'must be a JSON object'],
  ])('when it is %s', (_name, schema, fragment) => {
    expectProblem(schema, P, fragment);
  });

  it('without type "object"', () => {
    expectProblem({ properties: {}, additionalProperties: false }, `${P}.type`, 'type "object"');
    expectProblem({ type: 'array', additionalProperties: false }, `${P}.type`, 'type "object"');
    expectProblem({ type: ['object'], additionalProperties: false }, `${P}.type`, 'type "object"');
  });

  it('without additionalProperties false', () => {
    expectProblem({ type: 'object', properties: {} }, `${P}.additionalProperties`, 'additionalProperties to false');
    expectProblem({ type: 'object', additionalProperties: true }, `${P}.additionalProperties`, 'false');
    expectProblem({ type: 'object', additionalProperties: {} }, `${P}.additionalProperties`, 'false');
  });

  it('in strict mode when a declared property is not required', () => {
    const schema = root({ city: { type: 'string' }, units: { type: 'string' } }, { required: ['city'] });
    expectProblem(schema, `${P}.required`, '"units" is missing');
    expect(checkToolParameters(schema, false, P)).toBeNull();
  });

  it('in strict mode when required is omitted', () => {
    expectProblem(
      { type: 'object', properties: { city: { type: 'string' } }, additionalProperties: false },
      `${P}.required`,
      '"city"',
    );
  });
});

describe('checkToolParameters rejects required', () => {
  it.each([true, false])('naming an undeclared property (strict %s)', (strict) => {
    expectProblem(root({ a: {} }, { required: ['a', 'b'] }), `${P}.required[1]`, '"b", which is not declared', strict);
  });

  it('naming an inherited name such as toString', () => {
    expectProblem(root({ a: {} }, { required: ['toString'] }), `${P}.required[0]`, 'not declared', false);
  });

  it('with duplicates', () => {
    expectProblem(root({ a: {} }, { required: ['a', 'a'] }), `${P}.required[1]`, 'more than once');
  });

  it('that is not an array of strings', () => {
    expectProblem(root({ a: {} }, { required: 'a' }), `${P}.required`, 'must be an array');
    expectProblem(root({ a: {} }, { required: ['a', 1] }), `${P}.required[1]`, 'must be strings');
  });

  it('naming undeclared properties in nested objects', () => {
    const schema = root({ o: { type: 'object', properties: {}, required: ['x'], additionalProperties: false } });
    expectProblem(schema, `${P}.properties.o.required[0]`, '"x"', false);
  });
});

describe('checkToolParameters rejects keywords', () => {
  it.each(['$ref', '$defs', 'oneOf', 'allOf', 'not', 'patternProperties', 'definitions', 'if', '__proto__'])(
    'unknown keyword %s at the root',
    (keyword) => {
      const schema = JSON.parse(JSON.stringify({ ...root({}), [keyword]: {} }));
      expectProblem(schema, `${P}.${keyword}`, `keyword "${keyword}" is not supported (allowed: type, properties`);
    },
  );

  it('unknown keywords in nested schemas, with the full path', () => {
    expectProblem(root({ city: { $ref: '#/x' } }), `${P}.properties.city.$ref`, 'keyword "$ref" is not supported');
    expectProblem(root({ 'first name': { oneOf: [] } }), `${P}.properties.first name.oneOf`, '"oneOf"');
  });

  it('nullable, pointing at a type array', () => {
    expectProblem(root({ a: { type: 'string', nullable: true } }), `${P}.properties.a.nullable`, '"null"');
  });

  it('reports the first problem in document order', () => {
    const schema = root({ a: { type: 'str', minimum: 'x' }, b: { $ref: '#' } });
    expectProblem(schema, `${P}.properties.a.type`, 'unknown type "str"');
  });
});

describe('checkToolParameters rejects type', () => {
  it.each([
    ['an unknown name', 'str', `${P}.properties.city.type`, 'unknown type "str"'],
    ['a number', 1, `${P}.properties.city.type`, 'type must be one of string, number'],
    ['an empty array', [], `${P}.properties.city.type`, 'non-empty array'],
    ['an unknown name in an array', ['string', 'text'], `${P}.properties.city.type[1]`, 'type must be one of'],
    ['a duplicate in an array', ['string', 'string'], `${P}.properties.city.type[1]`, 'more than once'],
  ])('when it is %s', (_name, type, path, fragment) => {
    expectProblem(root({ city: { type } }), path, fragment);
  });
});

describe('checkToolParameters rejects structure', () => {
  it('properties that is not an object', () => {
    expectProblem(root({}, { properties: [] }), `${P}.properties`, 'properties must be an object');
  });

  it('property schemas that are not objects', () => {
    expectProblem(root({ a: true }), `${P}.properties.a`, 'got a boolean');
  });

  it('property names that are empty or longer than 64 characters', () => {
    expectProblem(root({ '': {} }), `${P}.properties`, '1 to 64 characters');
    expectProblem(root({ ['x'.repeat(65)]: {} }), `${P}.properties`, '1 to 64 characters');
  });

  it('nested additionalProperties that is a schema', () => {
    const schema = root({ o: { type: 'object', additionalProperties: { type: 'string' } } });
    expectProblem(schema, `${P}.properties.o.additionalProperties`, 'true or false');
  });

  it('items as an array', () => {
    expectProblem(
      root({ tags: { type: 'array', items: [{ type: 'string' }] } }),
      `${P}.properties.tags.items`,
      'not an array',
    );
  });

  it('items that is not a schema object', () => {
    expectProblem(root({ tags: { type: 'array', items: true } }), `${P}.properties.tags.items`, 'got a boolean');
  });

  it('anyOf that is empty, too long or holds a bad branch', () => {
    expectProblem(root({ a: { anyOf: [] } }), `${P}.properties.a.anyOf`, '1 to 16 schemas');
    const branches = Array.from({ length: 17 }, () => ({ type: 'string' }));
    expectProblem(root({ a: { anyOf: branches } }), `${P}.properties.a.anyOf`, '1 to 16 schemas');
    expectProblem(root({ a: { anyOf: {} } }), `${P}.properties.a.anyOf`, '1 to 16 schemas');
    expectProblem(root({ a: { anyOf: [{}, 'x'] } }), `${P}.properties.a.anyOf[1]`, 'got a string');
    expectProblem(root({ a: { anyOf: [{}, { type: 'nope' }] } }), `${P}.properties.a.anyOf[1].type`, '"nope"');
  });

  it('nesting deeper than 8 through properties', () => {
    const path = `${P}${'.properties.child'.repeat(8)}`;
    expectProblem(nestedTo(9), path, 'maximum depth of 8');
  });

  it('nesting deeper than 8 through items and anyOf', () => {
    const leaf = { anyOf: [{ items: { anyOf: [{ items: { type: 'string' } }] } }] };
    const schema = root({ a: { type: 'array', items: { items: { items: leaf } } } });
    expectProblem(schema, `${P}.properties.a.items.items.items.anyOf[0].items.anyOf[0].items`, 'maximum depth');
  });
});

describe('checkToolParameters rejects values', () => {
  it.each([
    ['enum too long', { enum: Array.from({ length: 257 }, (_, i) => i) }, 'enum', '1 to 256 values'],
    ['enum empty', { enum: [] }, 'enum', '1 to 256 values'],
    ['enum not an array', { enum: 'a' }, 'enum', '1 to 256 values'],
    ['enum with an object', { enum: ['a', {}] }, 'enum[1]', 'strings, numbers, booleans or null'],
    ['enum with an array', { enum: [[1]] }, 'enum[0]', 'strings, numbers, booleans or null'],
    ['a string minimum', { minimum: '5' }, 'minimum', 'minimum must be a finite number, got a string'],
    ['an infinite maximum', { maximum: Number.POSITIVE_INFINITY }, 'maximum', 'finite number'],
    ['a null exclusiveMinimum', { exclusiveMinimum: null }, 'exclusiveMinimum', 'got null'],
    ['a zero multipleOf', { multipleOf: 0 }, 'multipleOf', 'greater than 0'],
    ['a negative multipleOf', { multipleOf: -2 }, 'multipleOf', 'greater than 0'],
    ['a negative minLength', { minLength: -1 }, 'minLength', 'non-negative integer'],
    ['a fractional maxItems', { maxItems: 1.5 }, 'maxItems', 'non-negative integer'],
    ['a string maxLength', { maxLength: '3' }, 'maxLength', 'non-negative integer'],
    ['a string uniqueItems', { uniqueItems: 'yes' }, 'uniqueItems', 'true or false'],
    [
      'an invalid pattern',
      { pattern: '(' },
      'pattern',
      'not a valid regular expression with the u flag: Unterminated group',
    ],
    ['a pattern only valid without the u flag', { pattern: '\\a' }, 'pattern', 'not a valid regular expression'],
    ['a non-string pattern', { pattern: 5 }, 'pattern', 'pattern must be a string'],
    ['an unknown format', { format: 'phone' }, 'format', 'format must be one of date-time'],
    ['a long description', { description: 'd'.repeat(2001) }, 'description', 'the maximum is 2000'],
    ['a non-string description', { description: 1 }, 'description', 'description must be a string'],
    ['a non-string title', { title: ['t'] }, 'title', 'title must be a string'],
    ['a non-array examples', { examples: 1 }, 'examples', 'examples must be an array'],
  ])('%s', (_name, property, keywordPath, fragment) => {
    expectProblem(root({ v: property }), `${P}.properties.v.${keywordPath}`, fragment);
  });
});

describe('checkToolParameters enforces bounds', () => {
  it('rejects more than 256 properties at one level', () => {
    expectProblem(root(manyProperties(257)), `${P}.properties.p256`, 'more than 256 properties');
  });

  it('counts properties across nested objects', () => {
    const inner = { type: 'object', properties: manyProperties(200, 'i'), additionalProperties: false };
    const schema = root({ ...manyProperties(54), inner, extra: { type: 'string' }, over: {} });
    // 54 + inner = 55, then 200 inside inner, then extra is the 256th and "over" the 257th.
    expectProblem(schema, `${P}.properties.over`, 'more than 256 properties');
  });

  it('rejects a schema over 32768 bytes, before walking it', () => {
    const schema = root({ a: { default: 'x'.repeat(32768) } }, { $ref: '#' });
    expectProblem(schema, P, 'the maximum is 32768');
  });

  it('measures size in UTF-8 bytes, not characters', () => {
    const text = 'é'.repeat(16_500); // 16,500 characters but 33,000 bytes
    expect(JSON.stringify(text).length).toBeLessThan(32768);
    expectProblem(root({ a: { default: text } }), P, 'bytes');
  });

  it('accepts a schema just under the size limit', () => {
    const base = JSON.stringify(root({ a: { default: '' } })).length;
    const schema = root({ a: { default: 'x'.repeat(32768 - base) } });
    expect(JSON.stringify(schema).length).toBe(32768);
    expect(checkToolParameters(schema, true, P)).toBeNull();
  });
});

describe('checkToolParameters never throws', () => {
  it.each([
    [
      'a cyclic object',
      (): unknown => {
        const schema: Record<string, unknown> = { type: 'object', additionalProperties: false };
        schema.properties = { self: schema };
        return schema;
      },
    ],
    ['a BigInt', (): unknown => root({ a: { default: 1n } })],
    [
      'a throwing proxy',
      (): unknown =>
        new Proxy(
          {},
          {
            ownKeys() {
              throw new Error('boom');
            },
          },
        ),
    ],
    ['a symbol', (): unknown => Symbol('s')],
    ['a function', (): unknown => () => 1],
    [
      'a class instance',
      (): unknown =>
        new (class Schema {
          type = 'object';
          additionalProperties = false;
        })(),
    ],
  ])('on %s', (_name, make) => {
    const problem = checkToolParameters(make(), true, P);
    expect(problem).not.toBeNull();
    expect(problem?.path).toBe(P);
  });

  it('on a getter that throws after serialization succeeded', () => {
    let reads = 0;
    const schema = {
      additionalProperties: false,
      get type(): string {
        reads += 1;
        if (reads > 1) throw new Error('boom');
        return 'object';
      },
    };
    expectProblem(schema, P, 'not plain JSON data');
  });

  it('on input nested too deeply to serialize, inside keywords that are not walked', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 20_000; i++) deep = [deep];
    expectProblem(root({ a: { default: deep } }), P, 'cannot be serialized');
  });

  it('but accepts moderately nested values inside default', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 100; i++) deep = { v: [deep] };
    expect(checkToolParameters(root({ a: { default: deep } }), true, P)).toBeNull();
  });
});
