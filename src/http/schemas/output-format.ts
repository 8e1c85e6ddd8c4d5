/**
 * Structured output in a request body: Responses `text.format`, an agent's and a Sessions message's `outputFormat`.
 * One shape everywhere; the schema's compiling is checked by domain/output-format.ts (a 400 naming `….schema`).
 */
import { Type } from 'typebox';

const NAME_PATTERN = '^[A-Za-z0-9_-]+$';

const properties = {
  type: { type: 'string', enum: ['text', 'json_object', 'json_schema'] },
  name: { type: 'string', minLength: 1, maxLength: 64, pattern: NAME_PATTERN },
  schema: { type: 'object', description: 'A JSON Schema (2020-12) with "type": "object"; at most 100,000 characters' },
  strict: { type: ['boolean', 'null'], description: 'Default false' },
  description: { type: 'string', maxLength: 10_000 },
};

/**
 * `{type: "text"}`, `{type: "json_object"}` or `{type: "json_schema", name, schema, strict?, description?}`.
 * `open` tolerates fields OpenAI may add (Responses compatibility mode).
 */
export const outputFormatSchema = (open: boolean, description: string) =>
  Type.Unsafe<Record<string, unknown>>({
    type: 'object',
    properties,
    required: ['type'],
    additionalProperties: open,
    if: { properties: { type: { const: 'json_schema' } } },
    // biome-ignore lint/suspicious/noThenProperty: a JSON Schema keyword
    then: { required: ['type', 'name', 'schema'] },
    description,
  });

/** An output format as an agent or a Response shows it (free text is null in an agent). */
export const OutputFormatView = Type.Unsafe<Record<string, unknown>>({
  type: 'object',
  properties,
  required: ['type'],
  additionalProperties: false,
});
