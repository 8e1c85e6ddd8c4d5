/**
 * `bench/responses.ts`: what `/v1/responses` adds on top of the model it calls. The same local OpenAI-compatible
 * stub model is called directly (a streamed chat completion, as the platform's adapter calls it) and through
 * Agentry (a non-streaming Response on a fresh conversation), in one run: p50/p99 at concurrency 1 and
 * throughput at concurrency 32. Goal: p50 added latency at most 3 ms.
 */
import { join } from 'node:path';
import {
  type BenchResult,
  generateApiKey,
  percentile,
  REPO_ROOT,
  serverEnv,
  startServer,
  tempDir,
  withCleanup,
} from './support.ts';

const SEQUENTIAL = Number(process.env.BENCH_RESPONSES ?? 300);
const PARALLEL_TOTAL = Number(process.env.BENCH_RESPONSES_PARALLEL ?? 1200);
const CONCURRENCY = 32;

async function timeSequential(count: number, call: () => Promise<void>): Promise<number[]> {
  for (let i = 0; i < Math.min(30, count); i++) await call();
  const times: number[] = [];
  for (let i = 0; i < count; i++) {
    const started = performance.now();
    await call();
    times.push(performance.now() - started);
  }
  return times.sort((a, b) => a - b);
}

async function throughput(total: number, concurrency: number, call: () => Promise<void>): Promise<number> {
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < total) {
        next += 1;
        await call();
      }
    }),
  );
  return total / ((performance.now() - started) / 1000);
}

export async function runResponsesBench(): Promise<BenchResult[]> {
  return withCleanup(async (defer) => {
    const stub = await startServer({
      name: 'stub model',
      args: [join(REPO_ROOT, 'bench/stub-model.ts')],
      cwd: REPO_ROOT,
      env: process.env,
      timeoutMs: 10_000,
    });
    defer(async () => {
      stub.child.kill('SIGTERM');
    });
    const key = generateApiKey();
    const env = serverEnv({
      dataDir: await tempDir('responses', defer),
      apiKey: key,
      redis: false,
      extra: { AGENTRY_PROVIDERS: JSON.stringify({ stub: { baseURL: `${stub.url}/v1`, apiKey: 'stub' } }) },
    });
    const agentry = await startServer({
      name: 'agentry',
      args: [join(REPO_ROOT, 'src/main.ts')],
      cwd: REPO_ROOT,
      env,
      timeoutMs: 20_000,
    });
    defer(async () => {
      agentry.child.kill('SIGTERM');
    });
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    const created = await fetch(`${agentry.url}/v1/agents`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ name: 'bench', model: 'stub/model' }),
    });
    const agent = ((await created.json()) as { agent: { id: string } }).agent;

    const direct = async () => {
      const response = await fetch(`${stub.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'model', stream: true, messages: [{ role: 'user', content: 'hi' }] }),
      });
      await response.text();
    };
    const viaAgentry = async () => {
      const response = await fetch(`${agentry.url}/v1/responses`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ model: agent.id, input: 'hi' }),
      });
      const body = (await response.json()) as { status?: string; output_text?: string };
      if (response.status !== 200 || body.status !== 'completed' || body.output_text !== 'Hello from the stub.') {
        throw new Error(`unexpected response ${response.status}: ${JSON.stringify(body).slice(0, 300)}`);
      }
    };

    const directTimes = await timeSequential(SEQUENTIAL, direct);
    const agentryTimes = await timeSequential(SEQUENTIAL, viaAgentry);
    const directRate = await throughput(PARALLEL_TOTAL, CONCURRENCY, direct);
    const agentryRate = await throughput(PARALLEL_TOTAL, CONCURRENCY, viaAgentry);
    const p50 = percentile(agentryTimes, 50);
    const p99 = percentile(agentryTimes, 99);
    const baseP50 = percentile(directTimes, 50);
    const baseP99 = percentile(directTimes, 99);
    const round = (value: number) => Math.round(value * 100) / 100;
    return [
      { name: 'responses.added_latency.p50', value: round(p50 - baseP50), unit: 'ms', goal: 'value <= 3' },
      { name: 'responses.latency.p50', value: round(p50), unit: 'ms', baseline: round(baseP50) },
      { name: 'responses.latency.p99', value: round(p99), unit: 'ms', baseline: round(baseP99) },
      {
        name: `responses.throughput.c${CONCURRENCY}`,
        value: Math.round(agentryRate),
        unit: 'req/s',
        baseline: Math.round(directRate),
        ratio: round(agentryRate / directRate),
      },
    ];
  });
}

if (import.meta.main) {
  const results = await runResponsesBench();
  for (const result of results) console.log(JSON.stringify(result));
}
