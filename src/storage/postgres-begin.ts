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
 * The same client sends the texts of prepared queries as named statements (named-statements.ts), unless told not
 * to (a connection pooler that does not keep them, AGENTRY_DATABASE_PREPARED=0).
 */
import type pg from 'pg';
import { isStalePlan, statementName } from './named-statements.ts';

/** Parameter values past this many characters in all are sent as parameters (after a `begin` of their own). */
const MAX_INLINED_CHARS = 16_384;

/** The result of a statement answered without the database: a held-back BEGIN, a COMMIT of an empty transaction. */
function answered(command: string): pg.QueryResult {
  return { command, rowCount: null, oid: 0, rows: [], fields: [] };
}

function literal(value: unknown, quote: (text: string) => string): string | null {
  if (value === null || value === undefined) return 'null';
  if (typeof value === 'string') return value.includes('\u0000') ? null : quote(value);
  if (typeof value === 'number') return Number.isFinite(value) ? `'${String(value)}'` : null;
  if (typeof value === 'bigint') return `'${value.toString()}'`;
  if (typeof value === 'boolean') return value ? `'true'` : `'false'`;
  return null;
}

/**
 * `text` with each `$n` replaced by the literal of `values[n - 1]`, or null when that cannot be done safely: a
 * value of another type, a placeholder out of range, or text with quoting other than plain '…' strings and "…"
 * identifiers (dollar quotes, escape strings, comments).
 */
export function inlineParameters(
  text: string,
  values: readonly unknown[],
  quote: (text: string) => string,
): string | null {
  const literals: string[] = [];
  let size = 0;
  for (const value of values) {
    const written = literal(value, quote);
    if (written === null) return null;
    size += written.length;
    if (size > MAX_INLINED_CHARS) return null;
    literals.push(written);
  }
  let out = '';
  let i = 0;
  while (i < text.length) {
    const char = text[i];
    if (char === "'" || char === '"') {
      const end = text.indexOf(char, i + 1);
      if (end === -1) return null;
      const quoted = text.slice(i, end + 1);
      // An escape string (E'…') or a backslash: leave it to the server's own parsing of parameters.
      if (char === "'" && (quoted.includes('\\') || /[eE]$/.test(out))) return null;
      out += quoted;
      i = end + 1;
      continue;
    }
    if (char === '-' && text[i + 1] === '-') return null;
    if (char === '/' && text[i + 1] === '*') return null;
    if (char === '$') {
      const match = /^\$(\d+)/.exec(text.slice(i, i + 8));
      if (match === null) return null;
      const digits = match[1] ?? '';
      const written = literals[Number(digits) - 1];
      if (written === undefined) return null;
      // A literal next to a word character would merge with it; parameters never are, but keep them apart.
      out += ` ${written} `;
      i += 1 + digits.length;
      continue;
    }
    out += char;
    i += 1;
  }
  return out;
}

type Query = (this: pg.Client, ...args: unknown[]) => unknown;

export interface HeldBeginOptions {
  /** Send the texts of prepared queries as named statements. */
  named: boolean;
}

/** node-postgres's Client with the BEGIN held back until the transaction's first statement. */
export function beginWithFirstStatement(Client: typeof pg.Client, options: HeldBeginOptions): typeof pg.Client {
  /** The BEGIN each client holds back, if any. */
  const held = new WeakMap<pg.Client, string>();
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
  const query: Query = function (this: pg.Client, ...args: unknown[]) {
    const [text, values] = args;
    if (typeof text !== 'string' || args.length > 2 || (values !== undefined && !Array.isArray(values))) {
      return send(this, ...args);
    }
    if (text === 'begin' || text.startsWith('start transaction')) {
      held.set(this, text);
      return Promise.resolve(answered('BEGIN'));
    }
    const begin = held.get(this);
    if (begin === undefined) {
      const name = options.named && !unnamed.has(this) ? statementName(text) : undefined;
      return name === undefined ? send(this, ...args) : sendNamed(this, name, text, values ?? []);
    }
    held.delete(this);
    if (text === 'commit') return Promise.resolve(answered('COMMIT'));
    if (text === 'rollback') return Promise.resolve(answered('ROLLBACK'));
    const parameters: readonly unknown[] = Array.isArray(values) ? values : [];
    const inlined = inlineParameters(text, parameters, (value) => this.escapeLiteral(value));
    if (inlined === null) {
      return (send(this, begin) as Promise<unknown>).then(() => send(this, text, parameters));
    }
    return (send(this, `${begin};${inlined}`) as Promise<pg.QueryResult | pg.QueryResult[]>).then((results) => {
      if (!Array.isArray(results)) return results;
      const last = results.at(-1);
      if (last === undefined) throw new Error('no result for the first statement of a transaction');
      return last;
    });
  };
  Object.defineProperty(HeldBeginClient.prototype, 'query', { configurable: true, writable: true, value: query });
  return HeldBeginClient;
}
