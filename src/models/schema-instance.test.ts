import { describe, expect, it } from 'vitest';
import { compileOutputSchema, OutputSchemaError, outputViolation } from '../lib/output-schema.ts';
import { schemaInstance } from './schema-instance.ts';

const object = (properties: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
  type: 'object',
  properties,
  required: Object.keys(properties),
  ...extra,
});

describe('schemaInstance', () => {
  it.each([
    [
      'types',
      object({ s: { type: 'string' }, n: { type: 'number' }, i: { type: 'integer' }, b: { type: 'boolean' } }),
      { s: '', n: 0, i: 0, b: false },
    ],
    [
      'nullable types and unions',
      object({ a: { type: ['null', 'string'] }, u: { anyOf: [{ type: 'integer' }, { type: 'null' }] } }),
      { a: '', u: 0 },
    ],
    ['const and enum', object({ c: { const: 'fixed' }, e: { enum: ['x', 'y'] } }), { c: 'fixed', e: 'x' }],
    [
      'bounds',
      object({
        m: { type: 'integer', minimum: 3 },
        x: { type: 'number', exclusiveMinimum: 0 },
        neg: { type: 'integer', maximum: -2 },
        safe: { type: 'integer', minimum: -9007199254740991 },
      }),
      { m: 3, x: 0.5, neg: -2, safe: 0 },
    ],
    [
      'arrays',
      object({
        a: { type: 'array', items: { type: 'string', minLength: 1 }, minItems: 2 },
        t: { type: 'array', prefixItems: [{ const: 1 }], minItems: 1 },
      }),
      { a: ['a', 'a'], t: [1] },
    ],
    ['optional properties left out', { type: 'object', properties: { a: { type: 'string' } }, required: [] }, {}],
    [
      'formats',
      object({ d: { type: 'string', format: 'date-time' }, e: { type: 'string', format: 'email' } }),
      { d: '1970-01-01T00:00:00Z', e: 'user@example.com' },
    ],
    [
      'local references',
      object({ p: { $ref: '#/$defs/point' } }, { $defs: { point: object({ x: { type: 'number' } }) } }),
      { p: { x: 0 } },
    ],
    ['allOf', { allOf: [object({ a: { type: 'string' } }), object({ b: { type: 'boolean' } })] }, { a: '', b: false }],
  ])('%s', (_name, schema, expected) => {
    const instance = schemaInstance(schema);
    expect(instance).toEqual(expected);
    expect(outputViolation(JSON.stringify(instance), { type: 'object', ...schema })).toBeNull();
  });

  it('stops at self references', () => {
    const tree = { $ref: '#/$defs/node', $defs: { node: object({ child: { $ref: '#/$defs/node' } }) } };
    expect(JSON.stringify(schemaInstance(tree))).toContain('"child":null');
  });
});

describe('compileOutputSchema', () => {
  it('refuses a pattern that may backtrack catastrophically, and takes a plain one', () => {
    const schema = (pattern: string) => object({ s: { type: 'string', pattern } });
    expect(() => compileOutputSchema(schema('^(a+)+$'))).toThrow(
      'has the pattern "^(a+)+$", which may take exponential time to match',
    );
    expect(() => compileOutputSchema(object({}, { patternProperties: { '(x*)*': {} } }))).toThrow(OutputSchemaError);
    expect(outputViolation('{"s":"ab-12"}', schema('^[a-z]+-[0-9]{2}$'))).toBeNull();
    expect(outputViolation('{"s":"ab"}', schema('^[a-z]+-[0-9]{2}$'))).toBe(
      'the reply at /s must match pattern "^[a-z]+-[0-9]{2}$"',
    );
  });
});

describe('outputViolation', () => {
  const schema = object({ age: { type: 'integer' } }, { additionalProperties: false });
  it('names the parse error, the first violation with its path, or nothing', () => {
    expect(outputViolation('{"age":', schema)).toBe('the reply is not valid JSON');
    expect(outputViolation('{"age":"x"}', schema)).toBe('the reply at /age must be integer');
    expect(outputViolation('{}', schema)).toBe("the reply must have required property 'age'");
    expect(outputViolation('{"age":3}', schema)).toBeNull();
    expect(outputViolation('[]', null)).toBe('the reply is not a JSON object');
    expect(outputViolation('{"any":true}', null)).toBeNull();
  });
});
