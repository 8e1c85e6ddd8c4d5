/**
 * Turns over HTTP, as clients play them: each of 64 closed loops posts a message to its own session (with an
 * Idempotency-Key), then polls `GET …/messages/{id}` until the message is terminal, then posts the next one. The
 * agent uses the default `scripted` model, which answers at once, so all the time is Agentry's. Measured:
 *
 * - turns per second and turn latency (post → terminal GET) on SQLite and on Postgres, in timed rounds on fresh
 *   sessions (the median round's rate is reported);
 * - cluster mode (one `--role api` and two `--role worker` processes on Postgres and Redis) against embedded mode
 *   on Postgres, in paired rounds: the ratio of turns per second, round by round;
 * - the long session: one client plays 1,050 turns in one session; the p50 of its last 50 turns (about the
 *   1,000th) against the p50 of its turns 1–20 (about the 10th) says whether a turn's cost grows with history.
 */
import { type Agentry, Client, createAgent, createSession, type Mode, playTurn, startAgentry } from './agentry.ts';
import { type LoopStats, p50, pairedRounds, perSecond, roundRatios, timedLoops } from './load.ts';
import {
  type BenchResult,
  type Defer,
  median,
  nonNegativeNumber,
  percentile,
  positiveInt,
  runStandalone,
  scaled,
  scaledInt,
  variants,
  withCleanup,
} from './support.ts';

export type { BenchResult } from './support.ts';

const GOALS: Record<'sqlite' | 'postgres', string> = { sqlite: 'value >= 1000', postgres: 'value >= 300' };
const LONG_GOAL = 'ratio <= 1.1';
const EARLY_TURNS = 20;
const LATE_TURNS = 50;

function log(message: string): void {
  process.stderr.write(`[bench:turns-http] ${message}\n`);
}

interface Settings {
  loops: number;
  rounds: number;
  roundSeconds: number;
  rampSeconds: number;
  warmupSeconds: number;
  pollMs: number;
  longTurns: number;
  longPollMs: number;
  cluster: boolean;
  workers: number;
}

function settings(): Settings {
  return {
    loops: positiveInt('BENCH_TURNS_HTTP_LOOPS', 64),
    rounds: scaledInt('BENCH_TURNS_HTTP_ROUNDS', 3, 2),
    roundSeconds: scaled('BENCH_TURNS_HTTP_ROUND_S', 6),
    rampSeconds: 1,
    warmupSeconds: scaled('BENCH_TURNS_HTTP_WARMUP_S', 3),
    pollMs: nonNegativeNumber('BENCH_POLL_MS', 10),
    longTurns: scaledInt('BENCH_LONG_TURNS', 1050, EARLY_TURNS + LATE_TURNS),
    longPollMs: nonNegativeNumber('BENCH_LONG_POLL_MS', 0),
    cluster: process.env.BENCH_CLUSTER !== '0',
    workers: positiveInt('BENCH_CLUSTER_WORKERS', 2),
  };
}

interface Round {
  stats: LoopStats;
  /** GETs per turn, over every turn of the round (ramp included). */
  pollsPerTurn: number;
  /** p50 of POST → 202 over every turn of the round (ramp included): the part of a turn's latency spent accepting. */
  acceptP50: number;
}

/** A deployment under load: each round runs the closed loops on fresh sessions of one agent. */
interface Side {
  label: string;
  round(seconds: number, rampSeconds: number): Promise<Round>;
  client: Client;
  agentId: string;
}

async function openSide(label: string, agentry: Agentry, config: Settings, defer: Defer): Promise<Side> {
  const client = new Client(agentry.url, agentry.apiKey, config.loops);
  defer(() => client.close());
  const agentId = await createAgent(client);
  let rounds = 0;
  return {
    label,
    client,
    agentId,
    async round(seconds, rampSeconds) {
      rounds += 1;
      const sessions = await Promise.all(Array.from({ length: config.loops }, () => createSession(client, agentId)));
      let turns = 0;
      let polls = 0;
      const accepts: number[] = [];
      const stats = await timedLoops({
        concurrency: config.loops,
        rampSeconds,
        seconds,
        call: async (loop) => {
          turns += 1;
          // Read the result first: `polls += (await …).gets` would add to the value polls had before the await.
          const played = await playTurn(client, sessions[loop] ?? '', `r${rounds}-${turns}`, config.pollMs);
          polls += played.gets;
          accepts.push(played.acceptMs);
        },
      });
      return {
        stats,
        pollsPerTurn: polls / Math.max(1, turns),
        acceptP50: percentile(
          accepts.sort((a, b) => a - b),
          50,
        ),
      };
    },
  };
}

function describe(round: Round): string {
  return (
    `${perSecond(round.stats).toFixed(1)} turns/s, p50 ${p50(round.stats).toFixed(1)} ms ` +
    `(POST → 202 p50 ${round.acceptP50.toFixed(1)} ms), ${round.pollsPerTurn.toFixed(1)} GETs per turn`
  );
}

async function warmUp(side: Side, config: Settings): Promise<void> {
  log(`${side.label}: warm-up ${config.warmupSeconds.toFixed(1)}s (discarded)`);
  await side.round(config.warmupSeconds, 0);
}

/** Rate, latency and polls of one deployment over its rounds: the median round's rate, pooled latencies. */
function loopResults(name: string, rounds: readonly Round[], goal?: string): BenchResult[] {
  const rates = rounds.map((round) => perSecond(round.stats));
  const latencies = rounds.flatMap((round) => round.stats.latencies).sort((a, b) => a - b);
  const throughput: BenchResult = { name: `${name}.throughput`, value: median(rates), unit: 'turns/s', rounds: rates };
  if (goal !== undefined) throughput.goal = goal;
  return [
    throughput,
    { name: `${name}.latency.p50`, value: percentile(latencies, 50), unit: 'ms' },
    { name: `${name}.latency.p99`, value: percentile(latencies, 99), unit: 'ms' },
    { name: `${name}.latency.accept_p50`, value: median(rounds.map((round) => round.acceptP50)), unit: 'ms' },
    { name: `${name}.gets_per_turn`, value: median(rounds.map((round) => round.pollsPerTurn)), unit: 'GETs' },
  ];
}

/** One client, one session, `turns` turns one after the other; p50 of the last 50 against the p50 of turns 1–20. */
async function longSession(side: Side, config: Settings, name: string): Promise<BenchResult[]> {
  const sessionId = await createSession(side.client, side.agentId);
  log(`${side.label}: long session, ${config.longTurns} turns, polling every ${config.longPollMs} ms`);
  const latencies: number[] = [];
  for (let turn = 1; turn <= config.longTurns; turn++) {
    const started = performance.now();
    await playTurn(side.client, sessionId, `long-${turn}`, config.longPollMs);
    latencies.push(performance.now() - started);
    if (turn % 250 === 0) {
      const recent = latencies.slice(-LATE_TURNS).sort((a, b) => a - b);
      log(
        `${side.label}: long session turn ${turn}: p50 of the last ${LATE_TURNS} ${percentile(recent, 50).toFixed(2)} ms`,
      );
    }
  }
  const early = percentile(
    latencies.slice(0, EARLY_TURNS).sort((a, b) => a - b),
    50,
  );
  const late = percentile(
    latencies.slice(-LATE_TURNS).sort((a, b) => a - b),
    50,
  );
  log(
    `${side.label}: long session p50 turns 1-${EARLY_TURNS} ${early.toFixed(2)} ms, last ${LATE_TURNS} ${late.toFixed(2)} ms`,
  );
  return [
    {
      name: `${name}.long_session.p50_late_vs_early`,
      value: late,
      unit: 'ms',
      baseline: early,
      ratio: late / early,
      goal: LONG_GOAL,
    },
  ];
}

async function benchEmbedded(mode: Exclude<Mode, 'cluster'>, config: Settings): Promise<BenchResult[]> {
  return withCleanup(async (defer) => {
    const name = `turns_http.${mode}`;
    const embedded = await openSide(mode, await startAgentry({ bench: 'turns-http', mode }, defer), config, defer);
    await warmUp(embedded, config);
    const results: BenchResult[] = [];
    if (mode === 'postgres' && config.cluster) {
      results.push(...(await benchCluster(embedded, config, name)));
    } else {
      const rounds: Round[] = [];
      for (let index = 0; index < config.rounds; index++) {
        const round = await embedded.round(config.roundSeconds, config.rampSeconds);
        log(`${mode} round ${index + 1}: ${describe(round)}`);
        rounds.push(round);
      }
      results.push(...loopResults(name, rounds, GOALS[mode]));
    }
    results.push(...(await longSession(embedded, config, name)));
    return results;
  });
}

/** Embedded Postgres against cluster mode in paired rounds; the cluster is stopped before this returns. */
async function benchCluster(embedded: Side, config: Settings, name: string): Promise<BenchResult[]> {
  return withCleanup(async (defer) => {
    const label = `cluster (api + ${config.workers} workers)`;
    const agentry = await startAgentry({ bench: 'turns-http', mode: 'cluster', workers: config.workers }, defer);
    const cluster = await openSide(label, agentry, config, defer);
    await warmUp(cluster, config);
    log(
      `${config.rounds} paired rounds of ${config.roundSeconds.toFixed(1)}s (after a ${config.rampSeconds}s ramp each)`,
    );
    const paired = await pairedRounds(
      config.rounds,
      () => embedded.round(config.roundSeconds, config.rampSeconds),
      () => cluster.round(config.roundSeconds, config.rampSeconds),
      (round, index) => log(`round ${index + 1}: postgres ${describe(round.a)}; cluster ${describe(round.b)}`),
    );
    const { ratios, median: ratio } = roundRatios(paired, (round) => perSecond(round.stats), 'b');
    const embeddedResults = loopResults(
      name,
      paired.map((round) => round.a),
      GOALS.postgres,
    );
    const clusterResults = loopResults(
      'turns_http.cluster',
      paired.map((round) => round.b),
    );
    const clusterThroughput = clusterResults[0];
    if (clusterThroughput !== undefined) {
      clusterThroughput.baseline = embeddedResults[0]?.value ?? Number.NaN;
      clusterThroughput.ratio = ratio;
      clusterThroughput.rounds = ratios;
    }
    return [...embeddedResults, ...clusterResults];
  });
}

export async function runTurnsHttpBench(): Promise<BenchResult[]> {
  const config = settings();
  log(
    `${config.loops} loops, polling every ${config.pollMs} ms; ${config.rounds} rounds of ${config.roundSeconds.toFixed(1)}s` +
      (config.cluster ? `; cluster mode with ${config.workers} workers` : '; cluster mode skipped (BENCH_CLUSTER=0)'),
  );
  const results: BenchResult[] = [];
  for (const variant of variants()) results.push(...(await benchEmbedded(variant.kind, config)));
  return results;
}

if (import.meta.main) await runStandalone(runTurnsHttpBench);
