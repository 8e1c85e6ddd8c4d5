/**
 * Preloaded into the server children of bench/stream.ts (`node --expose-gc --import <this file> …`): SIGUSR2
 * runs a full garbage collection and then writes `process.memoryUsage()` as JSON to the file named by
 * BENCH_MEMORY_REPORT, so the bench can read the child's resident size and heap without garbage skewing them.
 * Touches nothing else of the server.
 */
import { writeFileSync } from 'node:fs';

const reportPath = process.env.BENCH_MEMORY_REPORT;

process.on('SIGUSR2', () => {
  globalThis.gc?.();
  if (reportPath !== undefined && reportPath !== '') writeFileSync(reportPath, JSON.stringify(process.memoryUsage()));
});
