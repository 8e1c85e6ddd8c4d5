/**
 * What an agent configures of its tools: which tool sources it uses (built-ins, toolkits, connectors), the client
 * tools it declares, its skills, the network its tools may reach and which calls wait for approval. The tool layer
 * reads these; the Agent (domain/agents/agent-types.ts) stores them among the rest of its configuration.
 */
import { isAbsentOr, isArrayOf, isJsonObject, isNumber, isOneOf, isString } from '../lib/guards.ts';
import { isToolSpec } from '../models/types.ts';

export const INTERNAL_TOOLS = [
  'web_search_&_browse',
  'sandbox',
  'skills',
  'coding_agent',
  'ask_user_question',
  'report_builder',
  'company',
  'app_builder_contract',
  'github',
  'sound_studio',
  'speech_generator',
  'http_client',
  'memory',
] as const;
export type InternalTool = (typeof INTERNAL_TOOLS)[number];

/** Third-party toolkit vendors an `mcpServers` entry may name as its `kind`. */
export const TOOLKIT_KINDS = ['composio'] as const;
export type ToolkitKind = (typeof TOOLKIT_KINDS)[number];

export type McpServer =
  | { kind: 'internal'; name: InternalTool }
  | { kind: ToolkitKind; toolkit: string }
  | ({ kind: 'custom'; serverId: string; name?: string } & SamplingOptIn)
  | ({ type: 'url'; name: string; url: string } & SamplingOptIn);

/**
 * A connector's opt-in to serve its server's `sampling/createMessage` with the agent's model (docs/mcp-auth.md
 * "Sampling"); absent: refused. `samplingMaxTokens` caps each answer's output tokens (default 1024).
 */
export interface SamplingOptIn {
  allowSampling?: boolean;
  samplingMaxTokens?: number;
}

/** The output tokens a sampling answer may take when the connector names no cap. */
export const DEFAULT_SAMPLING_MAX_TOKENS = 1024;
export const MAX_SAMPLING_MAX_TOKENS = 32_768;

const isSamplingOptIn = (value: Record<string, unknown>): boolean =>
  isAbsentOr(value.allowSampling, (flag) => typeof flag === 'boolean') &&
  isAbsentOr(value.samplingMaxTokens, (cap) => typeof cap === 'number');

export function isMcpServer(value: unknown): value is McpServer {
  if (!isJsonObject(value)) return false;
  if (value.type === 'url') {
    return typeof value.name === 'string' && typeof value.url === 'string' && isSamplingOptIn(value);
  }
  if (value.kind === 'internal') return isOneOf(INTERNAL_TOOLS, value.name);
  if (value.kind === 'custom') {
    return typeof value.serverId === 'string' && isAbsentOr(value.name, isString) && isSamplingOptIn(value);
  }
  return isOneOf(TOOLKIT_KINDS, value.kind) && typeof value.toolkit === 'string';
}

export interface ClientTool {
  type: 'function';
  name: string;
  description: string;
  parameters: Record<string, unknown>;
  strict: boolean;
}

/** A client tool is a ToolSpec marked `type: 'function'`. */
export const isClientTool = (value: unknown): value is ClientTool =>
  isJsonObject(value) && value.type === 'function' && isToolSpec(value);

export interface Skill {
  repo: string;
  path: string;
}

export const isSkill = (value: unknown): value is Skill =>
  isJsonObject(value) && typeof value.repo === 'string' && typeof value.path === 'string';

export const DOMAIN_ALLOWLISTS = ['none', 'package_managers_only', 'all_domains'] as const;

export interface NetworkPolicy {
  allow_network_egress: boolean;
  domain_allowlist: (typeof DOMAIN_ALLOWLISTS)[number];
  additional_allowed_domains: string[];
  allow_public_traffic: boolean;
}

export function isNetworkPolicy(value: unknown): value is NetworkPolicy {
  return (
    isJsonObject(value) &&
    typeof value.allow_network_egress === 'boolean' &&
    isOneOf(DOMAIN_ALLOWLISTS, value.domain_allowlist) &&
    isArrayOf(value.additional_allowed_domains, isString) &&
    typeof value.allow_public_traffic === 'boolean'
  );
}

export const APPROVAL_MODES = ['auto', 'always_ask'] as const;
export type ApprovalMode = (typeof APPROVAL_MODES)[number];

/**
 * Which server tool calls wait for a person's approval (an extension field, docs/tools.md "Approvals"). `overrides`
 * keys name a tool by its identity (a built-in's name, an MCP tool's `<server name>__<tool>`) or every tool of a
 * server (`<server name>__*`); the tool wins over the wildcard, the wildcard over `default` (tools/approval-policy.ts). `timeoutSeconds`: a call left undecided that long is denied.
 */
export interface ToolApprovals {
  default: ApprovalMode;
  overrides: Record<string, ApprovalMode>;
  timeoutSeconds?: number;
}

export const DEFAULT_TOOL_APPROVALS: ToolApprovals = { default: 'auto', overrides: {} };

export function isToolApprovals(value: unknown): value is ToolApprovals {
  return (
    isJsonObject(value) &&
    isOneOf(APPROVAL_MODES, value.default) &&
    isJsonObject(value.overrides) &&
    Object.values(value.overrides).every((mode) => isOneOf(APPROVAL_MODES, mode)) &&
    isAbsentOr(value.timeoutSeconds, isNumber)
  );
}

/** The part of an agent's configuration the tool layer reads. */
export interface AgentToolConfig {
  mcpServers: McpServer[];
  clientTools: ClientTool[];
  skills: Skill[];
  networkPolicy: NetworkPolicy | null;
  toolApprovals: ToolApprovals;
}
