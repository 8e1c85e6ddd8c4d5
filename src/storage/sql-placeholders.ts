/**
 * The `$n` placeholders of a Postgres text, and values written as SQL literals in their places.
 *
 * Two parts of the Postgres client write parameters into a statement's text: the constants of a prepared query, so
 * that a plan the server keeps knows them (named-statements.ts), and every parameter of a statement sent with a
 * held-back BEGIN or deferred write in one simple query (postgres-begin.ts). Both must find the placeholders the
 * server would find, and only those: a `$1` inside a quoted string or identifier is text. The scan follows plain
 * '…' strings and "…" identifiers only; text with any other quoting (dollar quotes, escape strings, comments) is not
 * scanned at all, since a placeholder found there could be text the server reads otherwise.
 */

export interface ScanOptions {
  /**
   * Refuse text whose '…' strings hold a backslash: whether one escapes the next character depends on the server's
   * settings (standard_conforming_strings), so where the string ends does too.
   */
  refuseBackslashes: boolean;
}

/**
 * `text` with each `$n` placeholder replaced by what `replace(n - 1)` returns, or null when the text cannot be
 * scanned safely (quoting other than plain '…' strings and "…" identifiers, a `$` that is no placeholder) or
 * `replace` returns null for one of them.
 */
export function replacePlaceholders(
  text: string,
  replace: (index: number) => string | null,
  options: ScanOptions,
): string | null {
  let out = '';
  let i = 0;
  while (i < text.length) {
    const char = text[i] ?? '';
    if (char === "'" || char === '"') {
      const end = text.indexOf(char, i + 1);
      if (end === -1) return null;
      const quoted = text.slice(i, end + 1);
      // An escape string (E'…') reads backslashes as escapes, so its end is not the next quote.
      if (char === "'" && (/[eE]$/.test(out) || (options.refuseBackslashes && quoted.includes('\\')))) return null;
      out += quoted;
      i = end + 1;
      continue;
    }
    if ((char === '-' && text[i + 1] === '-') || (char === '/' && text[i + 1] === '*')) return null;
    if (char !== '$') {
      out += char;
      i += 1;
      continue;
    }
    // A `$` not followed by digits opens a dollar-quoted string (`$$…$$`, `$tag$…$tag$`).
    const placeholder = /^\$(\d+)/.exec(text.slice(i, i + 8));
    if (placeholder === null) return null;
    const digits = placeholder[1] ?? '';
    const replacement = replace(Number(digits) - 1);
    if (replacement === null) return null;
    out += replacement;
    i += 1 + digits.length;
  }
  return out;
}

/**
 * A value written as an SQL literal, or null when it cannot be: a value that is not null, a string, a finite number,
 * a bigint or a boolean, a string with a NUL (no literal can hold one), or one `quote` refuses. Every literal but
 * null is quoted, so it is of unknown type until its context decides it, exactly as an untyped parameter is.
 */
export function sqlLiteral(value: unknown, quote: (text: string) => string | null): string | null {
  if (value === null) return 'null';
  if (typeof value === 'string') return value.includes('\u0000') ? null : quote(value);
  if (typeof value === 'number') return Number.isFinite(value) ? `'${String(value)}'` : null;
  if (typeof value === 'bigint') return `'${value.toString()}'`;
  if (typeof value === 'boolean') return value ? `'true'` : `'false'`;
  return null;
}

/** A literal in a placeholder's place: spaced, since one next to a word character would merge with it. */
export function spaced(literal: string): string {
  return ` ${literal} `;
}
