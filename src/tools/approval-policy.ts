/**
 * Which server tool calls wait for a person's approval, from the agent's `toolApprovals` policy (docs/tools.md,
 * "Approvals"). Decided once, when the model's step is persisted: the call item records it, so a change of the
 * policy never changes a call already made. Client tools and questions are answered by people already and never
 * ask; a call that cannot change anything (a read-only built-in, an `http_request` GET) never asks either.
 */
import { BUILTIN_LABEL, qualifiedToolName, safeToolName } from './naming.ts';
import type { ApprovalMode, ToolApprovals } from './tool-config.ts';
import type { ResolvedTool } from './types.ts';

function parsed(text: string): { ok: true; value: unknown } | { ok: false } {
  if (text.trim() === '') return { ok: true, value: {} };
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false };
  }
}

/**
 * Whether `<server>__<tool>` can name nothing but this tool: it was not cut to 64 characters, and the tool's name
 * neither starts with `_` nor holds `__` (else the same key could also be another server's name followed by a tool
 * name: `a` + `_x` and `a_` + `x` are both `a___x`).
 */
function onlyThisTool(label: string, tool: string): boolean {
  const name = safeToolName(tool);
  return `${label}__${tool}`.length <= 64 && !name.startsWith('_') && !name.includes('__');
}

/** The override of `key`; own keys only: a tool named `constructor` must not find Object.prototype's. */
const modeOf = (policy: ToolApprovals, key: string): ApprovalMode | undefined =>
  Object.hasOwn(policy.overrides, key) ? policy.overrides[key] : undefined;

/**
 * What `<server>__*` sets for the tools of a server, else the default; built-in tools answer to their entry
 * (`sandbox__*`) and to `agentry__*`. Also what a Responses `mcp` tool shows as its `require_approval`.
 */
export function serverModeOf(policy: ToolApprovals, server: { label: string; builtinEntry?: string }): ApprovalMode {
  const keys =
    server.builtinEntry === undefined
      ? [server.label, safeToolName(server.label)]
      : [server.builtinEntry, BUILTIN_LABEL];
  for (const key of keys) {
    const mode = modeOf(policy, `${key}__*`);
    if (mode !== undefined) return mode;
  }
  return policy.default;
}

/**
 * The mode the policy sets for a tool, from the tool's identity (its source and own name), never from the name the
 * model sees, which a server can influence:
 * - a built-in tool: its own name (`sandbox_run`), else `<entry>__*` (`sandbox__*`), else `agentry__*`;
 * - an MCP tool: `<server>__<tool>`, else `<server>__*`. Keys that could also name another tool can only make it
 *   ask: its bare name (any server can list it), unless that holds `__` (a `<server>__<tool>` key) or is the name
 *   of one of the turn's `builtins` (the built-in's key alone), and a `<server>__<tool>` that is not `onlyThisTool`.
 * Else the default.
 */
export function approvalModeOf(policy: ToolApprovals, tool: ResolvedTool, builtins: ReadonlySet<string>): ApprovalMode {
  const { serverLabel: label, tool: own } = tool.origin;
  const { builtinEntry } = tool;
  if (builtinEntry !== undefined) return modeOf(policy, own) ?? serverModeOf(policy, { label, builtinEntry });
  const exact = modeOf(policy, qualifiedToolName(label, own));
  if (exact !== undefined && onlyThisTool(label, own)) return exact;
  const bare = own.includes('__') || builtins.has(own) ? undefined : modeOf(policy, own);
  if (exact === 'always_ask' || bare === 'always_ask') return 'always_ask';
  return serverModeOf(policy, { label });
}

/**
 * Whether this call of `tool` (arguments as the model wrote them) must wait for approval; `builtins`: the own names
 * of the turn's built-in tools (see approvalModeOf).
 */
export function needsApproval(
  policy: ToolApprovals,
  tool: ResolvedTool | undefined,
  args: string,
  builtins: ReadonlySet<string>,
): boolean {
  if (tool === undefined || tool.kind !== 'server' || tool.execute === undefined) return false;
  if (approvalModeOf(policy, tool, builtins) !== 'always_ask') return false;
  if (tool.changes === undefined) return true;
  const value = parsed(args);
  // Unparsable arguments are refused before anything runs: nothing to approve.
  return value.ok && tool.changes(value.value);
}
