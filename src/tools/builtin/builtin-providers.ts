/**
 * The built-in tool providers of this deployment, wired from its configuration: the sandbox tools, the network
 * tools (`http_request`, `web_browse`, `web_search`), reports, skills, and the warning for inbound exposure. One
 * guarded fetch serves the network tools (plain http allowed, every address checked and pinned); the search
 * provider, being the operator's, gets a fetch of its own without the guard.
 */
import { join } from 'node:path';
import type { Config } from '../../config.ts';
import type { Resolver } from '../../lib/egress.ts';
import { createEgressFetch } from '../../lib/egress-fetch.ts';
import { DEFAULT_EGRESS_PORTS } from '../network/egress-proxy.ts';
import type { SandboxRuntime } from '../sandbox/sandbox-runtime.ts';
import type { ToolProvider } from '../types.ts';
import type { CpuWork } from './cpu-work.ts';
import { createHttpClientProvider } from './http-client.ts';
import { createNetworkExposureProvider } from './network-exposure.ts';
import { createReportBuilderProvider } from './report-builder.ts';
import { createSandboxProvider } from './sandbox-tools.ts';
import { createSkillSources } from './skill-sources.ts';
import { createSkillsProvider } from './skills.ts';
import { createWebToolsProvider } from './web-tools.ts';

export interface AgentNetworkOptions {
  /** Name resolution for the agents' network tools (and the sandbox's proxy); default the system's. */
  resolver?: Resolver | undefined;
  /** Certificates the network tools trust instead of the system's (PEM). */
  ca?: string | undefined;
}

export interface BuiltinTools {
  providers: ToolProvider[];
  close(): Promise<void>;
}

export function createBuiltinProviders(
  config: Config,
  runtime: SandboxRuntime,
  cpu: CpuWork,
  network: AgentNetworkOptions = {},
): BuiltinTools {
  // The agent picks these destinations: this host's own addresses stay refused even in insecure mode.
  const agentFetch = createEgressFetch({
    allowInsecure: config.allowInsecureDestinations,
    refuseHostLocal: true,
    allowHttp: true,
    resolver: network.resolver,
    ca: network.ca,
  });
  const searchFetch = createEgressFetch({ allowInsecure: true });
  const limits = { ...config.httpTools, ports: config.sandbox.egressPorts ?? DEFAULT_EGRESS_PORTS };
  const providers = [
    createSandboxProvider(runtime),
    createHttpClientProvider({ fetch: agentFetch, limits }),
    createWebToolsProvider({
      fetch: agentFetch,
      limits,
      cpu,
      search: config.webSearch === null ? null : { config: config.webSearch, fetch: searchFetch, cpu },
    }),
    createReportBuilderProvider(runtime),
    createSkillsProvider({
      runtime,
      sources: createSkillSources({
        ...config.skills,
        cacheDir: join(config.dataDir, 'skill-repos'),
        cpu,
        resolver: network.resolver,
      }),
    }),
    createNetworkExposureProvider(),
  ];
  return {
    providers,
    close: async () => {
      await Promise.all([agentFetch.close(), searchFetch.close()]);
    },
  };
}
