/**
 * JSON held in text columns, read back through a type guard. A column written by an older version (or by hand)
 * may not match today's type; failing here, naming the column, beats a TypeError three calls later. The guards
 * live beside the types they check (built from lib/guards.ts) and stay cheap: some run for every item of a
 * conversation log.
 */

import type { Guard } from '../lib/guards.ts';

/**
 * A stored JSON value that is unreadable or of the wrong shape. A plain Error, not an AppError: the HTTP layer
 * logs it and answers a generic 500, so the column name never reaches a client.
 */
export class JsonColumnError extends Error {
  /** `table.column`, e.g. `messages.options`. */
  readonly column: string;

  constructor(column: string, problem: string, options?: ErrorOptions) {
    super(`${column} holds ${problem}`, options);
    this.name = new.target.name;
    this.column = column;
  }
}

/** Parses stored JSON without judging its shape, for readers that normalize what they find. */
export function readJsonColumn(text: string, column: string): unknown {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new JsonColumnError(column, 'invalid JSON', { cause: error });
  }
}

/**
 * Parses stored JSON and checks it with `check`; throws JsonColumnError naming `column` (`table.column`) when the
 * text is not JSON or the value does not pass.
 */
export function parseJsonColumn<T>(text: string, check: Guard<T>, column: string): T {
  const value = readJsonColumn(text, column);
  if (!check(value)) throw new JsonColumnError(column, 'a value of the wrong shape');
  return value;
}
