import { describe, expect, it } from 'vitest';
import { discardingUnlessWritten, noDiscard } from './discarding.ts';

/** A discard that counts its calls. */
function counted() {
  const calls = { count: 0 };
  const discard = async () => {
    calls.count += 1;
  };
  return { calls, discard };
}

describe('discardingUnlessWritten', () => {
  it('keeps what a written result holds', async () => {
    const { calls, discard } = counted();
    expect(
      await discardingUnlessWritten(
        discard,
        async () => 'written',
        () => true,
      ),
    ).toBe('written');
    expect(calls.count).toBe(0);
  });

  it('discards once for a result that holds none of it (a replay), and still returns the result', async () => {
    const { calls, discard } = counted();
    const result = await discardingUnlessWritten(
      discard,
      async () => ({ replayed: true }),
      (r) => !r.replayed,
    );
    expect(result).toEqual({ replayed: true });
    expect(calls.count).toBe(1);
  });

  it('discards once when the work fails, and rethrows its error', async () => {
    const { calls, discard } = counted();
    const failure = new Error('refused');
    const failing = async (): Promise<string> => {
      throw failure;
    };
    await expect(discardingUnlessWritten(discard, failing, () => true)).rejects.toBe(failure);
    expect(calls.count).toBe(1);
  });

  it('runs the work first, the discard after it', async () => {
    const order: string[] = [];
    await discardingUnlessWritten(
      async () => {
        order.push('discard');
      },
      async () => {
        order.push('work');
      },
      () => false,
    );
    expect(order).toEqual(['work', 'discard']);
  });

  it('has a discard with nothing to delete', async () => {
    await expect(
      discardingUnlessWritten(
        noDiscard,
        async () => 1,
        () => false,
      ),
    ).resolves.toBe(1);
  });
});
