/**
 * Structured output as clients ask for it (Responses `text.format`, an agent's `outputFormat`, a Sessions message's
 * `outputFormat`): `{type: "text"}`, `{type: "json_object"}` or `{type: "json_schema", name, schema, strict?,
 * description?}`, turned into the ResponseFormat a turn runs with. The route schemas check the shape; what is
 * checked here is what a schema cannot say: that the schema compiles (size- and depth-bounded, lib/output-schema.ts).
 */
import { validationError } from '../errors/app-error.ts';
import { isJsonObject } from '../lib/guards.ts';
import { compileOutputSchema, OutputSchemaError } from '../lib/output-schema.ts';
import type { ResponseFormat } from '../models/types.ts';

const NAME = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * A 400 naming `param` unless `schema` compiles as a structured-output schema (bounded in size and depth, no
 * pattern that may backtrack catastrophically, no reference it cannot resolve locally).
 */
export function checkOutputSchema(schema: Record<string, unknown>, param: string): void {
  try {
    compileOutputSchema(schema);
  } catch (error) {
    if (!(error instanceof OutputSchemaError)) throw error;
    throw validationError(param, `${param} ${error.message}`);
  }
}

/** The format `value` asks for (null: free text), or a 400 naming the field under `param`. */
export function parseResponseFormat(value: unknown, param: string): ResponseFormat | null {
  if (!isJsonObject(value)) throw validationError(param, `${param} must be an object`);
  if (value.type === 'text') return null;
  if (value.type === 'json_object') return { type: 'json_object' };
  if (value.type !== 'json_schema') {
    throw validationError(`${param}.type`, `${param}.type must be one of text, json_object, json_schema`);
  }
  const { name, schema, strict, description } = value;
  if (typeof name !== 'string' || !NAME.test(name)) {
    throw validationError(`${param}.name`, `${param}.name must be 1-64 letters, digits, _ or -`);
  }
  if (!isJsonObject(schema) || schema.type !== 'object') {
    throw validationError(`${param}.schema`, `${param}.schema must be a JSON Schema object with "type": "object"`);
  }
  checkOutputSchema(schema, `${param}.schema`);
  return {
    type: 'json_schema',
    name,
    schema,
    strict: strict === true,
    ...(typeof description === 'string' ? { description } : {}),
  };
}

/** The wire shape of a format, as a Response echoes it in `text.format` (free text: `{type: "text"}`). */
export function responseFormatEcho(format: ResponseFormat | null | undefined): Record<string, unknown> {
  if (format === null || format === undefined) return { type: 'text' };
  if (format.type === 'json_object') return { type: 'json_object' };
  const { name, schema, strict, description } = format;
  return { type: 'json_schema', ...(description === undefined ? {} : { description }), name, schema, strict };
}
