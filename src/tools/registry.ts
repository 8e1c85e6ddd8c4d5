/**
 * The tool registry: asks every provider for its sources and answers the two questions of the tool layer from
 * that one answer, so they can never disagree:
 * - `warnings`: what the agent configures that this deployment cannot run (AcceptedMessage warnings);
 * - `resolve`: the tools one turn offers, with how each call is answered.
 * A source that fails to load at turn time (a remote server that is down) is left out of that turn and reported,
 * never fatal to the turn.
 */
import type { Warning } from '../events/session-values.ts';
import { BUILTIN_LABEL, exposeNames } from './naming.ts';
import type { AgentToolConfig, McpServer } from './tool-config.ts';
import type { ResolvedTool, ToolKind, ToolOrigin, ToolProvider, ToolScope, ToolSource } from './types.ts';

function describeEntry(entry: McpServer): string {
  if ('type' in entry) return `remote MCP server "${entry.name}" (${entry.url})`;
  if (entry.kind === 'internal') return `internal tool "${entry.name}"`;
  if (entry.kind === 'custom') return `MCP server ${entry.serverId}`;
  return `${entry.kind} toolkit "${entry.toolkit}"`;
}

/** The tools of one turn. */
export interface TurnTools {
  tools: ResolvedTool[];
  kindOf(name: string): ToolKind;
  get(name: string): ResolvedTool | undefined;
  /** Servers whose tools this turn offers, for `mcp_list_tools` items. */
  listings: { serverId: string | null; serverLabel: string; tools: ResolvedTool[] }[];
  /** Sources that were configured and runnable but failed to load for this turn. */
  failures: Warning[];
  /** What the loaded sources add to the agent's instructions for this turn (LoadedSource.instructions). */
  instructions: string[];
}

export interface ToolRegistry {
  sources(agent: AgentToolConfig, scope: ToolScope): Promise<ToolSource[]>;
  warnings(agent: AgentToolConfig, scope: ToolScope): Promise<Warning[]>;
  resolve(agent: AgentToolConfig, scope: ToolScope, signal: AbortSignal): Promise<TurnTools>;
}

export function createToolRegistry(providers: readonly ToolProvider[]): ToolRegistry {
  async function sources(agent: AgentToolConfig, scope: ToolScope): Promise<ToolSource[]> {
    const claimed = new Map<ToolProvider, McpServer[]>();
    const unclaimed: ToolSource[] = [];
    for (const entry of agent.mcpServers) {
      const provider = providers.find((candidate) => candidate.claims(entry));
      if (provider === undefined) {
        unclaimed.push({
          label: describeEntry(entry),
          available: false,
          warning: {
            code: 'tool_unavailable',
            message: `${describeEntry(entry)} is configured on the agent but this deployment cannot run it; the turn runs without it`,
          },
        });
      } else {
        const entries = claimed.get(provider);
        if (entries === undefined) claimed.set(provider, [entry]);
        else entries.push(entry);
      }
    }
    // In the providers' order, as their sources are listed.
    const asked: Promise<ToolSource[]>[] = [];
    for (const provider of providers) {
      const entries = claimed.get(provider);
      if (entries !== undefined) asked.push(provider.sources(agent, entries, scope));
      else if (provider.sourcesBeyondEntries?.(agent) === true) asked.push(provider.sources(agent, [], scope));
    }
    if (asked.length === 0) return unclaimed;
    const provided = await Promise.all(asked);
    return [...provided.flat(), ...unclaimed];
  }

  return {
    sources,

    async warnings(agent, scope) {
      return (await sources(agent, scope)).flatMap((source) => (source.available ? [] : [source.warning]));
    },

    async resolve(agent, scope, signal) {
      const all = await sources(agent, scope);
      const loaded = await Promise.all(
        all.map(async (source) => {
          if (!source.available) return { source, result: null, error: null };
          try {
            return { source, result: await source.load(signal), error: null };
          } catch (error) {
            if (signal.aborted) throw signal.reason;
            return { source, result: null, error: error instanceof Error ? error.message : String(error) };
          }
        }),
      );
      const failures: Warning[] = [];
      const instructions: string[] = [];
      const raw: ResolvedTool[] = [];
      const groups: { listing: { serverId: string | null; serverLabel: string }; from: number; to: number }[] = [];
      for (const { source, result, error } of loaded) {
        if (error !== null) {
          failures.push({
            code: 'tool_source_failed',
            message: `${source.label} could not be loaded; it is left out of this turn: ${error}`,
          });
        }
        if (result === null) continue;
        if (result.instructions !== undefined && result.instructions !== '') instructions.push(result.instructions);
        const from = raw.length;
        raw.push(...result.tools);
        if (result.listing !== undefined) groups.push({ listing: result.listing, from, to: raw.length });
      }
      const tools = exposeNames(raw);
      const byName = new Map(tools.map((tool) => [tool.name, tool]));
      return {
        tools,
        kindOf: (name) => byName.get(name)?.kind ?? 'server',
        get: (name) => byName.get(name),
        listings: groups.map(({ listing, from, to }) => ({ ...listing, tools: tools.slice(from, to) })),
        failures,
        instructions,
      };
    },
  };
}

/** The origin of the service's own tools. */
export const builtinOrigin = (tool: string): ToolOrigin => ({ serverId: null, serverLabel: BUILTIN_LABEL, tool });
