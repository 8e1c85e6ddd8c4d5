/** Agents: create, read, change (keeping every version) and delete, within one organization. */
import { AppError, notFound } from '../../errors/app-error.ts';
import type { Clock } from '../../lib/clock.ts';
import { jsonEqual } from '../../lib/hash.ts';
import { newId } from '../../lib/ids.ts';
import type { Executor } from '../../storage/db.ts';
import { isForeignKeyViolation } from '../../storage/errors.ts';
import {
  agentFromRow,
  configColumns,
  configOf,
  findAgentRow,
  insertAgent,
  insertAgentVersion,
  listAgentRows,
} from './agent-repo.ts';
import type {
  Agent,
  AgentConfig,
  AgentCreateInput,
  AgentUpdateInput,
  AgentWarning,
  NetworkPolicy,
  NetworkPolicyInput,
} from './agent-types.ts';
import { DEFAULT_MAX_STEPS } from './agent-types.ts';
import { checkAgentConfig, parseMcpServers, type ValidationContext } from './agent-validation.ts';

export interface AgentServiceDeps {
  db: Executor;
  clock: Clock;
  validation: ValidationContext;
  defaultModel: string;
}

const DEFAULT_AGENT_NAME = 'Default Agent';
const UPDATE_ATTEMPTS = 5;

function networkPolicy(input: NetworkPolicyInput): NetworkPolicy {
  return {
    allow_network_egress: input.allow_network_egress,
    domain_allowlist: input.domain_allowlist,
    additional_allowed_domains: input.additional_allowed_domains ?? [],
    allow_public_traffic: input.allow_public_traffic ?? false,
  };
}

export function createAgentService(deps: AgentServiceDeps) {
  const { clock, validation } = deps;

  function configFromCreate(input: AgentCreateInput): AgentConfig {
    const config: AgentConfig = {
      name: input.name,
      description: input.description ?? null,
      instructions: input.instructions ?? '',
      model: input.model ?? deps.defaultModel,
      maxSteps: input.maxSteps ?? DEFAULT_MAX_STEPS,
      mcpServers: parseMcpServers(input.mcpServers ?? [], validation),
      clientTools: input.clientTools ?? [],
      skills: input.skills ?? [],
      networkPolicy: input.networkPolicy === undefined ? null : networkPolicy(input.networkPolicy),
    };
    checkAgentConfig(config, validation);
    return config;
  }

  async function insert(db: Executor, orgId: string, config: AgentConfig, isDefault: boolean): Promise<Agent> {
    const now = clock.now();
    const row = {
      id: newId(),
      org_id: orgId,
      ...configColumns(config),
      is_default: isDefault ? 1 : 0,
      version: 1,
      workspace_provisioned_at: null,
      created_at: now,
      updated_at: now,
    };
    await insertAgent(db, row, config);
    return agentFromRow(row);
  }

  async function get(orgId: string, id: string, db: Executor = deps.db): Promise<Agent> {
    const row = await findAgentRow(db, orgId, id);
    if (row === undefined) throw notFound('agent', id);
    return agentFromRow(row);
  }

  return {
    get,

    /**
     * Non-fatal notes about an agent as written: a model whose provider has no credentials here (its turns fail
     * with model_not_configured until the variable is set).
     */
    warnings(agent: Pick<Agent, 'model'>): AgentWarning[] {
      const problem = validation.models.credentialProblem(agent.model);
      return problem === null ? [] : [{ code: 'model_not_configured', message: problem }];
    },

    async list(orgId: string): Promise<Agent[]> {
      return (await listAgentRows(deps.db, orgId)).map(agentFromRow);
    },

    /** Validates and inserts a new Agent (version 1). Pass the transaction the caller holds, if any. */
    async create(orgId: string, input: AgentCreateInput, db: Executor = deps.db): Promise<Agent> {
      return insert(db, orgId, configFromCreate(input), false);
    },

    /** The Agent every organization starts with; it cannot be deleted. */
    async createDefault(db: Executor, orgId: string): Promise<Agent> {
      return insert(db, orgId, configFromCreate({ name: DEFAULT_AGENT_NAME }), true);
    },

    /**
     * Applies a partial change and stores it as the next version. Optimistic: the write is conditional on the
     * version read, and retried when another writer got there first.
     */
    async update(orgId: string, id: string, input: AgentUpdateInput): Promise<Agent> {
      for (let attempt = 0; attempt < UPDATE_ATTEMPTS; attempt++) {
        const row = await findAgentRow(deps.db, orgId, id);
        if (row === undefined) throw notFound('agent', id);
        const current = configOf(agentFromRow(row));
        const next: AgentConfig = {
          name: input.name ?? current.name,
          description: input.description === undefined ? current.description : input.description,
          instructions: input.instructions ?? current.instructions,
          model: input.model ?? current.model,
          maxSteps: input.maxSteps ?? current.maxSteps,
          mcpServers:
            input.mcpServers === undefined ? current.mcpServers : parseMcpServers(input.mcpServers, validation),
          clientTools: input.clientTools ?? current.clientTools,
          skills: input.skills ?? current.skills,
          networkPolicy:
            input.networkPolicy === undefined
              ? current.networkPolicy
              : input.networkPolicy === null
                ? null
                : networkPolicy(input.networkPolicy),
        };
        checkAgentConfig(next, validation);
        if (row.workspace_provisioned_at !== null) {
          for (const field of ['skills', 'networkPolicy'] as const) {
            if (!jsonEqual(current[field], next[field])) {
              throw new AppError(
                'sandbox_provisioned',
                `${field} cannot change after the agent's workspace has been provisioned`,
                { param: field },
              );
            }
          }
        }
        const now = Math.max(clock.now(), row.updated_at);
        const version = row.version + 1;
        const updated = await deps.db.transaction().execute(async (trx) => {
          const result = await trx
            .updateTable('agents')
            .set({ ...configColumns(next), version, updated_at: now })
            .where('id', '=', id)
            .where('org_id', '=', orgId)
            .where('version', '=', row.version)
            .executeTakeFirst();
          if (result.numUpdatedRows === 0n) return false;
          await insertAgentVersion(trx, id, version, next, now);
          return true;
        });
        if (updated) return get(orgId, id);
      }
      throw new AppError('service_unavailable', 'the agent is being changed concurrently; retry', { retriable: true });
    },

    async delete(orgId: string, id: string): Promise<void> {
      await deps.db.transaction().execute(async (trx) => {
        const row = await findAgentRow(trx, orgId, id);
        if (row === undefined) throw notFound('agent', id);
        if (row.is_default === 1)
          throw new AppError('default_agent', "the organization's default agent cannot be deleted");
        const session = await trx
          .selectFrom('sessions')
          .select('id')
          .where('agent_id', '=', id)
          .limit(1)
          .executeTakeFirst();
        if (session !== undefined)
          throw new AppError('agent_in_use', 'the agent cannot be deleted while sessions reference it');
        try {
          await trx.deleteFrom('agents').where('id', '=', id).where('org_id', '=', orgId).execute();
        } catch (error) {
          // A session created between the check and the delete: the foreign key refuses, and so do we.
          if (isForeignKeyViolation(error)) {
            throw new AppError('agent_in_use', 'the agent cannot be deleted while sessions reference it', {
              cause: error,
            });
          }
          throw error;
        }
      });
    },
  };
}

export type AgentService = ReturnType<typeof createAgentService>;
