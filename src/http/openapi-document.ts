/**
 * Last touches to the generated OpenAPI document where @fastify/swagger cannot say what the server does: it
 * marks every request body required, but a JSON body whose fields are all optional may be left out (an empty
 * body is no body; see json-body.ts), and generated clients should know they can call such routes without one.
 */

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** True when `{}` satisfies the schema: an object schema with no required properties and no minimum count. */
function acceptsEmptyObject(schema: unknown): boolean {
  if (!isRecord(schema) || schema.type !== 'object') return false;
  const required = Array.isArray(schema.required) ? schema.required : [];
  const minimum = typeof schema.minProperties === 'number' ? schema.minProperties : 0;
  return required.length === 0 && minimum === 0;
}

/** Sets `requestBody.required: false` on operations whose JSON body may be omitted. Changes the document in place. */
export function markOptionalBodies<T extends object>(document: T): T {
  const paths: unknown = Reflect.get(document, 'paths');
  if (!isRecord(paths)) return document;
  for (const item of Object.values(paths)) {
    if (!isRecord(item)) continue;
    for (const operation of Object.values(item)) {
      if (!isRecord(operation) || !isRecord(operation.requestBody)) continue;
      const content = operation.requestBody.content;
      const json = isRecord(content) ? content['application/json'] : undefined;
      if (isRecord(json) && acceptsEmptyObject(json.schema)) operation.requestBody.required = false;
    }
  }
  return document;
}
