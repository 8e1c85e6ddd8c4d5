// autocannon ships no type declarations; these cover only what the benches use, so a field missing
// here is one nobody reads yet rather than one autocannon lacks.
declare module 'autocannon' {
  import type { EventEmitter } from 'node:events';

  namespace autocannon {
    interface Options {
      url: string;
      connections?: number;
      pipelining?: number;
      /** Seconds. */
      duration?: number;
      /** Seconds before a request counts as a timeout error. */
      timeout?: number;
      method?: string;
      headers?: Record<string, string>;
      body?: string;
      title?: string;
    }

    /** Per-second request samples or latency (milliseconds, whole numbers) distribution. */
    interface Histogram {
      average: number;
      mean: number;
      stddev: number;
      min: number;
      max: number;
      p50: number;
      p90: number;
      p99: number;
    }

    interface RequestHistogram extends Histogram {
      total: number;
      sent: number;
    }

    interface Result {
      url: string;
      /** Seconds the run actually took. */
      duration: number;
      connections: number;
      pipelining: number;
      /** Connection errors, timeouts included. */
      errors: number;
      timeouts: number;
      non2xx: number;
      statusCodeStats: Record<string, { count: number }>;
      requests: RequestHistogram;
      latency: Histogram;
      throughput: Histogram;
    }

    /** The running job: awaitable for its Result, stoppable early. */
    interface Instance extends EventEmitter, PromiseLike<Result> {
      stop(): void;
    }
  }

  function autocannon(options: autocannon.Options): autocannon.Instance;
  export = autocannon;
}
