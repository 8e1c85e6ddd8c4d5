/**
 * The webhook follow-up read (spec 4.8, 5.6): GET /v1/agents/sessions/{id}, behind the beta header
 * `Agentry-Beta: agents=v1`. It returns the Session with `required_actions`, the pending calls to answer.
 */
import type { Deps } from '../../deps.ts';
import { validationError } from '../../errors/app-error.ts';
import { orgOf } from '../auth.ts';
import { errorResponses, IdParams } from '../schemas/common.ts';
import { BetaHeaders, FollowUpSession } from '../schemas/webhooks.ts';
import type { App } from '../types.ts';

export const BETA_HEADER = 'Agentry-Beta';
export const BETA_VALUE = 'agents=v1';

/** True when one of the header's comma-separated values is agents=v1. */
export function hasBeta(value: string | string[] | undefined): boolean {
  const values = Array.isArray(value) ? value : value === undefined ? [] : [value];
  return values.some((text) => text.split(',').some((part) => part.trim() === BETA_VALUE));
}

export function sessionFollowUpRoutes(app: App, deps: Deps): void {
  app.route({
    method: 'GET',
    url: '/v1/agents/sessions/:id',
    config: { scopes: ['sessions:read'] },
    schema: {
      summary: 'Get a session (webhook follow-up)',
      description: `Beta: requires the header ${BETA_HEADER}: ${BETA_VALUE}. The Session a notification names, with required_actions listing the pending calls of its waiting turns.`,
      tags: ['Sessions'],
      params: IdParams,
      headers: BetaHeaders,
      response: { 200: FollowUpSession, ...errorResponses(400, 401, 403, 404) },
    },
    // Before schema validation, so the error names the header and the value it needs.
    preValidation: async (request) => {
      if (!hasBeta(request.headers['agentry-beta'])) {
        throw validationError(BETA_HEADER, `This beta route requires the header ${BETA_HEADER}: ${BETA_VALUE}`);
      }
    },
    handler: async (request) => ({
      session: await deps.followUpSession(orgOf(request), request.params.id),
    }),
  });
}
