import { describe, expect, it } from 'vitest';
import { isUuid, newId } from './ids.ts';

describe('newId', () => {
  it('makes version 7 UUIDs that sort in creation order, also within one millisecond', () => {
    const ids = Array.from({ length: 5000 }, () => newId());
    for (const id of ids) {
      expect(isUuid(id)).toBe(true);
      expect(id[14]).toBe('7');
      expect(['8', '9', 'a', 'b']).toContain(id[19]);
    }
    expect([...ids].sort()).toEqual(ids);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('never repeats its random part across many pool refills', () => {
    const tails = new Set<string>();
    for (let i = 0; i < 20_000; i++) tails.add(newId().slice(19));
    expect(tails.size).toBe(20_000);
  });

  it('carries the creation time in its first 48 bits', () => {
    const before = Date.now();
    const id = newId();
    const millis = Number.parseInt(id.replaceAll('-', '').slice(0, 12), 16);
    expect(millis).toBeGreaterThanOrEqual(before);
    expect(millis).toBeLessThanOrEqual(Date.now() + 5);
  });
});
