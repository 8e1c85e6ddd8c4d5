import { describe, expect, it } from 'vitest';
import { flatMapAsync } from './async-map.ts';

/** A source that yields the values pushed into it and records whether it was returned. */
function pushSource<T>() {
  const queued: T[] = [];
  let wake: (() => void) | null = null;
  const state = { returned: false };
  const iterator: AsyncIterableIterator<T> = {
    [Symbol.asyncIterator]: () => iterator,
    async next() {
      for (;;) {
        if (state.returned) return { done: true, value: undefined };
        const value = queued.shift();
        if (value !== undefined) return { done: false, value };
        await new Promise<void>((resolve) => {
          wake = resolve;
        });
      }
    },
    async return() {
      state.returned = true;
      wake?.();
      return { done: true, value: undefined };
    },
  };
  const push = (value: T) => {
    queued.push(value);
    wake?.();
  };
  return { iterator, push, state };
}

describe('flatMapAsync', () => {
  it('maps each value into zero or more, and stops (returning the source) after the last', async () => {
    const source = pushSource<number>();
    const mapped = flatMapAsync(source.iterator, async (value) => ({
      values: value === 0 ? [] : [value, value * 10],
      last: value === 3,
    }));
    for (const value of [0, 1, 3, 4]) source.push(value);
    const out: number[] = [];
    for await (const value of mapped) out.push(value);
    expect(out).toEqual([1, 10, 3, 30]);
    expect(source.state.returned).toBe(true);
  });

  it('returns the source at once while a next() waits for it', async () => {
    const source = pushSource<number>();
    const mapped = flatMapAsync(source.iterator, async (value) => ({ values: [value], last: false }));
    const waiting = mapped.next();
    await mapped.return?.(undefined);
    expect(source.state.returned).toBe(true);
    await expect(waiting).resolves.toEqual({ done: true, value: undefined });
  });
});
