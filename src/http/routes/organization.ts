/**
 * GET /v1/organization: who a key speaks for. The console shows the organization, its credit balance and the
 * key's scopes (to hide what the key cannot do); scripts use it to check a key. Any valid key may call it.
 */
import { Type } from 'typebox';
import type { Deps } from '../../deps.ts';
import { SCOPES } from '../../domain/auth/scopes.ts';
import type { Limits } from '../../domain/limits/limit-store.ts';
import { AppError } from '../../errors/app-error.ts';
import { errorResponses, StringEnum } from '../schemas/common.ts';
import type { App } from '../types.ts';

const AppliedLimits = (whose: string) =>
  Type.Object(
    {
      requests_per_minute: Type.Union([Type.Integer(), Type.Null()], { description: 'null: unlimited' }),
      concurrent_turns: Type.Union([Type.Integer(), Type.Null()], { description: 'null: unlimited' }),
    },
    { additionalProperties: false, description: `The limits that apply to ${whose}` },
  );

const Organization = Type.Object(
  {
    object: Type.Literal('organization'),
    id: Type.String({ description: 'The organization id' }),
    name: Type.String(),
    project_id: Type.Integer({ description: 'The numeric project id of the older API (/p/<project_id>)' }),
    projectId: Type.Integer({ description: 'The same project id, as the older API spells it' }),
    credit_balance_usd: Type.Union([Type.Number(), Type.Null()], {
      description: 'Remaining credits in USD; null when the organization is not limited',
    }),
    api_key: Type.Object(
      {
        id: Type.String({ description: 'The id of the key that made this request' }),
        scopes: Type.Array(StringEnum(SCOPES), { description: 'What the key may do' }),
      },
      { additionalProperties: false },
    ),
    limits: Type.Object(
      { organization: AppliedLimits('the whole organization'), api_key: AppliedLimits('this key') },
      {
        additionalProperties: false,
        description: "Rate and concurrency limits, set by the deployment's operator (read only)",
      },
    ),
  },
  { additionalProperties: false },
);

const wire = (limits: Limits) => ({
  requests_per_minute: limits.requestsPerMinute,
  concurrent_turns: limits.concurrentTurns,
});

export function organizationRoutes(app: App, deps: Deps): void {
  app.route({
    method: 'GET',
    url: '/v1/organization',
    config: { scopes: [], anyKey: true },
    schema: {
      summary: 'Get the organization of the API key',
      description:
        "The key's organization, its credit balance, the key's scopes and the rate and concurrency limits that apply. Any valid key may call it.",
      tags: ['Organization'],
      response: { 200: Organization, ...errorResponses(401) },
    },
    handler: async (request) => {
      const principal = request.principal;
      if (principal === null) throw new AppError('missing_api_key', 'No API key');
      // Organizations are few; the org service looks them up by name or lists them.
      const org = (await deps.orgs.list()).find((candidate) => candidate.id === principal.orgId);
      if (org === undefined) throw new AppError('invalid_api_key', 'The API key is invalid, expired or revoked');
      const applying = deps.limits.applying(principal.limits);
      return {
        object: 'organization' as const,
        id: org.id,
        name: org.name,
        project_id: org.projectId,
        projectId: org.projectId,
        credit_balance_usd: org.creditBalanceUsd,
        api_key: { id: principal.keyId, scopes: SCOPES.filter((scope) => principal.scopes.has(scope)) },
        limits: { organization: wire(applying.organization), api_key: wire(applying.apiKey) },
      };
    },
  });
}
