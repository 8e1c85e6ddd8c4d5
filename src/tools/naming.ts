/**
 * The names the model sees. A tool keeps its own name when no other tool of the agent has it; otherwise it
 * becomes `<server label>__<tool>`. Client tools never change name (the API caller dispatches on it), so a server
 * tool that clashes with one is the one renamed. Names are cut to what model providers accept
 * (`^[A-Za-z0-9_-]{1,64}$`), and a name that is still taken gets a numeric suffix, so the result is always unique.
 */
import type { ResolvedTool } from './types.ts';

const MAX_NAME = 64;

/** A model-safe form of any text: other characters become `_`, at most 64 characters, never empty. */
export function safeToolName(text: string): string {
  const cleaned = text.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, MAX_NAME);
  return cleaned === '' ? 'tool' : cleaned;
}

function withSuffix(name: string, n: number): string {
  const suffix = `_${n}`;
  return `${name.slice(0, MAX_NAME - suffix.length)}${suffix}`;
}

/** Returns the tools with their exposed names, in the given order. */
export function exposeNames(tools: ResolvedTool[]): ResolvedTool[] {
  const counts = new Map<string, number>();
  for (const tool of tools) counts.set(tool.name, (counts.get(tool.name) ?? 0) + 1);
  const taken = new Set(tools.filter((tool) => tool.fixedName === true).map((tool) => tool.name));
  const out: ResolvedTool[] = [];
  for (const tool of tools) {
    if (tool.fixedName === true) {
      out.push(tool);
      continue;
    }
    let name =
      (counts.get(tool.name) ?? 0) > 1 || taken.has(tool.name)
        ? safeToolName(`${tool.origin.serverLabel}__${tool.origin.tool}`)
        : safeToolName(tool.name);
    for (let n = 2; taken.has(name); n++)
      name = withSuffix(safeToolName(`${tool.origin.serverLabel}__${tool.origin.tool}`), n);
    taken.add(name);
    out.push({ ...tool, name });
  }
  return out;
}
