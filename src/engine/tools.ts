/**
 * The engine's side of the tool seam (src/tools/): the specs a model call offers, and running one server call
 * with its context: the turn's signal plus the call's own timeout, the deadline, ids for correlation, progress
 * to live listeners. Unknown tools, unparsable arguments, tool errors and timeouts all become error outputs the
 * model can read; only an abort of the turn itself propagates.
 */

import type { CallServer } from '../domain/turns/items.ts';
import { storableText } from '../lib/storable-text.ts';
import type { ToolSpec } from '../models/types.ts';
import type { TurnTools } from '../tools/registry.ts';
import type { ResolvedTool, ToolCallContext, ToolOutput } from '../tools/types.ts';

export function toolSpecs(tools: TurnTools): ToolSpec[] {
  return tools.tools.map((tool) => ({
    name: tool.name,
    description: tool.description,
    parameters: tool.parameters,
    strict: tool.strict,
  }));
}

/** The agent's instructions followed by what this turn's tool sources add (skills), one paragraph each. */
export function instructionsWithTools(instructions: string, tools: TurnTools): string {
  return [instructions, ...tools.instructions].filter((part) => part !== '').join('\n\n');
}

/** The largest tool result kept (characters), as for a client's function_call_output; the rest is cut with a note. */
export const MAX_TOOL_OUTPUT_CHARS = 1_000_000;

/** A result as it can be stored: at most MAX_TOOL_OUTPUT_CHARS, and text both databases accept. */
function bounded(result: ToolOutput): ToolOutput {
  const output =
    result.output.length <= MAX_TOOL_OUTPUT_CHARS
      ? result.output
      : `${result.output.slice(0, MAX_TOOL_OUTPUT_CHARS)}\n[output truncated: ${result.output.length} characters in all]`;
  return { ...result, output: storableText(output) };
}

export class ToolTimeoutError extends Error {
  constructor(ms: number) {
    super(`the tool did not answer within ${ms} ms`);
    this.name = new.target.name;
  }
}

function parseArguments(text: string): { ok: true; value: unknown } | { ok: false; message: string } {
  if (text.trim() === '') return { ok: true, value: {} };
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false, message: 'the arguments are not valid JSON' };
  }
}

/**
 * The tool a stored call runs: the tool its step resolved, found by what the call item recorded (server and own
 * name), so that a tool another server lists under the call's name since (after a refresh of its list, before an
 * approved call runs) is never run in its place. A call of no known tool runs nothing.
 */
export function toolOfCall(tools: TurnTools, call: { name: string; server?: CallServer | undefined }) {
  const { server } = call;
  if (server === undefined) return undefined;
  const same = (tool: ResolvedTool | undefined): tool is ResolvedTool =>
    tool?.kind === 'server' &&
    tool.origin.serverId === server.id &&
    tool.origin.serverLabel === server.label &&
    tool.origin.tool === server.tool;
  const named = tools.get(call.name);
  if (same(named)) return named;
  const found = tools.tools.filter(same);
  return found.length === 1 ? found[0] : undefined;
}

/**
 * Runs one server call. `turnSignal` aborting (interrupt, shutdown) rejects with its reason; everything else
 * resolves with an output, errors included. `timeoutMs` applies unless the tool sets its own; its deadline counts
 * from `now`.
 */
export async function executeServerCall(
  tools: TurnTools,
  call: { name: string; arguments: string; server?: CallServer | undefined },
  context: Omit<ToolCallContext, 'signal' | 'deadline'>,
  limits: { turnSignal: AbortSignal; timeoutMs: number; now: number },
): Promise<ToolOutput> {
  const { turnSignal, timeoutMs, now } = limits;
  const tool = toolOfCall(tools, call);
  if (tool?.execute === undefined) {
    const which = call.server === undefined ? '' : ` (${call.server.tool} of ${call.server.label})`;
    return { output: `Error: no tool named "${call.name}"${which} is available`, isError: true };
  }
  const args = parseArguments(call.arguments);
  if (!args.ok) return { output: `Error: ${args.message}`, isError: true };
  const limitMs = tool.timeoutMs ?? timeoutMs;
  const timeout = new AbortController();
  const timer = setTimeout(() => timeout.abort(new ToolTimeoutError(limitMs)), limitMs);
  const signal = AbortSignal.any([turnSignal, timeout.signal]);
  try {
    return bounded(await tool.execute(args.value, { ...context, signal, deadline: now + limitMs }));
  } catch (error) {
    if (turnSignal.aborted) throw turnSignal.reason;
    if (timeout.signal.aborted) return { output: `Error: ${(timeout.signal.reason as Error).message}`, isError: true };
    return bounded({ output: `Error: ${error instanceof Error ? error.message : String(error)}`, isError: true });
  } finally {
    clearTimeout(timer);
  }
}
