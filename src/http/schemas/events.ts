/**
 * The event shapes the API sends outside JSON responses (Server-Sent Events and webhook deliveries), registered as
 * shared schemas so the OpenAPI document shows them as components (`ResponseStreamEvent`, `SessionEvent`,
 * `WebhookEvent`, and the legacy wires: `TaskStreamEvent`, `TaskStreamDone`, `TaskWebhookEvent`,
 * `ToolRunStreamEvent` and the run object it ends with, `SdkRun`). They are declared beside their producers in the
 * domain; JSON responses that carry the same shapes (the webhook event history, a Task's content with its events,
 * a tool run) refer to them.
 */
import { ResponseStreamEventSchema } from '../../domain/responses/response-events.ts';
import { TaskStreamDoneSchema, TaskStreamEventSchema } from '../../domain/tasks/task-stream-schema.ts';
import { TaskWebhookEventSchema } from '../../domain/tasks/task-webhook-events.ts';
import { WebhookEventSchema } from '../../domain/webhooks/webhook-events.ts';
import { SdkRunBodySchema, ToolRunStreamEventSchema } from '../../domain/workflows/sdk-run-schema.ts';
import { SessionEventSchema } from '../../events/session-event-schema.ts';

export const EVENT_SCHEMAS = [
  ResponseStreamEventSchema,
  SessionEventSchema,
  WebhookEventSchema,
  TaskStreamEventSchema,
  TaskStreamDoneSchema,
  TaskWebhookEventSchema,
  ToolRunStreamEventSchema,
  SdkRunBodySchema,
] as const;
