/**
 * The sandbox's limits against commands written to exhaust the host: a fork bomb, an endless loop, a memory hog,
 * 100 MB of output, an oversized file, a full /tmp, a command that never ends, and an interrupt that must take
 * the command's background children with it. Each is paired with the same command kept within bounds (which
 * works), and after each the host must still run the next command normally.
 */
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { SandboxLimits } from '../src/config/sandbox-limits.ts';
import { createSandboxRuntime, type SandboxRuntime } from '../src/tools/sandbox/sandbox-runtime.ts';
import { WAIT_MS } from './helpers/deadlines.ts';
import {
  describeSandbox,
  detection,
  hostProcesses,
  scratchDataDir,
  silentLogger,
  testProjectIds,
} from './helpers/sandbox.ts';

const data = scratchDataDir('agentry-sandbox-limits-');
const MIB = 1024 * 1024;
const runtimes: SandboxRuntime[] = [];

async function runtimeWith(limits: Partial<SandboxLimits>): Promise<{ runtime: SandboxRuntime; workspace: string }> {
  const runtime = await createSandboxRuntime({
    dataDir: data.path,
    logger: silentLogger,
    allowInsecureDestinations: false,
    projectIdOf: testProjectIds(),
    detection,
    limits,
  });
  runtimes.push(runtime);
  return { runtime, workspace: await runtime.workspaceFor('org1', `agent${runtimes.length}`) };
}

/** Whether `condition` holds within WAIT_MS (polled). */
async function waitFor(condition: () => boolean): Promise<boolean> {
  const until = Date.now() + WAIT_MS;
  while (Date.now() < until) {
    if (condition()) return true;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return condition();
}

describeSandbox('sandbox limits', () => {
  let normal: { runtime: SandboxRuntime; workspace: string };

  beforeAll(async () => {
    normal = await runtimeWith({});
  });
  afterAll(async () => {
    for (const runtime of runtimes) await runtime.close();
    data.remove();
  });

  /** The host is fine: an ordinary command runs normally, to its end, stopped by no limit. */
  async function hostStillFine(): Promise<void> {
    const result = await normal.runtime.run({ workspace: normal.workspace, command: 'echo ok', policy: null });
    expect(result).toMatchObject({ exitCode: 0, stdout: 'ok\n', killed: null, timedOut: false });
  }

  it('a fork bomb stops at the process limit, without holding back another sandbox', async () => {
    const { runtime, workspace } = await runtimeWith({ processes: 64 });
    const bomb = runtime.run({
      workspace,
      policy: null,
      timeoutMs: 20_000,
      // Waits with builtins only (a full process table refuses forks), then counts the processes it can see.
      command: [
        'mkfifo /tmp/wait && exec 3<>/tmp/wait',
        'echo "limit=$(ulimit -u)"',
        'bomb() { bomb | bomb & }',
        'bomb 2>/dev/null &',
        'read -t 3 -u 3',
        'n=0; for p in /proc/[0-9]*; do n=$((n + 1)); done; echo "processes=$n"',
      ].join('\n'),
    });
    // Meanwhile another agent's sandbox forks freely: the limit is counted per sandbox.
    const other = await normal.runtime.run({
      workspace: normal.workspace,
      policy: null,
      command: 'for i in $(seq 20); do sleep 0.2 & done; wait; echo forked',
    });
    expect(other).toMatchObject({ exitCode: 0, stdout: 'forked\n' });
    const result = await bomb;
    expect(result.stdout).toContain('limit=64');
    const processes = Number(/processes=(\d+)/.exec(result.stdout)?.[1]);
    // The bomb really ran into the wall (so the count means something), and the wall held.
    expect(processes).toBeGreaterThan(32);
    expect(processes).toBeLessThanOrEqual(64);
    expect(result.exitCode).toBe(0);
    await hostStillFine();
  });

  it('an endless loop is stopped by the CPU limit; a finite one completes', async () => {
    const { runtime, workspace } = await runtimeWith({ cpuSeconds: 1 });
    const finite = await runtime.run({
      workspace,
      policy: null,
      command: 'for ((i = 0; i < 1000; i++)); do :; done; echo done',
    });
    expect(finite).toMatchObject({ exitCode: 0, stdout: 'done\n', killed: null });
    const endless = await runtime.run({ workspace, policy: null, timeoutMs: 30_000, command: 'while :; do :; done' });
    // Stopped by the CPU limit, not the 30 s wall clock (however long a second of CPU takes on a busy machine).
    expect(endless).toMatchObject({ killed: 'cpu_time', signal: 'SIGXCPU', exitCode: 152, timedOut: false });
    await hostStillFine();
  });

  it('a command that never ends is killed at the wall-clock timeout', async () => {
    const result = await normal.runtime.run({
      workspace: normal.workspace,
      policy: null,
      timeoutMs: 700,
      command: 'sleep 30',
    });
    expect(result).toMatchObject({ killed: 'timeout', timedOut: true, exitCode: null, signal: 'SIGKILL' });
    expect(result.durationMs).toBeGreaterThanOrEqual(650);
    // Killed at its 0.7 s limit, not when `sleep 30` ended; the bound leaves room for a loaded machine.
    expect(result.durationMs).toBeLessThan(20_000);
    await hostStillFine();
  });

  it('a memory hog is refused its memory; a modest allocation works', async () => {
    const { runtime, workspace } = await runtimeWith({ memoryBytes: 64 * MIB });
    const hog = (bytes: number) => `x=$(head -c ${bytes} /dev/zero | tr '\\0' x); echo "\${#x}"`;
    const modest = await runtime.run({ workspace, policy: null, command: hog(10_000_000) });
    expect(modest).toMatchObject({ exitCode: 0, stdout: '10000000\n' });
    const greedy = await runtime.run({ workspace, policy: null, timeoutMs: 30_000, command: hog(300_000_000) });
    expect(greedy.exitCode).not.toBe(0);
    expect(greedy.killed).toBe('memory');
    expect(greedy.stdout).not.toContain('300000000');
    await hostStillFine();
  });

  it('100 MB of output is cut off and the writer killed; small output is whole', async () => {
    const { runtime, workspace } = await runtimeWith({ outputBytes: 64 * 1024, outputKillBytes: 4 * MIB });
    const small = await runtime.run({ workspace, policy: null, command: "head -c 1000 /dev/zero | tr '\\0' a" });
    expect(small).toMatchObject({ exitCode: 0, truncated: false, killed: null });
    expect(small.stdout).toBe('a'.repeat(1000));
    const flood = await runtime.run({
      workspace,
      policy: null,
      timeoutMs: 30_000,
      command: "head -c 100000000 /dev/zero | tr '\\0' a; echo finished",
    });
    expect(flood).toMatchObject({ killed: 'output_limit', truncated: true, exitCode: null });
    expect(flood.stdout.startsWith('a'.repeat(64 * 1024))).toBe(true);
    expect(flood.stdout).toMatch(/\[output truncated: \d+ more bytes of stdout were not kept\]\n$/);
    expect(flood.stdout.length).toBeLessThan(64 * 1024 + 200);
    expect(flood.stdout).not.toContain('finished');
    await hostStillFine();
  });

  it('a file beyond the size limit is stopped; /tmp is small and private', async () => {
    const { runtime, workspace } = await runtimeWith({ fileSizeBytes: MIB, tmpBytes: 2 * MIB });
    const ok = await runtime.run({ workspace, policy: null, command: 'head -c 500000 /dev/zero > fits && echo ok' });
    expect(ok).toMatchObject({ exitCode: 0, stdout: 'ok\n' });
    const big = await runtime.run({ workspace, policy: null, command: 'head -c 5000000 /dev/zero > big' });
    expect(big.killed).toBe('file_size');
    expect(statSync(join(workspace, 'big')).size).toBeLessThanOrEqual(MIB);
    const tmp = await runtime.run({
      workspace,
      policy: null,
      command:
        'head -c 900000 /dev/zero > /tmp/a && echo a-fits; head -c 900000 /dev/zero > /tmp/b && head -c 900000 /dev/zero > /tmp/c; echo "status=$?"',
    });
    expect(tmp.stdout).toContain('a-fits');
    expect(tmp.stdout).toContain('status=1');
    expect(tmp.stderr).toContain('No space left on device');
    await hostStillFine();
  });

  it('an interrupt kills the command and everything it started, background children included', async () => {
    const controller = new AbortController();
    const running = normal.runtime.run({
      workspace: normal.workspace,
      policy: null,
      signal: controller.signal,
      timeoutMs: 60_000,
      command: 'sleep 987654 & sleep 987655',
    });
    // Positive control: the host can see both sleeps while they run.
    expect(await waitFor(() => hostProcesses('sleep 98765').length === 2)).toBe(true);
    controller.abort();
    const result = await running;
    expect(result).toMatchObject({ killed: 'aborted', exitCode: null, timedOut: false });
    expect(await waitFor(() => hostProcesses('sleep 98765').length === 0)).toBe(true);
    await hostStillFine();
  });

  it('nothing a command leaves behind outlives its run, and closing the runtime kills runs in flight', async () => {
    const left = await normal.runtime.run({
      workspace: normal.workspace,
      policy: null,
      command: 'sleep 987656 & echo left',
    });
    expect(left).toMatchObject({ exitCode: 0, stdout: 'left\n' });
    expect(await waitFor(() => hostProcesses('sleep 987656').length === 0)).toBe(true);

    const { runtime, workspace } = await runtimeWith({});
    const running = runtime.run({ workspace, policy: null, command: 'sleep 987657', timeoutMs: 60_000 });
    expect(await waitFor(() => hostProcesses('sleep 987657').length === 1)).toBe(true);
    expect(runtime.activeRuns()).toBe(1);
    await runtime.close();
    expect((await running).killed).toBe('aborted');
    expect(runtime.activeRuns()).toBe(0);
    expect(hostProcesses('sleep 987657')).toEqual([]);
  });
});
