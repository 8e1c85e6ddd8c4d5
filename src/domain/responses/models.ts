/**
 * GET /v1/models (what `client.models.list()` of the OpenAI SDKs reads): on /v1/responses a `model` is an agent
 * id (or name), so the models a key can use are its organization's agents; the providers configured for agents'
 * own `model` setting follow, as `provider/*` entries.
 */
import { AppError } from '../../errors/app-error.ts';
import { unixSeconds } from '../../lib/clock.ts';
import type { Executor } from '../../storage/db.ts';

export interface ModelObject {
  id: string;
  object: 'model';
  created: number;
  owned_by: string;
  /** Extension: `agent` (usable as `model` on /v1/responses) or `provider` (usable in an agent's `model`). */
  kind: 'agent' | 'provider';
  /** Extension: the agent's name, or the provider's id prefix. */
  name: string;
}

export interface ModelList {
  object: 'list';
  data: ModelObject[];
}

export interface ModelCatalogDeps {
  db: Executor;
  /** Providers whose models agents can run here (`scripted` first, then those with credentials or a base URL). */
  providers: string[];
}

export async function listModels(deps: ModelCatalogDeps, orgId: string): Promise<ModelList> {
  const org = await deps.db
    .selectFrom('orgs')
    .select(['name', 'created_at'])
    .where('id', '=', orgId)
    .executeTakeFirst();
  const agents = await deps.db
    .selectFrom('agents')
    .select(['id', 'name', 'created_at'])
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
      })),
      ...deps.providers.map((provider) => ({
        id: provider === 'scripted' ? 'scripted' : `${provider}/*`,
        object: 'model' as const,
        created,
        owned_by: provider,
        kind: 'provider' as const,
        name: provider === 'scripted' ? 'scripted' : `${provider}/`,
      })),
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
