/**
 * The outbox: every state change writes its session events and webhook events in the same transaction as the
 * change itself, so nothing is reported that did not happen and nothing that happened goes unreported. The
 * returned session events are published to live listeners after the transaction commits. Webhook events are
 * written only for the types the organization's endpoints subscribe to (domain/webhooks/subscriptions.ts): an
 * event no endpoint would receive is not recorded.
 */

import type { Bus } from '../bus/bus.ts';
import { hasEventShape, type SessionEvent, type SessionEventInput } from '../events/session-events.ts';
import { unixSeconds } from '../lib/clock.ts';
import { isJsonObject } from '../lib/guards.ts';
import { newId } from '../lib/ids.ts';
import type { Executor } from '../storage/db.ts';
import { parseJsonColumn } from '../storage/json-column.ts';
import { prepare, prepareInsert, prepareNumberedInsert } from '../storage/prepared.ts';
import type { SessionEventRow } from '../storage/schema.ts';
import { transactionMemo } from '../storage/transaction-memo.ts';
import { createdInTransaction } from './sessions/new-sessions.ts';
import type { WebhookSubscriptions } from './webhooks/subscriptions.ts';
import type { WebhookEventInput } from './webhooks/webhook-events.ts';

export {
  SESSION_EVENT_KINDS,
  type SessionEvent,
  type SessionEventInput,
  type SessionEventKind,
} from '../events/session-events.ts';
export {
  WEBHOOK_EVENT_TYPES,
  type WebhookEventData,
  type WebhookEventInput,
  type WebhookEventType,
} from './webhooks/webhook-events.ts';

const lastSeq = prepare((db, p: { sessionId: string }) =>
  db
    .selectFrom('session_events')
    .select((eb) => eb.fn.max<number | null>('seq').as('seq'))
    .where('session_id', '=', p.sessionId),
);

/** The webhook events of a state change, and what decides which of them are recorded. */
export interface WebhookBatch {
  subscriptions: WebhookSubscriptions;
  events: WebhookEventInput[];
}

const insertEvents = prepareNumberedInsert('session_events', 'session_id');
const insertWebhookEvents = prepareInsert('webhook_events');

/**
 * The last event seq each session got from an open transaction. Writers of a session's events hold its row (the
 * session is locked or leased for the transaction), so within one transaction nobody else adds to them: a second
 * write of the same transaction goes on from the first without reading `max(seq)` again.
 */
const writtenSeqs = transactionMemo<number>();

/** The last event seq of the session when this transaction knows it without a read; undefined otherwise. */
function knownSeqBase(trx: Executor, sessionId: string): number | undefined {
  return writtenSeqs.get(trx, sessionId) ?? (createdInTransaction(trx, sessionId) ? 0 : undefined);
}

export async function writeEvents(
  trx: Executor,
  target: { orgId: string; sessionId: string; now: number },
  sessionEvents: SessionEventInput[],
  webhooks?: WebhookBatch,
): Promise<SessionEvent[]> {
  const written: SessionEvent[] = [];
  if (sessionEvents.length > 0) {
    const drafts = sessionEvents.map((input) => ({
      input,
      row: {
        id: newId(),
        session_id: target.sessionId,
        kind: input.kind,
        message_id: input.messageId ?? null,
        run_id: input.runId ?? null,
        data: JSON.stringify(input.data),
        created_at: target.now,
      },
    }));
    const rows = drafts.map((draft) => draft.row);
    // Unknown to this transaction: numbered by the insert itself, with no read of the last seq before it.
    const base = await insertEvents.run(trx, target.sessionId, rows, knownSeqBase(trx, target.sessionId));
    drafts.forEach(({ input: { messageId, runId, ...body }, row }, index) => {
      const event: SessionEvent = {
        ...body,
        id: row.id,
        session_id: target.sessionId,
        seq: base + index + 1,
        ...(messageId == null ? {} : { message_id: messageId }),
        ...(runId == null ? {} : { run_id: runId }),
        created_at: unixSeconds(target.now),
      };
      written.push(event);
    });
    writtenSeqs.set(trx, target.sessionId, base + rows.length);
  }
  if (webhooks !== undefined && webhooks.events.length > 0) await writeWebhookEvents(trx, target, webhooks);
  return written;
}

async function writeWebhookEvents(
  trx: Executor,
  target: { orgId: string; now: number },
  webhooks: WebhookBatch,
): Promise<void> {
  const types = await webhooks.subscriptions.subscribedTypes(trx, target.orgId);
  const recorded = webhooks.events.filter((webhook) => types.has(webhook.type));
  if (recorded.length === 0) return;
  // Read back only by the dispatcher, after the commit: on Postgres it goes with the next statement.
  await insertWebhookEvents.run(
    trx,
    recorded.map((webhook) => ({
      id: `evt_${newId().replaceAll('-', '')}`,
      org_id: target.orgId,
      type: webhook.type,
      data: JSON.stringify(webhook.data),
      created_at: target.now,
      dispatched_at: null,
      traceparent: webhook.traceparent ?? null,
    })),
    { deferred: true },
  );
}

/** Webhook events of a change that concerns no session (e.g. a connector's credential failed). */
export async function recordWebhookEvents(
  trx: Executor,
  target: { orgId: string; now: number },
  webhooks: WebhookBatch,
): Promise<void> {
  if (webhooks.events.length > 0) await writeWebhookEvents(trx, target, webhooks);
}

const eventRows = (db: Executor, sessionId: string, afterSeq: number, order: 'asc' | 'desc', limit: number) =>
  db
    .selectFrom('session_events')
    .selectAll()
    .where('session_id', '=', sessionId)
    .where('seq', '>', afterSeq)
    .orderBy('seq', order)
    .limit(limit)
    .execute();

/** Session events persisted after `afterSeq`, oldest first: at most `limit`, the most recent ones when more exist. */
export async function eventsAfter(
  db: Executor,
  sessionId: string,
  afterSeq: number,
  limit: number,
): Promise<{ events: SessionEvent[]; truncated: boolean }> {
  const rows = await eventRows(db, sessionId, afterSeq, 'desc', limit + 1);
  const truncated = rows.length > limit;
  const kept = rows.slice(0, limit).reverse();
  return {
    truncated,
    events: kept.map(sessionEventFromRow),
  };
}

/** Session events persisted after `afterSeq`, oldest first: the first `limit` of them (a stream catching up). */
export async function eventsFrom(
  db: Executor,
  sessionId: string,
  afterSeq: number,
  limit: number,
): Promise<SessionEvent[]> {
  return (await eventRows(db, sessionId, afterSeq, 'asc', limit)).map(sessionEventFromRow);
}

/** The newest event seq of each of these sessions that has events. */
export async function newestSeqs(db: Executor, sessionIds: readonly string[]): Promise<Map<string, number>> {
  if (sessionIds.length === 0) return new Map();
  const rows = await db
    .selectFrom('session_events')
    .select((eb) => ['session_id', eb.fn.max<number>('seq').as('seq')])
    .where('session_id', 'in', sessionIds)
    .groupBy('session_id')
    .execute();
  return new Map(rows.map((row) => [row.session_id, Number(row.seq)]));
}

/**
 * A stored event. Its kind and the shape of its envelope are checked; its data is trusted to match the kind,
 * since writeEvents is the only writer of the table and takes typed events.
 */
function sessionEventFromRow(row: SessionEventRow): SessionEvent {
  const event = {
    id: row.id,
    session_id: row.session_id,
    seq: row.seq,
    kind: row.kind,
    ...(row.message_id === null ? {} : { message_id: row.message_id }),
    ...(row.run_id === null ? {} : { run_id: row.run_id }),
    created_at: unixSeconds(row.created_at),
    data: parseJsonColumn(row.data, isJsonObject, 'session_events.data'),
  };
  if (!hasEventShape(event) || !('seq' in event)) {
    throw new Error(`session_events row ${row.id} holds an event of the wrong shape`);
  }
  return event;
}

/**
 * What follows a committed change: its session events go to live listeners, the background senders hear that the
 * outbox may hold news (a change with session events is where webhook events, task notices and A2A task states
 * come from), then, when the change left work for the engine, a wake-up. Called only after the transaction
 * committed, so nothing uncommitted is ever announced.
 */
export function afterCommit(bus: Bus, sessionId: string, events: readonly SessionEvent[], wake: boolean): void {
  for (const event of events) bus.publish('live', { sessionId, event: { ...event } });
  if (events.length > 0) bus.publish('outbox', { sessionId });
  if (wake) bus.publish('wake', { sessionId });
}

/** The sequence number of the session's newest persisted event (0 when there is none). */
export async function lastEventSeq(db: Executor, sessionId: string): Promise<number> {
  const last = await lastSeq.first(db, { sessionId });
  return Number(last?.seq ?? 0);
}
