/**
 * The Agent Card of one agent (A2A 1.0, section 4.4.1): who it is, where its two bindings answer, how to
 * authenticate (the organization's API key as a bearer token) and what it can do. The card's URLs are absolute, on
 * the base URL the caller reached the server by (docs/a2a.md).
 */
import type { AgentCard, AgentSkill } from '@a2a-js/sdk';
import type { Agent } from '../agents/agent-types.ts';

export const A2A_PROTOCOL_VERSION = '1.0';
const SCHEME = 'agentryApiKey';

/** The paths the card names, below the server's base URL. */
export const a2aPaths = (agentId: string) => ({
  card: `/v1/agents/${agentId}/.well-known/agent-card.json`,
  jsonRpc: `/v1/agents/${agentId}/a2a`,
  rest: `/v1/agents/${agentId}/a2a/rest`,
});

function skillsOf(agent: Agent): AgentSkill[] {
  const skill = (id: string, name: string, description: string, tags: string[]): AgentSkill => ({
    id,
    name,
    description,
    tags,
    examples: [],
    inputModes: ['text/plain', 'application/json'],
    outputModes: ['text/plain', 'application/json'],
    securityRequirements: [],
  });
  const skills = [skill(agent.id, agent.name, agent.description ?? agent.name, ['agentry', 'agent'])];
  for (const item of agent.skills) {
    skills.push(skill(`${item.repo}/${item.path}`, item.path, `Skill ${item.path} from ${item.repo}`, ['skill']));
  }
  for (const tool of agent.clientTools) {
    skills.push(
      skill(`client-tool:${tool.name}`, tool.name, `Asks the caller to run ${tool.name}: ${tool.description}`, [
        'client-tool',
        'input-required',
      ]),
    );
  }
  return skills;
}

export function agentCardOf(agent: Agent, baseUrl: string): AgentCard {
  const paths = a2aPaths(agent.id);
  return {
    name: agent.name,
    description: agent.description ?? `Agentry agent ${agent.name}`,
    supportedInterfaces: [
      {
        url: `${baseUrl}${paths.jsonRpc}`,
        protocolBinding: 'JSONRPC',
        tenant: '',
        protocolVersion: A2A_PROTOCOL_VERSION,
      },
      {
        url: `${baseUrl}${paths.rest}`,
        protocolBinding: 'HTTP+JSON',
        tenant: '',
        protocolVersion: A2A_PROTOCOL_VERSION,
      },
    ],
    provider: { organization: 'Agentry', url: baseUrl },
    version: String(agent.version),
    documentationUrl: undefined,
    capabilities: { streaming: true, pushNotifications: true, extensions: [], extendedAgentCard: false },
    securitySchemes: {
      [SCHEME]: {
        scheme: {
          $case: 'httpAuthSecurityScheme',
          value: {
            description: "An Agentry API key of the agent's organization, as `Authorization: Bearer <key>`",
            scheme: 'bearer',
            bearerFormat: 'Agentry API key',
          },
        },
      },
    },
    securityRequirements: [{ schemes: { [SCHEME]: { list: [] } } }],
    defaultInputModes: ['text/plain', 'application/json'],
    defaultOutputModes: ['text/plain', 'application/json'],
    skills: skillsOf(agent),
    signatures: [],
    iconUrl: undefined,
  };
}
