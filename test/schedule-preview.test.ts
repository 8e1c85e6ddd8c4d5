/**
 * GET /v1/schedules/preview: the next five fire times of a timing that is not saved (the console's form shows
 * them), validated as a new schedule is, on a test clock. Once per dialect.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';
import { testClock } from './helpers/test-clock.ts';

const secs = (iso: string): number => Math.floor(Date.parse(iso) / 1000);

describe.each(dialects())('schedule preview (%s)', (dialect) => {
  let h: Harness;
  const clock = testClock();

  beforeAll(async () => {
    clock.set(Date.parse('2026-03-26T12:00:00Z'));
    h = await createHarness(dialect, {}, { clock });
  });
  afterAll(async () => {
    await h?.close();
  });

  const preview = (query: Record<string, string>, key?: string) =>
    h.request('GET', `/v1/schedules/preview?${new URLSearchParams(query)}`, key === undefined ? {} : { key });

  it('previews a cron expression in its time zone across the DST change, and saves nothing', async () => {
    const response = await preview({ cron: '0 9 * * 1-5', timezone: 'europe/berlin' });
    expect(response.status, response.text).toBe(200);
    expect(json(response)).toEqual({
      object: 'schedule.preview',
      timezone: 'Europe/Berlin',
      next_run_times: [
        secs('2026-03-27T08:00:00Z'),
        secs('2026-03-30T07:00:00Z'),
        secs('2026-03-31T07:00:00Z'),
        secs('2026-04-01T07:00:00Z'),
        secs('2026-04-02T07:00:00Z'),
      ],
    });
    expect(json(await h.request('GET', '/v1/schedules')).data).toEqual([]);
  });

  it('previews an interval counted from now, in UTC by default', async () => {
    const before = Math.floor(clock.now() / 1000);
    const response = await preview({ interval_seconds: '3600' });
    const after = Math.floor(clock.now() / 1000);
    expect(response.status, response.text).toBe(200);
    expect(json(response).timezone).toBe('UTC');
    const [first, ...rest]: number[] = json(response).next_run_times;
    expect(first).toBeGreaterThanOrEqual(before + 3600);
    expect(first).toBeLessThanOrEqual(after + 3600);
    expect(rest).toEqual([1, 2, 3, 4].map((hours) => (first ?? 0) + hours * 3600));
  });

  it('refuses what a schedule would refuse with a 400 naming the field', async () => {
    for (const [query, param] of [
      [{ cron: '0 9 * *' }, 'cron'],
      [{ cron: '61 * * * *' }, 'cron'],
      [{ cron: '0 0 30 2 *' }, 'cron'],
      [{ cron: '0 9 * * *', timezone: 'Mars/Olympus' }, 'timezone'],
      [{ cron: '0 9 * * *', interval_seconds: '60' }, 'cron'],
      [{}, 'cron'],
      [{ interval_seconds: '0' }, 'interval_seconds'],
      [{ interval_seconds: 'often' }, 'interval_seconds'],
    ] as const) {
      const response = await preview(query);
      expect(response.status, JSON.stringify(query)).toBe(400);
      expect(json(response).error.param, JSON.stringify(query)).toBe(param);
    }
  });

  it('needs agents:read', async () => {
    const orgId: string = json(await h.request('GET', '/v1/organization')).id;
    const filesOnly = await h.deps.orgs.createKey(orgId, ['files:read']);
    const response = await preview({ cron: '0 9 * * *' }, filesOnly);
    expect(response.status).toBe(403);
    expect(json(response).error.code).toBe('insufficient_scopes');
  });
});
