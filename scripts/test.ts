/**
 * `npm test`: lint, typecheck (the server's and the console's), then every test (unit and integration, SQLite and Postgres), ending with one
 * summary line `N passed, N failed, N skipped`. Exits non-zero when any stage fails.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

interface Stage {
  name: string;
  ok: boolean;
  seconds: number;
}

const bin = (name: string) => join(import.meta.dirname, '..', 'node_modules', '.bin', name);

function run(name: string, command: string, args: string[]): Stage {
  const started = performance.now();
  process.stdout.write(`\n=== ${name}: ${[command.split('/').pop(), ...args].join(' ')}\n`);
  const result = spawnSync(command, args, { stdio: 'inherit', env: process.env });
  return { name, ok: result.status === 0, seconds: (performance.now() - started) / 1000 };
}

interface VitestReport {
  numPassedTests: number;
  numFailedTests: number;
  numPendingTests: number;
  numTodoTests: number;
  testResults?: {
    name: string;
    startTime?: number;
    endTime?: number;
    message?: string;
    assertionResults?: { fullName: string; status: string; failureMessages?: string[] }[];
  }[];
}

/** The slowest test files of the run, so the suite's time can be kept in check from CI's log alone. */
function slowestFiles(report: VitestReport, count: number): string[] {
  const root = join(import.meta.dirname, '..');
  return (report.testResults ?? [])
    .map((file) => ({
      name: file.name.replace(`${root}/`, ''),
      seconds: ((file.endTime ?? 0) - (file.startTime ?? 0)) / 1000,
    }))
    .sort((a, b) => b.seconds - a.seconds)
    .slice(0, count)
    .map((file) => `${file.seconds.toFixed(1).padStart(7)} s  ${file.name}`);
}

/** The failed tests with the first lines of their messages, so a failure can be read from the end of CI's log. */
function failedTests(report: VitestReport): string[] {
  const root = join(import.meta.dirname, '..');
  const excerpt = (message: string) =>
    message
      .split('\n')
      .slice(0, 6)
      .map((line) => `      ${line.slice(0, 300)}`)
      .join('\n');
  const lines: string[] = [];
  for (const file of report.testResults ?? []) {
    const name = file.name.replace(`${root}/`, '');
    const failed = (file.assertionResults ?? []).filter((test) => test.status === 'failed');
    for (const test of failed) {
      lines.push(`  ${name} > ${test.fullName}`, excerpt(test.failureMessages?.[0] ?? ''));
    }
    if (failed.length === 0 && file.message) lines.push(`  ${name}`, excerpt(file.message));
  }
  return lines;
}

const stages: Stage[] = [];
stages.push(run('lint', bin('biome'), ['check', '.']));
stages.push(run('typecheck', bin('tsc'), ['--noEmit']));
stages.push(run('console', bin('tsc'), ['--noEmit', '-p', 'console']));

const reportDir = mkdtempSync(join(tmpdir(), 'agentry-test-report-'));
const reportFile = join(reportDir, 'vitest.json');
stages.push(
  run('tests', bin('vitest'), [
    'run',
    '--reporter=default',
    '--reporter=json',
    `--outputFile.json=${reportFile}`,
    ...process.argv.slice(2),
  ]),
);

let counts: VitestReport | null = null;
try {
  counts = JSON.parse(readFileSync(reportFile, 'utf8')) as VitestReport;
} catch {
  counts = null;
}
rmSync(reportDir, { recursive: true, force: true });

if (counts !== null) {
  const slowest = slowestFiles(counts, 15);
  if (slowest.length > 0) process.stdout.write(`\n=== Slowest test files\n${slowest.join('\n')}\n`);
  const failed = failedTests(counts);
  if (failed.length > 0) process.stdout.write(`\n=== Failed tests\n${failed.join('\n')}\n`);
}
process.stdout.write('\n=== Summary\n');
for (const stage of stages) {
  process.stdout.write(`  ${stage.ok ? 'ok  ' : 'FAIL'}  ${stage.name.padEnd(10)} ${stage.seconds.toFixed(1)} s\n`);
}
const failedStages = stages.filter((stage) => !stage.ok).length;
if (counts === null) {
  process.stdout.write('  (no test report was written)\n');
  process.stdout.write(`0 passed, ${Math.max(1, failedStages)} failed\n`);
} else {
  const skipped = counts.numPendingTests + counts.numTodoTests;
  // Stage failures (lint, typecheck) count as failures too, so the closing line never reads green when they fail.
  const failed = counts.numFailedTests + stages.filter((stage) => stage.name !== 'tests' && !stage.ok).length;
  process.stdout.write(`${counts.numPassedTests} passed, ${failed} failed, ${skipped} skipped\n`);
}
process.exit(failedStages === 0 ? 0 : 1);
