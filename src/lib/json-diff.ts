/**
 * What changed between two JSON values, as a list of JSON-pointer paths (RFC 6901) with the value before and
 * after. Objects are compared key by key; arrays element by element when their lengths match (a changed tool
 * reads `/clientTools/1/description`), and as a whole otherwise (an added or removed element replaces the array).
 */
import { jsonEqual } from './hash.ts';

export interface JsonChange {
  /** A JSON pointer into the value: `/instructions`, `/toolApprovals/overrides/search`. */
  path: string;
  op: 'add' | 'remove' | 'replace';
  /** Absent for `add`. */
  before?: unknown;
  /** Absent for `remove`. */
  after?: unknown;
}

const escapeKey = (key: string): string => key.replaceAll('~', '~0').replaceAll('/', '~1');

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function walk(before: unknown, after: unknown, path: string, out: JsonChange[]): void {
  if (jsonEqual(before, after)) return;
  if (isPlainObject(before) && isPlainObject(after)) {
    const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])].sort();
    for (const key of keys) {
      const child = `${path}/${escapeKey(key)}`;
      if (!(key in after) || after[key] === undefined) out.push({ path: child, op: 'remove', before: before[key] });
      else if (!(key in before) || before[key] === undefined) out.push({ path: child, op: 'add', after: after[key] });
      else walk(before[key], after[key], child, out);
    }
    return;
  }
  if (Array.isArray(before) && Array.isArray(after) && before.length === after.length) {
    for (const [index, item] of before.entries()) walk(item, after[index], `${path}/${index}`, out);
    return;
  }
  out.push({ path, op: 'replace', before, after });
}

/** The changes that turn `before` into `after`, in path order; empty when they are equal. */
export function jsonDiff(before: unknown, after: unknown): JsonChange[] {
  const out: JsonChange[] = [];
  walk(before, after, '', out);
  return out;
}
