/** A clock for tests: real time shifted by an offset the test sets or advances, so time only moves forward. */
import type { Clock } from '../../src/lib/clock.ts';

export interface TestClock extends Clock {
  /** Makes now() return `at` (epoch ms) at this instant; real time keeps flowing from there. */
  set(at: number): void;
  advance(ms: number): void;
}

export function testClock(): TestClock {
  let offset = 0;
  return {
    now: () => Date.now() + offset,
    set(at) {
      offset = at - Date.now();
    },
    advance(ms) {
      offset += ms;
    },
  };
}
