/**
 * The worker of one claimed session: runs its turns one at a time in submission order while a heartbeat extends the
 * lease (and notices interrupts that came through the database), then releases the session when nothing in it can
 * run, or hands it over when the engine drains. A full disk or an unreachable database keeps the session: the worker
 * waits, then goes on from the last persisted step.
 */
import type { ContextCaches } from '../domain/turns/context-cache.ts';
import { handOver, heartbeat, type Lease, LeaseLostError, releaseIfIdle } from '../domain/turns/leases.ts';
import { firstOpenMessage } from '../domain/turns/open-messages.ts';
import { abortableSleep, backoffDelay } from '../lib/retry.ts';
import { isDatabaseUnavailable, isStorageFull } from '../storage/errors.ts';
import type { MessageRow } from '../storage/schema.ts';
import type { EngineDeps } from './engine.ts';
import { runTurn } from './turn.ts';
import { TurnAbort, type TurnDeps } from './turn-context.ts';

/** Backoff of a session worker while the database cannot be reached: its first ceiling, and the largest. */
const UNREACHABLE_RETRY_MS = 250;
const UNREACHABLE_RETRY_MAX_MS = 5000;

/** What a session worker needs of its engine. */
export interface WorkerHost {
  readonly deps: EngineDeps;
  readonly turnDeps: TurnDeps;
  readonly contexts: ContextCaches;
  /** Whether the engine drains: the worker hands its session over at its next step boundary or between turns. */
  readonly stopping: boolean;
}

/** A session being worked on: the signal of its turn in flight (a new one after an interrupt), and the work. */
export interface SessionWork {
  controller: AbortController;
  done: Promise<void>;
  /** The message whose turn runs now, if one does. */
  messageId?: string | undefined;
}

/** The session's first turn that can run now (a turn waiting for input cannot). */
export async function nextRunnable(host: WorkerHost, sessionId: string): Promise<MessageRow | undefined> {
  const row = await firstOpenMessage(host.deps.db, sessionId);
  return row === undefined || row.status === 'requires_action' ? undefined : row;
}

/**
 * Gives a session this process stops working on to the others at once: the lease is cleared with the work still
 * pending, and a wake-up tells the other processes (this one no longer listens, so it never takes it back).
 */
export async function handOverNow(host: WorkerHost, lease: Lease): Promise<void> {
  await handOver(host.turnDeps, lease);
  host.deps.logger.debug({ sessionId: lease.sessionId, leaseToken: lease.token }, 'handed the session over');
  host.deps.bus.publish('wake', { sessionId: lease.sessionId });
}

/** Works on a claimed session until it is released, handed over, or its lease is lost. */
export async function workSession(host: WorkerHost, lease: Lease, work: SessionWork): Promise<void> {
  host.deps.logger.debug({ sessionId: lease.sessionId, leaseToken: lease.token }, 'working on the session');
  const beat = startHeartbeat(host, lease, work);
  try {
    const stoppedBy = await runTurns(host, lease, work);
    if (stoppedBy instanceof TurnAbort && stoppedBy.reason === 'shutdown') await handOverNow(host, lease);
    if (stoppedBy instanceof TurnAbort && stoppedBy.reason === 'lease_lost') leaseLost(host, lease);
  } catch (error) {
    if (error instanceof LeaseLostError) leaseLost(host, lease);
    else if (!isStorageFull(error))
      host.deps.logger.error({ err: error, sessionId: lease.sessionId }, 'session worker failed');
  } finally {
    clearInterval(beat);
  }
}

/**
 * Another process holds the session now: this one missed its registry heartbeats (it was taken for dead) or let its
 * lease lapse. Its writes were fenced off; a tool call it had in flight may have run there again.
 */
function leaseLost(host: WorkerHost, lease: Lease): void {
  host.deps.logger.warn(
    { sessionId: lease.sessionId, leaseToken: lease.token },
    'another process took this session over (this one missed its heartbeats or let its lease lapse); it stops here',
  );
}

/**
 * Extends the lease every third of its duration and checks `cancel_requested`, so an interrupt reaches the worker
 * even without the bus; a lost lease aborts the turn in flight.
 */
function startHeartbeat(host: WorkerHost, lease: Lease, work: SessionWork): NodeJS.Timeout {
  const { deps } = host;
  return setInterval(
    () => {
      heartbeat(host.turnDeps, lease, deps.clock.now())
        .then(async () => {
          // Interrupts also travel through the database, for processes the bus does not reach.
          const next = await nextRunnable(host, lease.sessionId);
          if (next?.cancel_requested === 1 && !work.controller.signal.aborted)
            work.controller.abort(new TurnAbort('interrupt'));
        })
        .catch((error: unknown) => {
          if (error instanceof LeaseLostError) work.controller.abort(new TurnAbort('lease_lost'));
          else if (!isStorageFull(error)) {
            deps.logger.warn({ err: error, sessionId: lease.sessionId }, 'lease heartbeat failed');
          }
        });
    },
    Math.max(50, Math.floor(deps.leaseMs / 3)),
  );
}

/**
 * Runs the session's turns one after the other until the session is released, handed over or lost. Returns the
 * reason of the abort that stopped it (a shutdown: the session is to be handed over), undefined otherwise.
 */
async function runTurns(host: WorkerHost, lease: Lease, work: SessionWork): Promise<unknown> {
  const context = host.contexts.forSession(lease.sessionId);
  /** Attempts in a row that found the database unreachable. */
  let unreachable = 0;
  for (;;) {
    if (work.controller.signal.aborted) {
      // An interrupt ends only the turn it hit (or, between turns, nothing: the API already cancelled a
      // waiting or queued turn in the database); the session's next turn gets a fresh signal.
      const reason: unknown = work.controller.signal.reason;
      if (!(reason instanceof TurnAbort) || reason.reason !== 'interrupt') return reason;
      work.controller = new AbortController();
    }
    if (host.stopping) {
      // Between turns, or a turn that paused at a step boundary because the engine drains.
      await handOverNow(host, lease);
      return undefined;
    }
    try {
      const next = await nextRunnable(host, lease.sessionId);
      if (next === undefined) {
        if (await releaseIfIdle(host.turnDeps, lease, host.deps.clock.now())) return undefined;
        continue;
      }
      work.messageId = next.id;
      try {
        await runTurn(host.turnDeps, lease, next, work.controller.signal, context);
      } finally {
        work.messageId = undefined;
      }
      if (lease.released === true) return undefined;
      unreachable = 0;
    } catch (error) {
      // The disk is full: nothing is wrong with the turn. The worker keeps the session and goes on from its last
      // persisted step once writes work again (a lease that lapsed meanwhile and was taken stops it then).
      if (host.deps.space.observe(error)) {
        await host.deps.space.whenWritable(work.controller.signal);
        continue;
      }
      if (!isDatabaseUnavailable(error)) throw error;
      unreachable += 1;
      await waitForDatabase(host, lease, work, { error, attempt: unreachable });
    }
  }
}

/**
 * Keeps the session while the database cannot be reached (the heartbeat renews the lease once it answers) and
 * waits before going on from its last persisted step. Giving it up would need the database too, and until its
 * lease lapsed no process, this one included, could claim it.
 */
async function waitForDatabase(
  host: WorkerHost,
  lease: Lease,
  work: SessionWork,
  failure: { error: unknown; attempt: number },
): Promise<void> {
  if (failure.attempt === 1) {
    host.deps.logger.warn(
      { err: failure.error, sessionId: lease.sessionId },
      'the database cannot be reached; the session waits for it and continues from its last persisted step',
    );
  }
  const delayMs = backoffDelay(failure.attempt, UNREACHABLE_RETRY_MS, UNREACHABLE_RETRY_MAX_MS, Math.random);
  await abortableSleep(delayMs, work.controller.signal).catch(() => undefined);
}
