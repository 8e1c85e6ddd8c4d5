/**
 * Which server tool calls wait for a person's approval, from the agent's `toolApprovals` policy (docs/tools.md,
 * "Approvals"). Decided once, when the model's step is persisted: the call item records it, so a change of the
 * policy never changes a call already made. Client tools and questions are answered by people already and never
 * ask; a call that cannot change anything (a read-only built-in, an `http_request` GET) never asks either.
 */
import type { ApprovalMode, ToolApprovals } from '../domain/agents/agent-types.ts';
import type { ResolvedTool } from './types.ts';

function parsed(text: string): { ok: true; value: unknown } | { ok: false } {
  if (text.trim() === '') return { ok: true, value: {} };
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false };
  }
}

/** The mode the policy sets for a tool: its exact name, else `<server>__*`, else the default. */
export function approvalModeOf(policy: ToolApprovals, tool: ResolvedTool): ApprovalMode {
  const exact = policy.overrides[tool.name];
  if (exact !== undefined) return exact;
  for (const server of [tool.approvalServer, tool.origin.serverLabel]) {
    if (server === undefined) continue;
    const wildcard = policy.overrides[`${server}__*`];
    if (wildcard !== undefined) return wildcard;
  }
  return policy.default;
}

/** Whether this call of `tool` (arguments as the model wrote them) must wait for approval. */
export function needsApproval(policy: ToolApprovals, tool: ResolvedTool | undefined, args: string): boolean {
  if (tool === undefined || tool.kind !== 'server' || tool.execute === undefined) return false;
  if (approvalModeOf(policy, tool) !== 'always_ask') return false;
  if (tool.changes === undefined) return true;
  const value = parsed(args);
  // Unparsable arguments are refused before anything runs: nothing to approve.
  return value.ok && tool.changes(value.value);
}
