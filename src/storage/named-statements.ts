/**
 * Server-side prepared statements for the hot queries on Postgres.
 *
 * node-postgres sends a statement without a name as an unnamed one: the server parses and plans it again on every
 * execution, and for the turn's statements that is most of the work (the claim plans in over a millisecond and runs
 * in a fifth of one). A query of prepared.ts is compiled once, so its text is known in advance: it gets a name here,
 * and the connections' client (postgres-begin.ts) sends it under that name, parsed once per connection and, after a
 * few executions, run on a plan the server keeps.
 *
 * A kept statement fails when the shape of its result changes under it ("cached plan must not change result type",
 * SQLSTATE 0A000): another process's migration adds a column to a table it reads with `*`. Texts that select or
 * return `*` are therefore never named (their result follows the table); a named one that fails so anyway (a
 * column's type changed) makes its connection send unnamed statements from then on.
 *
 * A kept plan is planned without the parameters' values. The constants of a prepared query (a status it filters
 * on, a limit) are part of its shape, not values, so they are written into its text as literals
 * (inlineConstants): the server plans with them as it did when every execution was planned afresh. Left as
 * parameters, a generic plan of a filter such as `status in ($2, $3)` would be made for any status.
 */

import { replacePlaceholders, spaced, sqlLiteral } from './sql-placeholders.ts';

/** The names of the texts registered so far. */
const names = new Map<string, string>();

/** Whether the text's result columns follow a table's columns (`select *`, `"t".*`, `returning *`). */
function selectsAll(text: string): boolean {
  return /(?:select|returning|,)\s+\*|\.\*/.test(text);
}

/** Registers a compiled query's text, unless its result follows a table's columns. */
export function nameStatement(text: string): void {
  if (names.has(text) || selectsAll(text)) return;
  names.set(text, `agentry_${names.size + 1}`);
}

/** The name a text is prepared under, if it is registered. */
export function statementName(text: string): string | undefined {
  return names.get(text);
}

/** Whether an error says a kept statement's result no longer matches its plan. */
export function isStalePlan(error: unknown): boolean {
  return (
    typeof error === 'object' &&
    error !== null &&
    (error as { code?: unknown }).code === '0A000' &&
    /cached plan must not change result type/.test(String((error as { message?: unknown }).message))
  );
}

/** Whether an error says a named statement does not exist on the connection (SQLSTATE 26000). */
export function isMissingStatement(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === '26000';
}

/** A constant's string as a literal: refused with a backslash, which reads differently under the server's settings. */
function quoteConstant(text: string): string | null {
  return text.includes('\\') ? null : `'${text.replaceAll("'", "''")}'`;
}

/**
 * A compiled Postgres query with the parameters that are constants (`constant(index)`) written into its text as
 * literals and the others renumbered; the kept parameters' original indexes, in their new order. Text with quoting
 * this does not follow (dollar quotes, comments, escape strings) is left as it is.
 */
export function inlineConstants(
  text: string,
  parameters: readonly unknown[],
  constant: (index: number) => boolean,
): { text: string; kept: number[] } {
  const kept: number[] = [];
  const inlined = replacePlaceholders(
    text,
    (index) => {
      // Undefined (a placeholder past the parameters) stays a parameter: what it means is the driver's to say.
      const value = parameters[index];
      const literal = constant(index) && value !== undefined ? sqlLiteral(value, quoteConstant) : null;
      if (literal !== null) return spaced(literal);
      kept.push(index);
      return `$${kept.length}`;
    },
    { refuseBackslashes: false },
  );
  return inlined === null ? { text, kept: parameters.map((_, index) => index) } : { text: inlined, kept };
}
