/**
 * The event shapes the API sends outside JSON responses (Server-Sent Events and webhook deliveries), registered as
 * shared schemas so the OpenAPI document shows them as components (`ResponseStreamEvent`, `SessionEvent`,
 * `WebhookEvent`). They are declared beside their producers in the domain.
 */
import { ResponseStreamEventSchema } from '../../domain/responses/response-events.ts';
import { SessionEventSchema } from '../../domain/session-event-schema.ts';
import { WebhookEventSchema } from '../../domain/webhooks/webhook-events.ts';

export const EVENT_SCHEMAS = [ResponseStreamEventSchema, SessionEventSchema, WebhookEventSchema] as const;
