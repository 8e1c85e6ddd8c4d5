/**
 * `networkPolicy.allow_public_traffic` asks for inbound exposure: a server started in the sandbox reachable from
 * outside the host. This deployment has no inbound path into a sandbox at all (docs/sandbox.md says what one would
 * expose), so an agent that asks for it is told so on every accepted message rather than left to believe it works.
 */
import type { ToolProvider } from '../types.ts';

export function createNetworkExposureProvider(): ToolProvider {
  return {
    name: 'network_exposure',
    claims: () => false,
    sourcesBeyondEntries: (agent) => agent.networkPolicy?.allow_public_traffic === true,
    async sources(agent) {
      if (agent.networkPolicy?.allow_public_traffic !== true) return [];
      return [
        {
          label: 'public traffic',
          available: false,
          warning: {
            code: 'public_traffic_unsupported',
            message:
              'networkPolicy.allow_public_traffic is true, but this deployment does not expose sandboxes to inbound traffic: nothing running in the sandbox can be reached from outside',
          },
        },
      ];
    },
  };
}
