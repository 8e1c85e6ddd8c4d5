import { describe, expect, it } from 'vitest';
import {
  compileOutputSchema,
  MAX_SCHEMA_CHARS,
  MAX_SCHEMA_DEPTH,
  OutputSchemaError,
  outputViolation,
} from './output-schema.ts';

/** A schema whose JSON nests `levels` objects deep: properties.a.properties.a… */
function nested(levels: number): Record<string, unknown> {
  let schema: Record<string, unknown> = { type: 'string' };
  // Each wrapper adds two levels of JSON (the schema object and its `properties`).
  for (let level = 2; level < levels; level += 2) schema = { type: 'object', properties: { a: schema } };
  return schema;
}

describe('output schemas', () => {
  it('compiles a schema nested up to the limit and refuses one a level deeper, however deep', () => {
    expect(() => compileOutputSchema(nested(MAX_SCHEMA_DEPTH))).not.toThrow();
    expect(() => compileOutputSchema(nested(MAX_SCHEMA_DEPTH + 2))).toThrow(
      `nests deeper than ${MAX_SCHEMA_DEPTH} levels`,
    );
    expect(() => compileOutputSchema(nested(3_000))).toThrow(OutputSchemaError);
  });

  it('refuses a schema over the size bound, a pattern that may backtrack, and one Ajv cannot compile', () => {
    const big = { type: 'object', description: 'x'.repeat(MAX_SCHEMA_CHARS) };
    expect(() => compileOutputSchema(big)).toThrow(/characters of JSON/);
    expect(() => compileOutputSchema({ type: 'string', pattern: '(a+)+$' })).toThrow(/exponential time/);
    expect(() => compileOutputSchema({ type: 'object', properties: { a: { $ref: '#/$defs/none' } } })).toThrow(
      /not a valid JSON Schema/,
    );
  });

  it('compiles a schema once, and names the first violation of a reply', () => {
    const schema = { type: 'object', properties: { age: { type: 'integer', minimum: 18 } }, required: ['age'] };
    expect(compileOutputSchema({ ...schema })).toBe(compileOutputSchema({ ...schema }));
    expect(outputViolation('{"age": 20}', schema)).toBeNull();
    expect(outputViolation('{"age": 3}', schema)).toBe('the reply at /age must be >= 18');
    expect(outputViolation('not json', schema)).toBe('the reply is not valid JSON');
    expect(outputViolation('[1]', null)).toBe('the reply is not a JSON object');
  });
});
