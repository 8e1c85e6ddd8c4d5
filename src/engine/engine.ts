/**
 * The engine: claims sessions with runnable work and runs their turns, one turn at a time per session in
 * submission order, up to `concurrency` sessions at once. Woken by the bus (a message was accepted, an answer
 * resumed a turn) and by a poll that also picks up the sessions of dead processes (lapsed leases, or owners
 * missing from the process registry).
 */

import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { createContextCaches } from '../domain/turns/context-cache.ts';
import {
  claimSession,
  handOver,
  heartbeat,
  type Lease,
  LeaseLostError,
  leasesHeldBy,
  releaseIfIdle,
} from '../domain/turns/leases.ts';
import { firstOpenMessage } from '../domain/turns/open-messages.ts';
import { abortableSleep, backoffDelay } from '../lib/retry.ts';
import { isDatabaseUnavailable, isStorageFull } from '../storage/errors.ts';
import type { MessageRow } from '../storage/schema.ts';
import type { WriteState } from '../storage/storage-space.ts';
import { denyExpiredApprovals } from './approval-timeouts.ts';
import { createProcessRegistry } from './process-registry.ts';
import { runTurn } from './turn.ts';
import { TurnAbort, type TurnDeps } from './turn-context.ts';

/** Backoff of a session worker while the database cannot be reached: its first ceiling, and the largest. */
const UNREACHABLE_RETRY_MS = 250;
const UNREACHABLE_RETRY_MAX_MS = 5000;

export interface EngineOptions {
  concurrency: number;
  pollMs: number;
  /** How long this process counts as alive after its last registry heartbeat (process-registry.ts). */
  processTtlMs: number;
  /** The process's role, recorded in the registry. */
  role?: string;
  /** Estimated bytes of session logs kept between turns (context-cache.ts). */
  contextCacheBytes: number;
}

export interface Engine {
  /** Registers the process, then starts claiming work; resolves once registered. */
  start(): Promise<void>;
  /**
   * Drains: stops claiming; each turn pauses at its next step boundary (no new model or tool call starts) and its
   * session is handed over; tool calls and a model call in flight get up to `graceMs`, and what they return is
   * stored first. Only what still runs after `graceMs` is aborted (and run again by the next worker).
   */
  stop(graceMs: number): Promise<void>;
  /** Sessions being worked on right now. */
  active(): number;
  /** Looks for work now (tests and wake-ups). */
  poke(): void;
}

export type EngineDeps = Omit<TurnDeps, 'owner' | 'draining'> & {
  /** Whether writes work: while the disk is full nothing is claimed, and turns in flight wait for space. */
  space: WriteState;
};

export function createEngine(deps: EngineDeps, options: EngineOptions): Engine {
  const owner = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  /** Fires when the engine starts draining: turns stop at their next step boundary (turn.ts). */
  const drain = new AbortController();
  const turnDeps: TurnDeps = { ...deps, owner, draining: drain.signal };
  const registry = createProcessRegistry({
    db: deps.db,
    clock: deps.clock,
    logger: deps.logger,
    owner,
    role: options.role ?? 'all',
    ttlMs: options.processTtlMs,
  });
  const contexts = createContextCaches(options.contextCacheBytes);
  const running = new Map<string, { controller: AbortController; done: Promise<void> }>();
  const unsubscribe: (() => void)[] = [];
  let stopping = false;
  let pumping = false;
  /** The claim loop running now (stop waits for it, so no session is claimed after the engine stopped). */
  let pumpRun: Promise<void> = Promise.resolve();
  /** Sessions named by wake-ups, claimed one by one before any scan. */
  const wanted = new Set<string>();
  /** Whether a scan for any claimable session was asked for since the last one started. */
  let scanWanted = false;
  /** A pump stopped at the concurrency limit: a slot that frees up should look for more work at once. */
  let saturated = false;
  /** Sessions woken while this process was still working on them (the worker may be releasing them just then). */
  const wokenWhileRunning = new Set<string>();
  let poll: NodeJS.Timeout | null = null;
  let starting: Promise<void> = Promise.resolve();
  /** A claim failed on the way back from the database: it may have taken a lease that no worker here runs. */
  let claimUncertain = false;

  async function nextRunnable(sessionId: string): Promise<MessageRow | undefined> {
    const row = await firstOpenMessage(deps.db, sessionId);
    return row === undefined || row.status === 'requires_action' ? undefined : row;
  }

  /**
   * Gives a session this process stops working on to the others at once: the lease is cleared with the work still
   * pending, and a wake-up tells the other processes (this one no longer listens, so it never takes it back).
   */
  async function handOverNow(lease: Lease): Promise<void> {
    await handOver(turnDeps, lease);
    deps.bus.publish('wake', { sessionId: lease.sessionId });
  }

  async function work(lease: Lease, controller: AbortController): Promise<void> {
    const context = contexts.forSession(lease.sessionId);
    /** Attempts in a row that found the database unreachable. */
    let unreachable = 0;
    const beat = setInterval(
      () => {
        heartbeat(turnDeps, lease, deps.clock.now())
          .then(async () => {
            // Interrupts also travel through the database, for processes the bus does not reach.
            const next = await nextRunnable(lease.sessionId);
            if (next?.cancel_requested === 1 && !controller.signal.aborted)
              controller.abort(new TurnAbort('interrupt'));
          })
          .catch((error: unknown) => {
            if (error instanceof LeaseLostError) controller.abort(new TurnAbort('lease_lost'));
            else if (!isStorageFull(error)) {
              deps.logger.warn({ err: error, sessionId: lease.sessionId }, 'lease heartbeat failed');
            }
          });
      },
      Math.max(50, Math.floor(deps.leaseMs / 3)),
    );
    try {
      for (;;) {
        if (controller.signal.aborted) {
          // An interrupt ends only the turn it hit (or, between turns, nothing: the API already cancelled a
          // waiting or queued turn in the database); the session's next turn gets a fresh signal.
          const reason: unknown = controller.signal.reason;
          if (!(reason instanceof TurnAbort) || reason.reason !== 'interrupt') break;
          controller = new AbortController();
          const entry = running.get(lease.sessionId);
          if (entry !== undefined) entry.controller = controller;
        }
        if (stopping) {
          // Between turns, or a turn that paused at a step boundary because the engine drains.
          await handOverNow(lease);
          return;
        }
        try {
          const next = await nextRunnable(lease.sessionId);
          if (next === undefined) {
            if (await releaseIfIdle(turnDeps, lease, deps.clock.now())) return;
            continue;
          }
          await runTurn(turnDeps, lease, next, controller.signal, context);
          if (lease.released === true) return;
          unreachable = 0;
        } catch (error) {
          // The disk is full: nothing is wrong with the turn. The worker keeps the session and goes on from its last
          // persisted step once writes work again (a lease that lapsed meanwhile and was taken stops it then).
          if (deps.space.observe(error)) {
            await deps.space.whenWritable(controller.signal);
            continue;
          }
          if (!isDatabaseUnavailable(error)) throw error;
          // Keep the session (the heartbeat renews the lease once the database answers) and go on from its last
          // persisted step then. Giving it up would need the database too, and until its lease lapsed no process,
          // this one included, could claim it.
          unreachable += 1;
          if (unreachable === 1) {
            deps.logger.warn(
              { err: error, sessionId: lease.sessionId },
              'the database cannot be reached; the session waits for it and continues from its last persisted step',
            );
          }
          const delayMs = backoffDelay(unreachable, UNREACHABLE_RETRY_MS, UNREACHABLE_RETRY_MAX_MS, Math.random);
          await abortableSleep(delayMs, controller.signal).catch(() => undefined);
        }
      }
      if (controller.signal.aborted) {
        const reason: unknown = controller.signal.reason;
        if (reason instanceof TurnAbort && reason.reason === 'shutdown') await handOverNow(lease);
      }
    } catch (error) {
      if (!(error instanceof LeaseLostError) && !isStorageFull(error))
        deps.logger.error({ err: error, sessionId: lease.sessionId }, 'session worker failed');
    } finally {
      clearInterval(beat);
    }
  }

  /**
   * Looks for work: first the sessions named by wake-ups (one claim each, no scan), then, when asked for (a poll,
   * start-up, a freed slot), any claimable session until none is left or the concurrency limit is reached.
   */
  function pump(sessionId?: string): Promise<void> {
    if (sessionId === undefined) scanWanted = true;
    else wanted.add(sessionId);
    if (pumping) return pumpRun;
    // Claims are writes: none while the disk is full, nor before this process is in the registry. The poll
    // comes back.
    if (!deps.space.writable || !registry.registered) return Promise.resolve();
    pumping = true;
    pumpRun = claimLoop();
    return pumpRun;
  }

  async function claimLoop(): Promise<void> {
    let scanning = false;
    try {
      while (!stopping && running.size < options.concurrency) {
        const preferred: string | undefined = wanted.values().next().value;
        if (preferred !== undefined) wanted.delete(preferred);
        else if (!scanning) {
          if (!scanWanted) break;
          scanWanted = false;
          scanning = true;
        }
        if (claimUncertain) await handOverUnknownLeases();
        const lease = await claimSession(turnDeps, deps.clock.now(), preferred);
        if (lease === null) {
          if (preferred === undefined) scanning = false;
          continue;
        }
        const controller = new AbortController();
        const entry = { controller, done: Promise.resolve() };
        running.set(lease.sessionId, entry);
        entry.done = work(lease, controller).finally(() => {
          running.delete(lease.sessionId);
          const woken = wokenWhileRunning.delete(lease.sessionId);
          if (stopping) return;
          if (woken) void pump(lease.sessionId);
          if (saturated) void pump();
        });
      }
      saturated = running.size >= options.concurrency;
    } catch (error) {
      if (isDatabaseUnavailable(error)) claimUncertain = true;
      if (!isStorageFull(error)) deps.logger.error({ err: error }, 'claiming work failed');
    } finally {
      pumping = false;
    }
  }

  /**
   * Hands over the sessions this process holds a lease on but does not run (see claimUncertain): without this, they
   * would wait for their lease to lapse, since no process may claim a live process's lease.
   */
  async function handOverUnknownLeases(): Promise<void> {
    for (const lease of await leasesHeldBy(deps.db, owner)) {
      if (!running.has(lease.sessionId)) await handOver(turnDeps, lease);
    }
    claimUncertain = false;
  }

  return {
    async start() {
      // Registered before the first claim: a process without a live row would look dead to the others.
      starting = registry.start();
      await starting;
      if (stopping) return;
      unsubscribe.push(
        deps.bus.subscribe('wake', ({ sessionId }) => {
          if (running.has(sessionId)) wokenWhileRunning.add(sessionId);
          else void pump(sessionId);
        }),
        deps.bus.subscribe('interrupt', ({ sessionId }) => {
          const entry = running.get(sessionId);
          if (entry !== undefined && !entry.controller.signal.aborted)
            entry.controller.abort(new TurnAbort('interrupt'));
        }),
      );
      let sweeping = false;
      poll = setInterval(() => {
        void pump();
        if (sweeping || !deps.space.writable) return;
        sweeping = true;
        denyExpiredApprovals(turnDeps)
          .catch((error: unknown) => deps.logger.warn({ err: error }, 'denying expired tool approvals failed'))
          .finally(() => {
            sweeping = false;
          });
      }, options.pollMs);
      poll.unref();
      deps.runExporter?.start();
      void pump();
    },
    async stop(graceMs) {
      stopping = true;
      drain.abort();
      const timer = new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), graceMs).unref());
      await starting.catch(() => undefined);
      if (poll !== null) clearInterval(poll);
      for (const off of unsubscribe.splice(0)) off();
      // A claim already under way when the stop came is waited for: its session is then handed over like the others.
      await pumpRun;
      const all = () => Promise.all([...running.values()].map((entry) => entry.done));
      if ((await Promise.race([all().then(() => 'done' as const), timer])) === 'timeout') {
        for (const entry of running.values()) entry.controller.abort(new TurnAbort('shutdown'));
        await all();
      }
      // Every session was released or handed over: the registry row can go.
      await registry
        .stop()
        .catch((error: unknown) =>
          deps.logger.warn({ err: error }, 'could not remove this process from the engine registry'),
        );
      await deps.runExporter?.stop();
    },
    active: () => running.size,
    poke: () => void pump(),
  };
}
