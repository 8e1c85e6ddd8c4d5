/** Webhook endpoints (spec 4.8): management, history, redelivery and tests. No beta header needed. */
import type { Deps } from '../../deps.ts';
import { EVENT_TYPE_DESCRIPTIONS, WEBHOOK_EVENT_TYPES } from '../../domain/webhooks/webhook-types.ts';
import { auditOf, orgOf } from '../auth.ts';
import { errorResponses } from '../schemas/common.ts';
import {
  CursorQuery,
  DeliveryQuery,
  EmptyBody,
  EndpointCreateBody,
  EndpointDeleted,
  EndpointEventParams,
  EndpointParams,
  EndpointUpdateBody,
  RedeliverHeaders,
  TestBody,
  TestResult,
  WebhookDelivery,
  WebhookEndpoint,
  WebhookEndpointList,
  WebhookEndpointWithSecret,
  WebhookEventList,
  WebhookEventTypeList,
} from '../schemas/webhooks.ts';
import type { App } from '../types.ts';

const tags = ['Webhooks'];

export function webhookRoutes(app: App, deps: Deps): void {
  const { endpoints, deliveries } = deps.webhooks;

  app.route({
    method: 'GET',
    url: '/v1/webhook_event_types',
    config: { scopes: ['webhooks:read'] },
    schema: {
      summary: 'List webhook event types',
      tags,
      response: { 200: WebhookEventTypeList, ...errorResponses(401, 403) },
    },
    handler: async () => ({
      object: 'list' as const,
      data: WEBHOOK_EVENT_TYPES.map((type) => ({ type, description: EVENT_TYPE_DESCRIPTIONS[type] })),
    }),
  });

  app.route({
    method: 'POST',
    url: '/v1/webhook_endpoints',
    config: { scopes: ['webhooks:write'] },
    schema: {
      summary: 'Create a webhook endpoint',
      description:
        'At most 20 per organization (400 limit_exceeded). The answer carries signing_secret, shown only this once.',
      tags,
      body: EndpointCreateBody,
      response: { 200: WebhookEndpointWithSecret, ...errorResponses(400, 401, 403, 413) },
    },
    handler: async (request) => endpoints.create(orgOf(request), request.body, auditOf(request)),
  });

  app.route({
    method: 'GET',
    url: '/v1/webhook_endpoints',
    config: { scopes: ['webhooks:read'] },
    schema: {
      summary: 'List webhook endpoints',
      description: 'Newest first; pass last_id as after for the next page.',
      tags,
      querystring: CursorQuery,
      response: { 200: WebhookEndpointList, ...errorResponses(400, 401, 403) },
    },
    handler: async (request) => endpoints.list(orgOf(request), request.query),
  });

  app.route({
    method: 'GET',
    url: '/v1/webhook_endpoints/:id',
    config: { scopes: ['webhooks:read'] },
    schema: {
      summary: 'Get a webhook endpoint',
      description: 'Without its secret (see signing_secret_hint).',
      tags,
      params: EndpointParams,
      response: { 200: WebhookEndpoint, ...errorResponses(400, 401, 403, 404) },
    },
    handler: async (request) => endpoints.get(orgOf(request), request.params.id),
  });

  app.route({
    method: 'POST',
    url: '/v1/webhook_endpoints/:id',
    config: { scopes: ['webhooks:write'] },
    schema: {
      summary: 'Update a webhook endpoint',
      description:
        'Changes name, url, or the complete event_types list. Subscriptions apply to future events; a new url also receives the pending attempts of earlier events.',
      tags,
      params: EndpointParams,
      body: EndpointUpdateBody,
      response: { 200: WebhookEndpoint, ...errorResponses(400, 401, 403, 404, 413) },
    },
    handler: async (request) => endpoints.update(orgOf(request), request.params.id, request.body, auditOf(request)),
  });

  app.route({
    method: 'DELETE',
    url: '/v1/webhook_endpoints/:id',
    config: { scopes: ['webhooks:write'] },
    schema: {
      summary: 'Delete a webhook endpoint',
      description: 'Stops future attempts: its pending deliveries become skipped. Requests in flight may still arrive.',
      tags,
      params: EndpointParams,
      response: { 200: EndpointDeleted, ...errorResponses(400, 401, 403, 404) },
    },
    handler: async (request) => endpoints.delete(orgOf(request), request.params.id, auditOf(request)),
  });

  app.route({
    method: 'POST',
    url: '/v1/webhook_endpoints/:id/rotate_secret',
    config: { scopes: ['webhooks:write'] },
    schema: {
      summary: 'Rotate the signing secret',
      description: 'Returns the new secret once; every later attempt, retries included, is signed with it.',
      tags,
      params: EndpointParams,
      body: EmptyBody,
      response: { 200: WebhookEndpointWithSecret, ...errorResponses(400, 401, 403, 404) },
    },
    handler: async (request) => endpoints.rotateSecret(orgOf(request), request.params.id, auditOf(request)),
  });

  app.route({
    method: 'POST',
    url: '/v1/webhook_endpoints/:id/test',
    config: { scopes: ['webhooks:write'] },
    schema: {
      summary: 'Send a test event',
      description:
        'One signed attempt of a test event (data ids test_resource) of a subscribed type, recorded in the event history. Any HTTP answer completes the test (inspect status_code); no answer is 502 webhook_test_failed.',
      tags,
      params: EndpointParams,
      body: TestBody,
      response: { 200: TestResult, ...errorResponses(400, 401, 403, 404, 502) },
    },
    handler: async (request) => deliveries.test(orgOf(request), request.params.id, request.body.event_type),
  });

  app.route({
    method: 'GET',
    url: '/v1/webhook_endpoints/:id/events',
    config: { scopes: ['webhooks:read'] },
    schema: {
      summary: 'List the events of a webhook endpoint',
      description: 'The notifications assigned to the endpoint (tests included), newest first.',
      tags,
      params: EndpointParams,
      querystring: CursorQuery,
      response: { 200: WebhookEventList, ...errorResponses(400, 401, 403, 404) },
    },
    handler: async (request) => deliveries.events(orgOf(request), request.params.id, request.query),
  });

  app.route({
    method: 'GET',
    url: '/v1/webhook_endpoints/:id/events/:event_id/delivery',
    config: { scopes: ['webhooks:read'] },
    schema: {
      summary: 'Get the delivery status of an event',
      description:
        'The automatic delivery, or with replay_key the manual delivery made with that Idempotency-Key. 404 once the history retention (AGENTRY_WEBHOOK_HISTORY_RETENTION_MS) has passed since it ended.',
      tags,
      params: EndpointEventParams,
      querystring: DeliveryQuery,
      response: { 200: WebhookDelivery, ...errorResponses(400, 401, 403, 404) },
    },
    handler: async (request) =>
      deliveries.delivery(orgOf(request), request.params.id, request.params.event_id, request.query.replay_key),
  });

  app.route({
    method: 'POST',
    url: '/v1/webhook_endpoints/:id/events/:event_id/redeliver',
    config: { scopes: ['webhooks:write'] },
    schema: {
      summary: 'Redeliver an event',
      description:
        'A new manual delivery with a new retry window, the same body and webhook-id. The same Idempotency-Key returns the same delivery while its history is retained.',
      tags,
      params: EndpointEventParams,
      headers: RedeliverHeaders,
      body: EmptyBody,
      response: { 202: WebhookDelivery, ...errorResponses(400, 401, 403, 404) },
    },
    handler: async (request, reply) => {
      const delivery = await deliveries.redeliver(
        orgOf(request),
        request.params.id,
        request.params.event_id,
        request.headers['idempotency-key'],
      );
      return reply.code(202).send(delivery);
    },
  });
}
