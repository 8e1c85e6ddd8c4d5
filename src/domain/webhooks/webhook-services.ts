/** The webhook services the HTTP layer uses, wired over one storage. */
import type { Clock } from '../../lib/clock.ts';
import type { Resolver } from '../../lib/egress.ts';
import type { SecretBox } from '../../lib/secret-box.ts';
import type { Dialect, Executor } from '../../storage/db.ts';
import { createDeliveryService, type DeliveryService } from './delivery-service.ts';
import { createEndpointService, type EndpointService } from './endpoint-service.ts';
import { createWebhookSubscriptions, type WebhookSubscriptions } from './subscriptions.ts';

export interface WebhookServices {
  endpoints: EndpointService;
  deliveries: DeliveryService;
  /** What the outbox asks before it records webhook events; told by `endpoints` of every change. */
  subscriptions: WebhookSubscriptions;
}

export interface WebhookServicesDeps {
  db: Executor;
  dialect: Dialect;
  clock: Clock;
  /** Seals signing secrets for storage and opens them to sign. */
  secrets: SecretBox;
  allowInsecureDestinations: boolean;
  retryWindowMs: number;
  historyRetentionMs: number;
  resolver?: Resolver;
  /** The storage's change version (storage/change-signal.ts), which other processes' endpoint writes move. */
  changeVersion: () => number | null;
}

export function createWebhookServices(deps: WebhookServicesDeps): WebhookServices {
  const subscriptions = createWebhookSubscriptions({ changeVersion: deps.changeVersion });
  const endpoints = createEndpointService({ ...deps, subscriptions });
  return { endpoints, deliveries: createDeliveryService({ ...deps, endpoints }), subscriptions };
}
