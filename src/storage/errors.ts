/** Recognises constraint violations from either dialect, so callers can turn them into domain errors. */

function codeOf(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const code: unknown = Reflect.get(error, 'code');
  return typeof code === 'string' ? code : undefined;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : '';
}

export function isUniqueViolation(error: unknown): boolean {
  return codeOf(error) === '23505' || /UNIQUE constraint failed/.test(messageOf(error));
}

export function isForeignKeyViolation(error: unknown): boolean {
  return codeOf(error) === '23503' || /FOREIGN KEY constraint failed/.test(messageOf(error));
}
