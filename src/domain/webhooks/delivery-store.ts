/**
 * The dispatcher's storage work, the same queries on SQLite and Postgres:
 * - fan-out: claim undispatched outbox events and create one delivery per endpoint subscribed at that moment;
 * - claim: lease due deliveries (FOR UPDATE SKIP LOCKED on Postgres), respecting the caller's per-endpoint room;
 * - record: write attempt outcomes in batches, each fenced by the lease token it was claimed with;
 * - sweep: drop delivery details past the history retention.
 */

import type { Updateable } from 'kysely';
import type { Dialect, Executor } from '../../storage/db.ts';
import type { WebhookDeliveriesTable } from '../../storage/schema.ts';
import type { AttemptOutcome } from './attempt.ts';
import { eventBody } from './attempt.ts';
import { newAttemptId, newDeliveryId } from './ids.ts';
import { nextAttemptAt } from './schedule.ts';
import { webhookIdFor } from './signing.ts';
import { parseEventTypes } from './views.ts';
import type { DeliveryKind } from './webhook-types.ts';

/** A delivery row about to be attempted for the first time, inside its retry window. */
export function pendingDelivery(fields: {
  orgId: string;
  endpointId: string;
  eventId: string;
  webhookId: string;
  kind: DeliveryKind;
  replayKey: string;
  now: number;
  windowMs: number;
}) {
  return {
    id: newDeliveryId(),
    org_id: fields.orgId,
    endpoint_id: fields.endpointId,
    event_id: fields.eventId,
    webhook_id: fields.webhookId,
    kind: fields.kind,
    replay_key: fields.replayKey,
    status: 'pending' as const,
    attempts: 0,
    status_code: null,
    error: null,
    created_at: fields.now,
    updated_at: fields.now,
    next_attempt_at: fields.now,
    deadline_at: fields.now + fields.windowMs,
    last_attempt_at: null,
    completed_at: null,
  };
}

export interface StoreDeps {
  db: Executor;
  dialect: Dialect;
  retryWindowMs: number;
  retryBaseMs: number;
  random: () => number;
}

const INSERT_CHUNK = 200;

/**
 * Fans out up to `limit` undispatched events, oldest first. An event goes to the organization's endpoints that
 * exist and subscribe to its type when it is fanned out (normally milliseconds after it was written), and not to
 * endpoints created after the event. Returns the number of events handled and the endpoints that got deliveries.
 */
export async function fanOut(
  deps: StoreDeps,
  now: number,
  limit: number,
): Promise<{ events: number; endpoints: Set<string> }> {
  // A cheap read first: most polls find nothing, and need not take SQLite's write lock for it.
  const any = await deps.db
    .selectFrom('webhook_events')
    .select('id')
    .where('dispatched_at', 'is', null)
    .limit(1)
    .executeTakeFirst();
  if (any === undefined) return { events: 0, endpoints: new Set() };
  return deps.db.transaction().execute(async (trx) => {
    let select = trx
      .selectFrom('webhook_events')
      .select(['id', 'org_id', 'type', 'created_at'])
      .where('dispatched_at', 'is', null)
      .orderBy('created_at')
      .limit(limit);
    if (deps.dialect === 'postgres') select = select.forUpdate().skipLocked();
    const events = await select.execute();
    if (events.length === 0) return { events: 0, endpoints: new Set() };
    const orgIds = [...new Set(events.map((event) => event.org_id))];
    const endpoints = await trx
      .selectFrom('webhook_endpoints')
      .select(['id', 'org_id', 'event_types', 'created_at'])
      .where('org_id', 'in', orgIds)
      .where('deleted_at', 'is', null)
      .execute();
    const byOrg = new Map<string, { id: string; types: Set<string>; createdAt: number }[]>();
    for (const endpoint of endpoints) {
      const list = byOrg.get(endpoint.org_id) ?? [];
      list.push({
        id: endpoint.id,
        types: new Set(parseEventTypes(endpoint.event_types)),
        createdAt: endpoint.created_at,
      });
      byOrg.set(endpoint.org_id, list);
    }
    const rows = [];
    for (const event of events) {
      for (const endpoint of byOrg.get(event.org_id) ?? []) {
        if (!endpoint.types.has(event.type) || endpoint.createdAt > event.created_at) continue;
        rows.push(
          pendingDelivery({
            orgId: event.org_id,
            endpointId: endpoint.id,
            eventId: event.id,
            webhookId: webhookIdFor(event.id, endpoint.id),
            kind: 'automatic',
            replayKey: '',
            now,
            windowMs: deps.retryWindowMs,
          }),
        );
      }
    }
    for (let i = 0; i < rows.length; i += INSERT_CHUNK) {
      await trx
        .insertInto('webhook_deliveries')
        .values(rows.slice(i, i + INSERT_CHUNK))
        .onConflict((conflict) => conflict.columns(['endpoint_id', 'event_id', 'replay_key']).doNothing())
        .execute();
    }
    await trx
      .updateTable('webhook_events')
      .set({ dispatched_at: now })
      .where(
        'id',
        'in',
        events.map((event) => event.id),
      )
      .execute();
    return { events: events.length, endpoints: new Set(rows.map((row) => row.endpoint_id)) };
  });
}

/** A leased delivery with what its attempt needs: the endpoint's current URL and (sealed) secret, and the body. */
export interface ClaimedDelivery {
  id: string;
  orgId: string;
  endpointId: string;
  token: number;
  webhookId: string;
  attempts: number;
  deadlineAt: number;
  url: string;
  sealedSecret: string;
  endpointDeleted: boolean;
  body: string;
  /** Sent as the `traceparent` header when the event belongs to a traced turn. */
  traceparent: string | null;
}

/** The endpoints (not deleted) with deliveries due now: one index probe per endpoint. */
export async function endpointsWithDueWork(deps: StoreDeps, now: number): Promise<string[]> {
  const rows = await deps.db
    .selectFrom('webhook_endpoints as w')
    .select('w.id')
    .where('w.deleted_at', 'is', null)
    .where(({ exists, selectFrom }) =>
      exists(
        selectFrom('webhook_deliveries as d')
          .select('d.id')
          .whereRef('d.endpoint_id', '=', 'w.id')
          .where('d.status', '=', 'pending')
          .where('d.next_attempt_at', '<=', now),
      ),
    )
    .execute();
  return rows.map((row) => row.id);
}

export interface ClaimOptions {
  owner: string;
  leaseMs: number;
  /** How many due deliveries to lease per endpoint, at most. */
  wants: { endpointId: string; count: number }[];
}

export interface Claim {
  claimed: ClaimedDelivery[];
  /** Endpoints that had fewer due deliveries than wanted: nothing more to take there for now. */
  exhausted: string[];
}

/**
 * Leases due deliveries of the given endpoints, oldest due first, and returns them with their endpoint's current
 * URL and secret and the event body. A leased delivery's next_attempt_at moves to its lease's expiry: it leaves the
 * due range while in flight, and a crashed worker's deliveries fall due again by themselves.
 */
export async function claimDue(deps: StoreDeps, now: number, options: ClaimOptions): Promise<Claim> {
  if (options.wants.length === 0) return { claimed: [], exhausted: [] };
  return deps.db.transaction().execute(async (trx) => {
    const chosen: string[] = [];
    const exhausted: string[] = [];
    for (const want of options.wants) {
      let select = trx
        .selectFrom('webhook_deliveries')
        .select('id')
        .where('endpoint_id', '=', want.endpointId)
        .where('status', '=', 'pending')
        .where('next_attempt_at', '<=', now)
        .orderBy('next_attempt_at')
        .limit(want.count);
      if (deps.dialect === 'postgres') select = select.forUpdate().skipLocked();
      const rows = await select.execute();
      if (rows.length < want.count) exhausted.push(want.endpointId);
      for (const row of rows) chosen.push(row.id);
    }
    if (chosen.length === 0) return { claimed: [], exhausted };
    const leased = await trx
      .updateTable('webhook_deliveries')
      .set((eb) => ({
        lease_owner: options.owner,
        lease_expires_at: now + options.leaseMs,
        next_attempt_at: now + options.leaseMs,
        lease_token: eb('lease_token', '+', 1),
      }))
      .where('id', 'in', chosen)
      .returning(['id', 'lease_token'])
      .execute();
    const tokens = new Map(leased.map((row) => [row.id, row.lease_token]));
    const details = await trx
      .selectFrom('webhook_deliveries as d')
      .innerJoin('webhook_endpoints as w', 'w.id', 'd.endpoint_id')
      .innerJoin('webhook_events as e', 'e.id', 'd.event_id')
      .select([
        'd.id',
        'd.org_id',
        'd.endpoint_id',
        'd.webhook_id',
        'd.attempts',
        'd.deadline_at',
        'w.url',
        'w.sealed_secret',
        'w.deleted_at',
        'e.id as event_id',
        'e.type',
        'e.created_at',
        'e.data',
        'e.traceparent',
      ])
      .where('d.id', 'in', chosen)
      .execute();
    const claimed = details.map((row) => ({
      id: row.id,
      orgId: row.org_id,
      endpointId: row.endpoint_id,
      token: tokens.get(row.id) ?? -1,
      webhookId: row.webhook_id,
      attempts: row.attempts,
      deadlineAt: row.deadline_at,
      url: row.url,
      sealedSecret: row.sealed_secret,
      endpointDeleted: row.deleted_at !== null,
      body: eventBody({ id: row.event_id, type: row.type, created_at: row.created_at, data: row.data }),
      traceparent: row.traceparent,
    }));
    return { claimed, exhausted };
  });
}

export type DeliveryResult =
  | { kind: 'attempt'; delivery: ClaimedDelivery; outcome: AttemptOutcome }
  /** The endpoint was deleted: never attempted again. */
  | { kind: 'skipped'; delivery: ClaimedDelivery }
  /** Claimed after its window had ended (the server was down): failed without an attempt. */
  | { kind: 'expired'; delivery: ClaimedDelivery }
  /** Given back unattempted (shutdown): stays pending for whoever claims it next. */
  | { kind: 'released'; delivery: ClaimedDelivery };

export interface RecordSummary {
  /** Pending deliveries and when they are due next, for the caller's wake-up timer. */
  rescheduled: number[];
  delivered: number;
  failed: number;
  /** Results dropped because the lease was lost or the delivery was no longer pending (deleted endpoint). */
  stale: number;
}

/** Records outcomes in one transaction. Each write is fenced: only the holder of the lease token may write. */
export async function recordResults(deps: StoreDeps, now: number, results: DeliveryResult[]): Promise<RecordSummary> {
  const summary: RecordSummary = { rescheduled: [], delivered: 0, failed: 0, stale: 0 };
  if (results.length === 0) return summary;
  await deps.db.transaction().execute(async (trx) => {
    const attempts = [];
    for (const result of results) {
      const { delivery } = result;
      const base: Updateable<WebhookDeliveriesTable> = { updated_at: now, lease_owner: null, lease_expires_at: null };
      let set: Updateable<WebhookDeliveriesTable>;
      if (result.kind === 'attempt') {
        const { outcome } = result;
        const attemptsNow = delivery.attempts + 1;
        const next =
          outcome.ok || !outcome.retriable
            ? null
            : nextAttemptAt({
                attempts: attemptsNow,
                now,
                deadline: delivery.deadlineAt,
                baseMs: deps.retryBaseMs,
                retryAfterMs: outcome.retryAfterMs,
                random: deps.random,
              });
        const status = outcome.ok ? 'delivered' : next === null ? 'failed' : 'pending';
        set = {
          ...base,
          status,
          attempts: attemptsNow,
          status_code: outcome.statusCode,
          error: outcome.error === null ? null : JSON.stringify(outcome.error),
          last_attempt_at: outcome.attemptedAt,
          next_attempt_at: next,
          completed_at: status === 'pending' ? null : now,
        };
      } else if (result.kind === 'skipped') {
        set = {
          ...base,
          status: 'skipped',
          error: JSON.stringify({ code: 'endpoint_deleted', message: 'the webhook endpoint was deleted' }),
          next_attempt_at: null,
          completed_at: now,
        };
      } else if (result.kind === 'expired') {
        set = { ...base, status: 'failed', next_attempt_at: null, completed_at: now };
      } else {
        set = { ...base, next_attempt_at: now };
      }
      const updated = await trx
        .updateTable('webhook_deliveries')
        .set(set)
        .where('id', '=', delivery.id)
        .where('lease_token', '=', delivery.token)
        .where('status', '=', 'pending')
        .executeTakeFirst();
      if (updated.numUpdatedRows === 0n) {
        // Deleted while the request was in flight: the attempt still happened, and is still recorded.
        const skipped =
          result.kind === 'attempt'
            ? await trx
                .updateTable('webhook_deliveries')
                .set((eb) => ({
                  attempts: eb('attempts', '+', 1),
                  status_code: result.outcome.statusCode,
                  last_attempt_at: result.outcome.attemptedAt,
                  lease_owner: null,
                  lease_expires_at: null,
                }))
                .where('id', '=', delivery.id)
                .where('lease_token', '=', delivery.token)
                .where('status', '=', 'skipped')
                .executeTakeFirst()
            : null;
        if (skipped === null || skipped.numUpdatedRows === 0n) {
          summary.stale += 1;
          continue;
        }
      } else if (set.status === 'delivered') summary.delivered += 1;
      else if (set.status === 'failed') summary.failed += 1;
      else if (typeof set.next_attempt_at === 'number' && result.kind === 'attempt') {
        summary.rescheduled.push(set.next_attempt_at);
      }
      if (result.kind === 'attempt') {
        attempts.push({
          id: newAttemptId(),
          delivery_id: delivery.id,
          org_id: delivery.orgId,
          attempted_at: result.outcome.attemptedAt,
          webhook_timestamp: result.outcome.timestamp,
          url: delivery.url,
          status_code: result.outcome.statusCode,
          error: result.outcome.error === null ? null : JSON.stringify(result.outcome.error),
          duration_ms: result.outcome.durationMs,
        });
      }
    }
    for (let i = 0; i < attempts.length; i += INSERT_CHUNK) {
      await trx
        .insertInto('webhook_attempts')
        .values(attempts.slice(i, i + INSERT_CHUNK))
        .execute();
    }
  });
  return summary;
}

/**
 * Drops details past the retention: attempts made before it (less one retry window, so that no delivery still
 * within the retention loses any), and manual deliveries that ended before it (so a redeliver key may be used
 * again). Automatic deliveries stay as the record that an event was assigned to an endpoint; the read path hides
 * their details once they are older than the retention.
 */
export async function sweepHistory(deps: StoreDeps, now: number, retentionMs: number): Promise<number> {
  const cutoff = now - retentionMs;
  const attempts = await deps.db
    .deleteFrom('webhook_attempts')
    .where('attempted_at', '<', cutoff - deps.retryWindowMs)
    .executeTakeFirst();
  const manual = await deps.db
    .deleteFrom('webhook_deliveries')
    .where('completed_at', '<', cutoff)
    .where('kind', '=', 'manual')
    .executeTakeFirst();
  return Number(attempts.numDeletedRows) + Number(manual.numDeletedRows);
}
