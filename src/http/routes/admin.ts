/**
 * The operator's routes (`/v1/admin/...`): limits of organizations and API keys (docs/operations.md, "Limits").
 * They take `Authorization: Bearer <AGENTRY_ADMIN_TOKEN>`, never an API key, so no tenant can lift its own
 * limits; without AGENTRY_ADMIN_TOKEN they answer 404 (http/auth.ts).
 */

import { Type } from 'typebox';
import type { Deps } from '../../deps.ts';
import { adminAudit } from '../../domain/audit/audit-log.ts';
import type { Limits, LimitsPatch } from '../../domain/limits/limit-store.ts';
import { errorResponses, Uuid } from '../schemas/common.ts';
import type { App } from '../types.ts';

const tags = ['Admin'];

const LimitValue = (description: string) =>
  Type.Union([Type.Integer({ minimum: 1, maximum: 1_000_000_000 }), Type.Null()], { description });

const LimitFields = {
  requests_per_minute: LimitValue('Requests per minute; null: the default (AGENTRY_DEFAULT_RPM, else unlimited)'),
  concurrent_turns: LimitValue(
    'Turns running at once; further turns wait in the queue. null: the default (AGENTRY_DEFAULT_CONCURRENT_TURNS, else unlimited)',
  ),
};

const LimitsBody = Type.Object(
  {
    requests_per_minute: Type.Optional(LimitFields.requests_per_minute),
    concurrent_turns: Type.Optional(LimitFields.concurrent_turns),
  },
  {
    additionalProperties: false,
    description: 'The limits to change: an absent field is kept, null clears it (the default applies again)',
  },
);

const LimitsObject = Type.Object(
  {
    object: Type.Literal('limits'),
    subject: Type.Union([Type.Literal('organization'), Type.Literal('api_key')]),
    id: Type.String({ description: 'The id of the organization or API key' }),
    organization_id: Type.String(),
    ...LimitFields,
    effective: Type.Object(
      {
        requests_per_minute: Type.Union([Type.Integer(), Type.Null()], { description: 'null: unlimited' }),
        concurrent_turns: Type.Union([Type.Integer(), Type.Null()], { description: 'null: unlimited' }),
      },
      { additionalProperties: false, description: 'The limits that apply: those set, else the defaults' },
    ),
  },
  { additionalProperties: false },
);

const OrgParams = Type.Object({ org_id: Uuid });
const KeyParams = Type.Object({ key_id: Uuid });

const wire = (limits: Limits) => ({
  requests_per_minute: limits.requestsPerMinute,
  concurrent_turns: limits.concurrentTurns,
});

function patchOf(body: { requests_per_minute?: number | null; concurrent_turns?: number | null }): LimitsPatch {
  return {
    ...(body.requests_per_minute === undefined ? {} : { requestsPerMinute: body.requests_per_minute }),
    ...(body.concurrent_turns === undefined ? {} : { concurrentTurns: body.concurrent_turns }),
  };
}

export function adminRoutes(app: App, deps: Deps): void {
  const service = deps.limits;
  const orgView = (orgId: string, view: { own: Limits; effective: Limits }) => ({
    object: 'limits' as const,
    subject: 'organization' as const,
    id: orgId,
    organization_id: orgId,
    ...wire(view.own),
    effective: wire(view.effective),
  });
  const keyView = (keyId: string, view: { orgId: string; own: Limits; effective: Limits }) => ({
    object: 'limits' as const,
    subject: 'api_key' as const,
    id: keyId,
    organization_id: view.orgId,
    ...wire(view.own),
    effective: wire(view.effective),
  });

  app.route({
    method: 'GET',
    url: '/v1/admin/organizations/:org_id/limits',
    config: { admin: true },
    schema: {
      summary: "Get an organization's limits",
      tags,
      params: OrgParams,
      response: { 200: LimitsObject, ...errorResponses(400, 401, 404) },
    },
    handler: async (request) => orgView(request.params.org_id, await service.organization(request.params.org_id)),
  });

  app.route({
    method: 'PUT',
    url: '/v1/admin/organizations/:org_id/limits',
    config: { admin: true },
    schema: {
      summary: "Set an organization's limits",
      description: "Requests per minute and concurrent turns of all the organization's keys together.",
      tags,
      params: OrgParams,
      body: LimitsBody,
      response: { 200: LimitsObject, ...errorResponses(400, 401, 404) },
    },
    handler: async (request) => {
      const { org_id: orgId } = request.params;
      return orgView(orgId, await service.setOrganization(orgId, patchOf(request.body), adminAudit(request.id)));
    },
  });

  app.route({
    method: 'GET',
    url: '/v1/admin/api_keys/:key_id/limits',
    config: { admin: true },
    schema: {
      summary: "Get an API key's limits",
      tags,
      params: KeyParams,
      response: { 200: LimitsObject, ...errorResponses(400, 401, 404) },
    },
    handler: async (request) => keyView(request.params.key_id, await service.apiKey(request.params.key_id)),
  });

  app.route({
    method: 'PUT',
    url: '/v1/admin/api_keys/:key_id/limits',
    config: { admin: true },
    schema: {
      summary: "Set an API key's limits",
      description:
        "Requests per minute and concurrent turns of this key alone; the organization's limits apply as well.",
      tags,
      params: KeyParams,
      body: LimitsBody,
      response: { 200: LimitsObject, ...errorResponses(400, 401, 404) },
    },
    handler: async (request) => {
      const { key_id: keyId } = request.params;
      return keyView(keyId, await service.setApiKey(keyId, patchOf(request.body), adminAudit(request.id)));
    },
  });
}
