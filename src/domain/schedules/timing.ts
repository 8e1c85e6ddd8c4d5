/**
 * When a schedule fires. Cron expressions (5 fields, Vixie semantics) are evaluated by croner in the schedule's
 * IANA time zone, which handles daylight saving time the way cron does: a fixed time that falls into a
 * spring-forward gap fires at the first valid time after it, and a time that occurs twice at fall-back fires
 * once. Intervals are counted from an anchor in absolute time, so DST never shifts them.
 */
import { Cron } from 'croner';

export interface Timing {
  cron: string | null;
  intervalSeconds: number | null;
  timezone: string;
  /** Interval schedules tick at anchorAt + k * intervalSeconds (k >= 1). */
  anchorAt: number;
}

/** The zone's canonical name (`utc` → `UTC`), or null when the runtime does not know it. */
export function canonicalZone(zone: string): string | null {
  if (zone === '' || zone.length > 100) return null;
  try {
    return new Intl.DateTimeFormat('en-US', { timeZone: zone }).resolvedOptions().timeZone;
  } catch {
    return null;
  }
}

function cronOf(expression: string, timezone: string): Cron {
  return new Cron(expression, { timezone, mode: '5-part' });
}

/** Why a cron expression cannot be used, or null when it can (it must also fire at least once). */
export function cronProblem(expression: string, timezone: string, now: number): string | null {
  if (expression.trim() !== expression || expression.includes('  ') || /[\t\n\r]/.test(expression)) {
    return 'cron must be 5 fields separated by single spaces (minute hour day-of-month month day-of-week)';
  }
  let job: Cron;
  try {
    job = cronOf(expression, timezone);
  } catch (error) {
    const detail = error instanceof Error ? error.message.replace(/^CronPattern: /, '') : String(error);
    return `cron is not a valid 5-field expression (minute hour day-of-month month day-of-week): ${detail}`;
  }
  if (job.nextRun(new Date(now)) === null) return 'cron never fires';
  return null;
}

/** The first tick strictly after `after` (epoch ms), or null when there is none. */
export function nextAfter(timing: Timing, after: number): number | null {
  if (timing.intervalSeconds !== null) {
    const step = timing.intervalSeconds * 1000;
    if (after < timing.anchorAt + step) return timing.anchorAt + step;
    return timing.anchorAt + (Math.floor((after - timing.anchorAt) / step) + 1) * step;
  }
  if (timing.cron === null) return null;
  // croner works in whole seconds: the next run after the start of the next second is strictly after `after`.
  const next = cronOf(timing.cron, timing.timezone).nextRun(new Date(Math.floor(after / 1000) * 1000));
  return next === null ? null : next.getTime();
}

/** The next `count` ticks strictly after `after`. */
export function nextTicks(timing: Timing, after: number, count: number): number[] {
  const out: number[] = [];
  let from = after;
  while (out.length < count) {
    const next = nextAfter(timing, from);
    if (next === null) break;
    out.push(next);
    from = next;
  }
  return out;
}

export interface DueTicks {
  /** Ticks within the grace window before `now`: they fire. At most `cap`, the newest. */
  onTime: number[];
  /** The newest tick older than the grace window (missed while no worker ran), or null. */
  lastMissed: number | null;
  /** The first tick after `now`: the schedule's next_run_at once these are claimed. */
  next: number | null;
}

/**
 * The ticks due at `now` for a schedule whose next tick was `nextRunAt`. A tick more than `graceMs` late was
 * missed (no worker ran at the time); the catch-up policy decides whether it still runs once.
 */
export function dueTicks(timing: Timing, nextRunAt: number, now: number, graceMs: number, cap: number): DueTicks {
  const windowStart = now - graceMs;
  let lastMissed: number | null = null;
  let tick: number | null = nextRunAt;
  if (nextRunAt < windowStart) {
    // Skip through the missed ticks without enumerating them one by one when there are many.
    const firstInWindow = nextAfter(timing, windowStart - 1);
    lastMissed = lastBefore(timing, nextRunAt, windowStart);
    tick = firstInWindow;
  }
  const onTime: number[] = [];
  while (tick !== null && tick <= now) {
    onTime.push(tick);
    if (onTime.length > cap) {
      const dropped = onTime.shift();
      if (dropped !== undefined) lastMissed = dropped;
    }
    tick = nextAfter(timing, tick);
  }
  return { onTime, lastMissed, next: nextAfter(timing, now) };
}

/** The newest tick in [from, before), given that `from` is one. */
function lastBefore(timing: Timing, from: number, before: number): number {
  if (timing.intervalSeconds !== null) {
    const step = timing.intervalSeconds * 1000;
    return from + Math.floor((before - 1 - from) / step) * step;
  }
  if (timing.cron === null) return from;
  const previous = cronOf(timing.cron, timing.timezone).previousRuns(1, new Date(before - 1))[0];
  const at = previous?.getTime();
  return at !== undefined && at >= from && at < before ? at : from;
}
