/** GET /v1/models and /v1/models/{id}: the agents a key can name as `model` on /v1/responses, and the configured providers. */
import { Type } from 'typebox';
import type { Deps } from '../../deps.ts';
import { orgOf } from '../auth.ts';
import { errorResponses } from '../schemas/common.ts';
import type { App } from '../types.ts';

const Model = Type.Object(
  {
    id: Type.String({ description: 'An agent id, or provider/* for a configured model provider' }),
    object: Type.Literal('model'),
    created: Type.Integer({ description: 'Unix seconds' }),
    owned_by: Type.String({ description: "The organization's name for agents; the provider for providers" }),
    kind: Type.Union([Type.Literal('agent'), Type.Literal('provider')], {
      description: 'agent: usable as model on /v1/responses; provider: usable in an agent model setting',
    }),
    name: Type.String(),
  },
  { additionalProperties: false },
);

const ModelList = Type.Object(
  { object: Type.Literal('list'), data: Type.Array(Model) },
  { additionalProperties: false },
);

export function modelRoutes(app: App, deps: Deps): void {
  app.route({
    method: 'GET',
    url: '/v1/models',
    config: { scopes: ['tasks:read'] },
    schema: {
      summary: 'List models',
      description:
        "The organization's agents (their ids are the `model` of /v1/responses), then the model providers this deployment has configured for agents (`scripted`, `openai/*`, `anthropic/*`, AGENTRY_PROVIDERS entries).",
      tags: ['Responses'],
      response: { 200: ModelList, ...errorResponses(401, 403) },
    },
    handler: async (request) => deps.listModels(orgOf(request)),
  });

  app.route({
    method: 'GET',
    url: '/v1/models/:id',
    config: { scopes: ['tasks:read'] },
    schema: {
      summary: 'Get a model',
      description:
        'The model object of one agent, named by its id, its name (of exactly one agent) or agent:<name>, or of a configured provider (`scripted`); 404 otherwise.',
      tags: ['Responses'],
      params: Type.Object({ id: Type.String({ minLength: 1, maxLength: 300 }) }),
      response: { 200: Model, ...errorResponses(401, 403, 404) },
    },
    handler: async (request) => deps.getModel(orgOf(request), request.params.id),
  });
}
