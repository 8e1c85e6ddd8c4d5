/**
 * Building blocks of hand-written type guards for JSON values. They live in lib/ so that types anywhere (models,
 * domain, tools) can keep their guard beside them without importing storage.
 */

/** A predicate that proves an unknown value has type T. */
export type Guard<T> = (value: unknown) => value is T;

/** A JSON object (not null, not an array). */
export function isJsonObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function isArrayOf<T>(value: unknown, check: Guard<T>): value is T[] {
  return Array.isArray(value) && value.every(check);
}

/** One of a closed set of strings (an `as const` list). */
export function isOneOf<T extends string>(values: readonly T[], value: unknown): value is T {
  const strings: readonly string[] = values;
  return typeof value === 'string' && strings.includes(value);
}

export const isString = (value: unknown): value is string => typeof value === 'string';
export const isNumber = (value: unknown): value is number => typeof value === 'number';
export const isBoolean = (value: unknown): value is boolean => typeof value === 'boolean';
export const isNullableString = (value: unknown): value is string | null => value === null || isString(value);
export const isNullableNumber = (value: unknown): value is number | null => value === null || isNumber(value);

/** An optional field: absent (JSON has no undefined), or passing `check`. */
export const isAbsentOr = (value: unknown, check: (value: unknown) => boolean): boolean =>
  value === undefined || check(value);
