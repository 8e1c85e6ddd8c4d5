/// <reference path="./autocannon.d.ts" />
/**
 * The cost of rate and concurrency limits on `POST /v1/responses` (non-streaming: a new conversation per call, the
 * turn accepted, run by the engine and answered completed; the scripted model answers at once, so the figure is
 * Agentry's own work). Two servers in this process on the same kind of database: one without limits, one whose
 * organization and key have limits of requests per minute and of concurrent turns set (high enough never to
 * refuse or queue a request: what is measured is counting each request in the database's window and claiming
 * turns under limits). Loaded by autocannon (closed loops): one uncounted warm-up round, then short rounds in
 * alternating order (12 × 3 s a side by default), so drift and pauses fall on both sides; the figure is the median of
 * the per-round ratios limited ÷ unlimited (goal ≥ 0.95: at most 5 % fewer responses per second). On SQLite and,
 * unless BENCH_POSTGRES=0, on Postgres (without Redis: the database counts, the slower of the two places).
 */
import autocannon from 'autocannon';
import { buildApp } from '../src/app.ts';
import { type BenchResult, median, runStandalone, scaled, scaledInt, variants, withCleanup } from './support.ts';
import { openWorld } from './turns.ts';

export type { BenchResult } from './support.ts';

const CONNECTIONS = 16;

function log(message: string): void {
  process.stderr.write(`[bench:limits] ${message}\n`);
}

export async function runLimitsBench(): Promise<BenchResult[]> {
  const rounds = scaledInt('BENCH_LIMITS_ROUNDS', 12);
  const seconds = scaled('BENCH_LIMITS_SECONDS', 3);
  const results: BenchResult[] = [];
  const kinds = (process.env.BENCH_LIMITS_DATABASES ?? 'sqlite,postgres').split(',');
  for (const variant of variants().filter((candidate) => kinds.includes(candidate.kind))) {
    await withCleanup(async (defer) => {
      const servers = new Map<'unlimited' | 'limited', { url: string; key: string; model: string }>();
      for (const name of ['unlimited', 'limited'] as const) {
        const world = await openWorld(variant, defer, { LOG_LEVEL: 'warn' });
        const { app } = await buildApp(world.deps);
        defer(() => app.close());
        const url = await app.listen({ host: '127.0.0.1', port: 0 });
        const key = await world.deps.orgs.createKey(world.orgId);
        if (name === 'limited') {
          // BENCH_LIMITS_ONLY=rpm|turns sets only that limit (to tell their costs apart).
          const only = process.env.BENCH_LIMITS_ONLY;
          const limits = {
            requestsPerMinute: only === 'turns' ? null : 1_000_000_000,
            // BENCH_LIMITS_TURNS: the limit of concurrent turns. The default is above the engine's 64 slots, which
            // settles it without counting; 64 or less (still never reached by 16 connections) is counted per claim.
            concurrentTurns: only === 'rpm' ? null : Number(process.env.BENCH_LIMITS_TURNS ?? 1_000_000),
          };
          await world.deps.limits.setOrganization(world.orgId, limits);
          const [created] = await world.deps.limits.keysByPrefix(world.orgId, key.slice(0, 12));
          if (created === undefined) throw new Error('the new key is not found');
          await world.deps.limits.setApiKey(created.id, limits);
        }
        servers.set(name, { url, key, model: world.agentId });
      }
      const rates = new Map<string, number[]>();
      const ratios: number[] = [];
      const load = async (name: 'unlimited' | 'limited'): Promise<number> => {
        const server = servers.get(name);
        if (server === undefined) throw new Error(`no server ${name}`);
        const result = await autocannon({
          url: `${server.url}/v1/responses`,
          method: 'POST',
          connections: CONNECTIONS,
          duration: seconds,
          headers: { authorization: `Bearer ${server.key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: server.model, input: 'ping' }),
        });
        if (result.non2xx > 0 || result.errors > 0) {
          throw new Error(`${name}: ${result.non2xx} non-2xx answers and ${result.errors} errors`);
        }
        return result.requests.average;
      };
      // One uncounted round warms both servers (compiled queries, caches, the database's first pages), so the first
      // counted round does not pay for the side that happens to go first.
      for (const name of ['unlimited', 'limited'] as const) await load(name);
      for (let round = 0; round < rounds; round++) {
        const order = round % 2 === 0 ? (['unlimited', 'limited'] as const) : (['limited', 'unlimited'] as const);
        const measured: Record<string, number> = {};
        for (const name of order) {
          const rate = await load(name);
          measured[name] = rate;
          rates.set(name, [...(rates.get(name) ?? []), rate]);
        }
        const ratio = (measured.limited ?? Number.NaN) / (measured.unlimited ?? Number.NaN);
        ratios.push(ratio);
        log(
          `${variant.kind} round ${round + 1}: unlimited ${Math.round(measured.unlimited ?? 0)}/s, limited ${Math.round(measured.limited ?? 0)}/s, ratio ${ratio.toFixed(3)}`,
        );
      }
      const unlimited = median(rates.get('unlimited') ?? []);
      results.push({
        name: `limits.${variant.kind}.responses`,
        value: median(rates.get('limited') ?? []),
        unit: 'responses/s',
        baseline: unlimited,
        ratio: median(ratios),
        goal: 'ratio >= 0.95',
        rounds: ratios,
      });
    });
  }
  return results;
}

if (import.meta.main) await runStandalone(runLimitsBench);
