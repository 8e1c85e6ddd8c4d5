/**
 * GET /v1/models (what `client.models.list()` of the OpenAI SDKs reads): on /v1/responses a `model` is an agent
 * id (or name), so the models a key can use are its organization's agents; the providers configured for agents'
 * own `model` setting follow, as `provider/*` entries.
 */
import { AppError } from '../../errors/app-error.ts';
import { unixSeconds } from '../../lib/clock.ts';
import type { ModelCatalogue, ModelInfo, ModelInfoSource } from '../../models/catalogue.ts';
import type { Executor } from '../../storage/db.ts';

/** Extension fields: what the catalogue knows of one model, snake_case, prices in USD per 1M tokens. */
export interface ModelCatalogueFields {
  context_window: number;
  max_output_tokens: number;
  pricing: { input: number; cached_input: number; output: number };
  capabilities: { tools: boolean; images: boolean; structured_output: boolean };
  /** builtin (Agentry's table), operator (AGENTRY_MODEL_CATALOG or AGENTRY_PROVIDERS) or default (unknown). */
  catalogue_source: ModelInfoSource;
}

export interface ModelObject extends ModelCatalogueFields {
  id: string;
  object: 'model';
  created: number;
  owned_by: string;
  /** Extension: `agent` (usable as `model` on /v1/responses) or `provider` (usable in an agent's `model`). */
  kind: 'agent' | 'provider';
  /** Extension: the agent's name, or the provider's id prefix. */
  name: string;
  /** Extension, agents: the model id the agent runs on; the catalogue fields are that model's. */
  model?: string;
  /**
   * Extension, providers: the catalogued models of this provider with their fields; the entry's own fields are
   * those of any other model of the provider.
   */
  models?: (ModelCatalogueFields & { id: string })[];
}

export interface ModelList {
  object: 'list';
  data: ModelObject[];
}

export interface ModelCatalogDeps {
  db: Executor;
  /** Providers whose models agents can run here (`scripted` first, then those with credentials or a base URL). */
  providers: string[];
  catalogue: ModelCatalogue;
}

export function catalogueFields(info: ModelInfo): ModelCatalogueFields {
  const { prices, capabilities } = info;
  return {
    context_window: info.contextWindow,
    max_output_tokens: info.maxOutputTokens,
    pricing: { input: prices.inputPerMTok, cached_input: prices.cachedInputPerMTok, output: prices.outputPerMTok },
    capabilities: {
      tools: capabilities.tools,
      images: capabilities.images,
      structured_output: capabilities.structuredOutput,
    },
    catalogue_source: info.source,
  };
}

/** A provider entry: `scripted` is one model; any other is `provider/*` with its catalogued models. */
function providerModel(catalogue: ModelCatalogue, provider: string, created: number): ModelObject {
  const base = { object: 'model' as const, created, owned_by: provider, kind: 'provider' as const };
  if (provider === 'scripted') {
    return { id: 'scripted', ...base, name: 'scripted', ...catalogueFields(catalogue.info('scripted')) };
  }
  const prefix = `${provider}/`;
  const models = catalogue
    .modelIds()
    .filter((id) => id.startsWith(prefix) && id !== `${prefix}*`)
    .map((id) => ({ id, ...catalogueFields(catalogue.info(id)) }));
  return { id: `${provider}/*`, ...base, name: prefix, ...catalogueFields(catalogue.info(`${prefix}*`)), models };
}

export async function listModels(deps: ModelCatalogDeps, orgId: string): Promise<ModelList> {
  const org = await deps.db
    .selectFrom('orgs')
    .select(['name', 'created_at'])
    .where('id', '=', orgId)
    .executeTakeFirst();
  const agents = await deps.db
    .selectFrom('agents')
    .select(['id', 'name', 'model', 'created_at'])
    .where('org_id', '=', orgId)
    .orderBy('created_at')
    .orderBy('id')
    .execute();
  const created = unixSeconds(org?.created_at ?? 0);
  return {
    object: 'list',
    data: [
      ...agents.map((agent) => ({
        id: agent.id,
        object: 'model' as const,
        created: unixSeconds(agent.created_at),
        owned_by: org?.name ?? 'organization',
        kind: 'agent' as const,
        name: agent.name,
        model: agent.model,
        ...catalogueFields(deps.catalogue.info(agent.model)),
      })),
      ...deps.providers.map((provider) => providerModel(deps.catalogue, provider, created)),
    ],
  };
}

/**
 * GET /v1/models/{id}: the model object of the agent `id` names (its id, its name, `agent:<name>`), or of a
 * provider entry; 404 otherwise, and for a name several agents share.
 */
export async function getModel(deps: ModelCatalogDeps, orgId: string, id: string): Promise<ModelObject> {
  const { data } = await listModels(deps, orgId);
  const byId = data.find((model) => model.id === id || model.id === id.toLowerCase());
  if (byId !== undefined) return byId;
  const name = id.startsWith('agent:') ? id.slice('agent:'.length) : id;
  const named = data.filter((model) => model.kind === 'agent' && model.name === name);
  const [only] = named;
  if (only !== undefined && named.length === 1) return only;
  const why =
    named.length > 1
      ? `several of your agents are named ${JSON.stringify(name)}; use the id`
      : 'no agent or provider has this id or name';
  throw new AppError(
    'not_found',
    `The model ${JSON.stringify(id)} does not exist: ${why} (GET /v1/models lists them)`,
    {
      param: 'model',
    },
  );
}

/** The providers a deployment has set up: OpenAI and Anthropic with their keys, every AGENTRY_PROVIDERS entry. */
export function configuredProviders(config: {
  openaiApiKey: string | null;
  anthropicApiKey: string | null;
  providers: Record<string, unknown>;
}): string[] {
  return [
    'scripted',
    ...(config.openaiApiKey === null ? [] : ['openai']),
    ...(config.anthropicApiKey === null ? [] : ['anthropic']),
    ...Object.keys(config.providers),
  ];
}
