/** Agents: create, read, change (keeping every version) and delete, within one organization. */

import { AppError, notFound, validationError } from '../../errors/app-error.ts';
import { type Clock, iso } from '../../lib/clock.ts';
import { deepFreeze } from '../../lib/freeze.ts';
import { jsonEqual } from '../../lib/hash.ts';
import { newId } from '../../lib/ids.ts';
import { jsonDiff } from '../../lib/json-diff.ts';
import type { ResponseFormat } from '../../models/types.ts';
import type { Executor } from '../../storage/db.ts';
import { isForeignKeyViolation } from '../../storage/errors.ts';
import { type AuditContext, appendAudit, changedFields, SYSTEM_AUDIT } from '../audit/audit-log.ts';
import {
  BUDGET_PERIODS,
  type Budget,
  type BudgetInput,
  type BudgetView,
  budgetColumns,
  budgetView,
  parseBudget,
  resetSpend,
} from '../billing/budgets.ts';
import type { Idempotency, IdempotentResult } from '../idempotency.ts';
import type { McpServerService, PreparedEntries } from '../mcp-servers/mcp-server-service.ts';
import { parseResponseFormat } from '../output-format.ts';
import {
  type AgentVersionRecord,
  agentFromRow,
  configColumns,
  configOf,
  findAgentIdsByName,
  findAgentRow,
  findAgentVersionRecord,
  insertAgent,
  insertAgentVersion,
  listAgentRows,
  listAgentVersions,
  toolApprovalsOf,
} from './agent-repo.ts';
import type {
  Agent,
  AgentConfig,
  AgentCreateInput,
  AgentUpdateInput,
  AgentVersionPage,
  AgentVersionView,
  AgentWarning,
  NetworkPolicy,
  NetworkPolicyInput,
  ToolApprovals,
} from './agent-types.ts';
import { DEFAULT_MAX_STEPS, defaultContextPolicy } from './agent-types.ts';
import { checkAgentConfig, parseMcpServers, type ValidationContext } from './agent-validation.ts';

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

/** Agents kept by `get` outside transactions, emptied whenever the change version moves. */
const AGENT_CACHE_MAX = 10_000;

/** What starting a turn needs to know of its agent: the current version, and whether its workspace exists yet. */
export interface AgentStart {
  version: number;
  workspaceProvisioned: boolean;
}

/** An agent as the cache keeps it: the Agent, and what only a turn's start needs of its row. */
interface CachedAgent {
  agent: Agent;
  workspaceProvisioned: boolean;
}

/** A validated create whose URL entries were discovered, ready to be written in a transaction. */
interface PreparedAgent {
  config: AgentConfig;
  budget: Budget | null;
  entries: PreparedEntries;
}

/** An agent's budget from a request (a 400 naming `budget.limitUsd` or `budget.period`); monthly unless named. */
function agentBudget(input: BudgetInput | null | undefined): Budget | null | undefined {
  return parseBudget(input === undefined || input === null ? input : { limit: input.limitUsd, period: input.period }, {
    field: 'budget',
    limit: 'limitUsd',
    periods: BUDGET_PERIODS,
    defaultPeriod: 'month',
  });
}

const DEFAULT_AGENT_NAME = 'Default Agent';

/** Who makes a change, and the version it expects to change (If-Match). */
export interface WriteOptions {
  /** The API key's prefix, or `cli`. */
  actor?: string | null;
  expectedVersion?: number;
  /** Who makes the change, for the audit log; without it the change is recorded as the system's. */
  audit?: AuditContext;
  /** The audit log's action: `agent.updated` unless said (`agent.restored`, `agent.applied`). */
  auditAction?: string;
}

function versionConflict(id: string, expected: number, current: number): AppError {
  return new AppError(
    'version_conflict',
    `agent ${id} is at version ${current}, not ${expected}: read it again and retry`,
    { details: { currentVersion: current, expectedVersion: expected } },
  );
}

/** A `cursor` of the versions list: the last version of the previous page. */
function versionCursor(cursor: string): number {
  if (!/^[1-9][0-9]{0,9}$/.test(cursor)) throw validationError('cursor', 'cursor must be the next_cursor of a page');
  return Number(cursor);
}

function versionView(agentId: string, record: AgentVersionRecord): AgentVersionView {
  return {
    object: 'agent.version',
    agentId,
    version: record.version,
    actor: record.actor,
    createdAt: iso(record.createdAt),
    config: record.config,
  };
}

/** Rolls back an update whose optimistic version check lost, so the loop can read and try again. */
class UpdateRaced extends Error {}
const UPDATE_ATTEMPTS = 5;

function networkPolicy(input: NetworkPolicyInput): NetworkPolicy {
  return {
    allow_network_egress: input.allow_network_egress,
    domain_allowlist: input.domain_allowlist,
    additional_allowed_domains: input.additional_allowed_domains ?? [],
    allow_public_traffic: input.allow_public_traffic ?? false,
  };
}

/** A copy keeping only the known fields (the schema has already checked them). */
function toolApprovals(input: ToolApprovals): ToolApprovals {
  return {
    default: input.default,
    overrides: { ...input.overrides },
    ...(input.timeoutSeconds === undefined ? {} : { timeoutSeconds: input.timeoutSeconds }),
  };
}

/** The agent's output format from its input (schemas compiled, 400 `outputFormat.schema` when one does not). */
function outputFormat(input: Record<string, unknown> | null | undefined): ResponseFormat | null {
  return input === undefined || input === null ? null : parseResponseFormat(input, 'outputFormat');
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
      toolApprovals: input.toolApprovals === undefined ? toolApprovalsOf(null) : toolApprovals(input.toolApprovals),
      outputFormat: outputFormat(input.outputFormat),
      contextPolicy: input.contextPolicy ?? defaultContextPolicy(input.model ?? deps.defaultModel),
      compactThreshold: input.compactThreshold ?? null,
    };
    checkAgentConfig(config, validation);
    return config;
  }

  async function prepare(orgId: string, input: AgentCreateInput): Promise<PreparedAgent> {
    const config = configFromCreate(input);
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

  const cache = new Map<string, CachedAgent>();
  let cachedAt: number | null = null;

  /** The cached agent, if the cache holds it at change version `version` (null: nothing is cached). */
  function cachedAgent(key: string, version: number | null): CachedAgent | undefined {
    if (version === null) return undefined;
    if (version !== cachedAt) {
      cache.clear();
      cachedAt = version;
    }
    return cache.get(key);
  }

  /** Reads the agent in `db`; kept at `version` only if nothing changed while it was read. */
  async function readAgent(db: Executor, orgId: string, id: string, version: number | null): Promise<CachedAgent> {
    const row = await findAgentRow(db, orgId, id);
    if (row === undefined) throw notFound('agent', id);
    const read = { agent: agentFromRow(row), workspaceProvisioned: row.workspace_provisioned_at !== null };
    if (version !== null && deps.changeVersion?.() === version) {
      if (cache.size >= AGENT_CACHE_MAX) cache.clear();
      deepFreeze(read.agent);
      cache.set(`${orgId}/${id}`, read);
    }
    return read;
  }

  /** The agent (frozen when it comes from the cache: callers never change what they are given). */
  async function get(orgId: string, id: string, db: Executor = deps.db): Promise<Agent> {
    // Inside a transaction the row is read there, as the transaction sees it.
    const version = db === deps.db ? (deps.changeVersion?.() ?? null) : null;
    return (cachedAgent(`${orgId}/${id}`, version) ?? (await readAgent(db, orgId, id, version))).agent;
  }

  /**
   * The agent for a transaction that reads it and does not write it (accepting a message): the cached one while
   * the cache holds it at the storage's current change version, as if read just before the transaction began;
   * else read in `trx`, and cached when nothing changed while it was read (frozen when it comes from the cache).
   */
  async function getIn(orgId: string, id: string, trx: Executor): Promise<Agent> {
    const version = deps.changeVersion?.() ?? null;
    return (cachedAgent(`${orgId}/${id}`, version) ?? (await readAgent(trx, orgId, id, version))).agent;
  }

  /**
   * What a turn's start needs of its agent, from the cache `get` and `getIn` fill (the accept of the turn's message
   * usually has), else read in `db`: the engine's own handle, whose reads outside a transaction are kept as `get`'s
   * are, so that a busy agent's turns do not each read its row.
   */
  async function atTurnStart(orgId: string, id: string, db: Executor): Promise<AgentStart> {
    const version = db.isTransaction ? null : (deps.changeVersion?.() ?? null);
    const { agent, workspaceProvisioned } =
      cachedAgent(`${orgId}/${id}`, version) ?? (await readAgent(db, orgId, id, version));
    return { version: agent.version, workspaceProvisioned };
  }

  /**
   * Stores the config `change` makes of the current one as the next version. Optimistic: the write is conditional
   * on the version read and retried when another writer got there first, unless the caller named the version it
   * expects (If-Match): then a version other than that one, read or raced, is a 409 version_conflict.
   */
  async function write(
    orgId: string,
    id: string,
    options: WriteOptions,
    entries: PreparedEntries | null,
    change: (current: AgentConfig) => AgentConfig,
  ): Promise<AgentView> {
    for (let attempt = 0; attempt < UPDATE_ATTEMPTS; attempt++) {
      const row = await findAgentRow(deps.db, orgId, id);
      if (row === undefined) throw notFound('agent', id);
      if (options.expectedVersion !== undefined && options.expectedVersion !== row.version) {
        throw versionConflict(id, options.expectedVersion, row.version);
      }
      const current = configOf(agentFromRow(row));
      const next = change(current);
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
      const updated = await deps.db
        .transaction()
        .execute(async (trx) => {
          let stored = next;
          if (entries !== null) {
            const committed = await deps.connectors.commitEntries(trx, orgId, entries);
            stored = { ...next, mcpServers: committed.entries };
            await deps.connectors.linkAgent(trx, id, committed.serverIds);
          }
          // Conditional on the version read: of two writers that read the same version, exactly one matches.
          const result = await trx
            .updateTable('agents')
            .set({ ...configColumns(stored), version, updated_at: now })
            .where('id', '=', id)
            .where('org_id', '=', orgId)
            .where('version', '=', row.version)
            .executeTakeFirst();
          if (result.numUpdatedRows === 0n) {
            // Another writer got there first: undo this attempt's links and connectors with the transaction.
            throw new UpdateRaced();
          }
          await insertAgentVersion(trx, {
            agentId: id,
            version,
            config: stored,
            at: now,
            actor: options.actor ?? null,
          });
          await appendAudit(
            trx,
            options.audit ?? SYSTEM_AUDIT,
            {
              orgId,
              action: options.auditAction ?? 'agent.updated',
              targetType: 'agent',
              targetId: id,
              before: { version: row.version },
              after: { version, changed_fields: changedFields({ ...current }, { ...stored }) },
            },
            clock,
          );
          return true;
        })
        .catch((error: unknown) => {
          if (error instanceof UpdateRaced) return false;
          throw error;
        });
      if (updated) return viewOf(deps.db, orgId, await get(orgId, id));
    }
    throw new AppError('service_unavailable', 'the agent is being changed concurrently; retry', { retriable: true });
  }

  /**
   * Sets or removes the agent's budget, without a new version (Agent.budget), honouring If-Match; the running total
   * of the budget's period is recomputed from the agent's stored cost.
   */
  async function setBudget(orgId: string, id: string, budget: Budget | null, expected?: number): Promise<void> {
    await deps.db.transaction().execute(async (trx) => {
      const row = await findAgentRow(trx, orgId, id);
      if (row === undefined) throw notFound('agent', id);
      if (expected !== undefined && expected !== row.version) throw versionConflict(id, expected, row.version);
      const now = Math.max(clock.now(), row.updated_at);
      await trx
        .updateTable('agents')
        .set({ ...budgetColumns(budget), updated_at: now })
        .where('id', '=', id)
        .where('org_id', '=', orgId)
        .execute();
      if (budget !== null) await resetSpend(trx, { ...budget, scope: 'agent', id, orgId, now });
    });
  }

  return {
    get,
    getIn,
    atTurnStart,

    /** The configuration a create with `input` would store, validated (a 400 naming the field), without writing. */
    configFor: configFromCreate,

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
      return insert(db, orgId, configFromCreate({ name: DEFAULT_AGENT_NAME }), true, actor);
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
      return write(orgId, id, options, entries, (current) => ({
        name: input.name ?? current.name,
        description: input.description === undefined ? current.description : input.description,
        instructions: input.instructions ?? current.instructions,
        model: input.model ?? current.model,
        maxSteps: input.maxSteps ?? current.maxSteps,
        mcpServers: entries === null ? current.mcpServers : entries.entries,
        clientTools: input.clientTools ?? current.clientTools,
        skills: input.skills ?? current.skills,
        networkPolicy:
          input.networkPolicy === undefined
            ? current.networkPolicy
            : input.networkPolicy === null
              ? null
              : networkPolicy(input.networkPolicy),
        toolApprovals: input.toolApprovals === undefined ? current.toolApprovals : toolApprovals(input.toolApprovals),
        outputFormat: input.outputFormat === undefined ? current.outputFormat : outputFormat(input.outputFormat),
        contextPolicy: input.contextPolicy ?? current.contextPolicy,
        compactThreshold: input.compactThreshold === undefined ? current.compactThreshold : input.compactThreshold,
      })).then(async (view) => {
        if (budget === undefined) return view;
        await setBudget(orgId, id, budget);
        return viewOf(deps.db, orgId, await get(orgId, id));
      });
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
      return write(orgId, id, { auditAction: 'agent.restored', ...options }, entries, () => ({ ...record.config }));
    },

    /** The agent's versions, newest first (GET /v1/agents/{id}/versions). */
    async versions(orgId: string, id: string, page: { limit: number; cursor?: string }): Promise<AgentVersionPage> {
      await get(orgId, id);
      const before = page.cursor === undefined ? undefined : versionCursor(page.cursor);
      const rows = await listAgentVersions(deps.db, id, {
        limit: page.limit + 1,
        ...(before === undefined ? {} : { before }),
      });
      const data = rows.slice(0, page.limit).map((row) => versionView(id, row));
      const hasMore = rows.length > page.limit;
      const last = data.at(-1);
      return {
        object: 'list',
        data,
        has_more: hasMore,
        next_cursor: hasMore && last !== undefined ? String(last.version) : null,
      };
    },

    /**
     * One version of the agent; with `diffFrom`, also what changed from that version to this one (JSON-pointer
     * paths into the config).
     */
    async version(orgId: string, id: string, version: number, diffFrom?: number): Promise<AgentVersionView> {
      await get(orgId, id);
      const record = await findAgentVersionRecord(deps.db, id, version);
      if (record === undefined) throw notFound('agent version', `${id}@${version}`);
      const view = versionView(id, record);
      if (diffFrom === undefined) return view;
      const from = await findAgentVersionRecord(deps.db, id, diffFrom);
      if (from === undefined) throw validationError('diff_from', `agent ${id} has no version ${diffFrom}`);
      return { ...view, diff: { from: diffFrom, changes: jsonDiff(from.config, record.config) } };
    },

    async delete(orgId: string, id: string, audit: AuditContext = SYSTEM_AUDIT): Promise<void> {
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
        await appendAudit(
          trx,
          audit,
          {
            orgId,
            action: 'agent.deleted',
            targetType: 'agent',
            targetId: id,
            before: { name: row.name, version: row.version },
          },
          clock,
        );
      });
    },
  };
}

export type AgentService = ReturnType<typeof createAgentService>;
