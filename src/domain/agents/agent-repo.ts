/** Agent rows in and out of storage. Every function takes a database handle or an open transaction. */

import { iso } from '../../lib/clock.ts';
import { isArrayOf, isOneOf } from '../../lib/guards.ts';
import { isResponseFormat, type ResponseFormat } from '../../models/types.ts';
import type { Executor } from '../../storage/db.ts';
import { parseJsonColumn } from '../../storage/json-column.ts';
import { prepare } from '../../storage/prepared.ts';
import type { AgentRow, NewAgentRow } from '../../storage/schema.ts';
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

export async function insertAgent(db: Executor, row: NewAgentRow, config: AgentConfig): Promise<void> {
  await db.insertInto('agents').values(row).execute();
  await insertAgentVersion(db, row.id, row.version, config, row.created_at);
}

export async function insertAgentVersion(
  db: Executor,
  agentId: string,
  version: number,
  config: AgentConfig,
  at: number,
): Promise<void> {
  await db
    .insertInto('agent_versions')
    .values({ agent_id: agentId, version, config: JSON.stringify(config), created_at: at })
    .execute();
}

const versionConfig = prepare((db, p: { agentId: string; version: number }) =>
  db.selectFrom('agent_versions').select('config').where('agent_id', '=', p.agentId).where('version', '=', p.version),
);

/** The config an Agent had at `version`, or undefined when that version does not exist. */
export async function findAgentVersion(
  db: Executor,
  agentId: string,
  version: number,
): Promise<AgentConfig | undefined> {
  const row = await versionConfig.first(db, { agentId, version });
  if (row === undefined) return undefined;
  const config = parseJsonColumn(row.config, isStoredAgentConfig, 'agent_versions.config');
  return {
    ...config,
    toolApprovals: config.toolApprovals ?? toolApprovalsOf(null),
    outputFormat: config.outputFormat ?? null,
    contextPolicy: config.contextPolicy ?? DEFAULT_CONTEXT_POLICY,
    compactThreshold: config.compactThreshold ?? null,
  };
}
