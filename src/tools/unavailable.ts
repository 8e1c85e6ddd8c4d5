/**
 * Configuration that this deployment stores and validates but cannot run yet is reported, never pretended:
 * skills are loaded by no provider here, so an agent with skills gets a warning on every accepted message.
 */
import type { ToolProvider } from './types.ts';

export function createSkillsUnavailableProvider(): ToolProvider {
  return {
    name: 'skills',
    claims: () => false,
    async sources(agent) {
      if (agent.skills.length === 0) return [];
      return [
        {
          label: 'skills',
          available: false,
          warning: {
            code: 'skills_unavailable',
            message: 'skills are configured on the agent but this deployment does not load skills yet',
          },
        },
      ];
    },
  };
}
