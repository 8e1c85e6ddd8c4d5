/**
 * Workflow Runs (spec 4.8; docs/legacy.md): the follow-up read that workflow.run.* notifications name, behind
 * the beta header, and the submission of function results for a run that requires action (the session's
 * client-output protocol).
 */
import { Type } from 'typebox';
import type { Deps } from '../../deps.ts';
import { validationError } from '../../errors/app-error.ts';
import { orgOf } from '../auth.ts';
import { errorResponses } from '../schemas/common.ts';
import { WorkflowOutputsBody, WorkflowRun } from '../schemas/sdk.ts';
import { BetaHeaders } from '../schemas/webhooks.ts';
import type { App } from '../types.ts';
import { BETA_HEADER, BETA_VALUE, hasBeta } from './session-followup.ts';

const tags = ['Workflow Runs'];
const RunParams = Type.Object({ id: Type.String({ format: 'uuid' }) });

export function workflowRunRoutes(app: App, deps: Deps): void {
  const requireBeta = async (request: { headers: Record<string, string | string[] | undefined> }) => {
    if (!hasBeta(request.headers['agentry-beta'])) {
      throw validationError(BETA_HEADER, `This beta route requires the header ${BETA_HEADER}: ${BETA_VALUE}`);
    }
  };

  app.route({
    method: 'GET',
    url: '/v1/workflow-agents/runs/:id',
    config: { scopes: ['tasks:read'] },
    schema: {
      summary: 'Get a Workflow Run',
      description: `Beta: requires the header ${BETA_HEADER}: ${BETA_VALUE}. A tool run of the older API, with required_actions listing the function calls it waits for.`,
      tags,
      params: RunParams,
      headers: BetaHeaders,
      response: { 200: WorkflowRun, ...errorResponses(400, 401, 403, 404) },
    },
    preValidation: requireBeta,
    handler: async (request) => deps.workflows.get(orgOf(request), request.params.id),
  });

  app.route({
    method: 'POST',
    url: '/v1/workflow-agents/runs/:id/function_call_outputs',
    config: { scopes: ['tasks:write'] },
    schema: {
      summary: 'Submit function results of a Workflow Run',
      description: `Beta: requires the header ${BETA_HEADER}: ${BETA_VALUE}. Each call_id must be a pending function call of the run; once none is left the run continues. An identical retry is idempotent; a different output for a recorded call_id is a 409.`,
      tags,
      params: RunParams,
      headers: BetaHeaders,
      body: WorkflowOutputsBody,
      response: { 200: WorkflowRun, ...errorResponses(400, 401, 403, 404, 409, 413) },
    },
    preValidation: requireBeta,
    handler: async (request) => deps.workflows.submitOutputs(orgOf(request), request.params.id, request.body.outputs),
  });

  app.route({
    method: 'POST',
    url: '/v1/workflow-agents/runs/:id/cancel',
    config: { scopes: ['tasks:write'] },
    schema: {
      summary: 'Cancel a Workflow Run',
      description: `Beta: requires the header ${BETA_HEADER}: ${BETA_VALUE}. A queued or waiting run ends cancelled at once, a running one within a second (read it again to see it). A finished run is returned as it is.`,
      tags,
      params: RunParams,
      headers: BetaHeaders,
      response: { 200: WorkflowRun, ...errorResponses(400, 401, 403, 404) },
    },
    preValidation: requireBeta,
    handler: async (request) => deps.workflows.cancel(orgOf(request), request.params.id),
  });
}
