/**
 * A2A push notifications (docs/a2a.md), delivered the way webhook deliveries are (dispatcher.ts): a durable row
 * per notification, leased attempts through the egress guard, retries with the webhooks' backoff inside their
 * retry window, writes fenced by the lease token. Two passes, run when changes commit (the bus's `outbox` signal,
 * at most one pass per `minGapMs`) and on a fallback poll:
 * - notice: the live configs whose task's status differs from the status last notified. For each, in one
 *   transaction, a compare-and-set moves the config's `notified_status` on and the notification row (the Task as
 *   it stands, as a StreamResponse) is inserted, unique per (config, seq): one process notices each change, once,
 *   crash or not. A task that went through several states between two looks is notified in its latest one.
 * - deliver: leases due notifications and POSTs each to its config's URL with `X-A2A-Notification-Token` (the
 *   config's token) and `Authorization: Bearer …` (its authentication), content type `application/a2a+json`.
 * The SDK (for the Task's JSON form) is loaded when there is a change to notify, not before.
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import type { Bus } from '../bus/bus.ts';
import type { TurnReport } from '../domain/a2a/a2a-service.ts';
import type { MessageService } from '../domain/turns/message-service.ts';
import { nextAttemptAt } from '../domain/webhooks/schedule.ts';
import type { Clock } from '../lib/clock.ts';
import { EgressError, postPinned, type Resolver } from '../lib/egress.ts';
import { newId } from '../lib/ids.ts';
import { parseRetryAfter } from '../lib/retry.ts';
import type { SecretBox } from '../lib/secret-box.ts';
import { createWakeLoop } from '../lib/wake-loop.ts';
import type { Dialect, Executor } from '../storage/db.ts';
import { isStorageFull } from '../storage/errors.ts';
import type { WriteState } from '../storage/storage-space.ts';

export interface A2aPushDeps {
  db: Executor;
  dialect: Dialect;
  clock: Clock;
  logger: Logger;
  messages: Pick<MessageService, 'get'>;
  /** The reports a task's turn wrote (the A2A service's). */
  reportsOf(orgId: string, taskId: string): Promise<TurnReport[]>;
  secrets: Pick<SecretBox, 'open'>;
  allowInsecureDestinations: boolean;
  retryBaseMs: number;
  retryWindowMs: number;
  /** Ended notifications are deleted this long after they ended (the webhooks' history retention). */
  historyRetentionMs: number;
  resolver?: Resolver;
  space: WriteState;
  /** Rings when changes that may move a task's status commit (the bus's `outbox` topic). */
  bus: Pick<Bus, 'subscribe'>;
}

export interface A2aPushOptions {
  /** The fallback poll. */
  pollMs: number;
  /** The shortest time between two passes that rings asked for. */
  minGapMs: number;
  /** Bound on one attempt. */
  timeoutMs: number;
  /** How long a claimed notification stays ours; longer than an attempt. */
  leaseMs: number;
  /** Attempts in flight in this process. */
  concurrency: number;
  random?: () => number;
}

export interface A2aPushNotifier {
  start(): void;
  stop(graceMs: number): Promise<void>;
  /** One notice pass and one delivery pass (tests drive it directly too). */
  tick(): Promise<void>;
}

const NOTICE_BATCH = 100;
/** How often ended notifications past the retention are deleted. */
const SWEEP_EVERY_MS = 10 * 60_000;
/** The statuses that are notified (queued is not a change a client needs to hear of). */
const NOTIFIED = new Set(['running', 'requires_action', 'completed', 'failed', 'cancelled']);
const TERMINAL = new Set(['completed', 'failed', 'cancelled']);

export function createA2aPushNotifier(deps: A2aPushDeps, options: A2aPushOptions): A2aPushNotifier {
  const { db } = deps;
  const owner = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  const random = options.random ?? Math.random;
  const log = deps.logger.child({ component: 'a2a-push' });
  const shutdown = new AbortController();
  let sweptAt = 0;

  /** The notification body: the task as it stands, as a StreamResponse (A2A 1.0 push notification payload). */
  async function bodyOf(row: {
    org_id: string;
    agent_id: string;
    base_url: string;
    session_id: string;
    task_id: string;
  }): Promise<string> {
    const [{ StreamResponse }, { reportFiles, taskOf }] = await Promise.all([
      import('@a2a-js/sdk'),
      import('../domain/a2a/task-view.ts'),
    ]);
    const turn = await deps.messages.get(row.org_id, row.session_id, row.task_id);
    const files = reportFiles(await deps.reportsOf(row.org_id, row.task_id), row.agent_id, row.base_url);
    return JSON.stringify(StreamResponse.toJSON({ payload: { $case: 'task', value: taskOf(turn, undefined, files) } }));
  }

  async function notice(): Promise<void> {
    const changed = await db
      .selectFrom('a2a_push_configs as c')
      .innerJoin('messages as m', 'm.id', 'c.task_id')
      .select([
        'c.id',
        'c.org_id',
        'c.session_id',
        'c.agent_id',
        'c.base_url',
        'c.task_id',
        'c.notified_status',
        'c.seq',
        'm.status',
        'm.org_id as task_org',
      ])
      .where('c.done', '=', 0)
      .where('c.deleted_at', 'is', null)
      .where('m.deleted_at', 'is', null)
      .whereRef('m.status', '<>', 'c.notified_status')
      .limit(NOTICE_BATCH)
      .execute();
    for (const row of changed) {
      if (row.task_org !== row.org_id) continue;
      const now = deps.clock.now();
      const notify = NOTIFIED.has(row.status);
      let body: string | null = null;
      try {
        body = notify ? await bodyOf(row) : null;
      } catch (error) {
        // One task that cannot be read (deleted meanwhile) must not hold up the others: it is looked at again.
        log.warn({ err: error, taskId: row.task_id }, 'reading an A2A task for its push notification failed');
        continue;
      }
      await db.transaction().execute(async (trx) => {
        const moved = await trx
          .updateTable('a2a_push_configs')
          .set({
            notified_status: row.status,
            seq: notify ? row.seq + 1 : row.seq,
            done: TERMINAL.has(row.status) ? 1 : 0,
          })
          .where('id', '=', row.id)
          .where('seq', '=', row.seq)
          .where('notified_status', '=', row.notified_status)
          .where('deleted_at', 'is', null)
          .executeTakeFirst();
        if (moved.numUpdatedRows === 0n || body === null) return;
        await trx
          .insertInto('a2a_push_deliveries')
          .values({
            id: `a2ap_${newId().replaceAll('-', '')}`,
            org_id: row.org_id,
            config_id: row.id,
            seq: row.seq + 1,
            task_status: row.status,
            body,
            status: 'pending',
            attempts: 0,
            status_code: null,
            error: null,
            created_at: now,
            updated_at: now,
            next_attempt_at: now,
            deadline_at: now + deps.retryWindowMs,
            last_attempt_at: null,
            completed_at: null,
          })
          .onConflict((conflict) => conflict.columns(['config_id', 'seq']).doNothing())
          .execute();
      });
    }
  }

  interface Claimed {
    id: string;
    token: number;
    attempts: number;
    deadlineAt: number;
    body: string;
    url: string;
    sealedToken: string | null;
    authScheme: string | null;
    sealedCredentials: string | null;
    deleted: boolean;
  }

  async function claim(now: number, limit: number): Promise<Claimed[]> {
    return db.transaction().execute(async (trx) => {
      let select = trx
        .selectFrom('a2a_push_deliveries')
        .select('id')
        .where('status', '=', 'pending')
        .where('next_attempt_at', '<=', now)
        .orderBy('next_attempt_at')
        .limit(limit);
      if (deps.dialect === 'postgres') select = select.forUpdate().skipLocked();
      const ids = (await select.execute()).map((row) => row.id);
      if (ids.length === 0) return [];
      await trx
        .updateTable('a2a_push_deliveries')
        .set((eb) => ({
          lease_owner: owner,
          lease_expires_at: now + options.leaseMs,
          next_attempt_at: now + options.leaseMs,
          lease_token: eb('lease_token', '+', 1),
        }))
        .where('id', 'in', ids)
        .execute();
      const rows = await trx
        .selectFrom('a2a_push_deliveries as d')
        .innerJoin('a2a_push_configs as c', 'c.id', 'd.config_id')
        .select([
          'd.id',
          'd.lease_token',
          'd.attempts',
          'd.deadline_at',
          'd.body',
          'c.url',
          'c.sealed_token',
          'c.auth_scheme',
          'c.sealed_credentials',
          'c.deleted_at',
        ])
        .where('d.id', 'in', ids)
        .execute();
      return rows.map((row) => ({
        id: row.id,
        token: row.lease_token,
        attempts: row.attempts,
        deadlineAt: row.deadline_at,
        body: row.body,
        url: row.url,
        sealedToken: row.sealed_token,
        authScheme: row.auth_scheme,
        sealedCredentials: row.sealed_credentials,
        deleted: row.deleted_at !== null,
      }));
    });
  }

  type Outcome =
    | {
        kind: 'attempt';
        ok: boolean;
        retriable: boolean;
        statusCode: number | null;
        error: object | null;
        retryAfterMs: number | null;
        at: number;
      }
    | { kind: 'skipped' | 'expired' | 'released' };

  async function attempt(item: Claimed): Promise<Outcome> {
    const at = deps.clock.now();
    if (item.deleted) return { kind: 'skipped' };
    if (at > item.deadlineAt) return { kind: 'expired' };
    const headers: Record<string, string> = {
      'content-type': 'application/a2a+json',
      'user-agent': 'Agentry-A2A-Push/1',
    };
    try {
      if (item.sealedToken !== null) headers['x-a2a-notification-token'] = deps.secrets.open(item.sealedToken);
      if (item.authScheme !== null && item.sealedCredentials !== null) {
        headers.authorization = `${item.authScheme} ${deps.secrets.open(item.sealedCredentials)}`;
      }
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      return {
        kind: 'attempt',
        ok: false,
        retriable: true,
        statusCode: null,
        error: { code: 'secret_unavailable', message: `the config's secrets cannot be decrypted: ${message}` },
        retryAfterMs: null,
        at,
      };
    }
    try {
      const response = await postPinned(item.url, item.body, {
        headers,
        timeoutMs: options.timeoutMs,
        allowInsecure: deps.allowInsecureDestinations,
        signal: shutdown.signal,
        resolver: deps.resolver,
        maxResponseBytes: 1024,
      });
      const ok = response.status >= 200 && response.status <= 299;
      return {
        kind: 'attempt',
        ok,
        retriable: true,
        statusCode: response.status,
        error: ok ? null : { code: 'unexpected_status', message: `the receiver answered ${response.status}` },
        retryAfterMs: ok ? null : parseRetryAfter(response.headers['retry-after'], at),
        at,
      };
    } catch (error) {
      if (error instanceof EgressError && error.code === 'aborted') return { kind: 'released' };
      return {
        kind: 'attempt',
        ok: false,
        retriable: error instanceof EgressError ? error.retriable : true,
        statusCode: null,
        error: {
          code: error instanceof EgressError ? error.code : 'connect_failed',
          message: error instanceof Error ? error.message : String(error),
        },
        retryAfterMs: null,
        at,
      };
    }
  }

  async function record(item: Claimed, outcome: Outcome): Promise<void> {
    const now = deps.clock.now();
    const base = { updated_at: now, lease_owner: null, lease_expires_at: null };
    let set: Record<string, unknown>;
    if (outcome.kind === 'attempt') {
      const attempts = item.attempts + 1;
      const next =
        outcome.ok || !outcome.retriable
          ? null
          : nextAttemptAt({
              attempts,
              now,
              deadline: item.deadlineAt,
              baseMs: deps.retryBaseMs,
              retryAfterMs: outcome.retryAfterMs,
              random,
            });
      const status = outcome.ok ? 'delivered' : next === null ? 'failed' : 'pending';
      set = {
        ...base,
        status,
        attempts,
        status_code: outcome.statusCode,
        error: outcome.error === null ? null : JSON.stringify(outcome.error),
        last_attempt_at: outcome.at,
        next_attempt_at: next,
        completed_at: status === 'pending' ? null : now,
      };
    } else if (outcome.kind === 'skipped') {
      set = { ...base, status: 'skipped', next_attempt_at: null, completed_at: now };
    } else if (outcome.kind === 'expired') {
      set = { ...base, status: 'failed', next_attempt_at: null, completed_at: now };
    } else {
      set = { ...base, next_attempt_at: now };
    }
    await db
      .updateTable('a2a_push_deliveries')
      .set(set)
      .where('id', '=', item.id)
      .where('lease_token', '=', item.token)
      .where('status', '=', 'pending')
      .execute();
  }

  async function deliver(): Promise<void> {
    const claimed = await claim(deps.clock.now(), options.concurrency);
    await Promise.all(
      claimed.map(async (item) => {
        const outcome = await attempt(item);
        await record(item, outcome);
      }),
    );
  }

  async function tick(): Promise<void> {
    if (!deps.space.writable) return;
    try {
      await notice();
      await deliver();
      const now = deps.clock.now();
      if (now - sweptAt >= SWEEP_EVERY_MS) {
        sweptAt = now;
        await db
          .deleteFrom('a2a_push_deliveries')
          .where('completed_at', '<', now - deps.historyRetentionMs)
          .execute();
      }
    } catch (error) {
      if (!isStorageFull(error)) log.error({ err: error }, 'A2A push notification pass failed');
    }
  }

  const loop = createWakeLoop(tick, { pollMs: options.pollMs, minGapMs: options.minGapMs });
  let unsubscribe: (() => void) | null = null;

  return {
    start() {
      if (unsubscribe !== null) return;
      unsubscribe = deps.bus.subscribe('outbox', () => loop.ring());
      loop.start();
    },
    async stop(graceMs: number) {
      unsubscribe?.();
      unsubscribe = null;
      const abort = setTimeout(() => shutdown.abort(), graceMs);
      await loop.stop();
      clearTimeout(abort);
    },
    tick,
  };
}
