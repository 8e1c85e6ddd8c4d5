/** Closed sets, limits and API shapes of webhook endpoints, events and deliveries (docs/webhooks.md). */
import type { DeliveryKind, DeliveryStatus } from '../../storage/column-values.ts';
import { WEBHOOK_EVENT_TYPES, type WebhookEventBody, type WebhookEventType } from './webhook-events.ts';

export { WEBHOOK_EVENT_TYPES, type WebhookEventType };

export const EVENT_TYPE_DESCRIPTIONS: Record<WebhookEventType, string> = {
  'agent.session.created': 'Session created',
  'agent.session.in_progress': 'Session has active work',
  'agent.session.action_required': 'A client function result (or an answer to a question) is needed',
  'agent.session.idle': 'Ready for input; not a guarantee the last turn succeeded',
  'agent.session.failed': 'Session entered a failed state',
  'agent.session.turn.completed': 'A turn completed; data.id is the turn (message) id, data.session_id its session',
  'agent.session.turn.failed': 'A turn failed; data.id is the turn (message) id, data.session_id its session',
  'agent.session.turn.cancelled': 'A turn was cancelled; data.id is the turn (message) id, data.session_id its session',
  'workflow.run.created': 'A Workflow Run (a tool-run call of the older API) was admitted; data.id is the run id',
  'workflow.run.in_progress': 'A Workflow Run started (or resumed after its function results)',
  'workflow.run.action_required':
    'A Workflow Run needs an application function result; data.required_action names the call',
  'workflow.run.completed': 'A Workflow Run completed',
  'workflow.run.failed': 'A Workflow Run failed',
  'workflow.run.cancelled': 'A Workflow Run was cancelled',
  'schedule.run.created': 'A Schedule Run was admitted (a tick fired or a manual run); data.schedule_id its schedule',
  'schedule.run.running': 'A Schedule Run was dispatched: its turn was submitted; data.session_id its session',
  'schedule.run.completed': "A Schedule Run's turn completed; data.schedule_id identifies the schedule",
  'schedule.run.failed': 'A Schedule Run failed (its turn failed, timed out, or could not start)',
  'schedule.run.cancelled': "A Schedule Run's turn was cancelled",
  'schedule.run.skipped': 'A tick was skipped because the previous run was unfinished (overlap skip)',
  'mcp_server.authorization_required':
    "An MCP server's credential can no longer be used (refresh refused, more scope needed); data.id is the connector, data.user the end user (null: the organization). Connect it again.",
  'budget.threshold':
    "The spend of an agent's, session's or schedule's budget crossed 80 % of its limit (once per limit and period); data.scope and data.id name it",
  'budget.exceeded':
    "The spend of an agent's, session's or schedule's budget reached its limit (once per limit and period): its turns are refused until it is raised or a new month starts",
};

export function isWebhookEventType(value: string): value is WebhookEventType {
  return (WEBHOOK_EVENT_TYPES as readonly string[]).includes(value);
}

export {
  DELIVERY_KINDS,
  DELIVERY_STATUSES,
  type DeliveryKind,
  type DeliveryStatus,
} from '../../storage/column-values.ts';

/** Spec section 8: at most 20 endpoints per organization. */
export const MAX_ENDPOINTS_PER_ORG = 20;
/** Spec section 6 rule 1: the receiver must answer within 10 seconds. */
export const DELIVERY_TIMEOUT_MS = 10_000;

export interface WebhookEndpoint {
  object: 'webhook_endpoint';
  id: string;
  name: string;
  url: string;
  event_types: WebhookEventType[];
  created_at: number;
  updated_at: number;
  signing_secret_hint: string;
}

/** Only the answers of create and rotate_secret carry the secret. */
export type WebhookEndpointWithSecret = WebhookEndpoint & { signing_secret: string };

/** An event of the history: what its deliveries carry. */
export type WebhookEvent = WebhookEventBody;

export interface DeliveryError {
  code: string;
  message: string;
}

export interface WebhookDelivery {
  object: 'webhook_delivery';
  id: string;
  webhook_endpoint_id: string;
  event_id: string;
  webhook_id: string;
  kind: DeliveryKind;
  replay_key: string | null;
  status: DeliveryStatus;
  attempts: number;
  status_code: number | null;
  error: DeliveryError | null;
  created_at: number;
  last_attempt_at: number | null;
  next_attempt_at: number | null;
  expires_at: number;
  completed_at: number | null;
}

export interface WebhookTestResult {
  object: 'webhook_endpoint.test';
  webhook_endpoint_id: string;
  event_type: WebhookEventType;
  success: true;
  status_code: number;
  event_id: string;
  delivery_id: string;
}
