/** Agent rows in and out of storage. Every function takes a database handle or an open transaction. */

import { validationError } from '../../errors/app-error.ts';
import { iso } from '../../lib/clock.ts';
import { isArrayOf, isOneOf } from '../../lib/guards.ts';
import { isResponseFormat, type ResponseFormat } from '../../models/types.ts';
import type { Executor } from '../../storage/db.ts';
import { parseJsonColumn } from '../../storage/json-column.ts';
import { prepare } from '../../storage/prepared.ts';
import type { AgentRow, NewAgentRow } from '../../storage/schema.ts';
import { budgetOf, budgetView } from '../billing/budgets.ts';
import {
  type Agent,
  type AgentConfig,
  CONTEXT_POLICIES,
  type ContextPolicy,
  DEFAULT_CONTEXT_POLICY,
  DEFAULT_TOOL_APPROVALS,
  isClientTool,
  isMcpServer,
  isNetworkPolicy,
  isSkill,
  isStoredAgentConfig,
  isToolApprovals,
  type ToolApprovals,
} from './agent-types.ts';

/** The stored policy, or the default one (rows and versions written before approvals existed have none). */
export function toolApprovalsOf(text: string | null | undefined): ToolApprovals {
  return text === null || text === undefined
    ? { ...DEFAULT_TOOL_APPROVALS, overrides: {} }
    : parseJsonColumn(text, isToolApprovals, 'agents.tool_approvals');
}

/** The stored output format, null for free text (and for rows written before output formats existed). */
function outputFormatOf(text: string | null): ResponseFormat | null {
  return text === null ? null : parseJsonColumn(text, isResponseFormat, 'agents.output_format');
}

/** The stored context policy (rows written before context policies existed have none: the default). */
function contextPolicyOf(value: string | null): ContextPolicy {
  return isOneOf(CONTEXT_POLICIES, value) ? value : DEFAULT_CONTEXT_POLICY;
}

export function agentFromRow(row: AgentRow): Agent {
  return {
    id: row.id,
    object: 'agent',
    name: row.name,
    description: row.description,
    instructions: row.instructions,
    model: row.model,
    maxSteps: row.max_steps,
    mcpServers: parseJsonColumn(row.mcp_servers, (value) => isArrayOf(value, isMcpServer), 'agents.mcp_servers'),
    clientTools: parseJsonColumn(row.client_tools, (value) => isArrayOf(value, isClientTool), 'agents.client_tools'),
    skills: parseJsonColumn(row.skills, (value) => isArrayOf(value, isSkill), 'agents.skills'),
    networkPolicy:
      row.network_policy === null
        ? null
        : parseJsonColumn(row.network_policy, isNetworkPolicy, 'agents.network_policy'),
    toolApprovals: toolApprovalsOf(row.tool_approvals),
    outputFormat: outputFormatOf(row.output_format),
    contextPolicy: contextPolicyOf(row.context_policy),
    compactThreshold: row.compact_threshold,
    budget: budgetView(budgetOf(row.budget_limit_micros, row.budget_period)),
    isDefault: row.is_default === 1,
    version: row.version,
    createdAt: iso(row.created_at),
    updatedAt: iso(row.updated_at),
  };
}

export function configColumns(config: AgentConfig) {
  return {
    name: config.name,
    description: config.description,
    instructions: config.instructions,
    model: config.model,
    max_steps: config.maxSteps,
    mcp_servers: JSON.stringify(config.mcpServers),
    client_tools: JSON.stringify(config.clientTools),
    skills: JSON.stringify(config.skills),
    network_policy: config.networkPolicy === null ? null : JSON.stringify(config.networkPolicy),
    tool_approvals: JSON.stringify(config.toolApprovals),
    output_format: config.outputFormat === null ? null : JSON.stringify(config.outputFormat),
    context_policy: config.contextPolicy,
    compact_threshold: config.compactThreshold,
  };
}

export function configOf(agent: Agent): AgentConfig {
  const { name, description, instructions, model, maxSteps, mcpServers, clientTools, skills, networkPolicy } = agent;
  const { toolApprovals, outputFormat, contextPolicy, compactThreshold } = agent;
  return {
    name,
    description,
    instructions,
    model,
    maxSteps,
    mcpServers,
    clientTools,
    skills,
    networkPolicy,
    toolApprovals,
    outputFormat,
    contextPolicy,
    compactThreshold,
  };
}

const agentRow = prepare((db, p: { orgId: string; id: string }) =>
  db.selectFrom('agents').selectAll().where('org_id', '=', p.orgId).where('id', '=', p.id),
);

export async function findAgentRow(db: Executor, orgId: string, id: string): Promise<AgentRow | undefined> {
  return agentRow.first(db, { orgId, id });
}

export async function listAgentRows(db: Executor, orgId: string): Promise<AgentRow[]> {
  return db.selectFrom('agents').selectAll().where('org_id', '=', orgId).orderBy('created_at').orderBy('id').execute();
}

/** Every model id some agent of any organization uses (the startup log names those the catalogue lacks). */
export async function agentModelIds(db: Executor): Promise<string[]> {
  const rows = await db.selectFrom('agents').select('model').distinct().orderBy('model').execute();
  return rows.map((row) => row.model);
}

/** Ids of the organization's agents named exactly `name` (at most `limit`): names are not unique. */
export async function findAgentIdsByName(db: Executor, orgId: string, name: string, limit: number): Promise<string[]> {
  const rows = await db
    .selectFrom('agents')
    .select('id')
    .where('org_id', '=', orgId)
    .where('name', '=', name)
    .orderBy('created_at')
    .orderBy('id')
    .limit(limit)
    .execute();
  return rows.map((row) => row.id);
}

export async function insertAgent(
  db: Executor,
  row: NewAgentRow,
  config: AgentConfig,
  actor: string | null,
): Promise<void> {
  await db.insertInto('agents').values(row).execute();
  await insertAgentVersion(db, { agentId: row.id, version: row.version, config, at: row.created_at, actor });
}

export async function insertAgentVersion(
  db: Executor,
  v: { agentId: string; version: number; config: AgentConfig; at: number; actor: string | null },
): Promise<void> {
  await db
    .insertInto('agent_versions')
    .values({
      agent_id: v.agentId,
      version: v.version,
      config: JSON.stringify(v.config),
      created_at: v.at,
      actor: v.actor,
    })
    .execute();
}

/** A stored version of an Agent: its config, when it was made and by whom. */
export interface AgentVersionRecord {
  version: number;
  config: AgentConfig;
  actor: string | null;
  createdAt: number;
}

function configFromColumn(text: string): AgentConfig {
  const config = parseJsonColumn(text, isStoredAgentConfig, 'agent_versions.config');
  return {
    ...config,
    toolApprovals: config.toolApprovals ?? toolApprovalsOf(null),
    outputFormat: config.outputFormat ?? null,
    contextPolicy: config.contextPolicy ?? DEFAULT_CONTEXT_POLICY,
    compactThreshold: config.compactThreshold ?? null,
  };
}

const versionRow = prepare((db, p: { agentId: string; version: number }) =>
  db
    .selectFrom('agent_versions')
    .select(['version', 'config', 'actor', 'created_at'])
    .where('agent_id', '=', p.agentId)
    .where('version', '=', p.version),
);

/** The version `version` of an Agent, or undefined when it does not exist. */
export async function findAgentVersionRecord(
  db: Executor,
  agentId: string,
  version: number,
): Promise<AgentVersionRecord | undefined> {
  const row = await versionRow.first(db, { agentId, version });
  if (row === undefined) return undefined;
  return { version: row.version, config: configFromColumn(row.config), actor: row.actor, createdAt: row.created_at };
}

/** The config an Agent had at `version`, or undefined when that version does not exist. */
export async function findAgentVersion(
  db: Executor,
  agentId: string,
  version: number,
): Promise<AgentConfig | undefined> {
  return (await findAgentVersionRecord(db, agentId, version))?.config;
}

/**
 * Checks a pin names a kept version of the agent: 400 naming `param` otherwise. Every surface that pins (sessions,
 * schedules, Responses, Chat Completions) checks here, so a turn never starts on a version that does not exist.
 */
export async function requireAgentVersion(
  db: Executor,
  agentId: string,
  version: number,
  param: string,
): Promise<AgentConfig> {
  const config = await findAgentVersion(db, agentId, version);
  if (config === undefined) throw validationError(param, `agent ${agentId} has no version ${version}`);
  return config;
}

/** Up to `limit` versions of an Agent below `before` (all when undefined), newest first. */
export async function listAgentVersions(
  db: Executor,
  agentId: string,
  page: { limit: number; before?: number },
): Promise<AgentVersionRecord[]> {
  let query = db
    .selectFrom('agent_versions')
    .select(['version', 'config', 'actor', 'created_at'])
    .where('agent_id', '=', agentId);
  if (page.before !== undefined) query = query.where('version', '<', page.before);
  const rows = await query.orderBy('version', 'desc').limit(page.limit).execute();
  return rows.map((row) => ({
    version: row.version,
    config: configFromColumn(row.config),
    actor: row.actor,
    createdAt: row.created_at,
  }));
}
