/**
 * Agentry against Mastra on the same zero-latency OpenAI-compatible stub model (bench/stub-model.ts, its own
 * process): Agentry's non-streaming `POST /v1/responses` (agent model `stub/model` through AGENTRY_PROVIDERS,
 * durable SQLite storage, default log level) against Mastra's `POST /api/agents/{id}/generate` (a project built
 * with `npx mastra build`, in-memory store; see mastra.ts). Both are loaded alternately by closed loops at
 * concurrency 1 and 32, in rounds; each round also calls the stub directly at concurrency 1, the way each
 * platform calls it (Agentry streams the completion, Mastra's generate does not), for the latency each adds.
 *
 * Reported: throughput ratios Agentry ÷ Mastra per round and their median (goal ≥ 3 at both concurrencies),
 * and the p50 latency each adds over calling the stub directly (Agentry's goal: ≤ 3 ms).
 * BENCH_MASTRA=0 leaves Mastra out (the stub comparison still runs).
 */
import { join } from 'node:path';
import { type Answer, Client, createAgent, field } from './agentry.ts';
import { alternatingRounds, type LoopStats, p50, perSecond, timedLoops } from './load.ts';
import { MASTRA_AGENT, mastraVersions, prepareMastra, startMastra } from './mastra.ts';
import { startStubAndAgentry } from './peers.ts';
import { type BenchResult, median, runStandalone, scaled, scaledInt, tempDir, withCleanup } from './support.ts';

export type { BenchResult } from './support.ts';

const HIGH_CONCURRENCY = 32;
const REPLY = 'Hello from the stub.';
const THROUGHPUT_GOAL = 'ratio >= 3';
const ADDED_P50_GOAL = 'value <= 3';

function log(message: string): void {
  process.stderr.write(`[bench:peer-mastra] ${message}\n`);
}

type Call = () => Promise<void>;

function check(name: string, answer: Answer, ok: boolean): void {
  if (!ok) throw new Error(`${name}: unexpected answer ${answer.status}: ${answer.text.slice(0, 500)}`);
}

interface Targets {
  stubStreamed: Call;
  stubJson: Call;
  agentry: Call;
  mastra: Call | null;
}

/** Closed loops; at concurrency > 1 the first half second is not counted (every loop starts at once). */
const measure = (concurrency: number, seconds: number, call: Call): Promise<LoopStats> =>
  timedLoops({ concurrency, rampSeconds: concurrency > 1 ? 0.5 : 0, seconds, call: () => call() });

function describe(label: string, stats: LoopStats): string {
  return `${label} ${perSecond(stats).toFixed(0)}/s p50 ${p50(stats).toFixed(2)} ms`;
}

export async function runPeerMastraBench(): Promise<BenchResult[]> {
  const rounds = scaledInt('BENCH_MASTRA_ROUNDS', 5, 2);
  const seconds = scaled('BENCH_MASTRA_ROUND_S', 3);
  const warmup = scaled('BENCH_MASTRA_WARMUP_S', 2);
  const withMastra = process.env.BENCH_MASTRA !== '0';
  return withCleanup(async (defer) => {
    // Installing and building first, so none of it runs while anything is measured.
    const mastraDir = withMastra ? await prepareMastra() : null;
    const { stub, agentry } = await startStubAndAgentry('peer-mastra', defer);
    const logs = await tempDir('peer-mastra', defer);
    const mastra =
      mastraDir === null ? null : await startMastra(mastraDir, `${stub.url}/v1`, join(logs, 'mastra.log'), defer);

    const pool = (url: string, key: string | null): Client => {
      const client = new Client(url, key, HIGH_CONCURRENCY);
      defer(() => client.close());
      return client;
    };
    const stubClient = pool(stub.url, null);
    const agentryClient = pool(agentry.url, agentry.apiKey);
    const agentId = await createAgent(agentryClient, { model: 'stub/model' });
    const stubCall =
      (stream: boolean): Call =>
      async () => {
        const answer = await stubClient.call('POST', '/v1/chat/completions', {
          model: 'model',
          stream,
          messages: [{ role: 'user', content: 'hi' }],
        });
        check('stub', answer, answer.status === 200);
      };
    const agentryCall: Call = async () => {
      const answer = await agentryClient.call('POST', '/v1/responses', { model: agentId, input: 'hi' });
      const ok =
        answer.status === 200 &&
        field(answer.body, 'status') === 'completed' &&
        field(answer.body, 'output_text') === REPLY;
      check('agentry POST /v1/responses', answer, ok);
    };
    let mastraCall: Call | null = null;
    if (mastra !== null) {
      const mastraClient = pool(mastra.url, null);
      mastraCall = async () => {
        const answer = await mastraClient.call('POST', `/api/agents/${MASTRA_AGENT}/generate`, { messages: 'hi' });
        check(
          `mastra POST /api/agents/${MASTRA_AGENT}/generate`,
          answer,
          answer.status === 200 && field(answer.body, 'text') === REPLY,
        );
      };
    }
    const targets: Targets = {
      stubStreamed: stubCall(true),
      stubJson: stubCall(false),
      agentry: agentryCall,
      mastra: mastraCall,
    };
    // One checked call of each before any load, so a broken setup fails here with its answer.
    for (const call of [
      targets.stubStreamed,
      targets.stubJson,
      agentryCall,
      ...(mastraCall === null ? [] : [mastraCall]),
    ]) {
      await call();
    }
    log(mastra === null ? 'Mastra left out (BENCH_MASTRA=0)' : `Mastra: ${mastraVersions()} at ${mastra.url}`);
    log(
      `warm-up ${warmup.toFixed(1)}s per side and concurrency, then ${rounds} rounds of ${seconds.toFixed(1)}s per side`,
    );
    for (const concurrency of [1, HIGH_CONCURRENCY]) {
      await measure(concurrency, warmup, agentryCall);
      if (mastraCall !== null) await measure(concurrency, warmup, mastraCall);
    }
    await measure(1, warmup / 2, targets.stubStreamed);
    await measure(1, warmup / 2, targets.stubJson);

    const low = await lowConcurrency(targets, rounds, seconds);
    const high = await highConcurrency(targets, rounds, seconds);
    return [...low, ...high];
  });
}

/** Concurrency 1: the stub directly (both ways), Agentry and Mastra, order alternating per round. */
async function lowConcurrency(targets: Targets, rounds: number, seconds: number): Promise<BenchResult[]> {
  const mastra = targets.mastra;
  const sides = [
    () => measure(1, seconds / 2, targets.stubStreamed),
    () => measure(1, seconds, targets.agentry),
    () => measure(1, seconds / 2, targets.stubJson),
    ...(mastra === null ? [] : [() => measure(1, seconds, mastra)]),
  ];
  const done = await alternatingRounds(rounds, sides, (results, index) => {
    const [stubStreamed, agentry, stubJson, peer] = results;
    const parts = [
      stubStreamed && describe('stub (streamed)', stubStreamed),
      stubJson && describe('stub (json)', stubJson),
      agentry && describe('agentry', agentry),
      peer && describe('mastra', peer),
    ];
    log(`c=1 round ${index + 1}: ${parts.filter(Boolean).join('; ')}`);
  });
  const at = (round: LoopStats[], i: number): LoopStats => {
    const stats = round[i];
    if (stats === undefined) throw new Error(`round without side ${i}`);
    return stats;
  };
  const added = done.map((round) => p50(at(round, 1)) - p50(at(round, 0)));
  const results: BenchResult[] = [
    {
      name: 'peer_mastra.agentry.added_p50',
      value: median(added),
      unit: 'ms',
      baseline: median(done.map((round) => p50(at(round, 0)))),
      goal: ADDED_P50_GOAL,
      rounds: added,
    },
  ];
  if (mastra === null) {
    results.push({
      name: 'peer_mastra.agentry.c1.throughput',
      value: median(done.map((r) => perSecond(at(r, 1)))),
      unit: 'req/s',
    });
    return results;
  }
  const peerAdded = done.map((round) => p50(at(round, 3)) - p50(at(round, 2)));
  const ratios = done.map((round) => perSecond(at(round, 1)) / perSecond(at(round, 3)));
  results.push(
    {
      name: 'peer_mastra.mastra.added_p50',
      value: median(peerAdded),
      unit: 'ms',
      baseline: median(done.map((round) => p50(at(round, 2)))),
      rounds: peerAdded,
    },
    {
      name: 'peer_mastra.c1.throughput',
      value: median(done.map((round) => perSecond(at(round, 1)))),
      unit: 'req/s',
      baseline: median(done.map((round) => perSecond(at(round, 3)))),
      ratio: median(ratios),
      goal: THROUGHPUT_GOAL,
      rounds: ratios,
    },
    {
      name: 'peer_mastra.c1.latency.p50',
      value: median(done.map((round) => p50(at(round, 1)))),
      unit: 'ms',
      baseline: median(done.map((round) => p50(at(round, 3)))),
    },
  );
  return results;
}

/** Concurrency 32: Agentry and Mastra, order alternating per round (Agentry alone without Mastra). */
async function highConcurrency(targets: Targets, rounds: number, seconds: number): Promise<BenchResult[]> {
  const c = HIGH_CONCURRENCY;
  const mastra = targets.mastra;
  const sides = [
    () => measure(c, seconds, targets.agentry),
    ...(mastra === null ? [] : [() => measure(c, seconds, mastra)]),
  ];
  const done = await alternatingRounds(rounds, sides, (results, index) => {
    const [agentry, peer] = results;
    log(
      `c=${c} round ${index + 1}: ${[agentry && describe('agentry', agentry), peer && describe('mastra', peer)].filter(Boolean).join('; ')}`,
    );
  });
  const rate = (round: LoopStats[], i: number): number => {
    const stats = round[i];
    if (stats === undefined) throw new Error(`round without side ${i}`);
    return perSecond(stats);
  };
  const latency = (round: LoopStats[], i: number): number => {
    const stats = round[i];
    if (stats === undefined) throw new Error(`round without side ${i}`);
    return p50(stats);
  };
  const name = `peer_mastra.c${c}`;
  if (mastra === null)
    return [
      { name: `peer_mastra.agentry.c${c}.throughput`, value: median(done.map((r) => rate(r, 0))), unit: 'req/s' },
    ];
  const ratios = done.map((round) => rate(round, 0) / rate(round, 1));
  return [
    {
      name: `${name}.throughput`,
      value: median(done.map((round) => rate(round, 0))),
      unit: 'req/s',
      baseline: median(done.map((round) => rate(round, 1))),
      ratio: median(ratios),
      goal: THROUGHPUT_GOAL,
      rounds: ratios,
    },
    {
      name: `${name}.latency.p50`,
      value: median(done.map((round) => latency(round, 0))),
      unit: 'ms',
      baseline: median(done.map((round) => latency(round, 1))),
    },
  ];
}

if (import.meta.main) await runStandalone(runPeerMastraBench);
