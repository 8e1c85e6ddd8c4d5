/**
 * `npm run bench`: runs every bench in sequence (never in parallel: they would compete for the same
 * cores and skew each other) and prints one summary table. Exits non-zero only when a bench errors;
 * a missed goal is a finding to report, not a failure of the run.
 *
 * `npm run bench -- http` runs only the named benches; `npm run bench -- all` runs every one, including those left
 * out of the default run.
 */
import { type BenchResult, formatResults, goalMet, loadAverage, machineDescription } from './support.ts';

interface Bench {
  name: string;
  run: () => Promise<BenchResult[]>;
  /** Whether `npm run bench` without names runs it (the others run when named, or with `all`). */
  byDefault: boolean;
}

// One line per bench. Loaded lazily so a bench module that fails to import fails only that bench. The in-process
// turns bench is left out of the default run to keep it under about ten minutes on a shared 2-core machine;
// turns-http measures turns as clients see them.
const BENCHES: readonly Bench[] = [
  { name: 'http', byDefault: true, run: () => import('./http.ts').then((m) => m.runHttpBench()) },
  { name: 'turns-http', byDefault: true, run: () => import('./turns-http.ts').then((m) => m.runTurnsHttpBench()) },
  { name: 'peer-mastra', byDefault: true, run: () => import('./peer-mastra.ts').then((m) => m.runPeerMastraBench()) },
  {
    name: 'peer-langgraph',
    byDefault: true,
    run: () => import('./peer-langgraph.ts').then((m) => m.runPeerLangGraphBench()),
  },
  { name: 'memory', byDefault: true, run: () => import('./memory.ts').then((m) => m.runMemoryBench()) },
  { name: 'stream', byDefault: true, run: () => import('./stream.ts').then((m) => m.runStreamBench()) },
  { name: 'webhooks', byDefault: true, run: () => import('./webhooks.ts').then((m) => m.runWebhooksBench()) },
  { name: 'console', byDefault: true, run: () => import('./console.ts').then((m) => m.runConsoleBench()) },
  { name: 'startup', byDefault: true, run: () => import('./startup.ts').then((m) => m.runStartupBench()) },
  { name: 'context', byDefault: true, run: () => import('./context.ts').then((m) => m.runContextBench()) },
  { name: 'turns', byDefault: false, run: () => import('./turns.ts').then((m) => m.runTurnsBench()) },
  { name: 'limits', byDefault: false, run: () => import('./limits.ts').then((m) => m.runLimitsBench()) },
  {
    name: 'observability',
    byDefault: false,
    run: () => import('./observability.ts').then((m) => m.runObservabilityBench()),
  },
];

async function main(): Promise<number> {
  const wanted = process.argv.slice(2);
  const unknown = wanted.filter((name) => name !== 'all' && !BENCHES.some((bench) => bench.name === name));
  if (unknown.length > 0) {
    console.error(`unknown bench(es): ${unknown.join(', ')}; known: ${BENCHES.map((b) => b.name).join(', ')}`);
    return 2;
  }
  const selected =
    wanted.length === 0
      ? BENCHES.filter((bench) => bench.byDefault)
      : wanted.includes('all')
        ? BENCHES
        : BENCHES.filter((bench) => wanted.includes(bench.name));

  console.log(`machine: ${machineDescription()}\n${new Date().toISOString()}, ${loadAverage()}`);
  const results: BenchResult[] = [];
  const failures: string[] = [];
  for (const bench of selected) {
    console.log(`\n== ${bench.name} (${new Date().toISOString()}, ${loadAverage()})`);
    const started = performance.now();
    try {
      const benchResults = await bench.run();
      results.push(...benchResults);
      console.log(formatResults(benchResults));
    } catch (error) {
      // Keep running the others: one broken bench should not hide the rest of the numbers.
      failures.push(bench.name);
      console.error(`bench ${bench.name} failed:`, error);
    }
    console.log(`(${((performance.now() - started) / 1000).toFixed(1)} s; at the end ${loadAverage()})`);
  }

  console.log(`\n== summary\nmachine: ${machineDescription()}\n${new Date().toISOString()}, ${loadAverage()}\n`);
  console.log(results.length > 0 ? formatResults(results) : '(no results)');
  const missed = results.filter((result) => goalMet(result) === false).map((result) => result.name);
  if (missed.length > 0) console.log(`\ngoal missed: ${missed.join(', ')}`);
  if (failures.length > 0) {
    console.error(`\nfailed: ${failures.join(', ')}`);
    return 1;
  }
  return 0;
}

process.exitCode = await main();
