/**
 * A transaction's BEGIN sent with its first statement, in one round trip instead of two.
 *
 * node-postgres sends one statement and waits for its answer before the next (no pipelining), so every statement
 * is a round trip, and on a shared machine the system call of each write is a large part of a turn's CPU. Kysely
 * opens a transaction with a `begin` of its own; this client holds that `begin` back and sends it with the
 * transaction's first statement as one multi-statement simple query (`begin;update …`), the statement's parameters
 * written into its text as quoted literals (escaped by node-postgres's own `escapeLiteral`). A quoted literal is
 * of unknown type until its context decides it, exactly as an untyped parameter is, so the statement means the
 * same either way. Anything that cannot be written so (a value that is not a string, number, bigint, boolean or
 * null; SQL text with quoting this does not follow; a large value) is sent as before: the `begin`, then the
 * statement with its parameters. A transaction that commits or rolls back before any statement sends nothing.
 *
 * The same client holds back the writes its callers mark as deferred (DEFERRED) until the transaction's next
 * statement or its COMMIT, and sends the texts of prepared queries as named statements (named-statements.ts),
 * unless told not to (a connection pooler that does not keep them, AGENTRY_DATABASE_PREPARED=0).
 */
import type pg from 'pg';
import { isStalePlan, statementName } from './named-statements.ts';
import { replacePlaceholders, spaced, sqlLiteral } from './sql-placeholders.ts';

/** Parameter values past this many characters in all are sent as parameters (after a `begin` of their own). */
const MAX_INLINED_CHARS = 16_384;

/** The result of a statement answered without the database: a held-back BEGIN, a COMMIT of an empty transaction. */
function answered(command: string): pg.QueryResult {
  return { command, rowCount: null, oid: 0, rows: [], fields: [] };
}

/**
 * `text` with each `$n` replaced by the literal of `values[n - 1]`, or null when that cannot be done safely: a
 * value of another type, a placeholder out of range, or text with quoting other than plain '…' strings and "…"
 * identifiers (dollar quotes, escape strings, comments, a backslash in a string).
 */
export function inlineParameters(
  text: string,
  values: readonly unknown[],
  quote: (text: string) => string,
): string | null {
  const literals: string[] = [];
  let size = 0;
  for (const value of values) {
    // node-postgres sends an undefined parameter as null.
    const written = sqlLiteral(value === undefined ? null : value, quote);
    if (written === null) return null;
    size += written.length;
    if (size > MAX_INLINED_CHARS) return null;
    literals.push(written);
  }
  // A backslash in the text's own strings: the statement is sent with its parameters, for the server to parse.
  return replacePlaceholders(
    text,
    (index) => {
      const written = literals[index];
      return written === undefined ? null : spaced(written);
    },
    { refuseBackslashes: true },
  );
}

type Query = (this: pg.Client, ...args: unknown[]) => unknown;

export interface HeldBeginOptions {
  /** Send the texts of prepared queries as named statements. */
  named: boolean;
}

/**
 * The start of the text of a statement whose answer its caller does not need (a write without RETURNING whose
 * count is not checked): inside a transaction it is held back and sent with the transaction's next statement, or
 * its COMMIT, in one round trip. Its failure then fails that statement, and so the transaction, which is what it
 * would have done on its own. Outside a transaction it is sent at once.
 */
export const DEFERRED = '/*deferred*/ ';

type Results = pg.QueryResult | pg.QueryResult[];

/** The last result of a multi-statement query: the answer of the statement the caller sent. */
function lastResult(results: Results): pg.QueryResult {
  if (!Array.isArray(results)) return results;
  const last = results.at(-1);
  if (last === undefined) throw new Error('no result for the statement sent with held ones');
  return last;
}

/**
 * node-postgres's Client with the BEGIN held back until the transaction's first statement, and deferred writes
 * (DEFERRED) until the next statement that is not one.
 */
export function beginWithFirstStatement(Client: typeof pg.Client, options: HeldBeginOptions): typeof pg.Client {
  /** What each client holds back: its transaction's BEGIN until a statement is sent, and deferred writes. */
  const held = new WeakMap<pg.Client, string[]>();
  /** Clients inside a transaction (from its BEGIN to its COMMIT or ROLLBACK). */
  const inTransaction = new WeakSet<pg.Client>();
  /** Clients whose kept statements went stale: they send every statement unnamed. */
  const unnamed = new WeakSet<pg.Client>();
  // Called through the prototype each time: whatever wraps the driver's query (a test counting statements) sees
  // one statement per round trip.
  const send = (client: pg.Client, ...args: unknown[]) => (Client.prototype.query as Query).apply(client, args);
  class HeldBeginClient extends Client {}
  const sendNamed = (client: pg.Client, name: string, text: string, values: unknown) =>
    (send(client, { name, text, values }) as Promise<unknown>).catch((error: unknown) => {
      if (isStalePlan(error)) unnamed.add(client);
      throw error;
    });
  /** Sends a statement as it is: named when it is a prepared query's. */
  const sendAlone = (client: pg.Client, text: string, values: unknown[]) => {
    const name = options.named && !unnamed.has(client) ? statementName(text) : undefined;
    return name === undefined ? send(client, text, values) : sendNamed(client, name, text, values);
  };
  /** Sends what `client` holds with the statement (inlined), or before it when it cannot be inlined. */
  const sendWithHeld = (client: pg.Client, pending: string[], text: string, values: unknown[]) => {
    held.delete(client);
    const inlined = inlineParameters(text, values, (value) => client.escapeLiteral(value));
    if (inlined === null) {
      return (send(client, pending.join(';')) as Promise<unknown>).then(() => sendAlone(client, text, values));
    }
    return (send(client, `${pending.join(';')};${inlined}`) as Promise<Results>).then(lastResult);
  };
  /** Holds back a deferred write (its parameters inlined), or sends it now when it cannot be inlined. */
  const defer = (client: pg.Client, pending: string[], text: string, values: unknown[]) => {
    const inlined = inlineParameters(text, values, (value) => client.escapeLiteral(value));
    if (inlined === null)
      return pending.length === 0 ? sendAlone(client, text, values) : sendWithHeld(client, pending, text, values);
    held.set(client, [...pending, inlined]);
    return Promise.resolve(answered('DEFERRED'));
  };
  /** COMMIT or ROLLBACK: ends the transaction, with what is held back (nothing at all for an empty one). */
  const end = (client: pg.Client, pending: string[], text: 'commit' | 'rollback') => {
    inTransaction.delete(client);
    held.delete(client);
    const sentNothing = pending[0] !== undefined && /^(begin|start transaction)/.test(pending[0]);
    if (sentNothing && (text === 'rollback' || pending.length === 1)) {
      return Promise.resolve(answered(text === 'commit' ? 'COMMIT' : 'ROLLBACK'));
    }
    // A rollback drops the held writes: they were never sent, and the transaction's others are undone.
    if (text === 'rollback' || pending.length === 0) return send(client, text);
    return (send(client, `${pending.join(';')};commit`) as Promise<Results>).then(lastResult);
  };
  const query: Query = function (this: pg.Client, ...args: unknown[]) {
    const [rawText, rawValues] = args;
    if (typeof rawText !== 'string' || args.length > 2 || (rawValues !== undefined && !Array.isArray(rawValues))) {
      return send(this, ...args);
    }
    const values: unknown[] = Array.isArray(rawValues) ? rawValues : [];
    const pending = held.get(this) ?? [];
    if (rawText === 'begin' || rawText.startsWith('start transaction')) {
      inTransaction.add(this);
      held.set(this, [rawText]);
      return Promise.resolve(answered('BEGIN'));
    }
    if (rawText === 'commit' || rawText === 'rollback') return end(this, pending, rawText);
    const deferred = rawText.startsWith(DEFERRED);
    const text = deferred ? rawText.slice(DEFERRED.length) : rawText;
    if (deferred && inTransaction.has(this)) return defer(this, pending, text, values);
    if (pending.length === 0) return sendAlone(this, text, values);
    return sendWithHeld(this, pending, text, values);
  };
  Object.defineProperty(HeldBeginClient.prototype, 'query', { configurable: true, writable: true, value: query });
  return HeldBeginClient;
}
