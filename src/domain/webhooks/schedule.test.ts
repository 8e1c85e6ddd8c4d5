import { describe, expect, it } from 'vitest';
import { MAX_RETRY_DELAY_MS, nextAttemptAt } from './schedule.ts';

const base = { now: 1_000_000, deadline: 1_000_000 + 7_200_000, baseMs: 5000, retryAfterMs: null };

describe('webhook retry schedule', () => {
  it('backs off exponentially with full jitter', () => {
    expect(nextAttemptAt({ ...base, attempts: 1, random: () => 0.999999 })).toBe(base.now + 4999);
    expect(nextAttemptAt({ ...base, attempts: 3, random: () => 0.5 })).toBe(base.now + 10_000);
    expect(nextAttemptAt({ ...base, attempts: 3, random: () => 0 })).toBe(base.now);
  });

  it('caps one wait, and never schedules past the end of the window', () => {
    expect(nextAttemptAt({ ...base, attempts: 30, random: () => 0.999999 })).toBe(
      base.now + Math.floor(0.999999 * MAX_RETRY_DELAY_MS),
    );
    const late = { ...base, now: base.deadline - 1000 };
    expect(nextAttemptAt({ ...late, attempts: 8, random: () => 0.9 })).toBe(base.deadline);
  });

  it('honours Retry-After, within the same bounds', () => {
    expect(nextAttemptAt({ ...base, attempts: 1, retryAfterMs: 120_000, random: () => 0 })).toBe(base.now + 120_000);
    expect(nextAttemptAt({ ...base, attempts: 1, retryAfterMs: 99 * 3600_000, random: () => 0 })).toBe(
      base.now + MAX_RETRY_DELAY_MS,
    );
  });

  it('gives up once the window is over', () => {
    expect(nextAttemptAt({ ...base, now: base.deadline, attempts: 9, random: () => 0.5 })).toBeNull();
    expect(nextAttemptAt({ ...base, now: base.deadline + 1, attempts: 9, random: () => 0.5 })).toBeNull();
  });
});
