/**
 * Turns over HTTP, as clients play them: each of 64 closed loops posts a message to its own session (with an
 * Idempotency-Key), then waits for it with the long-poll `GET …/messages/{id}?wait=30` until the message is
 * terminal (BENCH_TURNS_HTTP_WAIT=0: polls the plain GET every BENCH_POLL_MS instead, the `turns_http_polling`
 * figures), then posts the next one. The agent uses the default `scripted` model, which answers at once, so all
 * the time is Agentry's. Measured:
 *
 * - turns per second, turn latency (post → terminal GET) and GETs per turn on SQLite and on Postgres, in timed
 *   rounds on fresh sessions (the median round's rate is reported);
 * - cluster mode on Postgres and Redis, one `--role api` process with one `--role worker` and with
 *   BENCH_CLUSTER_WORKERS (2), in alternating rounds: the ratio of turns per second of the two workers to the one
 *   worker, round by round (goal 1.6);
 * - takeover: under the same load, one of the two workers is killed with SIGKILL; the time from the kill until
 *   every turn then in flight has completed (the dead worker's are taken over by the other one; goal 5 s);
 * - the long session: one client plays 1,050 turns in one session; the p50 of its last 50 turns (about the
 *   1,000th) against the p50 of its turns 1–20 (about the 10th) says whether a turn's cost grows with history.
 */
import { type Agentry, Client, createAgent, createSession, type Mode, playTurn, startAgentry } from './agentry.ts';
import { stopProcess } from './children.ts';
import { alternatingRounds, type LoopStats, p50, perSecond, sleep, timedLoops } from './load.ts';
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

const GOALS: Record<'sqlite' | 'postgres', string> = { sqlite: 'value >= 1300', postgres: 'value >= 400' };
const SCALING_GOAL = 'ratio >= 1.6';
const TAKEOVER_GOAL = 'value <= 5';
/** Load before the kill, so that every loop has a turn in flight on some worker. */
const LOAD_BEFORE_KILL_MS = 1500;
/** Gives up on the turns in flight at the kill after this long. */
const TAKEOVER_TIMEOUT_MS = 60_000;
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
  /** Seconds each long-poll GET waits at most; 0: poll instead. */
  waitSeconds: number;
  longTurns: number;
  longPollMs: number;
  cluster: boolean;
  workers: number;
  takeover: boolean;
  /** Embedded rounds alternate with rounds of clients that poll, on the same server. */
  pairedPolling: boolean;
}

function settings(): Settings {
  return {
    loops: positiveInt('BENCH_TURNS_HTTP_LOOPS', 64),
    rounds: scaledInt('BENCH_TURNS_HTTP_ROUNDS', 3, 2),
    roundSeconds: scaled('BENCH_TURNS_HTTP_ROUND_S', 6),
    rampSeconds: 1,
    warmupSeconds: scaled('BENCH_TURNS_HTTP_WARMUP_S', 3),
    pollMs: nonNegativeNumber('BENCH_POLL_MS', 10),
    waitSeconds: nonNegativeNumber('BENCH_TURNS_HTTP_WAIT', 30),
    longTurns: scaledInt('BENCH_LONG_TURNS', 1050, EARLY_TURNS + LATE_TURNS),
    longPollMs: nonNegativeNumber('BENCH_LONG_POLL_MS', 0),
    cluster: process.env.BENCH_CLUSTER !== '0',
    workers: positiveInt('BENCH_CLUSTER_WORKERS', 2),
    takeover: process.env.BENCH_CLUSTER_TAKEOVER !== '0',
    pairedPolling: process.env.BENCH_TURNS_HTTP_PAIRED_POLLING === '1',
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
  /** `waitSeconds` overrides the configured client behaviour (0: poll). */
  round(seconds: number, rampSeconds: number, waitSeconds?: number): Promise<Round>;
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
    async round(seconds, rampSeconds, waitSeconds = config.waitSeconds) {
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
          const played = await playTurn(
            client,
            sessions[loop] ?? '',
            `r${rounds}-${turns}`,
            config.pollMs,
            waitSeconds,
          );
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
  log(`${side.label}: long session, ${config.longTurns} turns, ${waiting(config, config.longPollMs)}`);
  const latencies: number[] = [];
  for (let turn = 1; turn <= config.longTurns; turn++) {
    const started = performance.now();
    await playTurn(side.client, sessionId, `long-${turn}`, config.longPollMs, config.waitSeconds);
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
    const name = `${family(config)}.${mode}`;
    const embedded = await openSide(mode, await startAgentry({ bench: 'turns-http', mode }, defer), config, defer);
    await warmUp(embedded, config);
    if (config.pairedPolling && config.waitSeconds > 0) {
      const paired = await alternatingRounds(
        config.rounds,
        [0, config.waitSeconds].map((wait) => () => embedded.round(config.roundSeconds, config.rampSeconds, wait)),
        ([polling, waiting], index) =>
          polling !== undefined &&
          waiting !== undefined &&
          log(`${mode} round ${index + 1}: polling ${describe(polling)}; waiting ${describe(waiting)}`),
      );
      const polling = loopResults(
        `turns_http_polling.${mode}`,
        paired.flatMap((round) => round.slice(0, 1)),
      );
      const waiting = loopResults(
        name,
        paired.flatMap((round) => round.slice(1, 2)),
        GOALS[mode],
      );
      const [throughput] = waiting;
      if (throughput !== undefined) {
        const { ratios, ratio } = ratioOf(paired, 1, 0);
        Object.assign(throughput, { baseline: polling[0]?.value ?? Number.NaN, ratio, rounds: ratios });
        log(`${mode}: waiting ÷ polling per round: ${ratios.map((r) => r.toFixed(3)).join(' ')}`);
      }
      return [...polling, ...waiting, ...(await longSession(embedded, config, name))];
    }
    const rounds: Round[] = [];
    for (let index = 0; index < config.rounds; index++) {
      const round = await embedded.round(config.roundSeconds, config.rampSeconds);
      log(`${mode} round ${index + 1}: ${describe(round)}`);
      rounds.push(round);
    }
    return [...loopResults(name, rounds, GOALS[mode]), ...(await longSession(embedded, config, name))];
  });
}

/** `turns_http`, or `turns_http_polling` for clients that poll instead of waiting. */
function family(config: Settings): string {
  return config.waitSeconds > 0 ? 'turns_http' : 'turns_http_polling';
}

function waiting(config: Settings, pollMs: number): string {
  return config.waitSeconds > 0 ? `waiting with ?wait=${config.waitSeconds}` : `polling every ${pollMs} ms`;
}

/** The median per-round ratio of side `subject` to side `baseline`, with the ratios. */
function ratioOf(rounds: readonly Round[][], subject: number, baseline: number) {
  const ratios = rounds.map((round) => {
    const a = round[subject];
    const b = round[baseline];
    return a === undefined || b === undefined ? Number.NaN : perSecond(a.stats) / perSecond(b.stats);
  });
  return { ratios, ratio: median(ratios) };
}

/**
 * Cluster mode on one Postgres schema and Redis: one API process with one worker, and with `config.workers`, in
 * alternating rounds (the workers beyond the first are stopped gracefully before a one-worker round and started
 * again before the next round that needs them); then the takeover measurement. One deployment at a time keeps the
 * processes' connections well under the server's max_connections.
 */
async function benchCluster(config: Settings): Promise<BenchResult[]> {
  return withCleanup(async (defer) => {
    const prefix = `${family(config)}.cluster`;
    const agentry = await startAgentry({ bench: 'turns-http', mode: 'cluster', workers: config.workers }, defer);
    const side = await openSide(`cluster (api + ${config.workers} workers)`, agentry, config, defer);
    await warmUp(side, config);
    const running = () =>
      agentry.processes.slice(1).filter(({ child }) => child.exitCode === null && child.signalCode === null);
    const workers = async (count: number) => {
      for (const extra of running().slice(count)) await stopProcess(extra.child);
      while (running().length < count) await agentry.addWorker();
    };
    log(
      `${config.rounds} alternating rounds of ${config.roundSeconds.toFixed(1)}s (after a ${config.rampSeconds}s ramp each), 1 and ${config.workers} workers`,
    );
    const counts = [1, config.workers];
    const rounds = await alternatingRounds(
      config.rounds,
      counts.map((count) => async () => {
        await workers(count);
        return side.round(config.roundSeconds, config.rampSeconds);
      }),
      (results, index) =>
        log(`round ${index + 1}: ${results.map((round, i) => `${counts[i]} worker(s) ${describe(round)}`).join('; ')}`),
    );
    const column = (index: number) => rounds.flatMap((round) => (round[index] === undefined ? [] : [round[index]]));
    const oneResults = loopResults(`${prefix}_1_worker`, column(0));
    const manyResults = loopResults(prefix, column(1), SCALING_GOAL);
    const [manyThroughput] = manyResults;
    if (manyThroughput !== undefined) {
      const { ratios, ratio } = ratioOf(rounds, 1, 0);
      Object.assign(manyThroughput, { baseline: oneResults[0]?.value ?? Number.NaN, ratio, rounds: ratios });
      log(`${config.workers} workers ÷ 1 worker per round: ${ratios.map((r) => r.toFixed(3)).join(' ')}`);
    }
    const results = [...oneResults, ...manyResults];
    if (config.takeover && config.workers >= 2) {
      await workers(config.workers);
      results.push(await takeover(side, agentry, config, prefix));
    }
    return results;
  });
}

/**
 * Every loop plays turns on a fresh session; after LOAD_BEFORE_KILL_MS the last worker is killed with SIGKILL.
 * The figure: seconds from the kill until the last of the turns then in flight completed (each loop has one).
 */
async function takeover(side: Side, agentry: Agentry, config: Settings, prefix: string): Promise<BenchResult> {
  const victim = agentry.processes.at(-1);
  if (victim === undefined || agentry.processes.length < 3) throw new Error('takeover needs two workers');
  const sessions = await Promise.all(
    Array.from({ length: config.loops }, () => createSession(side.client, side.agentId)),
  );
  let killedAt: number | null = null;
  let stopping = false;
  let failure: unknown = null;
  /** Milliseconds from the kill to the completion of each turn that was in flight at the kill. */
  const settled: number[] = [];
  const loops = sessions.map(async (sessionId, loop) => {
    for (let turn = 1; !stopping; turn++) {
      const started = performance.now();
      await playTurn(side.client, sessionId, `takeover-${loop}-${turn}`, config.pollMs, config.waitSeconds);
      if (killedAt !== null && started < killedAt) settled.push(performance.now() - killedAt);
    }
  });
  const all = Promise.all(loops).catch((error: unknown) => {
    failure = error;
  });
  await sleep(LOAD_BEFORE_KILL_MS);
  log(`takeover: killing ${victim.name} (pid ${victim.child.pid}) with SIGKILL under load of ${config.loops} loops`);
  victim.child.kill('SIGKILL');
  killedAt = performance.now();
  const giveUp = killedAt + TAKEOVER_TIMEOUT_MS;
  while (settled.length < config.loops && failure === null && performance.now() < giveUp) await sleep(20);
  stopping = true;
  await all;
  if (failure !== null) throw failure;
  if (settled.length < config.loops) {
    throw new Error(`takeover: ${config.loops - settled.length} turns in flight at the kill never completed`);
  }
  const sorted = [...settled].sort((a, b) => a - b);
  const last = (sorted.at(-1) ?? Number.NaN) / 1000;
  log(
    `takeover: every turn in flight at the kill completed within ${last.toFixed(2)} s ` +
      `(p50 ${(percentile(sorted, 50) / 1000).toFixed(2)} s)`,
  );
  return { name: `${prefix}.takeover`, value: last, unit: 's', goal: TAKEOVER_GOAL };
}

export async function runTurnsHttpBench(): Promise<BenchResult[]> {
  const config = settings();
  log(
    `${config.loops} loops, ${waiting(config, config.pollMs)}; ${config.rounds} rounds of ${config.roundSeconds.toFixed(1)}s` +
      (config.cluster
        ? `; cluster mode with 1 and ${config.workers} workers`
        : '; cluster mode skipped (BENCH_CLUSTER=0)'),
  );
  const results: BenchResult[] = [];
  for (const variant of variants()) {
    results.push(...(await benchEmbedded(variant.kind, config)));
    if (variant.kind === 'postgres' && config.cluster) results.push(...(await benchCluster(config)));
  }
  return results;
}

if (import.meta.main) await runStandalone(runTurnsHttpBench);
