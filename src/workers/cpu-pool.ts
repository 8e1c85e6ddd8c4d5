/**
 * CPU work on untrusted input runs here, off the event loop that serves every organization: a small pool of worker
 * threads (`node:worker_threads`), each with a heap and stack limit (`resourceLimits`), and a time limit per job.
 * Synchronous work cannot be interrupted from inside, and a tool's timeout cannot fire while the loop is blocked;
 * a worker can always be ended from outside. So a job that runs too long, needs too much memory or overflows its
 * stack ENDS its worker (terminate; the next job gets a fresh one) and rejects with a CpuJobError saying which limit
 * it met, in words a model can read. The caller's AbortSignal cancels a queued job, or ends the worker of a running
 * one, so an interrupted turn never leaves a worker busy. The queue is bounded: past it a job is refused at once.
 *
 * Workers start on demand, say "ready" when loaded (a job's time counts from then), and are unref'd while idle, so
 * a process that never needs one (the CLI) starts none and an idle pool keeps no process alive. Jobs are a table
 * of functions in the worker module (serve-jobs.ts); `run` is typed from that table. The pool knows no jobs of its
 * own: the server's are the built-in tools' (tools/builtin/cpu-work.ts).
 */
import { Worker } from 'node:worker_threads';
import type { Logger } from 'pino';
import type { CpuPoolConfig } from '../config.ts';
import type { JobReply, JobRequest, JobTable } from './serve-jobs.ts';

export const CPU_JOB_FAILURES = ['timeout', 'memory', 'too_deep', 'busy', 'closed', 'crashed', 'failed'] as const;
export type CpuJobFailure = (typeof CPU_JOB_FAILURES)[number];

/** Why a job gave no value. `failed`: the job itself threw, and `message` is its message. */
export class CpuJobError extends Error {
  readonly code: CpuJobFailure;

  constructor(code: CpuJobFailure, message: string) {
    super(message);
    this.name = new.target.name;
    this.code = code;
  }
}

/** Stack of each worker: Node's default, stated so the "nested too deeply" depth does not depend on the platform. */
const STACK_MB = 4;

export interface CpuPool<J extends JobTable> {
  /**
   * Runs job `kind` on `input` in a worker. Rejects with CpuJobError, or with the signal's reason when `signal`
   * aborts (the job is then dropped from the queue, or its worker ended).
   */
  run<K extends keyof J & string>(
    kind: K,
    input: Parameters<J[K]>[0],
    options?: { signal?: AbortSignal | undefined },
  ): Promise<Awaited<ReturnType<J[K]>>>;
  readonly limits: CpuPoolConfig;
  /** Ends every worker; queued and running jobs reject with `closed`. */
  close(): Promise<void>;
}

interface Job {
  id: number;
  kind: string;
  input: unknown;
  resolve(value: unknown): void;
  reject(reason: unknown): void;
  /** Removes the abort listener. */
  release(): void;
}

interface Slot {
  worker: Worker;
  ready: boolean;
  job: Job | null;
  timer: NodeJS.Timeout | undefined;
  /** The error the worker emitted before it exited (an out-of-memory end, a crash). */
  error: Error | undefined;
}

function limitMessage(code: 'timeout' | 'memory' | 'too_deep' | 'busy', limits: CpuPoolConfig): string {
  switch (code) {
    case 'timeout':
      return `it took longer than ${limits.timeoutMs / 1000} s`;
    case 'memory':
      return `it needed more than ${limits.memoryMb} MB of memory`;
    case 'too_deep':
      return 'it is nested too deeply';
    case 'busy':
      return `the server is busy: ${limits.maxQueue} jobs are already waiting; try again shortly`;
  }
}

/** A pool running the jobs of the worker module at `entry` (which calls `serveCpuJobs`) within `limits`. */
export function createCpuPool<J extends JobTable>(
  entry: URL,
  limits: CpuPoolConfig,
  logger?: Pick<Logger, 'warn'>,
): CpuPool<J> {
  const slots = new Set<Slot>();
  const queue: Job[] = [];
  let nextId = 1;
  let closed = false;
  const limitError = (code: 'timeout' | 'memory' | 'too_deep' | 'busy') =>
    new CpuJobError(code, limitMessage(code, limits));

  function settle(slot: Slot): Job | null {
    const job = slot.job;
    slot.job = null;
    clearTimeout(slot.timer);
    job?.release();
    return job;
  }

  /**
   * Ends the worker (it may be stuck in synchronous code) and fails its job with `reason` once the thread is gone;
   * a fresh worker may start meanwhile.
   */
  function end(slot: Slot, reason: unknown): void {
    const job = settle(slot);
    slots.delete(slot);
    if (job !== null && reason instanceof CpuJobError) {
      logger?.warn({ job: job.kind, limit: reason.code }, `cpu job ended: ${reason.message}`);
    }
    const fail = () => job?.reject(reason);
    slot.worker.terminate().then(fail, fail);
    pump();
  }

  function start(slot: Slot, job: Job): void {
    slot.job = job;
    slot.worker.ref();
    slot.timer = setTimeout(() => end(slot, limitError('timeout')), limits.timeoutMs);
    try {
      const request: JobRequest = { id: job.id, kind: job.kind, input: job.input };
      slot.worker.postMessage(request);
    } catch (error) {
      // An input that cannot be cloned: the worker never saw it.
      settle(slot);
      slot.worker.unref();
      job.reject(new CpuJobError('failed', error instanceof Error ? error.message : String(error)));
    }
  }

  function onExit(slot: Slot, code: number): void {
    if (!slots.has(slot)) return; // ended on purpose
    slots.delete(slot);
    const memory = slot.error !== undefined && Reflect.get(slot.error, 'code') === 'ERR_WORKER_OUT_OF_MEMORY';
    const failure = memory
      ? limitError('memory')
      : new CpuJobError('crashed', `the worker stopped unexpectedly (${slot.error?.message ?? `exit code ${code}`})`);
    const job = settle(slot);
    if (job !== null) {
      if (memory) logger?.warn({ job: job.kind, limit: 'memory' }, `cpu job ended: ${failure.message}`);
      job.reject(failure);
    } else if (!slot.ready) {
      // It could not even load: fail what waits rather than starting worker after worker.
      logger?.warn({ err: slot.error?.message, code }, 'cpu worker failed to start');
      for (const waiting of queue.splice(0)) {
        waiting.release();
        waiting.reject(failure);
      }
    }
    pump();
  }

  function spawn(): void {
    const worker = new Worker(entry, {
      resourceLimits: { maxOldGenerationSizeMb: limits.memoryMb, stackSizeMb: STACK_MB },
      // The jobs need nothing from the environment, so they are given none of its secrets.
      env: {},
    });
    const slot: Slot = { worker, ready: false, job: null, timer: undefined, error: undefined };
    slots.add(slot);
    worker.on('message', (reply: JobReply) => {
      if (reply.type === 'ready') {
        slot.ready = true;
        worker.unref();
        pump();
        return;
      }
      if (slot.job?.id !== reply.id) return;
      const job = settle(slot);
      worker.unref();
      if (reply.type === 'done') job?.resolve(reply.value);
      else job?.reject(reply.stackOverflow ? limitError('too_deep') : new CpuJobError('failed', reply.message));
      pump();
    });
    worker.on('error', (error) => {
      slot.error = error;
    });
    worker.on('exit', (code) => onExit(slot, code));
  }

  /** Gives waiting jobs to idle workers, starting workers up to the limit. */
  function pump(): void {
    if (closed) return;
    for (const slot of slots) {
      while (slot.ready && slot.job === null && queue.length > 0) {
        const next = queue.shift();
        if (next !== undefined) start(slot, next);
      }
    }
    const starting = [...slots].filter((slot) => !slot.ready).length;
    const wanted = Math.min(limits.workers - slots.size, queue.length - starting);
    for (let n = 0; n < wanted; n++) spawn();
  }

  return {
    limits,
    run(kind, input, options = {}) {
      const { signal } = options;
      return new Promise((resolve, reject) => {
        if (closed) return reject(new CpuJobError('closed', 'the server is shutting down'));
        if (signal?.aborted) return reject(signal.reason);
        if (queue.length >= limits.maxQueue) return reject(limitError('busy'));
        const onAbort = () => {
          const waiting = queue.indexOf(job);
          if (waiting >= 0) {
            queue.splice(waiting, 1);
            job.release();
            reject(signal?.reason);
            return;
          }
          for (const slot of slots) if (slot.job === job) end(slot, signal?.reason);
        };
        const job: Job = {
          id: nextId++,
          kind,
          input,
          // The worker ran the job of this name, whose return type `run` promises.
          resolve: (value) => resolve(value as Awaited<ReturnType<J[typeof kind]>>),
          reject,
          release: () => signal?.removeEventListener('abort', onAbort),
        };
        signal?.addEventListener('abort', onAbort, { once: true });
        queue.push(job);
        pump();
      });
    },
    async close() {
      closed = true;
      const stopping = new CpuJobError('closed', 'the server is shutting down');
      for (const job of queue.splice(0)) {
        job.release();
        job.reject(stopping);
      }
      const workers = [...slots];
      slots.clear();
      for (const slot of workers) settle(slot)?.reject(stopping);
      await Promise.all(workers.map((slot) => slot.worker.terminate()));
    },
  };
}
