/**
 * Agentry against the LangGraph.js Agent Server on the same zero-latency OpenAI-compatible stub model
 * (bench/stub-model.ts, its own process): a run created and waited for.
 *
 * - LangGraph: `POST /runs/wait` (a stateless run: the server makes a thread for it, queues the run, one of its
 *   workers runs the graph, the call answers with the final state), the prebuilt ReAct agent on `ChatOpenAI`; the
 *   server `langgraph dev` runs, in memory (see langgraph.ts).
 * - Agentry: non-streaming `POST /v1/responses` (a new conversation, durable on SQLite: the turn is accepted and
 *   stored, run by the engine, and the call answers with the completed Response), default log level. It is the
 *   closest equivalent: one call that creates the work, waits for it and answers with its result. A session message
 *   waited for would take two calls (post, then wait on the stream or poll).
 *
 * Both are loaded alternately by closed loops, concurrency 1 and then 32, in rounds; reported: the throughput ratio
 * Agentry ÷ LangGraph per round and its median (goal ≥ 2 at both), and the p50 latencies. BENCH_LANGGRAPH=0 leaves
 * LangGraph out; when it cannot be installed or started, the bench says why (on standard error and in a result's
 * note) and reports Agentry alone instead of failing.
 */
import { type Answer, Client, createAgent, field } from './agentry.ts';
import type { ServerProcess } from './children.ts';
import { LANGGRAPH_ASSISTANT, langgraphVersions, prepareLangGraph, startLangGraph } from './langgraph.ts';
import { alternatingRounds, type LoopStats, p50, perSecond, timedLoops } from './load.ts';
import { startStubAndAgentry } from './peers.ts';
import {
  type BenchResult,
  type Defer,
  median,
  runStandalone,
  scaled,
  scaledInt,
  tempDir,
  withCleanup,
} from './support.ts';

export type { BenchResult } from './support.ts';

const CONCURRENCIES = [1, 32] as const;
const REPLY = 'Hello from the stub.';
const THROUGHPUT_GOAL = 'ratio >= 2';

function log(message: string): void {
  process.stderr.write(`[bench:peer-langgraph] ${message}\n`);
}

type Call = () => Promise<void>;

function check(name: string, answer: Answer, ok: boolean): void {
  if (!ok) throw new Error(`${name}: unexpected answer ${answer.status}: ${answer.text.slice(0, 500)}`);
}

/**
 * Closed loops; at concurrency > 1 the first 2 s are not counted: every loop starts at once, and a LangGraph run
 * can take longer than a second to be picked up (an idle worker looks for queued runs after a random pause of up to
 * 1 s), so the loops need that long to reach a steady state.
 */
const measure = (concurrency: number, seconds: number, call: Call): Promise<LoopStats> =>
  timedLoops({ concurrency, rampSeconds: concurrency > 1 ? 2 : 0, seconds, call: () => call() });

function describe(label: string, stats: LoopStats): string {
  return `${label} ${perSecond(stats).toFixed(1)}/s p50 ${p50(stats).toFixed(1)} ms`;
}

/** The last message of a LangGraph state (`{ messages: [...] }`), as text. */
function lastMessageText(state: unknown): unknown {
  const messages = field(state, 'messages');
  return Array.isArray(messages) ? field(messages.at(-1), 'content') : undefined;
}

/** LangGraph started, or why it could not be (the error's first lines). */
async function langGraphOrReason(
  stubBaseUrl: string,
  defer: Defer,
): Promise<{ server: ServerProcess } | { reason: string }> {
  try {
    const dir = await prepareLangGraph();
    const workDir = await tempDir('peer-langgraph', defer);
    return { server: await startLangGraph(dir, stubBaseUrl, workDir, defer) };
  } catch (error) {
    const text = error instanceof Error ? error.message : String(error);
    return { reason: text.split('\n').slice(0, 12).join('\n') };
  }
}

export async function runPeerLangGraphBench(): Promise<BenchResult[]> {
  const rounds = scaledInt('BENCH_LANGGRAPH_ROUNDS', 5, 2);
  const seconds = scaled('BENCH_LANGGRAPH_ROUND_S', 3);
  const warmup = scaled('BENCH_LANGGRAPH_WARMUP_S', 2);
  return withCleanup(async (defer) => {
    const { stub, agentry } = await startStubAndAgentry('peer-langgraph', defer);
    const peer =
      process.env.BENCH_LANGGRAPH === '0'
        ? { reason: 'left out (BENCH_LANGGRAPH=0)' }
        : await langGraphOrReason(`${stub.url}/v1`, defer);

    const pool = (url: string, key: string | null): Client => {
      const client = new Client(url, key, CONCURRENCIES[1]);
      defer(() => client.close());
      return client;
    };
    const agentryClient = pool(agentry.url, agentry.apiKey);
    const agentId = await createAgent(agentryClient, { model: 'stub/model' });
    const agentryCall: Call = async () => {
      const answer = await agentryClient.call('POST', '/v1/responses', { model: agentId, input: 'hi' });
      const ok =
        answer.status === 200 &&
        field(answer.body, 'status') === 'completed' &&
        field(answer.body, 'output_text') === REPLY;
      check('agentry POST /v1/responses', answer, ok);
    };
    let langgraphCall: Call | null = null;
    if ('server' in peer) {
      const client = pool(peer.server.url, null);
      langgraphCall = async () => {
        const answer = await client.call('POST', '/runs/wait', {
          assistant_id: LANGGRAPH_ASSISTANT,
          input: { messages: [{ role: 'user', content: 'hi' }] },
        });
        check('langgraph POST /runs/wait', answer, answer.status === 200 && lastMessageText(answer.body) === REPLY);
      };
    }
    // One checked call of each before any load, so a broken setup fails here with its answer.
    await agentryCall();
    if (langgraphCall !== null) await langgraphCall();
    if ('reason' in peer) log(`LangGraph not measured: ${peer.reason}`);
    else log(`LangGraph: ${langgraphVersions()} at ${peer.server.url}`);
    log(
      `warm-up ${warmup.toFixed(1)}s per side and concurrency, then ${rounds} rounds of ${seconds.toFixed(1)}s per side`,
    );

    const results: BenchResult[] = [];
    for (const concurrency of CONCURRENCIES) {
      await measure(concurrency, warmup, agentryCall);
      if (langgraphCall !== null) await measure(concurrency, warmup, langgraphCall);
      const other = langgraphCall;
      const sides = [
        () => measure(concurrency, seconds, agentryCall),
        ...(other === null ? [] : [() => measure(concurrency, seconds, other)]),
      ];
      const done = await alternatingRounds(rounds, sides, (round, index) => {
        const [ours, theirs] = round;
        const parts = [ours && describe('agentry', ours), theirs && describe('langgraph', theirs)];
        log(`c=${concurrency} round ${index + 1}: ${parts.filter(Boolean).join('; ')}`);
      });
      const at = (round: LoopStats[], i: number): LoopStats => {
        const stats = round[i];
        if (stats === undefined) throw new Error(`round without side ${i}`);
        return stats;
      };
      const name = `peer_langgraph.c${concurrency}`;
      if (other === null) {
        results.push({
          name: `peer_langgraph.agentry.c${concurrency}.throughput`,
          value: median(done.map((round) => perSecond(at(round, 0)))),
          unit: 'req/s',
          note: `LangGraph not measured: ${'reason' in peer ? peer.reason.split('\n')[0] : ''}`,
        });
        continue;
      }
      const ratios = done.map((round) => perSecond(at(round, 0)) / perSecond(at(round, 1)));
      results.push(
        {
          name: `${name}.throughput`,
          value: median(done.map((round) => perSecond(at(round, 0)))),
          unit: 'req/s',
          baseline: median(done.map((round) => perSecond(at(round, 1)))),
          ratio: median(ratios),
          goal: THROUGHPUT_GOAL,
          rounds: ratios,
        },
        {
          name: `${name}.latency.p50`,
          value: median(done.map((round) => p50(at(round, 0)))),
          unit: 'ms',
          baseline: median(done.map((round) => p50(at(round, 1)))),
        },
      );
    }
    return results;
  });
}

if (import.meta.main) await runStandalone(runPeerLangGraphBench);
