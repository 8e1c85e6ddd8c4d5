/**
 * An async iterable mapped value by value into zero or more values, whose `return()` reaches the source at once,
 * also while a `next()` waits for it (an async generator would queue the return behind that wait, so a consumer
 * that leaves, such as a closed stream, would keep the source open until its next value).
 */
export function flatMapAsync<T, U>(
  source: AsyncIterable<T>,
  map: (value: T) => Promise<{ values: U[]; last: boolean }>,
): AsyncIterableIterator<U> {
  const inner = source[Symbol.asyncIterator]();
  const ready: { value: U }[] = [];
  let over = false;
  const iterator: AsyncIterableIterator<U> = {
    [Symbol.asyncIterator]: () => iterator,
    async next() {
      for (;;) {
        const head = ready.shift();
        if (head !== undefined) return { done: false, value: head.value };
        if (over) return { done: true, value: undefined };
        const next = await inner.next();
        if (next.done === true || over) {
          over = true;
          continue;
        }
        const mapped = await map(next.value);
        ready.push(...mapped.values.map((value) => ({ value })));
        if (mapped.last) {
          over = true;
          await inner.return?.(undefined);
        }
      }
    },
    async return() {
      over = true;
      ready.length = 0;
      await inner.return?.(undefined);
      return { done: true, value: undefined };
    },
  };
  return iterator;
}
