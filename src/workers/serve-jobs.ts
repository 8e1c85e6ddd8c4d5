/**
 * The worker's side of the CPU pool (cpu-pool.ts): a worker module builds its table of jobs and calls
 * `serveCpuJobs(table)`, which says "ready" once the module and its imports have loaded (so a job's time limit
 * never counts the worker's start), then runs one job per message and answers with its value or its error. A stack
 * overflow is told apart from other errors so the caller can say "nested too deeply" instead of a stack trace.
 */
import { isMainThread, parentPort } from 'node:worker_threads';

/** Jobs by name; each takes one structured-cloneable input and returns (or resolves to) a cloneable value. */
export type JobTable = Record<string, (input: never) => unknown>;

export interface JobRequest {
  id: number;
  kind: string;
  input: unknown;
}

export type JobReply =
  | { type: 'ready' }
  | { type: 'done'; id: number; value: unknown }
  | { type: 'failed'; id: number; message: string; stackOverflow: boolean };

function isRequest(value: unknown): value is JobRequest {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof Reflect.get(value, 'id') === 'number' &&
    typeof Reflect.get(value, 'kind') === 'string'
  );
}

const isStackOverflow = (error: unknown): boolean =>
  error instanceof RangeError && /maximum call stack size exceeded/i.test(error.message);

/** Serves `table` to the pool that started this worker; throws on the main thread. */
export function serveCpuJobs(table: JobTable): void {
  const port = parentPort;
  if (isMainThread || port === null) throw new Error('serveCpuJobs runs in a worker thread of the CPU pool');
  const reply = (message: JobReply) => port.postMessage(message);
  port.on('message', async (request: unknown) => {
    if (!isRequest(request)) return;
    const job = Object.hasOwn(table, request.kind) ? table[request.kind] : undefined;
    try {
      if (job === undefined) throw new Error(`no CPU job named ${request.kind}`);
      // The pool's typed `run` is the only sender: the input has the job's parameter type.
      const value: unknown = await Reflect.apply(job, undefined, [request.input]);
      reply({ type: 'done', id: request.id, value });
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      reply({ type: 'failed', id: request.id, message, stackOverflow: isStackOverflow(error) });
    }
  });
  reply({ type: 'ready' });
}
