/**
 * Schedules across real processes: three servers on one Postgres schema and one Redis fire an every-second
 * schedule. The process that fired the latest tick is killed with kill -9 just as the next tick falls due (twice,
 * restarting it each time). Every tick still gets exactly one run (a unique tick per schedule, no gap, no
 * double), and every admitted run completes: runs left preparing are started by another process, and turns of
 * the dead process are taken over once their leases expire.
 *
 * Needs Postgres and Redis; skipped with a notice when either is unreachable, except under CI=true.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { httpClient, waitUntil } from './helpers/fixtures.ts';
import { testEnvironment, testKey } from './helpers/harness.ts';
import { REDIS_URL, redisReachable } from './helpers/redis.ts';
import { type ServerProcess, startServerProcess, startsTimeout } from './helpers/server-process.ts';

describe('schedules across processes (postgres)', () => {
  let unavailable: string | null = null;
  const servers: ServerProcess[] = [];
  let environment: ReturnType<typeof testEnvironment> | null = null;
  let sql: pg.Client | null = null;

  beforeAll(async () => {
    if (inject('postgresUrl') === null) unavailable = 'Postgres is unreachable or disabled';
    else if (!(await redisReachable())) unavailable = `Redis at ${REDIS_URL} is unreachable`;
    if (unavailable !== null && process.env.CI === 'true') throw new Error(`schedule cluster test: ${unavailable}`);
    if (unavailable !== null)
      process.stdout.write(`\n[agentry] NOTICE: schedule cluster test SKIPPED: ${unavailable}\n`);
  });
  afterAll(async () => {
    await Promise.all(servers.map((server) => server.stop('SIGKILL')));
    await sql?.end();
    await environment?.cleanup();
  });

  it(
    'fires each tick once while the ticking process is killed with kill -9',
    async (context) => {
      if (unavailable !== null) context.skip(unavailable);
      environment = testEnvironment('postgres');
      const key = testKey();
      const env: Record<string, string> = {
        ...environment.env,
        REDIS_URL,
        AGENTRY_BOOTSTRAP_KEY: key,
        AGENTRY_LEASE_MS: '1500',
        AGENTRY_POLL_MS: '100',
        LOG_LEVEL: 'warn',
      };
      // The first creates the schema; the others start against it.
      servers.push(await startServerProcess(env));
      servers.push(...(await Promise.all([startServerProcess(env), startServerProcess(env)])));
      const url = inject('postgresUrl') ?? '';
      sql = new pg.Client({ connectionString: url });
      await sql.connect();
      const schema = env.AGENTRY_DATABASE_SCHEMA ?? '';
      const api = httpClient(servers[0]?.url ?? '', key);
      const agent = await api('POST', '/v1/agents', { name: 'ticker' });
      expect(agent.status).toBe(201);
      const created = await api('POST', '/v1/schedules', {
        name: 'every second',
        agent_id: agent.body.agent.id,
        input: 'tick',
        interval_seconds: 1,
        overlap: 'queue',
      });
      expect(created.status).toBe(201);
      const scheduleId: string = created.body.id;
      const runs = async () =>
        (
          await sql?.query<{ scheduled_at: string; status: string; claimed_by: string | null }>(
            `select scheduled_at, status, claimed_by from "${schema}".schedule_runs where schedule_id = $1 order by scheduled_at`,
            [scheduleId],
          )
        )?.rows ?? [];
      const pidOf = (claimedBy: string | null) => claimedBy?.split(':')[1];

      const kills: string[] = [];
      for (let round = 0; round < 2; round++) {
        // Let a few ticks fire, then kill whichever process fired the latest just before the next tick is due.
        const before = (await runs()).length;
        const latest = await waitUntil(
          async () => {
            const rows = await runs();
            return rows.length >= before + 3 ? rows.at(-1) : null;
          },
          { what: 'three more ticks' },
        );
        const nextTick = Number(latest?.scheduled_at) + 1000;
        const victim = servers.find((server) => String(server.child.pid) === pidOf(latest?.claimed_by ?? null));
        if (victim === undefined) throw new Error(`no live process fired the latest tick (${latest?.claimed_by})`);
        await new Promise((resolve) => setTimeout(resolve, Math.max(0, nextTick - Date.now() - 5)));
        await victim.stop('SIGKILL');
        kills.push(String(victim.child.pid));
        servers.splice(servers.indexOf(victim), 1);
        servers.push(await startServerProcess(env));
      }
      // A few more ticks after the last restart, then pause and let every admitted run finish.
      const count = (await runs()).length;
      await waitUntil(async () => ((await runs()).length >= count + 3 ? true : null), {
        what: 'ticks after the restart',
      });
      const paused = await httpClient(servers[0]?.url ?? '', key)('POST', `/v1/schedules/${scheduleId}`, {
        enabled: false,
      });
      expect(paused.status).toBe(200);
      const final = await waitUntil(
        async () => {
          const rows = await runs();
          return rows.every((row) => ['completed', 'skipped'].includes(row.status)) ? rows : null;
        },
        { what: 'every run to complete', timeoutMs: 60_000, everyMs: 200 },
      );
      const ticks = final.map((row) => Number(row.scheduled_at));
      // One run per tick: consecutive seconds from the first to the last, none twice, none missing.
      expect(new Set(ticks).size).toBe(ticks.length);
      for (let i = 1; i < ticks.length; i++) expect(ticks[i], `tick ${i}`).toBe(Number(ticks[i - 1]) + 1000);
      expect(final.filter((row) => row.status === 'completed').length).toBeGreaterThan(ticks.length / 2);
      const firedBy = new Set(final.map((row) => pidOf(row.claimed_by)));
      for (const pid of kills) expect(firedBy.has(pid)).toBe(true);
      process.stdout.write(
        `[schedules] ${ticks.length} ticks fired by ${firedBy.size} processes, 2 of them killed with kill -9 as a tick fell due; every tick once\n`,
      );
    },
    startsTimeout(4),
  );
});
