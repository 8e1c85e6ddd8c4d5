/**
 * Helpers for the schemas written as plain JSON Schema (the OpenAI-shaped bodies, whose unions and nullables read
 * more plainly so than as TypeBox builders): one place for the wrapper, a nullable type and an object.
 */
import { Type } from 'typebox';

export type Schema = Record<string, unknown>;

/** A plain JSON Schema as a TypeBox schema of type `T`. */
export const raw = <T = unknown>(schema: Schema) => Type.Unsafe<T>(schema);

/** `type` (one or several) or null. */
export const nullable = (type: string | string[], schema: Schema = {}) =>
  raw({ type: [...(Array.isArray(type) ? type : [type]), 'null'], ...schema });

/** An object schema with these properties, these required, and other properties allowed or not. */
export const object = (
  properties: Schema,
  required: string[],
  additionalProperties: boolean,
  description?: string,
) => ({
  type: 'object',
  properties,
  required,
  additionalProperties,
  ...(description === undefined ? {} : { description }),
});
