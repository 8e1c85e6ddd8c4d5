import { performance } from 'node:perf_hooks';
import { describe, expect, it } from 'vitest';
import { createWakeLoop } from './wake-loop.ts';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A loop whose passes record their start times and last `passMs`. */
function recorded(options: { pollMs: number; minGapMs: number; passMs?: number }) {
  const starts: number[] = [];
  let concurrent = 0;
  let overlapped = false;
  const loop = createWakeLoop(async () => {
    concurrent += 1;
    if (concurrent > 1) overlapped = true;
    starts.push(performance.now());
    await sleep(options.passMs ?? 0);
    concurrent -= 1;
  }, options);
  return { loop, starts, overlapped: () => overlapped };
}

describe('wake loop', () => {
  it('runs a pass at start, then only when rung while the poll is far off', async () => {
    const { loop, starts } = recorded({ pollMs: 60_000, minGapMs: 20 });
    loop.start();
    await sleep(50);
    expect(starts).toHaveLength(1);
    const rungAt = performance.now();
    loop.ring();
    while (starts.length < 2 && performance.now() - rungAt < 5000) await sleep(5);
    expect(starts).toHaveLength(2);
    // Rung, not polled (the poll is a minute off).
    expect(starts[1]! - rungAt).toBeLessThan(1000);
    await loop.stop();
  });

  it('serves a flood of rings with at most one pass per gap, never two at once', async () => {
    const { loop, starts, overlapped } = recorded({ pollMs: 60_000, minGapMs: 40, passMs: 5 });
    loop.start();
    const until = performance.now() + 400;
    while (performance.now() < until) {
      loop.ring();
      await sleep(1);
    }
    await loop.stop();
    // 400 ms of rings every millisecond: about 10 passes, not hundreds.
    expect(starts.length).toBeGreaterThanOrEqual(2);
    expect(starts.length).toBeLessThanOrEqual(12);
    // A timer may fire a millisecond or two before its time as performance.now() counts it (the loop clock is coarser).
    for (let i = 1; i < starts.length; i += 1) expect(starts[i]! - starts[i - 1]!).toBeGreaterThanOrEqual(37);
    expect(overlapped()).toBe(false);
  });

  it('runs once more after a pass that was rung while it ran', async () => {
    const { loop, starts } = recorded({ pollMs: 60_000, minGapMs: 10, passMs: 50 });
    loop.start();
    await sleep(10);
    loop.ring();
    loop.ring();
    await sleep(120);
    expect(starts).toHaveLength(2);
    await loop.stop();
  });

  it('polls when nobody rings', async () => {
    const { loop, starts } = recorded({ pollMs: 30, minGapMs: 10 });
    loop.start();
    await sleep(200);
    await loop.stop();
    expect(starts.length).toBeGreaterThanOrEqual(4);
  });

  it('starts no pass after stop, and stop waits for the pass in flight', async () => {
    let ended = false;
    const loop = createWakeLoop(
      async () => {
        await sleep(40);
        ended = true;
      },
      { pollMs: 10, minGapMs: 0 },
    );
    loop.start();
    await sleep(5);
    await loop.stop();
    expect(ended).toBe(true);
    ended = false;
    loop.ring();
    await sleep(60);
    expect(ended).toBe(false);
  });

  it('keeps going after a pass that rejects', async () => {
    let calls = 0;
    const loop = createWakeLoop(
      async () => {
        calls += 1;
        if (calls === 1) throw new Error('first pass fails');
      },
      { pollMs: 60_000, minGapMs: 0 },
    );
    loop.start();
    await sleep(10);
    loop.ring();
    await sleep(10);
    await loop.stop();
    expect(calls).toBe(2);
  });
});
