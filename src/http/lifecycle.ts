/**
 * Where the server is in its life: starting (the port is open, but the first-start bootstrap has not finished, so
 * an API key given to it may not exist yet), ready, or shutting down. main.ts listens before it bootstraps, so that
 * a start that fails to listen never uses up the one showing of the first admin key; this gate makes the requests
 * that arrive in between wait instead of meeting a database without its organization. A start that finds the
 * database unreachable keeps listening and tries again (main.ts); meanwhile requests are answered 503 at once.
 */
import type { FastifyReply } from 'fastify';
import { AppError } from '../errors/app-error.ts';

export interface Lifecycle {
  /** False once shutdown has begun: readiness fails so load balancers stop sending traffic. */
  accepting: boolean;
  /** True once the server can serve every request it accepts (migrations, bootstrap organization and key, engine). */
  readonly ready: boolean;
  /** While starting: what the start is waiting for that may take long (`the database`), else null. */
  waitingFor: string | null;
  markReady(): void;
  /** Resolves true once ready, or false when `timeoutMs` passes first. */
  waitUntilReady(timeoutMs: number): Promise<boolean>;
}

/** `ready: false` for a server that still has startup work to do after it listens; tests build ready apps. */
export function createLifecycle(options: { ready: boolean }): Lifecycle {
  let ready = options.ready;
  const { promise: readyPromise, resolve: resolveReady } = Promise.withResolvers<void>();
  if (ready) resolveReady();
  return {
    accepting: true,
    waitingFor: null,
    get ready() {
      return ready;
    },
    markReady() {
      ready = true;
      resolveReady();
    },
    async waitUntilReady(timeoutMs) {
      if (ready) return true;
      let timer: NodeJS.Timeout | undefined;
      const timedOut = new Promise<false>((resolve) => {
        timer = setTimeout(() => resolve(false), timeoutMs);
      });
      try {
        return await Promise.race([readyPromise.then(() => true as const), timedOut]);
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

/** Seconds a client is asked to wait (Retry-After) before trying a server that is still starting. */
export const STARTING_RETRY_AFTER_S = 1;

/** The 503 of a server still starting, with its Retry-After header set on `reply`. */
export function startingError(reply: FastifyReply, lifecycle: Pick<Lifecycle, 'waitingFor'>): AppError {
  reply.header('retry-after', String(STARTING_RETRY_AFTER_S));
  const waiting = lifecycle.waitingFor === null ? '' : `, waiting for ${lifecycle.waitingFor}`;
  return new AppError('service_unavailable', `the server is starting${waiting}; try again in a moment`);
}
