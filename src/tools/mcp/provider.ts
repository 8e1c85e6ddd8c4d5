/**
 * The MCP provider: an agent's MCP entries become tool sources.
 * - `{kind:"custom", serverId}`: an organization connector (URL entries are stored this way after discovery);
 * - `{kind:<vendor>, toolkit}`: a toolkit the deployment configured in AGENTRY_TOOLKITS (`kind/toolkit`, or `kind`
 *   with `{toolkit}` in its URL); an unconfigured kind stays valid but is reported unavailable;
 * - `{type:"url"}`: only in agents stored before connectors existed; used through the connector at that URL if
 *   the organization has one, else directly.
 * Tool lists come from the list cache; calls go through pooled connections, with the call's signal (an interrupt
 * cancels the call on the server too), its deadline, `_meta` for correlation and progress to live listeners.
 * A connector that signs in with OAuth (docs/mcp-auth.md) is reached with a credential of the vault: the turn's
 * end user's, else the organization's, one pooled connection per credential. A 401 refreshes the credential and
 * retries once; a credential that cannot be used makes that call's result `authorization_required` (other tools
 * are unaffected).
 */
import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import type { ToolkitEndpoint } from '../../config.ts';
import type { Clock } from '../../lib/clock.ts';
import type { Executor } from '../../storage/db.ts';
import type { McpServer } from '../tool-config.ts';
import type { ResolvedTool, ToolProvider, ToolScope, ToolSource } from '../types.ts';
import { isMcpError, isMcpProtocol, type McpConnection, type McpEndpoint } from './client.ts';
import {
  AUTHORIZATION_REQUIRED,
  type Connector,
  type ConnectorCredentials,
  type ConnectorStore,
  type CredentialResult,
  TOOLS_TRUNCATED,
} from './connectors.ts';
import type { Discovery, ListedMcpTool } from './discovery-types.ts';
import { challengeOf } from './oauth.ts';
import type { McpPool } from './pool.ts';
import { type ConnectionRunner, resourceTools } from './resource-tools.ts';
import type { ToolListCache } from './tool-cache.ts';
import { boundToolList } from './tool-list-bounds.ts';

export interface McpProviderDeps {
  db: Executor;
  clock: Clock;
  logger: Logger;
  store: ConnectorStore;
  /** The credential vault, for connectors that sign in with OAuth. */
  credentials: ConnectorCredentials;
  cache: ToolListCache;
  /** Connections to organization connectors (through the egress guard). */
  connectorPool: McpPool;
  /** Connections to operator-configured toolkit endpoints (trusted: they may be private). */
  toolkitPool: McpPool;
  toolkits: Record<string, ToolkitEndpoint>;
}

const isToolkit = (entry: McpServer): entry is Extract<McpServer, { toolkit: string }> =>
  !('type' in entry) && 'toolkit' in entry;

/** One server a source talks to. */
interface Target {
  key: string;
  version: number;
  label: string;
  serverId: string | null;
  pool: McpPool;
  endpoint(): McpEndpoint;
  prefer: string | null;
  connector: Connector | null;
  /**
   * The agent's entry allows sampling: its connection declares the capability, and is pooled apart from the
   * connections of agents that do not (a server is told it may sample only where its requests will be served).
   */
  sampling: boolean;
  /** Set for OAuth connectors: the turn's credential (`rejected`: the key a server just refused). */
  credential?: (rejected?: string) => Promise<CredentialResult>;
  endUser?: string | null;
}

/** The credential of a connector cannot be used: the call's result says so. */
class AuthorizationRequired extends Error {}

/** Where a connection goes, and with which credential (OAuth connectors). */
interface Prepared {
  /** The pool key: the target's, plus the credential's id. */
  key: string;
  endpoint: McpEndpoint;
  credentialKey: string | null;
  /** The last 401/403 challenge its server sent since `prepare`. */
  challenge(): { status: number; header: string | null } | null;
}

/** How long after the call's deadline the client gives up on its own, should the signal not reach it. */
const CLIENT_TIMEOUT_GRACE_MS = 1000;

/** What every pool key of a connector's connections starts with (all its URLs, credentials and capabilities). */
export const connectorKeyPrefix = (id: string) => `connector:${id}:`;

const digest = (text: string) => createHash('sha256').update(text).digest('hex').slice(0, 16);

/** A JSON Schema the model providers accept as a function's parameters: an object at the root. */
function parametersOf(schema: Record<string, unknown>): Record<string, unknown> {
  return { ...schema, type: 'object', properties: schema.properties ?? {} };
}

/** Thrown by `browse` when the connector's credential cannot be used (the message says why and what to do). */
export class McpAuthorizationRequired extends Error {}

export interface McpProviderTools extends ToolProvider {
  /**
   * Runs `operation` on a connection to the organization's connector as the organization (its credential, if it
   * has one): how the API lists a connector's resources and prompts. Undefined when the org has no such connector.
   */
  browse<T>(
    orgId: string,
    serverId: string,
    signal: AbortSignal,
    operation: (connection: McpConnection) => Promise<T>,
  ): Promise<T | undefined>;
  /**
   * Runs `operation` on a connection to the agent's MCP server whose label (as its tools show it) is `label`, as
   * a turn would: with the end user's credential when `scope.endUser` is set, else the organization's; through the
   * same pools and egress guard. Undefined when no entry of `entries` has that label.
   */
  withServer<T>(
    scope: ToolScope,
    entries: McpServer[],
    label: string,
    signal: AbortSignal,
    operation: (connection: McpConnection) => Promise<T>,
  ): Promise<T | undefined>;
}

export function createMcpProvider(deps: McpProviderDeps): McpProviderTools {
  const { store, cache, clock } = deps;
  const challenges = new Map<string, { status: number; header: string | null }>();

  /**
   * Where a target's connection goes and with which credential (OAuth connectors: the vault's, one pooled
   * connection per credential, replaced when its token changes).
   */
  async function prepare(target: Target, rejected?: string): Promise<Prepared> {
    const base = { ...target.endpoint(), sampling: target.sampling };
    const poolKey = target.sampling ? `${target.key}:sampling` : target.key;
    if (target.credential === undefined) {
      return { key: poolKey, endpoint: base, credentialKey: null, challenge: () => null };
    }
    const credential = await target.credential(rejected);
    if (!credential.ok) throw new AuthorizationRequired(credential.message);
    const key = `${poolKey}:${credential.key.split(':')[0] ?? ''}`;
    challenges.delete(key);
    return {
      key,
      // '': the connector's own headers only (no credential stored): a 401 is the server's answer, not ours to fix.
      credentialKey: credential.key === '' ? null : credential.key,
      endpoint: {
        ...base,
        headers: { ...base.headers, ...credential.headers },
        onChallenge: (status, header) => challenges.set(key, { status, header }),
      },
      challenge: () => challenges.get(key) ?? null,
    };
  }

  /** The pooled connection; its tool-list changes (across reconnects) end the cached list. */
  async function connect(target: Target, prepared: Prepared, signal?: AbortSignal): Promise<McpConnection> {
    // Set with each use: the pool drops it with the connection, so keys no longer used (a credential, an old URL)
    // keep nothing.
    target.pool.watch(prepared.key, () => {
      cache.invalidate(target.key);
      if (target.serverId !== null) void store.markStale(deps.db, target.serverId).catch(() => undefined);
    });
    const prefer = isMcpProtocol(target.prefer) ? target.prefer : undefined;
    return target.pool.get(prepared.key, prepared.endpoint, prefer, signal);
  }

  /**
   * Runs `operation` on the target's connection. An OAuth connector's 401 (connecting or later) refreshes the
   * credential and runs it again, once; a 403 `insufficient_scope` asks a person to connect again with the
   * larger scope.
   */
  async function withConnection<T>(
    target: Target,
    signal: AbortSignal | undefined,
    operation: (connection: McpConnection) => Promise<T>,
  ): Promise<T> {
    let rejected: string | undefined;
    for (let attempt = 0; ; attempt++) {
      const prepared = await prepare(target, rejected);
      try {
        return await operation(await connect(target, prepared, signal));
      } catch (error) {
        const key = prepared.credentialKey;
        const connector = target.connector;
        if (key === null || connector === null) throw error;
        const challenge = prepared.challenge();
        const wanted = challengeOf(challenge?.header ?? null);
        if (challenge?.status === 403 && wanted.error === 'insufficient_scope') {
          throw new AuthorizationRequired(
            await deps.credentials.needsScope(deps.db, connector, target.endUser ?? null, key, wanted.scope ?? ''),
          );
        }
        if (challenge?.status !== 401 && !(isMcpError(error) && error.status === 401)) throw error;
        if (attempt > 0) {
          throw new AuthorizationRequired(
            `the MCP server "${target.label}" refused its credential again after a refresh; connect it again`,
          );
        }
        rejected = key;
      }
    }
  }

  /** Runs one request of a resource tool on the target's connection; a credential problem is its result. */
  const runner =
    (target: Target): ConnectionRunner =>
    async (signal, operation) => {
      try {
        return { output: await withConnection(target, signal, operation), isError: false };
      } catch (error) {
        if (!(error instanceof AuthorizationRequired)) throw error;
        return { output: `${AUTHORIZATION_REQUIRED}: ${error.message}`, isError: true };
      }
    };

  function toolOf(target: Target, listed: ListedMcpTool): ResolvedTool {
    return {
      name: listed.name,
      description: listed.description ?? listed.title ?? '',
      parameters: parametersOf(listed.inputSchema),
      strict: false,
      kind: 'server',
      origin: { serverId: target.serverId, serverLabel: target.label, tool: listed.name },
      async execute(args, context) {
        try {
          const result = await withConnection(target, context.signal, (connection) =>
            connection.callTool(listed.name, args, {
              signal: context.signal,
              // The call's signal fires at the deadline (and cancels on the server); the client's bound is a backstop.
              timeoutMs: Math.max(1, context.deadline - clock.now()) + CLIENT_TIMEOUT_GRACE_MS,
              meta: context.meta,
              onProgress: (progress) => context.progress(progress),
              onElicit: context.elicit,
              onSample: context.sample,
            }),
          );
          return { output: result.text, isError: result.isError };
        } catch (error) {
          if (!(error instanceof AuthorizationRequired)) throw error;
          return { output: `${AUTHORIZATION_REQUIRED}: ${error.message}`, isError: true };
        }
      },
    };
  }

  function source(target: Target): ToolSource {
    return {
      label: `MCP server "${target.label}"`,
      available: true,
      async load(signal) {
        const { tools, offers } = await cache.get(
          {
            key: target.key,
            version: target.version,
            stored:
              target.connector === null
                ? null
                : {
                    tools: target.connector.tools,
                    fetchedAt: target.connector.toolsFetchedAt,
                    ttlMs: target.connector.toolsTtlMs,
                    offers: target.connector.offers,
                  },
            list: async (listSignal): Promise<Discovery> => {
              const { connection, listed } = await withConnection(target, listSignal, async (connection) => ({
                connection,
                listed: await connection.listTools(listSignal),
              }));
              if (listed.note !== null && target.connector === null) {
                deps.logger.warn({ server: target.label }, `MCP server "${target.label}" ${listed.note}`);
              }
              return {
                protocol: connection.protocol,
                tools: listed.tools,
                ttlMs: listed.ttlMs,
                note: listed.note,
                offers: connection.capabilities,
              };
            },
            record: async (discovery) => {
              if (target.serverId !== null) await store.recordListing(deps.db, target.serverId, discovery, clock.now());
            },
            recordFailure: async (error) => {
              if (target.serverId !== null) await store.recordFailure(deps.db, target.serverId, error);
            },
          },
          signal,
        );
        return {
          // A list stored before the bounds existed is bounded here too.
          tools: [
            ...boundToolList(tools).tools.map((tool) => toolOf(target, tool)),
            ...(offers?.resources === true
              ? resourceTools({ serverId: target.serverId, serverLabel: target.label }, runner(target))
              : []),
          ],
          listing: { serverId: target.serverId, serverLabel: target.label },
        };
      },
    };
  }

  /** The connector's source, with a warning when its last listing left tools out. */
  function connectorSources(connector: Connector, label: string, scope: ToolScope, sampling: boolean): ToolSource[] {
    const available = source(connectorTarget(connector, label, scope.endUser ?? null, sampling));
    if (connector.toolsNote === null) return [available];
    const warned = `MCP server "${label}"`;
    return [
      available,
      {
        label: `${warned} tool list`,
        available: false,
        warning: { code: TOOLS_TRUNCATED, message: `${warned}: ${connector.toolsNote}` },
      },
    ];
  }

  function connectorTarget(connector: Connector, label: string, endUser: string | null, sampling: boolean): Target {
    return {
      sampling,
      // Every connector may hold credentials in the vault (OAuth tokens, static bearer tokens or headers).
      endUser,
      credential: (rejected?: string) => deps.credentials.headersFor(deps.db, connector, endUser, rejected),
      key: `${connectorKeyPrefix(connector.id)}${digest(`${connector.url}\n${connector.sealedHeaders ?? ''}`)}`,
      version: connector.updatedAt,
      label,
      serverId: connector.id,
      pool: deps.connectorPool,
      endpoint: () => ({ url: connector.url, headers: store.openHeaders(connector.sealedHeaders) }),
      prefer: connector.protocol,
      connector,
    };
  }

  function urlTarget(entry: Extract<McpServer, { type: 'url' }>, sampling: boolean): Target {
    return {
      sampling,
      key: `url:${digest(entry.url)}`,
      version: 0,
      label: entry.name,
      serverId: null,
      pool: deps.connectorPool,
      endpoint: () => ({ url: entry.url, headers: {} }),
      prefer: null,
      connector: null,
    };
  }

  /** The target of the agent's entry labelled `label` (the label `sources` gives it), or null. */
  async function labelledTarget(scope: ToolScope, entries: McpServer[], label: string): Promise<Target | null> {
    const endUser = scope.endUser ?? null;
    for (const entry of entries) {
      if ('type' in entry) {
        if (entry.name !== label) continue;
        const [connector] = await store.connectorsAt(scope.db, scope.orgId, [entry.url]);
        return connector === undefined ? urlTarget(entry, false) : connectorTarget(connector, label, endUser, false);
      }
      if (isToolkit(entry)) {
        if (entry.toolkit === label) return toolkitTarget(entry);
      } else if (entry.kind === 'custom') {
        const [connector] = await store.connectors(scope.db, scope.orgId, [entry.serverId]);
        if (connector !== undefined && (entry.name ?? connector.name) === label) {
          return connectorTarget(connector, label, endUser, false);
        }
      }
    }
    return null;
  }

  /** `withConnection` for the API: a credential that cannot be used is an McpAuthorizationRequired. */
  async function asApi<T>(target: Target, signal: AbortSignal, operation: (c: McpConnection) => Promise<T>) {
    try {
      return await withConnection(target, signal, operation);
    } catch (error) {
      if (error instanceof AuthorizationRequired) throw new McpAuthorizationRequired(error.message, { cause: error });
      throw error;
    }
  }

  function toolkitTarget(entry: Extract<McpServer, { toolkit: string }>): Target | null {
    const endpoint = deps.toolkits[`${entry.kind}/${entry.toolkit}`] ?? deps.toolkits[entry.kind];
    if (endpoint === undefined) return null;
    const url = endpoint.url.replaceAll('{toolkit}', encodeURIComponent(entry.toolkit));
    return {
      key: `toolkit:${entry.kind}/${entry.toolkit}:${digest(url)}`,
      version: 0,
      label: entry.toolkit,
      serverId: null,
      pool: deps.toolkitPool,
      endpoint: () => ({ url, headers: endpoint.headers }),
      prefer: null,
      connector: null,
      sampling: false,
    };
  }

  return {
    name: 'mcp',
    async browse(orgId, serverId, signal, operation) {
      const [connector] = await store.connectors(deps.db, orgId, [serverId]);
      if (connector === undefined) return undefined;
      return asApi(connectorTarget(connector, connector.name, null, false), signal, operation);
    },
    async withServer(scope, entries, label, signal, operation) {
      const target = await labelledTarget(scope, entries, label);
      return target === null ? undefined : asApi(target, signal, operation);
    },
    claims: (entry) => 'type' in entry || entry.kind === 'custom' || isToolkit(entry),

    async sources(_agent, claimed, scope) {
      if (claimed.length === 0) return [];
      const ids = claimed.flatMap((entry) => (!('type' in entry) && entry.kind === 'custom' ? [entry.serverId] : []));
      const urls = claimed.flatMap((entry) => ('type' in entry ? [entry.url] : []));
      const byId = new Map(
        (await store.connectors(scope.db, scope.orgId, ids)).map((connector) => [connector.id, connector]),
      );
      const byUrl = new Map(
        (await store.connectorsAt(scope.db, scope.orgId, urls)).map((connector) => [connector.url, connector]),
      );
      const configured = Object.keys(deps.toolkits);
      return claimed.flatMap((entry): ToolSource | ToolSource[] => {
        const sampling = 'allowSampling' in entry && entry.allowSampling === true;
        if ('type' in entry) {
          const connector = byUrl.get(entry.url);
          if (connector !== undefined) return connectorSources(connector, entry.name, scope, sampling);
          return source(urlTarget(entry, sampling));
        }
        if (isToolkit(entry)) {
          const target = toolkitTarget(entry);
          if (target !== null) return source(target);
          const label = `${entry.kind} toolkit "${entry.toolkit}"`;
          return {
            label,
            available: false,
            warning: {
              code: 'tool_unavailable',
              message: `${label} is configured on the agent but this deployment has no endpoint for it (configured toolkit kinds: ${configured.length === 0 ? 'none' : configured.join(', ')}; see AGENTRY_TOOLKITS); the turn runs without it`,
            },
          };
        }
        const custom = entry.kind === 'custom' ? entry : null;
        const connector = custom === null ? undefined : byId.get(custom.serverId);
        if (custom === null || connector === undefined) {
          const label = `MCP server ${custom?.serverId ?? ''}`;
          return {
            label,
            available: false,
            warning: {
              code: 'tool_unavailable',
              message: `${label} no longer exists in this organization; the turn runs without it`,
            },
          };
        }
        return connectorSources(connector, custom.name ?? connector.name, scope, sampling);
      });
    },
  };
}
