/**
 * Webhook endpoints as documents: the create body of POST /v1/webhook_endpoints, keyed by the endpoint's name
 * (every endpoint has one). The signing secret is never part of a document: an endpoint an apply creates gets a
 * new one, answered once in the apply's plan; an update keeps the endpoint's.
 */
import { jsonDiff } from '../../lib/json-diff.ts';
import type { EndpointService } from '../webhooks/endpoint-service.ts';
import type { WebhookEventType } from '../webhooks/webhook-types.ts';
import { markerOf } from './apply-types.ts';
import type { Existing, ResourceKind } from './resource-kind.ts';

export interface WebhookEndpointDocument {
  kind: 'webhook_endpoint';
  name: string;
  url: string;
  event_types: WebhookEventType[];
}

export function endpointKind(deps: { endpoints: EndpointService }): ResourceKind<WebhookEndpointDocument> {
  const { endpoints } = deps;
  return {
    kind: 'webhook_endpoint',
    noun: 'webhook endpoint',

    async existing(orgId: string): Promise<Existing<WebhookEndpointDocument>[]> {
      return (await endpoints.all(orgId)).map((endpoint) => {
        const document: WebhookEndpointDocument = {
          kind: 'webhook_endpoint',
          name: endpoint.name,
          url: endpoint.url,
          event_types: endpoint.event_types,
        };
        return { id: endpoint.id, name: endpoint.name, document, marker: markerOf(document) };
      });
    },

    async plan(_context, document: WebhookEndpointDocument, current) {
      const desired = { ...document, event_types: [...document.event_types].sort() };
      const changes =
        current === undefined
          ? []
          : jsonDiff({ ...current.document, event_types: [...current.document.event_types].sort() }, desired).map(
              (change) => change.path,
            );
      const { kind: _kind, ...input } = document;
      return {
        changes,
        write: async ({ orgId, audit }) => {
          if (current === undefined) {
            const created = await endpoints.create(orgId, input, audit);
            return { id: created.id, signing_secret: created.signing_secret };
          }
          if (changes.length > 0) await endpoints.update(orgId, current.id, input, audit);
          return { id: current.id };
        },
      };
    },
  };
}
