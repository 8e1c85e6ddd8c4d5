/**
 * Agents: create, read, change (keeping every version) and delete, within one organization. The parts: the
 * request's config (agent-input.ts), the cached reads (agent-cache.ts), the versioned writes (agent-writes.ts) and
 * the versions' views (agent-versions.ts).
 */

import { notFound } from '../../errors/app-error.ts';
import type { Clock } from '../../lib/clock.ts';
import { newId } from '../../lib/ids.ts';
import type { Executor } from '../../storage/db.ts';
import { type AuditContext, appendAudit, SYSTEM_AUDIT } from '../audit/audit-log.ts';
import { type Budget, type BudgetInput, type BudgetView, budgetColumns, budgetView } from '../billing/budgets.ts';
import type { Idempotency, IdempotentResult } from '../idempotency.ts';
import type { McpServerService, PreparedEntries } from '../mcp-servers/mcp-server-service.ts';
import { createAgentCache } from './agent-cache.ts';
import { agentBudget, configFromCreate, configFromUpdate } from './agent-input.ts';
import {
  agentFromRow,
  configColumns,
  findAgentIdsByName,
  findAgentVersionRecord,
  insertAgent,
  listAgentRows,
} from './agent-repo.ts';
import type {
  Agent,
  AgentConfig,
  AgentCreateInput,
  AgentUpdateInput,
  AgentVersionPage,
  AgentVersionView,
  AgentWarning,
} from './agent-types.ts';
import { parseMcpServers, type ValidationContext } from './agent-validation.ts';
import { listVersions, readVersion } from './agent-versions.ts';
import { createAgentWrites, type WriteOptions } from './agent-writes.ts';

export type { WriteOptions } from './agent-writes.ts';

export interface AgentServiceDeps {
  db: Executor;
  clock: Clock;
  validation: ValidationContext;
  defaultModel: string;
  idempotency: Idempotency;
  /** Registers URL entries as connectors and checks custom ones (src/domain/mcp-servers). */
  connectors: Pick<McpServerService, 'prepareEntries' | 'commitEntries' | 'linkAgent'>;
  /** The storage's change version (storage/change-signal.ts); without it agents are read on every get. */
  changeVersion?: () => number | null;
  /**
   * What the agent configures that this deployment cannot run: the tool registry's answer (src/tools/registry.ts),
   * the same an accepted message of the agent carries. It reads the database (connectors) but never calls out.
   */
  toolWarnings: (agent: Agent, scope: { orgId: string; agentId: string; db: Executor }) => Promise<AgentWarning[]>;
}

/** An agent with what will not work as it is configured (create, update and get answer with both). */
export interface AgentView {
  agent: Agent;
  warnings: AgentWarning[];
}

/** A validated create whose URL entries were discovered, ready to be written in a transaction. */
interface PreparedAgent {
  config: AgentConfig;
  budget: Budget | null;
  entries: PreparedEntries;
}

const DEFAULT_AGENT_NAME = 'Default Agent';

export function createAgentService(deps: AgentServiceDeps) {
  const { clock, validation } = deps;

  const { get, getIn, atTurnStart } = createAgentCache(deps);
  const { write, setBudget, remove } = createAgentWrites(deps);

  async function prepare(orgId: string, input: AgentCreateInput): Promise<PreparedAgent> {
    const config = configFromCreate(input, deps.defaultModel, validation);
    const budget = agentBudget(input.budget) ?? null;
    return { config, budget, entries: await deps.connectors.prepareEntries(orgId, config.mcpServers) };
  }

  async function insertPrepared(
    db: Executor,
    orgId: string,
    prepared: PreparedAgent,
    actor: string | null,
  ): Promise<Agent> {
    const { entries, serverIds } = await deps.connectors.commitEntries(db, orgId, prepared.entries);
    const agent = await insert(db, orgId, { ...prepared.config, mcpServers: entries }, false, actor, prepared.budget);
    await deps.connectors.linkAgent(db, agent.id, serverIds);
    return agent;
  }

  async function insert(
    db: Executor,
    orgId: string,
    config: AgentConfig,
    isDefault: boolean,
    actor: string | null,
    budget: Budget | null = null,
  ): Promise<Agent> {
    const now = clock.now();
    const row = {
      id: newId(),
      org_id: orgId,
      ...configColumns(config),
      ...budgetColumns(budget),
      is_default: isDefault ? 1 : 0,
      version: 1,
      workspace_provisioned_at: null,
      created_at: now,
      updated_at: now,
    };
    await insertAgent(db, row, config, actor);
    return agentFromRow(row);
  }

  /**
   * Non-fatal notes about an agent as it is: a model whose provider has no credentials here (its turns fail with
   * model_not_configured until the variable is set), then the warnings every accepted message of it carries.
   */
  async function viewOf(db: Executor, orgId: string, agent: Agent): Promise<AgentView> {
    const problem = validation.models.credentialProblem(agent.model);
    const model = problem === null ? [] : [{ code: 'model_not_configured', message: problem }];
    return { agent, warnings: [...model, ...(await deps.toolWarnings(agent, { orgId, agentId: agent.id, db }))] };
  }

  /** `write`, answered with the agent's view as it now is. */
  async function writeAndView(
    orgId: string,
    id: string,
    options: WriteOptions,
    entries: PreparedEntries | null,
    change: (current: AgentConfig) => AgentConfig,
  ): Promise<AgentView> {
    await write(orgId, id, options, entries, change);
    return viewOf(deps.db, orgId, await get(orgId, id));
  }

  return {
    get,
    getIn,
    atTurnStart,

    /** The configuration a create with `input` would store, validated (a 400 naming the field), without writing. */
    configFor: (input: AgentCreateInput): AgentConfig => configFromCreate(input, deps.defaultModel, validation),

    /** The budget a request's `budget` sets, as the Agent shows it (validated: a 400 naming the field). */
    budgetFor(input: BudgetInput | null): BudgetView | null {
      return budgetView(agentBudget(input) ?? null);
    },

    /** The agent with its warnings (GET /v1/agents/{id}). */
    async view(orgId: string, id: string): Promise<AgentView> {
      return viewOf(deps.db, orgId, await get(orgId, id));
    },

    /**
     * The ids of the organization's agents named `name`, at most two: one is the agent that name means, two say the
     * name is ambiguous.
     */
    async idsNamed(orgId: string, name: string, db: Executor = deps.db): Promise<string[]> {
      return findAgentIdsByName(db, orgId, name, 2);
    },

    async list(orgId: string): Promise<Agent[]> {
      return (await listAgentRows(deps.db, orgId)).map(agentFromRow);
    },

    /**
     * Validates and inserts a new Agent (version 1), under an optional Idempotency-Key. Remote URL servers are
     * discovered before the write (a failure is a 400 naming the entry and writes nothing) and registered as
     * connectors in the same transaction as the agent. A replayed key answers without discovering again.
     */
    async create(
      orgId: string,
      input: AgentCreateInput,
      idempotencyKey?: string,
      actor: string | null = null,
      audit: AuditContext = SYSTEM_AUDIT,
      auditAction = 'agent.created',
    ): Promise<IdempotentResult<AgentView>> {
      const request = { orgId, scope: 'POST /v1/agents', key: idempotencyKey, request: input };
      const earlier = await deps.idempotency.lookup<AgentView>(request);
      if (earlier !== null) return earlier;
      const prepared = await prepare(orgId, input);
      return deps.idempotency.run(request, async (trx) => {
        const agent = await insertPrepared(trx, orgId, prepared, actor);
        await appendAudit(
          trx,
          audit,
          {
            orgId,
            action: auditAction,
            targetType: 'agent',
            targetId: agent.id,
            after: { name: agent.name, version: agent.version, fields: Object.keys(prepared.config).sort() },
          },
          clock,
        );
        return { status: 201, body: await viewOf(trx, orgId, agent) };
      });
    },

    /** The Agent every organization starts with; it cannot be deleted. */
    async createDefault(db: Executor, orgId: string, actor: string | null = null): Promise<Agent> {
      return insert(
        db,
        orgId,
        configFromCreate({ name: DEFAULT_AGENT_NAME }, deps.defaultModel, validation),
        true,
        actor,
      );
    },

    /**
     * Applies a partial change and stores it as the next version (see `write`). Answers with the new version's
     * warnings.
     */
    async update(orgId: string, id: string, update: AgentUpdateInput, options: WriteOptions = {}): Promise<AgentView> {
      const { budget: budgetInput, ...input } = update;
      const budget = agentBudget(budgetInput);
      if (Object.keys(input).length === 0 && budget !== undefined) {
        // A budget alone is not a new version.
        await setBudget(orgId, id, budget, options.expectedVersion);
        return viewOf(deps.db, orgId, await get(orgId, id));
      }
      const entries =
        input.mcpServers === undefined
          ? null
          : await deps.connectors.prepareEntries(orgId, parseMcpServers(input.mcpServers, validation));
      return writeAndView(orgId, id, options, entries, (current) => configFromUpdate(current, input, entries)).then(
        async (view) => {
          if (budget === undefined) return view;
          await setBudget(orgId, id, budget);
          return viewOf(deps.db, orgId, await get(orgId, id));
        },
      );
    },

    /**
     * Stores a new version whose config is that of version `version` (its connectors must still exist). The
     * history is kept: restoring never removes a version.
     */
    async restore(orgId: string, id: string, version: number, options: WriteOptions = {}): Promise<AgentView> {
      await get(orgId, id);
      const record = await findAgentVersionRecord(deps.db, id, version);
      if (record === undefined) throw notFound('agent version', `${id}@${version}`);
      const entries = await deps.connectors.prepareEntries(orgId, record.config.mcpServers);
      return writeAndView(orgId, id, { auditAction: 'agent.restored', ...options }, entries, () => ({
        ...record.config,
      }));
    },

    /** The agent's versions, newest first (GET /v1/agents/{id}/versions). */
    async versions(orgId: string, id: string, page: { limit: number; cursor?: string }): Promise<AgentVersionPage> {
      await get(orgId, id);
      return listVersions(deps.db, id, page);
    },

    /**
     * One version of the agent; with `diffFrom`, also what changed from that version to this one (JSON-pointer
     * paths into the config).
     */
    async version(orgId: string, id: string, version: number, diffFrom?: number): Promise<AgentVersionView> {
      await get(orgId, id);
      return readVersion(deps.db, id, version, diffFrom);
    },

    delete: remove,
  };
}

export type AgentService = ReturnType<typeof createAgentService>;
