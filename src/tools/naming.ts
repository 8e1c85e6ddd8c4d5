/**
 * The names the model sees. Who keeps its own name, in this order:
 * 1. client tools and `ask_user_question` (`fixedName`): the API caller dispatches on that exact name;
 * 2. built-in tools (`builtinEntry`): their documented names, whatever an MCP server lists; only a client tool of
 *    the same name moves one to `agentry__<tool>`;
 * 3. MCP tools: their own name when it is free (no other tool of the agent has it) and does not start with another
 *    server's name and `__` (a tool a server lists as `github__create_issue` never passes for the `github` server's
 *    tool); otherwise `<server label>__<tool>`.
 * Names are cut to what model providers accept (`^[A-Za-z0-9_-]{1,64}$`), and a name that is still taken gets a
 * numeric suffix, so the result is always unique. Names decide nothing else: approval rules follow the tool's
 * identity, its source and own name (approval-policy.ts).
 */
import type { ResolvedTool } from './types.ts';

const MAX_NAME = 64;

/** The server label of the service's own tools. */
export const BUILTIN_LABEL = 'agentry';

/**
 * Why `name` cannot label an MCP server, or null: the built-in tools' label is reserved, so that a server's tools
 * (and the approval requests a person reads) never pass for the service's own.
 */
export function reservedServerNameProblem(name: string): string | null {
  return name.trim().toLowerCase() === BUILTIN_LABEL
    ? `must not be "${BUILTIN_LABEL}": that name labels the built-in tools`
    : null;
}

/** A model-safe form of any text: other characters become `_`, at most 64 characters, never empty. */
export function safeToolName(text: string): string {
  const cleaned = text.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, MAX_NAME);
  return cleaned === '' ? 'tool' : cleaned;
}

/** `<server label>__<tool>`, model-safe: the name a tool is prefixed to. */
export const qualifiedToolName = (label: string, tool: string): string => safeToolName(`${label}__${tool}`);

function withSuffix(name: string, n: number): string {
  const suffix = `_${n}`;
  return `${name.slice(0, MAX_NAME - suffix.length)}${suffix}`;
}

/** Returns the tools with their exposed names, in the given order. */
export function exposeNames(tools: ResolvedTool[]): ResolvedTool[] {
  const names: string[] = tools.map((tool) => tool.name);
  const taken = new Set<string>();
  /** `wanted` if free, else `qualified`, else `qualified` with the first free suffix. */
  const claim = (index: number, wanted: string, qualified: string) => {
    let name = taken.has(wanted) ? qualified : wanted;
    for (let n = 2; taken.has(name); n++) name = withSuffix(qualified, n);
    taken.add(name);
    names[index] = name;
  };
  const fixed: number[] = [];
  const builtin: number[] = [];
  const mcp: number[] = [];
  tools.forEach((tool, index) => {
    if (tool.fixedName === true) fixed.push(index);
    else if (tool.builtinEntry !== undefined) builtin.push(index);
    else mcp.push(index);
  });
  for (const index of fixed) taken.add(names[index] as string);
  for (const index of builtin) {
    const tool = tools[index] as ResolvedTool;
    claim(index, safeToolName(tool.name), qualifiedToolName(BUILTIN_LABEL, tool.origin.tool));
  }
  const counts = new Map<string, number>();
  for (const index of mcp) {
    const name = safeToolName((tools[index] as ResolvedTool).name);
    counts.set(name, (counts.get(name) ?? 0) + 1);
  }
  const labels = new Set([BUILTIN_LABEL, ...mcp.map((index) => safeToolName(tools[index]?.origin.serverLabel ?? ''))]);
  const passesForAnother = (tool: ResolvedTool, name: string): boolean => {
    const own = safeToolName(tool.origin.serverLabel);
    return [...labels].some((label) => label !== own && name.startsWith(`${label}__`));
  };
  const keeps = new Set<number>();
  // Prefixed names first: a tool keeping its own name never takes the name another tool is prefixed to.
  for (const index of mcp) {
    const tool = tools[index] as ResolvedTool;
    const name = safeToolName(tool.name);
    const qualified = qualifiedToolName(tool.origin.serverLabel, tool.origin.tool);
    if ((counts.get(name) ?? 0) > 1 || taken.has(name) || passesForAnother(tool, name))
      claim(index, qualified, qualified);
    else keeps.add(index);
  }
  for (const index of keeps) {
    const tool = tools[index] as ResolvedTool;
    claim(index, safeToolName(tool.name), qualifiedToolName(tool.origin.serverLabel, tool.origin.tool));
  }
  return tools.map((tool, index) => (names[index] === tool.name ? tool : { ...tool, name: names[index] as string }));
}
