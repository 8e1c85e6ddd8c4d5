import { hash } from 'node:crypto';

/** One-shot (`crypto.hash`): a third of the cost of a Hash object, on every authenticated request. */
export function sha256Hex(text: string): string {
  return hash('sha256', text, 'hex');
}

/** JSON with object keys sorted, so that equal values always serialize to equal text. */
export function stableStringify(value: unknown): string {
  return JSON.stringify(value, (_key, inner: unknown) => {
    if (inner === null || typeof inner !== 'object' || Array.isArray(inner)) return inner;
    const sorted: Record<string, unknown> = {};
    for (const key of Object.keys(inner).sort()) sorted[key] = Reflect.get(inner, key);
    return sorted;
  });
}

/** Deep equality of JSON values (key order ignored). */
export function jsonEqual(a: unknown, b: unknown): boolean {
  return stableStringify(a) === stableStringify(b);
}
