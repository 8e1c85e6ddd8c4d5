/** An agent's configuration from a request: a create's defaults filled in, an update's changes applied. */

import type { ResponseFormat } from '../../models/types.ts';
import { BUDGET_PERIODS, type Budget, type BudgetInput, parseBudget } from '../billing/budgets.ts';
import type { PreparedEntries } from '../mcp-servers/mcp-server-service.ts';
import { parseResponseFormat } from '../output-format.ts';
import { toolApprovalsOf } from './agent-repo.ts';
import type {
  AgentConfig,
  AgentCreateInput,
  AgentUpdateInput,
  NetworkPolicy,
  NetworkPolicyInput,
  ToolApprovals,
} from './agent-types.ts';
import { DEFAULT_MAX_STEPS, defaultContextPolicy } from './agent-types.ts';
import { checkAgentConfig, parseMcpServers, type ValidationContext } from './agent-validation.ts';

/** An agent's budget from a request (a 400 naming `budget.limitUsd` or `budget.period`); monthly unless named. */
export function agentBudget(input: BudgetInput | null | undefined): Budget | null | undefined {
  return parseBudget(input === undefined || input === null ? input : { limit: input.limitUsd, period: input.period }, {
    field: 'budget',
    limit: 'limitUsd',
    periods: BUDGET_PERIODS,
    defaultPeriod: 'month',
  });
}

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

/** The configuration a create with `input` stores, validated (a 400 naming the field). */
export function configFromCreate(
  input: AgentCreateInput,
  defaultModel: string,
  validation: ValidationContext,
): AgentConfig {
  const config: AgentConfig = {
    name: input.name,
    description: input.description ?? null,
    instructions: input.instructions ?? '',
    model: input.model ?? defaultModel,
    maxSteps: input.maxSteps ?? DEFAULT_MAX_STEPS,
    mcpServers: parseMcpServers(input.mcpServers ?? [], validation),
    clientTools: input.clientTools ?? [],
    skills: input.skills ?? [],
    networkPolicy: input.networkPolicy === undefined ? null : networkPolicy(input.networkPolicy),
    toolApprovals: input.toolApprovals === undefined ? toolApprovalsOf(null) : toolApprovals(input.toolApprovals),
    outputFormat: outputFormat(input.outputFormat),
    contextPolicy: input.contextPolicy ?? defaultContextPolicy(input.model ?? defaultModel),
    compactThreshold: input.compactThreshold ?? null,
  };
  checkAgentConfig(config, validation);
  return config;
}

/** The configuration an update makes of `current` (`entries`: its MCP servers, prepared; null: unchanged). */
export function configFromUpdate(
  current: AgentConfig,
  input: Omit<AgentUpdateInput, 'budget'>,
  entries: PreparedEntries | null,
): AgentConfig {
  return {
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
  };
}
