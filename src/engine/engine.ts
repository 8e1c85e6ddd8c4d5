/**
 * The engine: claims sessions with runnable work and runs their turns, one turn at a time per session in
 * submission order, up to `concurrency` sessions at once. Woken by the bus (a message was accepted, an answer
 * resumed a turn) and by a poll that also picks up the sessions of dead processes (lapsed leases, or owners
 * missing from the process registry).
 */

import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { claimSession } from '../domain/turns/claims.ts';
import { type ContextCaches, createContextCaches } from '../domain/turns/context-cache.ts';
import { handOver, heartbeat, type Lease, LeaseLostError, leasesHeldBy } from '../domain/turns/leases.ts';
import type { LeaseOffer, LocalClaimsSlot } from '../domain/turns/local-claims.ts';
import type { Executor } from '../storage/db.ts';
import { isDatabaseUnavailable, isStorageFull } from '../storage/errors.ts';
import type { WriteState } from '../storage/storage-space.ts';
import { denyExpiredApprovals } from './approval-timeouts.ts';
import { createProcessRegistry, type ProcessRegistry } from './process-registry.ts';
import { handOverNow, type SessionWork, type WorkerHost, workSession } from './session-worker.ts';
import { TurnAbort, type TurnDeps } from './turn-context.ts';

export interface EngineOptions {
  concurrency: number;
  pollMs: number;
  /** How long this process counts as alive after its last registry heartbeat (process-registry.ts). */
  processTtlMs: number;
  /** The process's role, recorded in the registry. */
  role?: string;
  /** Estimated bytes of session logs kept between turns (context-cache.ts). */
  contextCacheBytes: number;
  /** Where the engine offers this process's accepts the leases of sessions it can run at once (local-claims.ts). */
  localClaims?: LocalClaimsSlot;
}

/**
 * How long a lease taken at accept waits for the wake-up that follows its commit before the engine looks for itself:
 * a lease the database holds is then run, one it does not (the accept rolled back) is forgotten.
 */
const TAKEN_LEASE_WAIT_MS = 1000;

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
  /**
   * Where the process registry's heartbeats go (`db` when not given). On Postgres, connections of their own that
   * commit without waiting for the disk: a heartbeat queued behind the turns' statements, or behind a slow flush,
   * could let the row lapse while the process lives, and the others would take its sessions over (and run again a
   * tool call it still has in flight).
   */
  registryDb?: Executor;
};

/** The engine's state, shared by its claim loop, its session workers and its start and stop. */
interface Pool extends WorkerHost {
  readonly options: EngineOptions;
  readonly owner: string;
  readonly registry: ProcessRegistry;
  /** Fires when the engine starts draining: turns stop at their next step boundary (turn.ts). */
  readonly drain: AbortController;
  readonly running: Map<string, SessionWork>;
  readonly unsubscribe: (() => void)[];
  stopping: boolean;
  pumping: boolean;
  /** The claim loop running now (stop waits for it, so no session is claimed after the engine stopped). */
  pumpRun: Promise<void>;
  /** Sessions named by wake-ups, claimed one by one (taking turns with a scan: nextClaim). */
  readonly wanted: Set<string>;
  /** Whether a scan for any claimable session was asked for since the last one started. */
  scanWanted: boolean;
  /** A pump stopped at the concurrency limit: a slot that frees up should look for more work at once. */
  saturated: boolean;
  /** Sessions woken while this process was still working on them (the worker may be releasing them just then). */
  readonly wokenWhileRunning: Set<string>;
  poll: NodeJS.Timeout | null;
  starting: Promise<void>;
  /** A claim failed on the way back from the database: it may have taken a lease that no worker here runs. */
  claimUncertain: boolean;
  /**
   * Leases offered to accepts in progress (local-claims.ts), by session: each holds a slot. `lease` is set once the
   * accept took it; the wake-up after its commit hands it over (adoptTaken), or after a while the timer does.
   */
  readonly offered: Map<string, { lease: Lease | null; timer: NodeJS.Timeout | null }>;
}

export function createEngine(deps: EngineDeps, options: EngineOptions): Engine {
  const owner = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  const drain = new AbortController();
  const registry = createProcessRegistry({
    db: deps.registryDb ?? deps.db,
    clock: deps.clock,
    logger: deps.logger,
    owner,
    role: options.role ?? 'all',
    slots: options.concurrency,
    ttlMs: options.processTtlMs,
  });
  const contexts: ContextCaches = createContextCaches(options.contextCacheBytes);
  const pool: Pool = {
    deps,
    turnDeps: { ...deps, owner, draining: drain.signal },
    contexts,
    options,
    owner,
    registry,
    drain,
    running: new Map(),
    unsubscribe: [],
    stopping: false,
    pumping: false,
    pumpRun: Promise.resolve(),
    wanted: new Set(),
    scanWanted: false,
    saturated: false,
    wokenWhileRunning: new Set(),
    poll: null,
    starting: Promise.resolve(),
    claimUncertain: false,
    offered: new Map(),
  };
  return {
    start: () => startEngine(pool),
    stop: (graceMs) => stopEngine(pool, graceMs),
    active: () => pool.running.size,
    poke: () => void pump(pool),
  };
}

/**
 * Looks for work: the sessions named by wake-ups (one claim each, no scan) and, when asked for (a poll, start-up,
 * a freed slot), any claimable session until none is left or the concurrency limit is reached, the two taking
 * turns (nextClaim).
 */
function pump(pool: Pool, sessionId?: string): Promise<void> {
  if (sessionId === undefined) pool.scanWanted = true;
  else pool.wanted.add(sessionId);
  if (pool.pumping) return pool.pumpRun;
  // Claims are writes: none while the disk is full, nor before this process is in the registry. The poll
  // comes back.
  if (!pool.deps.space.writable || !pool.registry.registered) return Promise.resolve();
  pool.pumping = true;
  pool.pumpRun = claimLoop(pool);
  return pool.pumpRun;
}

/** Where a claim loop is: whether it scans for any claimable session, and whether its last claim named one. */
interface ClaimRound {
  scanning: boolean;
  namedLast: boolean;
}

/**
 * The next claim of a loop: a session named by a wake-up, undefined for a scan claim, null when nothing is asked
 * for. While a scan runs, named claims and scan claims take turns: under load wake-ups never stop coming, and
 * the scan is what finds the sessions of a dead process (its sessions get no wake-up), so it must not wait for
 * them to stop; nor must the wake-ups wait for a scan that keeps finding work.
 */
function nextClaim(pool: Pool, round: ClaimRound): string | undefined | null {
  if (!round.scanning && pool.scanWanted) {
    pool.scanWanted = false;
    round.scanning = true;
  }
  const named: string | undefined = round.scanning && round.namedLast ? undefined : pool.wanted.values().next().value;
  round.namedLast = named !== undefined;
  if (named !== undefined) {
    pool.wanted.delete(named);
    return named;
  }
  return round.scanning ? undefined : null;
}

async function claimLoop(pool: Pool): Promise<void> {
  const { deps } = pool;
  const round: ClaimRound = { scanning: false, namedLast: false };
  try {
    while (!pool.stopping && busySlots(pool) < pool.options.concurrency) {
      const preferred = nextClaim(pool, round);
      if (preferred === null) break;
      if (pool.claimUncertain) await handOverUnknownLeases(pool);
      const lease = await claimSession(pool.turnDeps, deps.clock.now(), preferred);
      if (lease === null) {
        if (preferred === undefined) round.scanning = false;
        continue;
      }
      run(pool, lease);
    }
    pool.saturated = busySlots(pool) >= pool.options.concurrency;
  } catch (error) {
    if (isDatabaseUnavailable(error)) pool.claimUncertain = true;
    if (!isStorageFull(error)) deps.logger.error({ err: error }, 'claiming work failed');
  } finally {
    pool.pumping = false;
  }
}

/** Slots taken: sessions worked on, and leases offered to accepts in progress. */
const busySlots = (pool: Pool): number => pool.running.size + pool.offered.size;

/** Works on the session of a lease this process holds, in a slot of its own. */
function run(pool: Pool, lease: Lease): void {
  const { running } = pool;
  const work: SessionWork = { controller: new AbortController(), done: Promise.resolve() };
  running.set(lease.sessionId, work);
  work.done = workSession(pool, lease, work).finally(() => {
    running.delete(lease.sessionId);
    const woken = pool.wokenWhileRunning.delete(lease.sessionId);
    if (pool.stopping) return;
    if (woken) void pump(pool, lease.sessionId);
    if (pool.saturated) void pump(pool);
  });
}

/**
 * A lease for an accept to take (local-claims.ts): only with a free slot, no wake-up waiting for its claim (those
 * sessions come first), writes working, and no limit of concurrent turns in force for certain.
 */
function offer(pool: Pool, sessionId: string, now: number): LeaseOffer | null {
  const { deps } = pool;
  if (pool.stopping || !pool.registry.registered || !deps.space.writable) return null;
  if (busySlots(pool) >= pool.options.concurrency || pool.wanted.size > 0) return null;
  if (pool.running.has(sessionId) || pool.offered.has(sessionId)) return null;
  if (deps.turnLimits !== undefined && !deps.turnLimits.knownNone()) return null;
  const slot: { lease: Lease | null; timer: NodeJS.Timeout | null } = { lease: null, timer: null };
  pool.offered.set(sessionId, slot);
  const forget = () => {
    if (pool.offered.get(sessionId) !== slot) return;
    pool.offered.delete(sessionId);
    if (slot.timer !== null) clearTimeout(slot.timer);
    if (pool.saturated && !pool.stopping) void pump(pool);
  };
  return {
    owner: pool.owner,
    expiresAt: now + deps.leaseMs,
    taken(lease) {
      if (pool.offered.get(sessionId) !== slot) return;
      slot.lease = lease;
      slot.timer = setTimeout(() => void lookForTaken(pool, sessionId, slot), TAKEN_LEASE_WAIT_MS);
      slot.timer.unref();
    },
    declined: forget,
  };
}

/** The wake-up of a session whose accept took its lease here: the session is run at once, without a claim. */
function adoptTaken(pool: Pool, sessionId: string): boolean {
  const slot = pool.offered.get(sessionId);
  if (slot === undefined || slot.lease === null) return false;
  pool.offered.delete(sessionId);
  if (slot.timer !== null) clearTimeout(slot.timer);
  // The accept found the lease this process already held (its turn in flight renewed it that very millisecond).
  if (pool.running.has(sessionId)) pool.wokenWhileRunning.add(sessionId);
  else run(pool, slot.lease);
  return true;
}

/**
 * A taken lease whose wake-up did not come: run it if the database holds it (its accept committed), else forget it
 * (its accept rolled back). When the database cannot say, the leases this process holds and does not run are
 * handed over at the next claim (claimUncertain).
 */
async function lookForTaken(
  pool: Pool,
  sessionId: string,
  slot: { lease: Lease | null; timer: NodeJS.Timeout | null },
): Promise<void> {
  if (pool.offered.get(sessionId) !== slot || slot.lease === null) return;
  const lease = slot.lease;
  try {
    await heartbeat(pool.turnDeps, lease, pool.deps.clock.now());
  } catch (error) {
    if (pool.offered.get(sessionId) === slot) pool.offered.delete(sessionId);
    if (!(error instanceof LeaseLostError)) pool.claimUncertain = true;
    if (!pool.stopping) void pump(pool);
    return;
  }
  if (pool.offered.get(sessionId) !== slot) return;
  pool.offered.delete(sessionId);
  if (pool.stopping) await handOverNow(pool, lease);
  else if (pool.running.has(sessionId)) pool.wokenWhileRunning.add(sessionId);
  else run(pool, lease);
}

/** At a stop: the leases taken at accept that no worker runs yet go to the other processes. */
async function handOverTaken(pool: Pool): Promise<void> {
  const taken = [...pool.offered.values()].flatMap((slot) => (slot.lease === null ? [] : [slot.lease]));
  for (const slot of pool.offered.values()) if (slot.timer !== null) clearTimeout(slot.timer);
  pool.offered.clear();
  for (const lease of taken) {
    await handOverNow(pool, lease).catch((error: unknown) =>
      pool.deps.logger.warn({ err: error, sessionId: lease.sessionId }, 'could not hand over a session on stop'),
    );
  }
}

/**
 * Hands over the sessions this process holds a lease on but does not run (see claimUncertain): without this, they
 * would wait for their lease to lapse, since no process may claim a live process's lease.
 */
async function handOverUnknownLeases(pool: Pool): Promise<void> {
  for (const lease of await leasesHeldBy(pool.deps.db, pool.owner)) {
    if (!pool.running.has(lease.sessionId) && !pool.offered.has(lease.sessionId)) await handOver(pool.turnDeps, lease);
  }
  pool.claimUncertain = false;
}

async function startEngine(pool: Pool): Promise<void> {
  const { deps } = pool;
  // Registered before the first claim: a process without a live row would look dead to the others.
  pool.starting = pool.registry.start();
  await pool.starting;
  if (pool.stopping) return;
  pool.unsubscribe.push(
    deps.bus.subscribe('wake', ({ sessionId }) => {
      if (adoptTaken(pool, sessionId)) return;
      if (pool.running.has(sessionId)) pool.wokenWhileRunning.add(sessionId);
      else void pump(pool, sessionId);
    }),
    deps.bus.subscribe('interrupt', ({ sessionId, messageId }) => {
      const work = pool.running.get(sessionId);
      if (work === undefined || work.controller.signal.aborted) return;
      // An interrupt for a turn that already ended must not stop the one queued behind it.
      if (messageId !== undefined && work.messageId !== messageId) return;
      work.controller.abort(new TurnAbort('interrupt'));
    }),
  );
  let sweeping = false;
  pool.poll = setInterval(() => {
    void pump(pool);
    if (sweeping || !deps.space.writable) return;
    sweeping = true;
    denyExpiredApprovals(pool.turnDeps)
      .catch((error: unknown) => deps.logger.warn({ err: error }, 'denying expired tool approvals failed'))
      .finally(() => {
        sweeping = false;
      });
  }, pool.options.pollMs);
  pool.poll.unref();
  deps.runExporter?.start();
  if (pool.options.localClaims !== undefined) {
    pool.options.localClaims.current = { offer: (sessionId, now) => offer(pool, sessionId, now) };
  }
  void pump(pool);
}

async function stopEngine(pool: Pool, graceMs: number): Promise<void> {
  const { deps, running } = pool;
  pool.stopping = true;
  if (pool.options.localClaims !== undefined) pool.options.localClaims.current = null;
  pool.drain.abort();
  const timer = new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), graceMs).unref());
  await pool.starting.catch(() => undefined);
  if (pool.poll !== null) clearInterval(pool.poll);
  for (const off of pool.unsubscribe.splice(0)) off();
  // A claim already under way when the stop came is waited for: its session is then handed over like the others.
  await pool.pumpRun;
  await handOverTaken(pool);
  const all = () => Promise.all([...running.values()].map((work) => work.done));
  if ((await Promise.race([all().then(() => 'done' as const), timer])) === 'timeout') {
    for (const work of running.values()) work.controller.abort(new TurnAbort('shutdown'));
    await all();
  }
  // Every session was released or handed over: the registry row can go.
  await pool.registry
    .stop()
    .catch((error: unknown) =>
      deps.logger.warn({ err: error }, 'could not remove this process from the engine registry'),
    );
  await deps.runExporter?.stop();
}
