/// <reference path="./autocannon.d.ts" />
/**
 * The cost of observability: turn throughput (64 sessions in parallel, in-process, as bench/turns.ts measures it)
 * and authenticated `GET /v1/agents` request throughput (autocannon over loopback), each with observability off,
 * with Prometheus metrics on, and with OpenTelemetry traces exported over OTLP/HTTP (protobuf) to a local sink
 * that reads and discards them. The configurations are measured in alternating rounds and each figure is the
 * median of its rounds; the ratio is against "off" measured in the same rounds. Besides throughput (which other
 * work on a shared machine disturbs), the CPU time this process spent per turn and per request is reported: it
 * is what observability adds, and it moves far less with the machine's load. SQLite only: the question is what
 * observability adds, not what the database costs.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import autocannon from 'autocannon';
import { buildApp } from '../src/app.ts';
import { type BenchResult, median, runStandalone, withCleanup } from './support.ts';
import { openWorld, parallelTurns } from './turns.ts';

export type { BenchResult } from './support.ts';

const SESSIONS = 64;

async function startSink(): Promise<{ url: string; spans: () => number; close: () => Promise<void> }> {
  let requests = 0;
  const server = createServer((request, response) => {
    request.resume();
    request.on('end', () => {
      requests += 1;
      response.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans: () => requests,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

export async function runObservabilityBench(): Promise<BenchResult[]> {
  const rounds = Number(process.env.BENCH_OBSERVABILITY_ROUNDS ?? 3);
  const turns = Number(process.env.BENCH_OBSERVABILITY_TURNS ?? SESSIONS * 15);
  const seconds = Number(process.env.BENCH_OBSERVABILITY_SECONDS ?? 3);
  return withCleanup(async (defer) => {
    const sink = await startSink();
    defer(() => sink.close());
    const configs: Record<string, Record<string, string>> = {
      off: {},
      metrics: { AGENTRY_METRICS: 'true' },
      traces: { OTEL_EXPORTER_OTLP_ENDPOINT: sink.url },
    };
    const worlds = new Map<string, Awaited<ReturnType<typeof openWorld>>>();
    const urls = new Map<string, { url: string; key: string }>();
    for (const [name, env] of Object.entries(configs)) {
      const world = await openWorld({ kind: 'sqlite' }, defer, env);
      const { app } = await buildApp(world.deps);
      defer(() => app.close());
      const url = await app.listen({ host: '127.0.0.1', port: 0 });
      urls.set(name, { url, key: await world.deps.orgs.createKey(world.orgId) });
      worlds.set(name, world);
    }
    const turnRates = new Map<string, number[]>();
    const requestRates = new Map<string, number[]>();
    const turnCpu = new Map<string, number[]>();
    const requestCpu = new Map<string, number[]>();
    const push = (map: Map<string, number[]>, name: string, value: number) =>
      map.set(name, [...(map.get(name) ?? []), value]);
    const cpuMs = (since: NodeJS.CpuUsage) => {
      const used = process.cpuUsage(since);
      return (used.user + used.system) / 1000;
    };
    for (let round = 0; round < rounds; round++) {
      // Rotate the order each round, so no configuration always runs first.
      const names = Object.keys(configs);
      const order = [...names.slice(round % names.length), ...names.slice(0, round % names.length)];
      for (const name of order) {
        const world = worlds.get(name);
        const target = urls.get(name);
        if (world === undefined || target === undefined) throw new Error(`no world for ${name}`);
        const sessions: string[] = [];
        for (let i = 0; i < SESSIONS; i++) sessions.push(await world.newSession());
        let cpu = process.cpuUsage();
        const elapsed = await parallelTurns(world, sessions, turns);
        push(turnCpu, name, cpuMs(cpu) / turns);
        const rate = (turns / elapsed) * 1000;
        turnRates.set(name, [...(turnRates.get(name) ?? []), rate]);
        cpu = process.cpuUsage();
        const result = await autocannon({
          url: `${target.url}/v1/agents`,
          connections: 50,
          duration: seconds,
          headers: { authorization: `Bearer ${target.key}` },
        });
        requestRates.set(name, [...(requestRates.get(name) ?? []), result.requests.average]);
        push(requestCpu, name, (cpuMs(cpu) * 1000) / Math.max(1, result.requests.total));
        process.stderr.write(
          `[bench:observability] round ${round + 1} ${name}: ${Math.round(rate)} turns/s (${turnCpu.get(name)?.at(-1)?.toFixed(2)} CPU ms/turn), ${Math.round(result.requests.average)} requests/s (${requestCpu.get(name)?.at(-1)?.toFixed(0)} CPU µs/request)\n`,
        );
      }
    }
    const results: BenchResult[] = [];
    const offTurns = median(turnRates.get('off') ?? []);
    const offRequests = median(requestRates.get('off') ?? []);
    const offTurnCpu = median(turnCpu.get('off') ?? []);
    const offRequestCpu = median(requestCpu.get('off') ?? []);
    for (const name of Object.keys(configs)) {
      const turnsPerSecond = median(turnRates.get(name) ?? []);
      const requestsPerSecond = median(requestRates.get(name) ?? []);
      results.push(
        {
          name: `observability.${name}.turns`,
          value: turnsPerSecond,
          unit: 'turns/s',
          baseline: offTurns,
          ratio: turnsPerSecond / offTurns,
        },
        {
          name: `observability.${name}.requests`,
          value: requestsPerSecond,
          unit: 'req/s',
          baseline: offRequests,
          ratio: requestsPerSecond / offRequests,
        },
        {
          name: `observability.${name}.turn_cpu`,
          value: median(turnCpu.get(name) ?? []),
          unit: 'CPU ms/turn',
          baseline: offTurnCpu,
          ratio: median(turnCpu.get(name) ?? []) / offTurnCpu,
        },
        {
          name: `observability.${name}.request_cpu`,
          value: median(requestCpu.get(name) ?? []),
          unit: 'CPU µs/req',
          baseline: offRequestCpu,
          ratio: median(requestCpu.get(name) ?? []) / offRequestCpu,
        },
      );
    }
    if (sink.spans() === 0) throw new Error('the traces configuration exported nothing');
    return results;
  });
}

if (import.meta.main) await runStandalone(runObservabilityBench);
