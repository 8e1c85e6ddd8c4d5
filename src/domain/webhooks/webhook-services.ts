/** The webhook services the HTTP layer uses, wired over one storage. */
import type { Clock } from '../../lib/clock.ts';
import type { Resolver } from '../../lib/egress.ts';
import type { Dialect, Executor } from '../../storage/db.ts';
import { createDeliveryService, type DeliveryService } from './delivery-service.ts';
import { createEndpointService, type EndpointService } from './endpoint-service.ts';

export interface WebhookServices {
  endpoints: EndpointService;
  deliveries: DeliveryService;
}

export interface WebhookServicesDeps {
  db: Executor;
  dialect: Dialect;
  clock: Clock;
  allowInsecureDestinations: boolean;
  retryWindowMs: number;
  historyRetentionMs: number;
  resolver?: Resolver;
}

export function createWebhookServices(deps: WebhookServicesDeps): WebhookServices {
  const endpoints = createEndpointService(deps);
  return { endpoints, deliveries: createDeliveryService({ ...deps, endpoints }) };
}
