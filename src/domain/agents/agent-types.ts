/** The Agent as the API speaks it (DESIGN section 5), and the inputs that create and change it. */

import { isAbsentOr, isArrayOf, isJsonObject, isNullableNumber, isNullableString, isOneOf } from '../../lib/guards.ts';
import type { JsonChange } from '../../lib/json-diff.ts';
import { CONTEXT_POLICIES, type ContextPolicy } from '../../models/context-fit.ts';
import { isResponseFormat, type ResponseFormat } from '../../models/types.ts';
import {
  type AgentToolConfig,
  type ClientTool,
  isClientTool,
  isMcpServer,
  isNetworkPolicy,
  isSkill,
  isToolApprovals,
  type NetworkPolicy,
  type Skill,
  type ToolApprovals,
} from '../../tools/tool-config.ts';
import type { BudgetInput, BudgetView } from '../billing/budgets.ts';

export { CONTEXT_POLICIES, type ContextPolicy, DEFAULT_CONTEXT_POLICY } from '../../models/context-fit.ts';

/**
 * The policy of an agent created without one: compaction on a real model, truncation on `scripted` (whose replies
 * are written in advance and has no window of its own).
 */
export const defaultContextPolicy = (model: string): ContextPolicy =>
  model === 'scripted' ? 'truncation' : 'compaction';
export {
  type AgentToolConfig,
  APPROVAL_MODES,
  type ApprovalMode,
  type ClientTool,
  DEFAULT_TOOL_APPROVALS,
  DOMAIN_ALLOWLISTS,
  INTERNAL_TOOLS,
  type InternalTool,
  isClientTool,
  isMcpServer,
  isNetworkPolicy,
  isSkill,
  isToolApprovals,
  type McpServer,
  type NetworkPolicy,
  type Skill,
  TOOLKIT_KINDS,
  type ToolApprovals,
  type ToolkitKind,
} from '../../tools/tool-config.ts';

/** Everything a version of an Agent fixes; kept per version. */
export interface AgentConfig extends AgentToolConfig {
  name: string;
  description: string | null;
  instructions: string;
  model: string;
  maxSteps: number;
  /** The structure of the agent's replies when a message asks for none (docs/agents.md); null for free text. */
  outputFormat: ResponseFormat | null;
  /** How a turn keeps its context within the model's window (docs/context.md). */
  contextPolicy: ContextPolicy;
  /**
   * Under the compaction policy, the estimated input tokens past which the older conversation is summarised; null:
   * 80 % of the window less the output reserved (docs/context.md).
   */
  compactThreshold: number | null;
}

/**
 * An AgentConfig as `agent_versions.config` holds it: versions written before approvals or output formats existed
 * have none.
 */
export type StoredAgentConfig = Omit<
  AgentConfig,
  'toolApprovals' | 'outputFormat' | 'contextPolicy' | 'compactThreshold'
> & {
  toolApprovals?: ToolApprovals;
  outputFormat?: ResponseFormat | null;
  contextPolicy?: ContextPolicy;
  compactThreshold?: number | null;
};

export function isStoredAgentConfig(value: unknown): value is StoredAgentConfig {
  return (
    isJsonObject(value) &&
    typeof value.name === 'string' &&
    isNullableString(value.description) &&
    typeof value.instructions === 'string' &&
    typeof value.model === 'string' &&
    typeof value.maxSteps === 'number' &&
    isArrayOf(value.mcpServers, isMcpServer) &&
    isArrayOf(value.clientTools, isClientTool) &&
    isArrayOf(value.skills, isSkill) &&
    (value.networkPolicy === null || isNetworkPolicy(value.networkPolicy)) &&
    isAbsentOr(value.toolApprovals, isToolApprovals) &&
    isAbsentOr(value.outputFormat, (format) => format === null || isResponseFormat(format)) &&
    isAbsentOr(value.contextPolicy, (policy) => isOneOf(CONTEXT_POLICIES, policy)) &&
    isAbsentOr(value.compactThreshold, isNullableNumber)
  );
}

export interface Agent extends AgentConfig {
  id: string;
  object: 'agent';
  /**
   * The agent's spend cap (docs/budgets.md); null: none. Not part of a version: it caps every version's turns, so
   * changing it leaves `version` as it is.
   */
  budget: BudgetView | null;
  isDefault: boolean;
  version: number;
  createdAt: string;
  updatedAt: string;
}

export type NetworkPolicyInput = Omit<NetworkPolicy, 'additional_allowed_domains' | 'allow_public_traffic'> &
  Partial<Pick<NetworkPolicy, 'additional_allowed_domains' | 'allow_public_traffic'>>;

export interface AgentCreateInput {
  name: string;
  description?: string;
  instructions?: string;
  model?: string;
  maxSteps?: number;
  mcpServers?: unknown[];
  clientTools?: ClientTool[];
  skills?: Skill[];
  networkPolicy?: NetworkPolicyInput;
  toolApprovals?: ToolApprovals;
  /** The wire shape (domain/output-format.ts); `{type: "text"}` or null for free text. */
  outputFormat?: Record<string, unknown> | null;
  contextPolicy?: ContextPolicy;
  compactThreshold?: number | null;
  budget?: BudgetInput | null;
}

export interface AgentUpdateInput {
  name?: string;
  description?: string | null;
  instructions?: string;
  model?: string;
  maxSteps?: number;
  mcpServers?: unknown[];
  clientTools?: ClientTool[];
  skills?: Skill[];
  networkPolicy?: NetworkPolicyInput | null;
  toolApprovals?: ToolApprovals;
  outputFormat?: Record<string, unknown> | null;
  contextPolicy?: ContextPolicy;
  compactThreshold?: number | null;
  /** Set without a new version (see Agent.budget); null removes it. */
  budget?: BudgetInput | null;
}

/** A kept version of an Agent (GET /v1/agents/{id}/versions/{n}). */
export interface AgentVersionView {
  object: 'agent.version';
  agentId: string;
  version: number;
  /** The API key prefix that made it, `cli` for the command line, null when not recorded. */
  actor: string | null;
  createdAt: string;
  config: AgentConfig;
  /** With `diff_from`: what changed from that version to this one. */
  diff?: { from: number; changes: JsonChange[] };
}

export interface AgentVersionPage {
  object: 'list';
  data: AgentVersionView[];
  has_more: boolean;
  next_cursor: string | null;
}

export const DEFAULT_MAX_STEPS = 32;

/**
 * A non-fatal note returned with an agent: its model's provider has no credentials here (`model_not_configured`),
 * or what the tool registry says an accepted message would carry (`tool_unavailable`, `skill_unavailable`, …).
 */
export interface AgentWarning {
  code: string;
  message: string;
}
