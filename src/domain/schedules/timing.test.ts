import { describe, expect, it } from 'vitest';
import { canonicalZone, cronProblem, dueTicks, nextAfter, nextTicks, type Timing } from './timing.ts';

const at = (iso: string): number => Date.parse(iso);
const iso = (millis: number | null): string | null => (millis === null ? null : new Date(millis).toISOString());
const cron = (expression: string, timezone = 'UTC'): Timing => ({
  cron: expression,
  intervalSeconds: null,
  timezone,
  anchorAt: 0,
});
const every = (seconds: number, anchorAt: number): Timing => ({
  cron: null,
  intervalSeconds: seconds,
  timezone: 'UTC',
  anchorAt,
});

describe('schedule timing', () => {
  it('keeps 09:00 local time across both DST changes of Europe/Berlin', () => {
    const weekdays = cron('0 9 * * 1-5', 'Europe/Berlin');
    expect(nextTicks(weekdays, at('2026-03-26T12:00:00Z'), 3).map(iso)).toEqual([
      '2026-03-27T08:00:00.000Z',
      '2026-03-30T07:00:00.000Z',
      '2026-03-31T07:00:00.000Z',
    ]);
    expect(nextTicks(weekdays, at('2026-10-22T12:00:00Z'), 3).map(iso)).toEqual([
      '2026-10-23T07:00:00.000Z',
      '2026-10-26T08:00:00.000Z',
      '2026-10-27T08:00:00.000Z',
    ]);
  });

  it('fires a time in the spring-forward gap once after it, and a repeated time once', () => {
    const early = cron('30 2 * * *', 'Europe/Berlin');
    expect(nextTicks(early, at('2026-03-28T12:00:00Z'), 2).map(iso)).toEqual([
      '2026-03-29T01:00:00.000Z',
      '2026-03-30T00:30:00.000Z',
    ]);
    expect(nextTicks(early, at('2026-10-24T12:00:00Z'), 2).map(iso)).toEqual([
      '2026-10-25T00:30:00.000Z',
      '2026-10-26T01:30:00.000Z',
    ]);
    // America/New_York changes on other dates: 2026-03-08 and 2026-11-01.
    expect(iso(nextAfter(cron('0 9 * * *', 'America/New_York'), at('2026-03-08T00:00:00Z')))).toBe(
      '2026-03-08T13:00:00.000Z',
    );
    expect(iso(nextAfter(cron('0 9 * * *', 'America/New_York'), at('2026-11-01T00:00:00Z')))).toBe(
      '2026-11-01T14:00:00.000Z',
    );
  });

  it('returns ticks strictly after the given time', () => {
    const hourly = cron('0 * * * *');
    expect(iso(nextAfter(hourly, at('2026-01-01T10:00:00Z')))).toBe('2026-01-01T11:00:00.000Z');
    expect(iso(nextAfter(hourly, at('2026-01-01T09:59:59.999Z')))).toBe('2026-01-01T10:00:00.000Z');
    const anchor = at('2026-01-01T00:00:00Z');
    expect(nextAfter(every(60, anchor), anchor)).toBe(anchor + 60_000);
    expect(nextAfter(every(60, anchor), anchor + 60_000)).toBe(anchor + 120_000);
    expect(nextAfter(every(60, anchor), anchor + 60_001)).toBe(anchor + 120_000);
    expect(nextAfter(every(60, anchor), anchor - 5)).toBe(anchor + 60_000);
  });

  it('splits due ticks into on-time ones and the newest missed one', () => {
    const anchor = at('2026-01-01T00:00:00Z');
    const minute = every(60, anchor);
    // On time: one tick 10 s late.
    expect(dueTicks(minute, anchor + 60_000, anchor + 70_000, 60_000, 10)).toEqual({
      onTime: [anchor + 60_000],
      lastMissed: null,
      next: anchor + 120_000,
    });
    // A day of downtime: the newest missed tick is one before the grace window, nothing older is enumerated.
    const now = anchor + 86_400_000 + 30_000;
    const due = dueTicks(minute, anchor + 60_000, now, 60_000, 10);
    expect(due.onTime).toEqual([anchor + 86_400_000]);
    expect(due.lastMissed).toBe(anchor + 86_400_000 - 60_000);
    expect(due.next).toBe(anchor + 86_400_000 + 60_000);
    // Hourly cron, three hours down.
    const hourly = dueTicks(cron('0 * * * *'), at('2026-01-01T01:00:00Z'), at('2026-01-01T03:20:00Z'), 60_000, 10);
    expect(hourly).toEqual({
      onTime: [],
      lastMissed: at('2026-01-01T03:00:00Z'),
      next: at('2026-01-01T04:00:00Z'),
    });
    // More on-time ticks than the cap: the newest are kept, the dropped newest becomes the missed one.
    const second = every(1, anchor);
    const capped = dueTicks(second, anchor + 1000, anchor + 30_000, 60_000, 10);
    expect(capped.onTime).toHaveLength(10);
    expect(capped.onTime.at(-1)).toBe(anchor + 30_000);
    expect(capped.lastMissed).toBe(anchor + 20_000);
  });

  it('explains invalid cron expressions and zones', () => {
    const now = at('2026-01-01T00:00:00Z');
    expect(cronProblem('0 9 * * 1-5', 'UTC', now)).toBeNull();
    expect(cronProblem('0 9 * * MON-FRI', 'UTC', now)).toBeNull();
    expect(cronProblem('61 * * * *', 'UTC', now)).toMatch(/minute/);
    expect(cronProblem('* * * *', 'UTC', now)).toMatch(/5-field/);
    expect(cronProblem('0 0 9 * * *', 'UTC', now)).toMatch(/5/);
    expect(cronProblem(' * * * * *', 'UTC', now)).toMatch(/single spaces/);
    expect(cronProblem('0 0 30 2 *', 'UTC', now)).toBe('cron never fires');
    expect(canonicalZone('Europe/Berlin')).toBe('Europe/Berlin');
    expect(canonicalZone('utc')).toBe('UTC');
    expect(canonicalZone('Mars/Olympus')).toBeNull();
    expect(canonicalZone('')).toBeNull();
  });
});
