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
 *
 * In a multi-statement query a prepared query goes as `execute <name>(<literals>)` once its connection has parsed
 * it: the server plans it once per connection instead of on every execution (planning the session's release alone
 * took 0.2 ms). The first time on a connection it goes alone, as a named statement of the protocol, which
 * node-postgres parses and records; `execute` runs what that parsed, since both kinds share one namespace per
 * connection. Each connection first asks the server whether it keeps its statements under their names (a pooler
 * such as PgBouncer renames them); a connection that finds a kept statement stale or missing sends every statement
 * unnamed from then on.
 */
import type pg from 'pg';
import { isMissingStatement, isStalePlan, statementName } from './named-statements.ts';
import { replacePlaceholders, spaced, sqlLiteral } from './sql-placeholders.ts';

/** Parameter values past this many characters in all are sent as parameters (after a `begin` of their own). */
const MAX_INLINED_CHARS = 16_384;

/** The result of a statement answered without the database: a held-back BEGIN, a COMMIT of an empty transaction. */
function answered(command: string): pg.QueryResult {
  return { command, rowCount: null, oid: 0, rows: [], fields: [] };
}

/**
 * Each value as an SQL literal, or null when one cannot be written (a value of another type) or they are too large
 * in all: such values are sent as parameters.
 */
function literalsOf(values: readonly unknown[], quote: (text: string) => string): string[] | null {
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
  return literals;
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
  const literals = literalsOf(values, quote);
  if (literals === null) return null;
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
  /**
   * With `named`, run them by name in a batch too, with EXECUTE (default true). Off behind a pooler that keeps
   * named statements under names of its own.
   */
  batched?: boolean;
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

/** The number of parameters of a text (its highest `$n`), or null when its placeholders cannot be found safely. */
function parameterCount(text: string): number | null {
  let count = 0;
  const scanned = replacePlaceholders(
    text,
    (index) => {
      count = Math.max(count, index + 1);
      return '';
    },
    { refuseBackslashes: false },
  );
  return scanned === null ? null : count;
}

/** Parameter counts of the named texts, by name (a text is scanned once). */
const parameterCounts = new Map<string, number | null>();

/**
 * Whether node-postgres has parsed (or sent to be parsed, ahead of anything sent now) the named statement on the
 * client's connection. Its record is internal to node-postgres, so it is read defensively: without it, nothing is
 * taken as parsed.
 */
function parsedOn(client: pg.Client, name: string): boolean {
  const connection: unknown = Reflect.get(client, 'connection');
  if (typeof connection !== 'object' || connection === null) return false;
  return ['parsedStatements', 'submittedNamedStatements'].some((record) => {
    const names: unknown = Reflect.get(connection, record);
    return typeof names === 'object' && names !== null && Reflect.get(names, name) !== undefined;
  });
}

/**
 * `execute <name>(<literals>)` for a named text and its values, or null when the values cannot be written so (a
 * value of another type, too large in all, or another number of them than the text's parameters: the server
 * refuses that, as it does such a Bind).
 */
function executeByName(client: pg.Client, name: string, text: string, values: readonly unknown[]): string | null {
  if (!parameterCounts.has(name)) parameterCounts.set(name, parameterCount(text));
  if (parameterCounts.get(name) !== values.length) return null;
  const literals = literalsOf(values, (literal) => client.escapeLiteral(literal));
  if (literals === null) return null;
  return literals.length === 0 ? `execute ${name}` : `execute ${name}(${literals.join(',')})`;
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
  /** Clients whose kept statements went stale or missing: they send every statement unnamed. */
  const unnamed = new WeakSet<pg.Client>();
  /**
   * Whether the server connection behind a client has the client's named statements under their names: false
   * behind a pooler that renames them (an EXECUTE would not find them), undefined until a look answers.
   */
  const sameNames = new WeakMap<pg.Client, boolean>();
  const looking = new WeakSet<pg.Client>();
  // Called through the prototype each time: whatever wraps the driver's query (a test counting statements) sees
  // one statement per round trip.
  const send = (client: pg.Client, ...args: unknown[]) => (Client.prototype.query as Query).apply(client, args);
  class HeldBeginClient extends Client {}
  /** A kept statement that went stale (another process's migration) or missing (a pooler): none is used again. */
  const noteFailure = (client: pg.Client, error: unknown) => {
    if (isStalePlan(error) || isMissingStatement(error)) unnamed.add(client);
  };
  const sendNamed = (client: pg.Client, name: string, text: string, values: unknown) => {
    // The connection's first parse: the look that lets its batches run statements by name follows it at once.
    const first = options.batched !== false && !sameNames.has(client) && !parsedOn(client, name);
    return (send(client, { name, text, values }) as Promise<unknown>).then(
      (result) => {
        if (first) lookForName(client, name);
        return result;
      },
      (error: unknown) => {
        noteFailure(client, error);
        throw error;
      },
    );
  };
  /** Sends a statement as it is: named when it is a prepared query's. */
  const sendAlone = (client: pg.Client, text: string, values: unknown[]) => {
    const name = options.named && !unnamed.has(client) ? statementName(text) : undefined;
    return name === undefined ? send(client, text, values) : sendNamed(client, name, text, values);
  };
  /** Sends a batch of statements in one simple query. */
  const sendBatch = (client: pg.Client, text: string): Promise<Results> =>
    (send(client, text) as Promise<Results>).catch((error: unknown) => {
      noteFailure(client, error);
      throw error;
    });
  /**
   * A statement's text as it goes in a batch, or null when it goes alone after what is held. A prepared query goes
   * as `execute <name>(<literals>)` once its connection has parsed it (so the server plans it once per connection,
   * not per execution) and the server was seen to keep it under that name; the first time it goes alone, named, to
   * be parsed. Any other statement goes with its parameters written into its text, or alone when they cannot be.
   */
  const inBatch = (client: pg.Client, text: string, values: unknown[]): string | null => {
    const name = options.named && options.batched !== false && !unnamed.has(client) ? statementName(text) : undefined;
    if (name !== undefined && sameNames.get(client) !== false) {
      if (!parsedOn(client, name)) return null;
      if (sameNames.get(client) === true) {
        const executed = executeByName(client, name, text, values);
        if (executed !== null) return executed;
      } else lookForName(client, name);
    }
    return inlineParameters(text, values, (value) => client.escapeLiteral(value));
  };
  /**
   * Asks the server whether a statement the client parsed is there under its name (once per client; batches write
   * values into their texts until it answers). A pooler that keeps named statements under names of its own
   * (PgBouncer from 1.21) answers no, and the client's batches go on that way.
   */
  const lookForName = (client: pg.Client, name: string) => {
    if (looking.has(client)) return;
    looking.add(client);
    (send(client, 'select 1 from pg_prepared_statements where name = $1', [name]) as Promise<pg.QueryResult>).then(
      (result) => sameNames.set(client, result.rows.length > 0),
      // A transaction that failed meanwhile refuses the look: the next batch asks again.
      () => looking.delete(client),
    );
  };
  /** Sends what `client` holds with the statement, or before it when it goes alone. */
  const sendWithHeld = (client: pg.Client, pending: string[], text: string, values: unknown[]) => {
    held.delete(client);
    const statement = inBatch(client, text, values);
    if (statement === null) return sendBatch(client, pending.join(';')).then(() => sendAlone(client, text, values));
    return sendBatch(client, `${pending.join(';')};${statement}`).then(lastResult);
  };
  /** Holds back a deferred write, or sends it now when it goes alone. */
  const defer = (client: pg.Client, pending: string[], text: string, values: unknown[]) => {
    const statement = inBatch(client, text, values);
    if (statement === null)
      return pending.length === 0 ? sendAlone(client, text, values) : sendWithHeld(client, pending, text, values);
    held.set(client, [...pending, statement]);
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
    return sendBatch(client, `${pending.join(';')};commit`).then(lastResult);
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
