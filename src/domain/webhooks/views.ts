/** Stored rows to API objects. Times are Unix seconds (webhooks speak snake_case, OpenAI style). */
import { unixSeconds } from '../../lib/clock.ts';
import { isJsonObject } from '../../lib/guards.ts';
import { parseJsonColumn, readJsonColumn } from '../../storage/json-column.ts';
import type { WebhookDeliveryRow, WebhookEndpointRow, WebhookEventRow } from '../../storage/schema.ts';
import { type WebhookEventBody, WebhookEventSchema } from './webhook-events.ts';
import {
  type DeliveryError,
  isWebhookEventType,
  type WebhookDelivery,
  type WebhookEndpoint,
  type WebhookEndpointWithSecret,
  type WebhookEventType,
} from './webhook-types.ts';

/** The endpoint's event types; a type this version no longer knows is left out rather than failing the read. */
export function parseEventTypes(text: string): WebhookEventType[] {
  const parsed = readJsonColumn(text, 'webhook_endpoints.event_types');
  return Array.isArray(parsed)
    ? parsed.filter((value): value is WebhookEventType => typeof value === 'string' && isWebhookEventType(value))
    : [];
}

export function endpointFromRow(row: WebhookEndpointRow): WebhookEndpoint {
  return {
    object: 'webhook_endpoint',
    id: row.id,
    name: row.name,
    url: row.url,
    event_types: parseEventTypes(row.event_types),
    created_at: unixSeconds(row.created_at),
    updated_at: unixSeconds(row.updated_at),
    signing_secret_hint: row.secret_hint,
  };
}

/** The answer of create and rotate_secret: the only ones that show the secret (`secret`, in clear). */
export function endpointWithSecret(row: WebhookEndpointRow, secret: string): WebhookEndpointWithSecret {
  return { ...endpointFromRow(row), signing_secret: secret };
}

/** Reads a stored event as the API shows it; null for one this version cannot read as its type. */
export type WebhookEventReader = (
  row: Pick<WebhookEventRow, 'id' | 'type' | 'created_at' | 'data'>,
) => WebhookEventBody | null;

let eventReader: Promise<WebhookEventReader> | null = null;

/**
 * The reader of stored events, checking each against its type's data: an event written by an older version whose
 * data differed is null, and the history leaves it out rather than showing it untyped or failing the read. Its
 * checker is loaded and compiled by the first call: a process that never lists webhook events never pays for it.
 */
export function webhookEventReader(): Promise<WebhookEventReader> {
  eventReader ??= import('typebox/schema').then(({ Compile }) => {
    const check = Compile(WebhookEventSchema);
    return (row) => {
      const event = {
        id: row.id,
        object: 'event',
        created_at: unixSeconds(row.created_at),
        type: row.type,
        data: parseJsonColumn(row.data, isJsonObject, 'webhook_events.data'),
      };
      return check.Check(event) ? event : null;
    };
  });
  return eventReader;
}

function errorOf(text: string | null): DeliveryError | null {
  if (text === null) return null;
  const parsed = readJsonColumn(text, 'webhook_deliveries.error');
  if (!isJsonObject(parsed)) return null;
  const { code, message } = parsed;
  return { code: typeof code === 'string' ? code : 'unknown', message: typeof message === 'string' ? message : '' };
}

const seconds = (millis: number | null): number | null => (millis === null ? null : unixSeconds(millis));

export function deliveryFromRow(row: WebhookDeliveryRow): WebhookDelivery {
  const status = row.status;
  return {
    object: 'webhook_delivery',
    id: row.id,
    webhook_endpoint_id: row.endpoint_id,
    event_id: row.event_id,
    webhook_id: row.webhook_id,
    kind: row.kind,
    replay_key: row.replay_key === '' ? null : row.replay_key,
    status,
    attempts: row.attempts,
    status_code: row.status_code,
    error: errorOf(row.error),
    created_at: unixSeconds(row.created_at),
    last_attempt_at: seconds(row.last_attempt_at),
    next_attempt_at: status === 'pending' ? seconds(row.next_attempt_at) : null,
    expires_at: unixSeconds(row.deadline_at),
    completed_at: seconds(row.completed_at),
  };
}
