/**
 * What happened to an endpoint's notifications: the events assigned to it, the status of a delivery, manual
 * redelivery, and the test route's one signed attempt. Delivery details expire after
 * AGENTRY_WEBHOOK_HISTORY_RETENTION_MS (404); the events stay, and can still be redelivered.
 */
import { AppError, notFound, validationError } from '../../errors/app-error.ts';
import type { Clock } from '../../lib/clock.ts';
import type { Resolver } from '../../lib/egress.ts';
import type { SecretBox } from '../../lib/secret-box.ts';
import type { Executor } from '../../storage/db.ts';
import type { WebhookDeliveryRow, WebhookEventRow } from '../../storage/schema.ts';
import { type CursorPage, type CursorQuery, newestFirstPage } from '../pagination.ts';
import { attemptDelivery, eventBody } from './attempt.ts';
import { pendingDelivery } from './delivery-store.ts';
import type { EndpointService } from './endpoint-service.ts';
import { newAttemptId, newDeliveryId, newEventId } from './ids.ts';
import { createSigner, webhookIdFor } from './signing.ts';
import { deliveryFromRow, parseEventTypes, webhookEventReader } from './views.ts';
import type { WebhookEventData } from './webhook-events.ts';
import {
  DELIVERY_TIMEOUT_MS,
  type WebhookDelivery,
  type WebhookEvent,
  type WebhookEventType,
  type WebhookTestResult,
} from './webhook-types.ts';

export interface DeliveryServiceDeps {
  db: Executor;
  clock: Clock;
  endpoints: EndpointService;
  /** Opens the endpoint's stored signing secret for the test attempt. */
  secrets: Pick<SecretBox, 'open'>;
  retryWindowMs: number;
  historyRetentionMs: number;
  allowInsecureDestinations: boolean;
  resolver?: Resolver;
}

const TEST_ID = 'test_resource';

const testTurn = { id: TEST_ID, session_id: TEST_ID };
const testError = { code: 'test_error', message: 'A test event' };
const testCall = { type: 'function_call', call_id: TEST_ID, name: TEST_ID } as const;
const testRun = (status: WebhookEventData<'schedule.run.created'>['status']) =>
  ({ id: TEST_ID, schedule_id: TEST_ID, trigger: 'manual', status }) as const;
const testBudget = (threshold: number, spent: number): WebhookEventData<'budget.threshold'> => ({
  scope: 'agent',
  id: TEST_ID,
  period: 'month',
  period_key: '2026-01',
  limit_usd: 10,
  spent_usd: spent,
  threshold,
});

/** The data of a test event: shaped like the real event of that type, with test_resource ids. */
const TEST_DATA: { [K in WebhookEventType]: WebhookEventData<K> } = {
  'agent.session.created': { id: TEST_ID },
  'agent.session.in_progress': { id: TEST_ID },
  'agent.session.action_required': {
    id: TEST_ID,
    turn_id: TEST_ID,
    required_action: testCall,
    required_actions_count: 1,
  },
  'agent.session.idle': { id: TEST_ID },
  'agent.session.failed': { id: TEST_ID },
  'agent.session.turn.completed': testTurn,
  'agent.session.turn.failed': { ...testTurn, error: testError },
  'agent.session.turn.cancelled': testTurn,
  'workflow.run.created': { id: TEST_ID },
  'workflow.run.in_progress': { id: TEST_ID },
  'workflow.run.action_required': { id: TEST_ID, required_action: testCall },
  'workflow.run.completed': { id: TEST_ID },
  'workflow.run.failed': { id: TEST_ID, error: testError },
  'workflow.run.cancelled': { id: TEST_ID },
  'schedule.run.created': testRun('preparing'),
  'schedule.run.running': { ...testRun('running'), session_id: TEST_ID, turn_id: TEST_ID },
  'schedule.run.completed': { ...testRun('completed'), session_id: TEST_ID, turn_id: TEST_ID },
  'schedule.run.failed': { ...testRun('failed'), session_id: TEST_ID, turn_id: TEST_ID },
  'schedule.run.cancelled': { ...testRun('cancelled'), session_id: TEST_ID, turn_id: TEST_ID },
  'schedule.run.skipped': testRun('skipped'),
  'mcp_server.authorization_required': {
    id: TEST_ID,
    name: 'test',
    user: null,
    reason: 'a test delivery: no credential changed',
  },
  'budget.threshold': testBudget(0.8, 8),
  'budget.exceeded': testBudget(1, 10),
};

/** Told that an endpoint has a delivery due now (a redelivery), so an in-process dispatcher need not wait to poll. */
export type DueListener = (endpointId: string) => void;

export function createDeliveryService(deps: DeliveryServiceDeps) {
  const { db } = deps;
  const listeners = new Set<DueListener>();

  const expired = (row: WebhookDeliveryRow, now: number): boolean =>
    row.completed_at !== null && row.completed_at < now - deps.historyRetentionMs;

  /** The automatic (or test) delivery: the record that the event was assigned to the endpoint. */
  async function assignment(endpointId: string, eventId: string): Promise<WebhookDeliveryRow> {
    const row = await db
      .selectFrom('webhook_deliveries')
      .selectAll()
      .where('endpoint_id', '=', endpointId)
      .where('event_id', '=', eventId)
      .where('replay_key', '=', '')
      .executeTakeFirst();
    if (row === undefined) throw notFound('webhook event', eventId);
    return row;
  }

  return {
    onDue(listener: DueListener): () => void {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },

    /**
     * The notifications assigned to an endpoint, newest first. An event this version cannot read as its type is
     * left out of its page; the cursors still count it, so paging goes on past it.
     */
    async events(orgId: string, endpointId: string, query: CursorQuery): Promise<CursorPage<WebhookEvent>> {
      await deps.endpoints.load(orgId, endpointId);
      const read = await webhookEventReader();
      const page = await newestFirstPage(
        db
          .selectFrom('webhook_deliveries as d')
          .innerJoin('webhook_events as e', 'e.id', 'd.event_id')
          .select(['e.id', 'e.type', 'e.created_at', 'e.data', 'd.created_at as assigned_at', 'd.id as delivery_id'])
          .where('d.endpoint_id', '=', endpointId)
          .where('d.replay_key', '=', ''),
        query,
        {
          createdAt: 'd.created_at',
          id: 'd.id',
          anchor: (after) =>
            db
              .selectFrom('webhook_deliveries')
              .select(['id', 'created_at'])
              .where('endpoint_id', '=', endpointId)
              .where('event_id', '=', after)
              .where('replay_key', '=', '')
              .executeTakeFirst(),
          unknownAfter: (after) => `after names no event of this endpoint: ${after}`,
          view: (row) => row,
        },
      );
      return { ...page, data: page.data.flatMap((row) => read(row) ?? []) };
    },

    /** The automatic delivery of an event, or the manual one made with `replayKey`. */
    async delivery(orgId: string, endpointId: string, eventId: string, replayKey?: string): Promise<WebhookDelivery> {
      await deps.endpoints.load(orgId, endpointId);
      const row = await db
        .selectFrom('webhook_deliveries')
        .selectAll()
        .where('endpoint_id', '=', endpointId)
        .where('event_id', '=', eventId)
        .where('replay_key', '=', replayKey ?? '')
        .executeTakeFirst();
      if (row === undefined) {
        throw notFound(
          replayKey === undefined ? 'delivery of event' : `manual delivery (${replayKey}) of event`,
          eventId,
        );
      }
      if (expired(row, deps.clock.now())) {
        throw new AppError('not_found', `the delivery details of event ${eventId} have expired (history retention)`);
      }
      return deliveryFromRow(row);
    },

    /**
     * A new manual delivery of an assigned event, with a new retry window and the same webhook-id and body.
     * The same key returns that delivery again while its history is retained.
     */
    async redeliver(orgId: string, endpointId: string, eventId: string, key: string): Promise<WebhookDelivery> {
      await deps.endpoints.load(orgId, endpointId);
      const assigned = await assignment(endpointId, eventId);
      const row = await db.transaction().execute(async (trx) => {
        const now = deps.clock.now();
        // A key whose delivery has left the history may be used again.
        await trx
          .deleteFrom('webhook_deliveries')
          .where('endpoint_id', '=', endpointId)
          .where('event_id', '=', eventId)
          .where('replay_key', '=', key)
          .where('completed_at', '<', now - deps.historyRetentionMs)
          .execute();
        await trx
          .insertInto('webhook_deliveries')
          .values(
            pendingDelivery({
              orgId,
              endpointId,
              eventId,
              webhookId: assigned.webhook_id,
              kind: 'manual',
              replayKey: key,
              now,
              windowMs: deps.retryWindowMs,
            }),
          )
          .onConflict((conflict) => conflict.columns(['endpoint_id', 'event_id', 'replay_key']).doNothing())
          .execute();
        return trx
          .selectFrom('webhook_deliveries')
          .selectAll()
          .where('endpoint_id', '=', endpointId)
          .where('event_id', '=', eventId)
          .where('replay_key', '=', key)
          .executeTakeFirstOrThrow();
      });
      for (const listener of listeners) listener(endpointId);
      return deliveryFromRow(row);
    },

    /**
     * One signed attempt of a test event to the endpoint, recorded in its history like any delivery (no retries).
     * Any HTTP answer completes the test; no answer is a 502 webhook_test_failed.
     */
    async test(orgId: string, endpointId: string, eventType: WebhookEventType): Promise<WebhookTestResult> {
      const endpoint = await deps.endpoints.load(orgId, endpointId);
      if (!parseEventTypes(endpoint.event_types).includes(eventType)) {
        throw validationError('event_type', `event_type ${eventType} is not one of this endpoint's event_types`);
      }
      const now = deps.clock.now();
      const event: WebhookEventRow = {
        id: newEventId(),
        org_id: orgId,
        type: eventType,
        data: JSON.stringify(TEST_DATA[eventType]),
        created_at: now,
        // Already dispatched: a test goes to this endpoint only.
        dispatched_at: now,
        traceparent: null,
      };
      const webhookId = webhookIdFor(event.id, endpointId);
      const outcome = await attemptDelivery(
        { url: endpoint.url, sealedSecret: endpoint.sealed_secret, webhookId, body: eventBody(event) },
        {
          signer: createSigner(deps.secrets),
          now,
          timeoutMs: DELIVERY_TIMEOUT_MS,
          allowInsecure: deps.allowInsecureDestinations,
          ...(deps.resolver === undefined ? {} : { resolver: deps.resolver }),
        },
      );
      const deliveryId = newDeliveryId();
      const done = deps.clock.now();
      const error = outcome.error === null ? null : JSON.stringify(outcome.error);
      await db.transaction().execute(async (trx) => {
        await trx.insertInto('webhook_events').values(event).execute();
        await trx
          .insertInto('webhook_deliveries')
          .values({
            id: deliveryId,
            org_id: orgId,
            endpoint_id: endpointId,
            event_id: event.id,
            webhook_id: webhookId,
            kind: 'test',
            replay_key: '',
            status: outcome.ok ? 'delivered' : 'failed',
            attempts: 1,
            status_code: outcome.statusCode,
            error,
            created_at: now,
            updated_at: done,
            next_attempt_at: null,
            deadline_at: now,
            last_attempt_at: now,
            completed_at: done,
          })
          .execute();
        await trx
          .insertInto('webhook_attempts')
          .values({
            id: newAttemptId(),
            delivery_id: deliveryId,
            org_id: orgId,
            attempted_at: now,
            webhook_timestamp: outcome.timestamp,
            url: endpoint.url,
            status_code: outcome.statusCode,
            error,
            duration_ms: outcome.durationMs,
          })
          .execute();
      });
      if (outcome.statusCode === null) {
        throw new AppError(
          'webhook_test_failed',
          `The test event could not be delivered: ${outcome.error?.message ?? 'no answer'} (${outcome.error?.code ?? 'connect_failed'}); it is recorded as delivery ${deliveryId}`,
        );
      }
      return {
        object: 'webhook_endpoint.test',
        webhook_endpoint_id: endpointId,
        event_type: eventType,
        success: true,
        status_code: outcome.statusCode,
        event_id: event.id,
        delivery_id: deliveryId,
      };
    },
  };
}

export type DeliveryService = ReturnType<typeof createDeliveryService>;
