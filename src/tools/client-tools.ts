/**
 * The agent's client tools (and the per-response function tools of the Responses surface, merged into the
 * config by the engine): offered to the model under their own names, answered by the API caller, so they have
 * no `execute` and end the turn with `requires_action`.
 */
import { builtinOrigin } from './registry.ts';
import type { ToolProvider } from './types.ts';

export function createClientToolProvider(): ToolProvider {
  return {
    name: 'client',
    claims: () => false,
    sourcesBeyondEntries: (agent) => agent.clientTools.length > 0,
    async sources(agent) {
      if (agent.clientTools.length === 0) return [];
      const tools = agent.clientTools.map((tool) => ({
        name: tool.name,
        description: tool.description,
        parameters: tool.parameters,
        strict: tool.strict,
        kind: 'client' as const,
        origin: { ...builtinOrigin(tool.name), serverLabel: 'client' },
        fixedName: true,
      }));
      return [{ label: 'client tools', available: true, load: async () => ({ tools }) }];
    },
  };
}
