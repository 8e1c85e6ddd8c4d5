/**
 * The CPU pool against real worker threads (test/helpers/cpu-test-worker.ts): values and job errors come back, and
 * each limit ENDS the job's worker (time, memory), or fails the job (stack depth, a full queue), with the next job
 * running normally; an abort cancels a queued job and ends a running one; close fails what is left.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { TestJobs } from '../../test/helpers/cpu-test-worker.ts';
import type { CpuPoolConfig } from '../config.ts';
import { type CpuPool, createCpuPool } from './cpu-pool.ts';

const ENTRY = new URL('../../test/helpers/cpu-test-worker.ts', import.meta.url);
const LIMITS: CpuPoolConfig = { workers: 1, timeoutMs: 1000, memoryMb: 64, maxQueue: 10 };

/** A counter the `spin` job advances: still while its worker is gone, rising while it runs. */
function beats() {
  const counter = new Int32Array(new SharedArrayBuffer(4));
  return {
    counter,
    async stopped(): Promise<boolean> {
      const before = Atomics.load(counter, 0);
      await new Promise((resolve) => setTimeout(resolve, 200));
      return Atomics.load(counter, 0) === before;
    },
  };
}

/** Resolves once the spinning job has started. */
async function waitForBeat(counter: Int32Array) {
  while (Atomics.load(counter, 0) === 0) await new Promise((resolve) => setTimeout(resolve, 10));
}

const pools: CpuPool<TestJobs>[] = [];
function pool(limits: Partial<CpuPoolConfig> = {}) {
  const created = createCpuPool<TestJobs>(ENTRY, { ...LIMITS, ...limits });
  pools.push(created);
  return created;
}
afterEach(async () => {
  await Promise.all(pools.splice(0).map((created) => created.close()));
});

describe('cpu pool', () => {
  it('runs jobs in a worker and returns their values; a job that throws fails alone', async () => {
    const cpu = pool();
    expect(await cpu.run('upper', { text: 'page' })).toBe('PAGE');
    const thread = await cpu.run('whoami', null);
    expect(thread).toBeGreaterThan(0);
    await expect(cpu.run('fail', { message: 'no article here' })).rejects.toMatchObject({
      name: 'CpuJobError',
      code: 'failed',
      message: 'no article here',
    });
    expect(await cpu.run('whoami', null)).toBe(thread);
  });

  it('ends a job past the time limit with its worker, and the next job runs on a fresh one', async () => {
    const cpu = pool({ timeoutMs: 500 });
    const before = await cpu.run('whoami', null);
    const spin = beats();
    await expect(cpu.run('spin', { beats: spin.counter })).rejects.toMatchObject({
      code: 'timeout',
      message: 'it took longer than 0.5 s',
    });
    expect(Atomics.load(spin.counter, 0)).toBeGreaterThan(0);
    expect(await spin.stopped()).toBe(true);
    const after = await cpu.run('whoami', null);
    expect(after).not.toBe(before);
    expect(await cpu.run('upper', { text: 'again' })).toBe('AGAIN');
  });

  it('ends a job past the memory limit with its worker, and the next job runs', async () => {
    const cpu = pool({ memoryMb: 32, timeoutMs: 60_000 });
    await expect(cpu.run('allocate', null)).rejects.toMatchObject({
      code: 'memory',
      message: 'it needed more than 32 MB of memory',
    });
    expect(await cpu.run('upper', { text: 'after' })).toBe('AFTER');
  });

  it('reports a stack overflow as nesting too deep', async () => {
    const cpu = pool();
    await expect(cpu.run('recurse', { depth: 0 })).rejects.toMatchObject({
      code: 'too_deep',
      message: 'it is nested too deeply',
    });
    expect(await cpu.run('upper', { text: 'fine' })).toBe('FINE');
  });

  it('cancels on abort: a running job ends its worker at once, a queued job never runs', async () => {
    const cpu = pool({ timeoutMs: 120_000 });
    const before = await cpu.run('whoami', null);
    const running = new AbortController();
    const queued = new AbortController();
    const spin = beats();
    const spinning = cpu.run('spin', { beats: spin.counter }, { signal: running.signal });
    const waiting = cpu.run('upper', { text: 'never' }, { signal: queued.signal });
    queued.abort(new Error('interrupted while queued'));
    await expect(waiting).rejects.toThrow('interrupted while queued');
    await waitForBeat(spin.counter);
    running.abort(new Error('interrupted while running'));
    await expect(spinning).rejects.toThrow('interrupted while running');
    expect(await spin.stopped()).toBe(true);
    expect(await cpu.run('whoami', null)).not.toBe(before);
    // An already aborted signal never queues.
    await expect(cpu.run('upper', { text: 'x' }, { signal: AbortSignal.abort(new Error('late')) })).rejects.toThrow(
      'late',
    );
  });

  it('refuses a job at once when the queue is full', async () => {
    const cpu = pool({ maxQueue: 1, timeoutMs: 120_000 });
    await cpu.run('whoami', null); // the worker is up and idle: the next job starts at once
    const stop = new AbortController();
    const spinning = cpu.run('spin', null, { signal: stop.signal });
    const queued = cpu.run('upper', { text: 'queued' });
    await expect(cpu.run('upper', { text: 'one too many' })).rejects.toMatchObject({
      code: 'busy',
      message: 'the server is busy: 1 jobs are already waiting; try again shortly',
    });
    stop.abort(new Error('stop'));
    await expect(spinning).rejects.toThrow('stop');
    expect(await queued).toBe('QUEUED');
  });

  it('fails running and queued jobs on close, and every later one', async () => {
    const cpu = pool({ timeoutMs: 120_000 });
    await cpu.run('whoami', null);
    const spinning = expect(cpu.run('spin', null)).rejects.toMatchObject({ code: 'closed' });
    const queued = expect(cpu.run('upper', { text: 'x' })).rejects.toMatchObject({ code: 'closed' });
    await cpu.close();
    await spinning;
    await queued;
    await expect(cpu.run('upper', { text: 'x' })).rejects.toMatchObject({ code: 'closed' });
  });
});
