import { Type } from 'typebox';

/** Patterns whose failures validation.ts words in plain English. */
export const NON_BLANK = '\\S';
export const TRIMMED = '^\\S(?:[\\s\\S]*\\S)?$';
export const VISIBLE_ASCII = '^[\\x21-\\x7E]+$';

/** A string enum that keeps its literal union type (and stays a plain `enum` in the OpenAPI document). */
export const StringEnum = <T extends string>(values: readonly T[], description?: string) =>
  Type.Unsafe<T>(
    description === undefined
      ? { type: 'string', enum: [...values] }
      : { type: 'string', enum: [...values], description },
  );

export const Uuid = Type.String({ format: 'uuid', description: 'A UUID' });

export const ErrorResponse = Type.Object(
  {
    error: Type.Object({
      code: Type.String({ description: 'Stable error code; see docs/errors.md' }),
      message: Type.String(),
      type: Type.String(),
      param: Type.Union([Type.String(), Type.Null()], { description: 'The offending field, when there is one' }),
      details: Type.Optional(
        Type.Record(Type.String(), Type.Unknown(), {
          description: 'Facts some errors carry, e.g. currentVersion of a version_conflict',
        }),
      ),
    }),
  },
  { $id: 'Error', description: 'Error' },
);

export const IdParams = Type.Object({ id: Uuid });

export const IdempotencyHeaders = Type.Object({
  'idempotency-key': Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 255,
      pattern: VISIBLE_ASCII,
      description: 'Makes the request safe to retry: the same key and body return the original response.',
    }),
  ),
});

export const OffsetPagination = {
  limit: Type.Integer({ minimum: 1, maximum: 100, default: 50 }),
  offset: Type.Integer({ minimum: 0, default: 0 }),
};

const errorRef = Type.Unsafe<Record<string, unknown>>({ $ref: 'Error#' });

/** Standard error responses for a route, keyed by status. */
export function errorResponses(...statuses: number[]): Record<number, typeof errorRef> {
  const out: Record<number, typeof errorRef> = {};
  for (const status of statuses) out[status] = errorRef;
  return out;
}

export const NoContent = Type.Null({ description: 'No content' });

/** An OpenAI-style cursor list (`after` = the previous page's `last_id`). */
export const CursorList = <T extends Parameters<typeof Type.Array>[0]>(item: T, description: string) =>
  Type.Object(
    {
      object: Type.Literal('list'),
      data: Type.Array(item),
      first_id: Type.Union([Type.String(), Type.Null()]),
      last_id: Type.Union([Type.String(), Type.Null()], { description: 'Pass as `after` for the next page' }),
      has_more: Type.Boolean(),
    },
    { description },
  );
