/** GET /v1/models and /v1/models/{id}: the agents a key can name as `model` on /v1/responses, and the configured providers. */
import { Type } from 'typebox';
import type { Deps } from '../../deps.ts';
import { orgOf } from '../auth.ts';
import { errorResponses } from '../schemas/common.ts';
import type { App } from '../types.ts';

/** What the model catalogue knows of one model (docs/models.md, "Model catalogue"). */
const catalogueFields = {
  context_window: Type.Integer({ description: 'Tokens one call may read and write (input plus output)' }),
  max_output_tokens: Type.Integer({ description: 'The most output tokens one call may produce' }),
  pricing: Type.Object(
    { input: Type.Number(), cached_input: Type.Number(), output: Type.Number() },
    { additionalProperties: false, description: 'USD per 1M tokens; cached_input: input read from the prompt cache' },
  ),
  capabilities: Type.Object(
    { tools: Type.Boolean(), images: Type.Boolean(), structured_output: Type.Boolean() },
    { additionalProperties: false },
  ),
  catalogue_source: Type.Union([Type.Literal('builtin'), Type.Literal('operator'), Type.Literal('default')], {
    description:
      "builtin: Agentry's table; operator: AGENTRY_MODEL_CATALOG or AGENTRY_PROVIDERS; default: unknown model",
  }),
};

const CatalogueModel = Type.Object(
  { id: Type.String({ description: 'A full model id, provider/model' }), ...catalogueFields },
  { additionalProperties: false },
);

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
    model: Type.Optional(
      Type.String({ description: "Agents: the agent's model id; the catalogue fields describe that model" }),
    ),
    ...catalogueFields,
    models: Type.Optional(
      Type.Array(CatalogueModel, {
        description: "Providers: the provider's catalogued models; the entry's own fields apply to its other models",
      }),
    ),
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
    config: { scopes: ['sessions:read'] },
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
    config: { scopes: ['sessions:read'] },
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
