/**
 * The placeholder scan shared by the Postgres client's inlining (named-statements.ts, postgres-begin.ts): it finds
 * the placeholders the server would find and only those, refuses text it cannot follow, and writes literals the
 * server reads back as the values.
 */
import { describe, expect, it } from 'vitest';
import { replacePlaceholders, spaced, sqlLiteral } from './sql-placeholders.ts';

const lenient = { refuseBackslashes: false };
const strict = { refuseBackslashes: true };
/** Each placeholder written as its 0-based index in brackets. */
const indexes = (index: number) => `[${index}]`;

describe('replacePlaceholders', () => {
  it('reads every digit of a placeholder: $10 is not $1 followed by 0', () => {
    expect(replacePlaceholders('select $1, $10, $2', indexes, lenient)).toBe('select [0], [9], [1]');
    expect(replacePlaceholders('select $1$2', indexes, lenient)).toBe('select [0][1]');
  });

  it('reads at most seven digits of a placeholder', () => {
    expect(replacePlaceholders('select $12345678', indexes, lenient)).toBe('select [1234566]8');
  });

  it('leaves placeholders inside quoted strings and identifiers alone', () => {
    expect(replacePlaceholders(`select '$1', "$2", 'it''s $3' where a = $4`, indexes, lenient)).toBe(
      `select '$1', "$2", 'it''s $3' where a = [3]`,
    );
    expect(replacePlaceholders(`select "a'b" where c = $1`, indexes, lenient)).toBe(`select "a'b" where c = [0]`);
  });

  it('refuses text whose quoting it does not follow', () => {
    for (const text of [
      'select $$x$$, $1',
      'select $tag$x$tag$, $1',
      'select $ 1',
      'select $1 -- $2',
      'select /* $2 */ $1',
      "select E'\\n', $1",
      "select e'x', $1",
      "select 'unterminated, $1",
      'select "unterminated, $1',
    ]) {
      expect(replacePlaceholders(text, indexes, lenient), text).toBeNull();
    }
  });

  it('refuses a backslash in a string only when asked to', () => {
    const text = "select 'a\\b', $1";
    expect(replacePlaceholders(text, indexes, lenient)).toBe("select 'a\\b', [0]");
    expect(replacePlaceholders(text, indexes, strict)).toBeNull();
    expect(replacePlaceholders('select "a\\b", $1', indexes, strict)).toBe('select "a\\b", [0]');
  });

  it('gives up when the replacement is refused, and passes each index as found', () => {
    const seen: number[] = [];
    const replace = (index: number) => {
      seen.push(index);
      return index === 1 ? null : indexes(index);
    };
    expect(replacePlaceholders('select $1, $3, $2, $4', replace, lenient)).toBeNull();
    expect(seen).toEqual([0, 2, 1]);
    expect(replacePlaceholders('select $0', indexes, lenient)).toBe('select [-1]');
  });

  it('returns text without placeholders unchanged', () => {
    expect(replacePlaceholders('select 1', () => null, strict)).toBe('select 1');
    expect(replacePlaceholders('', () => null, strict)).toBe('');
  });
});

describe('sqlLiteral', () => {
  const quote = (text: string) => `'${text.replaceAll("'", "''")}'`;

  it('quotes every value but null', () => {
    expect(sqlLiteral(null, quote)).toBe('null');
    expect(sqlLiteral("it's", quote)).toBe("'it''s'");
    expect(sqlLiteral(1.5, quote)).toBe("'1.5'");
    expect(sqlLiteral(-2, quote)).toBe("'-2'");
    expect(sqlLiteral(12345678901234567890n, quote)).toBe("'12345678901234567890'");
    expect(sqlLiteral(true, quote)).toBe("'true'");
    expect(sqlLiteral(false, quote)).toBe("'false'");
  });

  it('refuses what no literal can hold, and what the quoting refuses', () => {
    for (const value of [
      undefined,
      Number.NaN,
      Number.POSITIVE_INFINITY,
      new Date(0),
      Buffer.from('x'),
      {},
      'a\u0000b',
    ]) {
      expect(sqlLiteral(value, quote), String(value)).toBeNull();
    }
    expect(sqlLiteral('a\\b', (text) => (text.includes('\\') ? null : quote(text)))).toBeNull();
  });

  it('spaces a literal so that it cannot merge with a neighbouring word', () => {
    expect(spaced("'x'")).toBe(" 'x' ");
  });
});
