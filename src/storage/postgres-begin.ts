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
 * In a multi-statement query a prepared query's text goes as `execute <name>(<literals>)`, preceded the first time
 * on its connection by `prepare <name> as <text>`: the server parses and plans it once per connection, as it does a
 * named statement sent alone, instead of for every turn (planning the session's release alone took 0.2 ms). Both
 * ways share one namespace of statements per connection, and node-postgres's record of the parsed ones: a statement
 * prepared either way is not prepared again. A PREPARE is not undone by a rollback, and a batch that fails may have
 * run its PREPAREs or not: its connection then sends every statement unnamed, as after a stale plan.
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
  /**
   * With `named`, in a batch too, as PREPARE and EXECUTE (default true). Off behind a pooler that keeps the
   * protocol's named statements but not SQL-level ones.
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
 * node-postgres's record of the statements a connection has parsed, and of those it has sent to be parsed (by
 * name: their texts). Internal to node-postgres, so read defensively: without it nothing is prepared in batches.
 */
function parsedStatements(
  client: pg.Client,
): { parsed: Record<string, string>; submitted: Record<string, unknown> } | null {
  const connection: unknown = Reflect.get(client, 'connection');
  if (typeof connection !== 'object' || connection === null) return null;
  const parsed: unknown = Reflect.get(connection, 'parsedStatements');
  const submitted: unknown = Reflect.get(connection, 'submittedNamedStatements');
  if (typeof parsed !== 'object' || parsed === null) return null;
  return {
    parsed: parsed as Record<string, string>,
    submitted: typeof submitted === 'object' && submitted !== null ? (submitted as Record<string, unknown>) : {},
  };
}

/**
 * node-postgres's Client with the BEGIN held back until the transaction's first statement, and deferred writes
 * (DEFERRED) until the next statement that is not one.
 */
export function beginWithFirstStatement(Client: typeof pg.Client, options: HeldBeginOptions): typeof pg.Client {
  /** What each client holds back: its transaction's BEGIN until a statement is sent, and deferred writes. */
  const held = new WeakMap<pg.Client, string[]>();
  /** Statements whose PREPARE is in what a client holds or sends now, not yet known to have run: name → text. */
  const preparing = new WeakMap<pg.Client, Map<string, string>>();
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
  /**
   * A prepared query's text as one statement of a batch, `execute <name>(<literals>)`, with its PREPARE before it
   * when the connection has not parsed it yet; null when it is not named or its values cannot be written so.
   */
  const executed = (client: pg.Client, text: string, values: unknown[]): string | null => {
    const name = options.named && options.batched !== false && !unnamed.has(client) ? statementName(text) : undefined;
    if (name === undefined) return null;
    if (!parameterCounts.has(name)) parameterCounts.set(name, parameterCount(text));
    const count = parameterCounts.get(name);
    const statements = parsedStatements(client);
    // The server refuses an EXECUTE with another number of values, as it does such a Bind.
    if (count !== values.length || statements === null) return null;
    const literals: string[] = [];
    let size = 0;
    for (const value of values) {
      const written = sqlLiteral(value === undefined ? null : value, (literal) => client.escapeLiteral(literal));
      if (written === null) return null;
      size += written.length;
      if (size > MAX_INLINED_CHARS) return null;
      literals.push(written);
    }
    const execute = literals.length === 0 ? `execute ${name}` : `execute ${name}(${literals.join(',')})`;
    const pending = preparing.get(client) ?? new Map<string, string>();
    if (statements.parsed[name] !== undefined || statements.submitted[name] !== undefined || pending.has(name)) {
      return execute;
    }
    pending.set(name, text);
    preparing.set(client, pending);
    return `prepare ${name} as ${text};${execute}`;
  };
  /** A statement as it goes in a batch: executed by name, or with its parameters written into its text. */
  const batched = (client: pg.Client, text: string, values: unknown[]): string | null =>
    executed(client, text, values) ?? inlineParameters(text, values, (value) => client.escapeLiteral(value));
  /**
   * Sends a batch. Once it has run, the statements it prepared are recorded as node-postgres records those it
   * parses; when it fails, whether they were prepared is not known, and the client sends every statement unnamed.
   */
  const sendBatch = (client: pg.Client, text: string): Promise<Results> => {
    const prepared = preparing.get(client);
    preparing.delete(client);
    return (send(client, text) as Promise<Results>).then(
      (results) => {
        const statements = parsedStatements(client);
        if (prepared !== undefined && statements !== null) {
          for (const [name, statement] of prepared) statements.parsed[name] = statement;
        }
        return results;
      },
      (error: unknown) => {
        // A statement the connection should keep is not there: a pooler in front gave the batch another
        // connection of the server. Statements are sent unnamed from then on, as after a stale plan.
        if ((prepared !== undefined && prepared.size > 0) || isStalePlan(error) || isMissingStatement(error)) {
          unnamed.add(client);
        }
        throw error;
      },
    );
  };
  /** Sends what `client` holds with the statement, or before it when it cannot go in the batch. */
  const sendWithHeld = (client: pg.Client, pending: string[], text: string, values: unknown[]) => {
    held.delete(client);
    const statement = batched(client, text, values);
    if (statement === null) return sendBatch(client, pending.join(';')).then(() => sendAlone(client, text, values));
    return sendBatch(client, `${pending.join(';')};${statement}`).then(lastResult);
  };
  /** Holds back a deferred write, or sends it now when it cannot go in a batch. */
  const defer = (client: pg.Client, pending: string[], text: string, values: unknown[]) => {
    const statement = batched(client, text, values);
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
    // A rollback drops the held writes, and the PREPAREs among them: none was sent.
    if (text === 'rollback') preparing.delete(client);
    if (sentNothing && (text === 'rollback' || pending.length === 1)) {
      return Promise.resolve(answered(text === 'commit' ? 'COMMIT' : 'ROLLBACK'));
    }
    // The transaction's other writes are undone by the rollback.
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
