/**
 * A worker module for the CPU pool's own tests (src/workers/cpu-pool.test.ts): jobs that answer, fail, loop
 * forever, allocate without end or recurse without end, so each limit of the pool can be met on purpose.
 */
import { threadId } from 'node:worker_threads';
import { serveCpuJobs } from '../../src/workers/serve-jobs.ts';

const TEST_JOBS = {
  /** The thread that ran it: a new one after a worker was ended. */
  whoami: (_input: null) => threadId,
  upper: (input: { text: string }) => input.text.toUpperCase(),
  fail: (input: { message: string }) => {
    throw new Error(input.message);
  },
  /** Synchronous and endless: only ending the worker stops it. Counts its turns in shared memory, if given. */
  spin: (input: { beats: Int32Array } | null): never => {
    for (;;) if (input !== null) Atomics.add(input.beats, 0, 1);
  },
  allocate: (_input: null) => {
    const kept: number[][] = [];
    for (;;) kept.push(new Array(100_000).fill(kept.length));
  },
  recurse: (input: { depth: number }): number => TEST_JOBS.recurse({ depth: input.depth + 1 }) + 1,
};

export type TestJobs = typeof TEST_JOBS;

serveCpuJobs(TEST_JOBS);
