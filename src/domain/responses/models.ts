/**
 * GET /v1/models (what `client.models.list()` of the OpenAI SDKs reads): on /v1/responses a `model` is an agent
 * id (or name), so the models a key can use are its organization's agents; the providers configured for agents'
 * own `model` setting follow, as `provider/*` entries.
 */
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
