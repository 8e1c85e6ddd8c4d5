/**
 * The webhook dispatcher (docs/webhooks.md). Two loops over the database, like the turn engine:
 * - fan-out: claims outbox events (`webhook_events` without `dispatched_at`) and creates one delivery per
 *   subscribed endpoint;
 * - delivery: leases due deliveries and makes one signed attempt each through the egress guard, at most
 *   `concurrency` at once per process and `perEndpoint` per endpoint, so a slow or dead receiver holds a few
 *   slots, never the others'. Outcomes are recorded in batches, fenced by the lease token.
 * Woken by the bus's `outbox` signal (published after a transaction with session events commits, in cluster mode by
 * any process; at most one fan-out per `minGapMs`), by redeliveries made in this process, by a timer set to the
 * earliest retry it scheduled, and by a fallback poll. A pending delivery lives only in the database, so a restart
 * (or another worker, once the lease expires) picks it up.
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import type { Bus } from '../bus/bus.ts';
import { attemptDelivery } from '../domain/webhooks/attempt.ts';
import type { DeliveryService } from '../domain/webhooks/delivery-service.ts';
import {
  type ClaimedDelivery,
  claimDue,
  type DeliveryResult,
  endpointsWithDueWork,
  fanOut,
  recordResults,
  type StoreDeps,
  sweepHistory,
} from '../domain/webhooks/delivery-store.ts';
import { createSigner } from '../domain/webhooks/signing.ts';
import type { Clock } from '../lib/clock.ts';
import type { Resolver } from '../lib/egress.ts';
import type { SecretBox } from '../lib/secret-box.ts';
import type { Metrics } from '../observability/metrics-types.ts';
import type { Dialect, Executor } from '../storage/db.ts';
import { isStorageFull } from '../storage/errors.ts';
import type { WriteState } from '../storage/storage-space.ts';

export interface DispatcherDeps {
  db: Executor;
  dialect: Dialect;
  clock: Clock;
  bus: Bus;
  logger: Logger;
  deliveries: Pick<DeliveryService, 'onDue'>;
  /** Opens the endpoints' stored signing secrets. */
  secrets: Pick<SecretBox, 'open'>;
  allowInsecureDestinations: boolean;
  retryBaseMs: number;
  retryWindowMs: number;
  historyRetentionMs: number;
  resolver?: Resolver;
  metrics?: Metrics;
  /** Whether writes work: while the disk is full nothing is fanned out or claimed (the poll comes back). */
  space: WriteState;
}

export interface DispatcherOptions {
  /** Attempts in flight in this process. */
  concurrency: number;
  /** Attempts in flight in this process to one endpoint. */
  perEndpoint: number;
  /** The fallback poll for events and due deliveries. */
  pollMs: number;
  /** The shortest time between two fan-outs that commits asked for. */
  minGapMs: number;
  /** Bound on one attempt (spec: 10 s). */
  timeoutMs: number;
  /** How long a claimed delivery stays ours; longer than an attempt. */
  leaseMs: number;
  random?: () => number;
}

export interface DispatcherStats {
  attempts: number;
  delivered: number;
  failed: number;
  /** Milliseconds spent computing signatures. */
  signingMs: number;
}

export interface WebhookDispatcher {
  start(): void;
  /** Stops claiming; attempts in flight get `graceMs` to finish, then are aborted and left pending. */
  stop(graceMs: number): Promise<void>;
  /** Looks for events and due deliveries now. */
  poke(): void;
  /** Attempts in flight. */
  active(): number;
  stats(): DispatcherStats;
}

const FAN_OUT_BATCH = 500;
const RECORD_BATCH = 500;
const SWEEP_MAX_MS = 3600_000;

export function createWebhookDispatcher(deps: DispatcherDeps, options: DispatcherOptions): WebhookDispatcher {
  const owner = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  const store: StoreDeps = {
    db: deps.db,
    dialect: deps.dialect,
    retryWindowMs: deps.retryWindowMs,
    retryBaseMs: deps.retryBaseMs,
    random: options.random ?? Math.random,
  };
  const log = deps.logger.child({ component: 'webhooks' });
  // A delivery claimed later than this after its window ended is failed without an attempt (the server was down).
  const expiryGraceMs = Math.max(1000, options.pollMs * 2);
  const signer = createSigner(deps.secrets);
  const shutdown = new AbortController();
  const perEndpoint = new Map<string, number>();
  // Endpoints believed to have due deliveries, in the order they are served (round robin).
  const active = new Set<string>();
  let discoverRun: Promise<void> | null = null;
  let discoverAgain = false;
  const attempts = new Set<Promise<void>>();
  const results: DeliveryResult[] = [];
  const unsubscribe: (() => void)[] = [];
  const timers: NodeJS.Timeout[] = [];
  const stats: DispatcherStats = { attempts: 0, delivered: 0, failed: 0, signingMs: 0 };
  let inFlight = 0;
  let stopping = false;
  let pumpRun: Promise<void> | null = null;
  let pumpAgain = false;
  let fanRun: Promise<void> | null = null;
  let fanAgain = false;
  let fanSoon = false;
  let fanStartedAt = Number.NEGATIVE_INFINITY;
  let pumpSoonQueued = false;
  let flushRun: Promise<void> | null = null;
  let wake: { at: number; timer: NodeJS.Timeout } | null = null;

  /** Logs a failed pass, unless the disk is full: that is logged once per episode (storage-space.ts). */
  function failed(error: unknown, fields: Record<string, unknown>, message: string): void {
    if (!isStorageFull(error)) log.error({ err: error, ...fields }, message);
  }

  function fan(): void {
    if (!deps.space.writable) return;
    if (fanRun !== null) {
      fanAgain = true;
      return;
    }
    // Cleared in a callback: a body that finishes without awaiting must not clear it before it is set.
    fanRun = (async () => {
      try {
        do {
          fanAgain = false;
          fanStartedAt = performance.now();
          for (;;) {
            const done = await fanOut(store, deps.clock.now(), FAN_OUT_BATCH);
            if (done.endpoints.size > 0) {
              for (const endpointId of done.endpoints) active.add(endpointId);
              pump();
            }
            if (done.events < FAN_OUT_BATCH || stopping) break;
          }
        } while (fanAgain && !stopping);
      } catch (error) {
        failed(error, {}, 'webhook fan-out failed');
      }
    })().finally(() => {
      fanRun = null;
    });
  }

  /** A burst of commits is served by one fan-out, and under load by at most one per `minGapMs`. */
  function fanShortly(): void {
    if (fanSoon || stopping) return;
    fanSoon = true;
    const timer = setTimeout(
      () => {
        fanSoon = false;
        fan();
      },
      Math.max(0, fanStartedAt + options.minGapMs - performance.now()),
    );
    timer.unref();
  }

  /** Finds every endpoint with due deliveries (retries that fell due, other processes' work, expired leases). */
  function discover(): void {
    if (stopping) return;
    if (discoverRun !== null) {
      discoverAgain = true;
      return;
    }
    // Cleared in a callback: a body that finishes without awaiting must not clear it before it is set.
    discoverRun = (async () => {
      try {
        do {
          discoverAgain = false;
          for (const endpointId of await endpointsWithDueWork(store, deps.clock.now())) active.add(endpointId);
          pump();
        } while (discoverAgain && !stopping);
      } catch (error) {
        failed(error, {}, 'looking for due webhook deliveries failed');
      }
    })().finally(() => {
      discoverRun = null;
    });
  }

  /** What to claim now: per active endpoint, its free slots, within the free global slots. */
  function wants(): { endpointId: string; count: number }[] {
    let free = options.concurrency - inFlight;
    const list: { endpointId: string; count: number }[] = [];
    for (const endpointId of active) {
      if (free <= 0) break;
      const room = options.perEndpoint - (perEndpoint.get(endpointId) ?? 0);
      if (room <= 0) continue;
      const count = Math.min(room, free);
      list.push({ endpointId, count });
      free -= count;
    }
    // Round robin: the endpoints served now go to the back, so a long list cannot starve its tail.
    for (const { endpointId } of list) {
      active.delete(endpointId);
      active.add(endpointId);
    }
    return list;
  }

  /**
   * After an attempt ends: claims once the current batch of I/O callbacks has run, so the attempts that end
   * together share one claim transaction instead of one each.
   */
  function pumpSoon(): void {
    if (pumpSoonQueued || stopping) return;
    pumpSoonQueued = true;
    setImmediate(() => {
      pumpSoonQueued = false;
      pump();
    });
  }

  function pump(): void {
    if (stopping || !deps.space.writable) return;
    if (pumpRun !== null) {
      pumpAgain = true;
      return;
    }
    // Cleared in a callback: a body that finishes without awaiting must not clear it before it is set.
    pumpRun = (async () => {
      try {
        do {
          pumpAgain = false;
          while (!stopping) {
            const wanted = wants();
            if (wanted.length === 0) break;
            const { claimed, exhausted } = await claimDue(store, deps.clock.now(), {
              owner,
              leaseMs: options.leaseMs,
              wants: wanted,
            });
            for (const endpointId of exhausted) active.delete(endpointId);
            for (const delivery of claimed) launch(delivery);
            if (claimed.length === 0) break;
          }
        } while (pumpAgain && !stopping);
      } catch (error) {
        failed(error, {}, 'claiming webhook deliveries failed');
      }
    })().finally(() => {
      pumpRun = null;
    });
  }

  function launch(delivery: ClaimedDelivery): void {
    const now = deps.clock.now();
    if (delivery.endpointDeleted) {
      record({ kind: 'skipped', delivery });
      return;
    }
    if (now > delivery.deadlineAt + expiryGraceMs) {
      record({ kind: 'expired', delivery });
      return;
    }
    inFlight += 1;
    perEndpoint.set(delivery.endpointId, (perEndpoint.get(delivery.endpointId) ?? 0) + 1);
    const attempt = attemptDelivery(
      {
        url: delivery.url,
        sealedSecret: delivery.sealedSecret,
        webhookId: delivery.webhookId,
        body: delivery.body,
        traceparent: delivery.traceparent,
      },
      {
        signer,
        now,
        timeoutMs: options.timeoutMs,
        allowInsecure: deps.allowInsecureDestinations,
        signal: shutdown.signal,
        ...(deps.resolver === undefined ? {} : { resolver: deps.resolver }),
      },
    )
      .then((outcome) => {
        stats.signingMs += outcome.signingMs;
        if (outcome.aborted) {
          record({ kind: 'released', delivery });
          return;
        }
        stats.attempts += 1;
        deps.metrics?.webhookAttempt(outcome.durationMs);
        record({ kind: 'attempt', delivery, outcome });
      })
      .finally(() => {
        inFlight -= 1;
        const left = (perEndpoint.get(delivery.endpointId) ?? 1) - 1;
        if (left <= 0) perEndpoint.delete(delivery.endpointId);
        else perEndpoint.set(delivery.endpointId, left);
        attempts.delete(attempt);
        pumpSoon();
      });
    attempts.add(attempt);
  }

  function record(result: DeliveryResult): void {
    results.push(result);
    if (flushRun !== null) return;
    // Cleared in a callback: a body that finishes without awaiting must not clear it before it is set.
    flushRun = (async () => {
      while (results.length > 0) {
        const batch = results.splice(0, RECORD_BATCH);
        try {
          const summary = await recordResults(store, deps.clock.now(), batch);
          stats.delivered += summary.delivered;
          stats.failed += summary.failed;
          deps.metrics?.webhookOutcomes({
            delivered: summary.delivered,
            failed: summary.failed,
            retry: summary.rescheduled.length,
          });
          for (const at of summary.rescheduled) wakeAt(at);
          if (batch.some((result) => result.kind === 'released')) discover();
        } catch (error) {
          // The leases lapse and the deliveries are tried again: at-least-once, never lost.
          failed(error, { results: batch.length }, 'recording webhook attempts failed');
        }
      }
    })().finally(() => {
      flushRun = null;
    });
  }

  function wakeAt(at: number): void {
    if (stopping) return;
    if (wake !== null && wake.at <= at) return;
    if (wake !== null) clearTimeout(wake.timer);
    const timer = setTimeout(
      () => {
        wake = null;
        discover();
      },
      Math.max(0, at - deps.clock.now()),
    );
    timer.unref();
    wake = { at, timer };
  }

  function sweep(): void {
    if (!deps.space.writable) return;
    sweepHistory(store, deps.clock.now(), deps.historyRetentionMs).catch((error: unknown) => {
      if (!isStorageFull(error)) log.warn({ err: error }, 'webhook history sweep failed');
    });
  }

  return {
    start() {
      unsubscribe.push(deps.bus.subscribe('outbox', fanShortly));
      unsubscribe.push(
        deps.deliveries.onDue((endpointId) => {
          active.add(endpointId);
          pump();
        }),
      );
      const poll = setInterval(() => {
        fan();
        discover();
      }, options.pollMs);
      const sweeper = setInterval(sweep, Math.min(SWEEP_MAX_MS, Math.max(1000, deps.historyRetentionMs)));
      poll.unref();
      sweeper.unref();
      timers.push(poll, sweeper);
      fan();
      discover();
    },

    async stop(graceMs) {
      stopping = true;
      for (const timer of timers.splice(0)) clearInterval(timer);
      if (wake !== null) clearTimeout(wake.timer);
      for (const off of unsubscribe.splice(0)) off();
      await Promise.all([pumpRun, fanRun, discoverRun]);
      const all = () => Promise.all([...attempts]);
      const grace = new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), graceMs).unref());
      if ((await Promise.race([all().then(() => 'done' as const), grace])) === 'timeout') {
        shutdown.abort();
        await all();
      }
      while (flushRun !== null) await flushRun;
    },

    poke() {
      fan();
      discover();
    },
    active: () => inFlight,
    stats: () => ({ ...stats }),
  };
}
