/**
 * Organization MCP connectors: the `/v1/mcp_servers` API, and the two halves of registering an agent's
 * `{type:"url"}` entries atomically with the agent write:
 * - `prepareEntries` (before any transaction): reuses the organization's connector at each URL, or discovers the
 *   server (connect + list tools) so that an unreachable URL is a 400 naming `mcpServers[i].url` and nothing is
 *   written;
 * - `commitEntries` (inside the agent's transaction): inserts the discovered connectors (one per URL even under
 *   concurrent creates), checks `custom` entries name a connector of this organization, rewrites URL entries to
 *   `{kind:"custom", serverId, name}`, and returns the connector ids to link to the agent.
 */

import { AppError, notFound, validationError } from '../../errors/app-error.ts';
import type { Clock } from '../../lib/clock.ts';
import { publicHttpsUrlProblem } from '../../lib/url-policy.ts';
import type { Executor } from '../../storage/db.ts';
import { isForeignKeyViolation, isUniqueViolation } from '../../storage/errors.ts';
import { reservedServerNameProblem } from '../../tools/naming.ts';
import type { McpServer } from '../agents/agent-types.ts';
import { type AuditContext, appendAudit, SYSTEM_AUDIT } from '../audit/audit-log.ts';
import { type CursorPage, type CursorQuery, newestFirstPage } from '../pagination.ts';
import type { McpServerStore } from './mcp-server-store.ts';
import {
  type Discover,
  type Discovery,
  DiscoveryError,
  type McpServerCreateInput,
  type McpServerUpdateInput,
  type McpServerView,
} from './mcp-server-types.ts';

export interface McpServerServiceDeps {
  db: Executor;
  clock: Clock;
  store: McpServerStore;
  discover: Discover;
  allowInsecureDestinations: boolean;
  /**
   * Closes this process's connections to the connector (its URL, headers or sign-in changed, or it was deleted);
   * other processes close theirs once idle.
   */
  closeConnections?: (id: string) => Promise<void>;
}

/** URL entries of an agent, resolved before its transaction: the discoveries of URLs no connector holds yet. */
export interface PreparedEntries {
  entries: McpServer[];
  discovered: Map<string, Discovery>;
}

const describeFailure = (error: unknown): string =>
  error instanceof DiscoveryError || error instanceof Error ? error.message : String(error);

export function createMcpServerService(deps: McpServerServiceDeps) {
  const { db, clock, store } = deps;
  /** Beside the request: a slow server must not hold the answer back, and a failed close changes nothing stored. */
  const closeConnections = (id: string) => {
    void deps.closeConnections?.(id).catch(() => undefined);
  };

  async function discoverOrThrow(
    endpoint: { url: string; headers: Record<string, string> },
    prefer: string | null,
    param: string,
  ): Promise<Discovery> {
    try {
      return await deps.discover(endpoint, { prefer });
    } catch (error) {
      throw validationError(param, `${param}: the MCP server could not be used: ${describeFailure(error)}`);
    }
  }

  function checkName(name: string | undefined): void {
    const problem = name === undefined ? null : reservedServerNameProblem(name);
    if (problem !== null) throw validationError('name', `name ${problem}`);
  }

  function checkUrl(url: string, param: string): void {
    const problem = publicHttpsUrlProblem(url, deps.allowInsecureDestinations);
    if (problem !== null) throw validationError(param, `${param} ${problem}`);
  }

  async function mustFind(orgId: string, id: string, trx: Executor = db) {
    const row = await store.find(trx, orgId, id);
    if (row === undefined) throw notFound('mcp server', id);
    return row;
  }

  return {
    async create(
      orgId: string,
      input: McpServerCreateInput,
      audit: AuditContext = SYSTEM_AUDIT,
    ): Promise<McpServerView> {
      checkName(input.name);
      checkUrl(input.url, 'url');
      const headers = input.headers ?? {};
      if ((await store.findByUrls(db, orgId, [input.url])).length > 0) {
        throw new AppError('mcp_server_exists', `the organization already has an MCP server at ${input.url}`, {
          param: 'url',
        });
      }
      // A server that signs in is listed once connected (POST /v1/mcp_servers/{id}/connect).
      const discovery =
        input.oauth === undefined ? await discoverOrThrow({ url: input.url, headers }, null, 'url') : null;
      const { row, created } = await db.transaction().execute(async (trx) => {
        const inserted = await store.insert(
          trx,
          { orgId, name: input.name, url: input.url, headers, discovery, oauth: input.oauth },
          clock.now(),
        );
        if (inserted.created) {
          const after = { name: input.name, url: input.url, header_names: Object.keys(headers).sort() };
          await appendAudit(
            trx,
            audit,
            { orgId, action: 'mcp_server.created', ...target(inserted.row.id), after },
            clock,
          );
        }
        return inserted;
      });
      if (!created) {
        throw new AppError('mcp_server_exists', `the organization already has an MCP server at ${input.url}`, {
          param: 'url',
        });
      }
      return store.view(row);
    },

    async list(orgId: string, query: CursorQuery): Promise<CursorPage<McpServerView>> {
      return newestFirstPage(db.selectFrom('mcp_servers').selectAll().where('org_id', '=', orgId), query, {
        createdAt: 'created_at',
        id: 'id',
        anchor: (after) =>
          db
            .selectFrom('mcp_servers')
            .select(['id', 'created_at'])
            .where('org_id', '=', orgId)
            .where('id', '=', after)
            .executeTakeFirst(),
        unknownAfter: (after) => `after names no MCP server of this organization: ${after}`,
        view: store.view,
      });
    },

    /** Every connector of the organization, oldest first (documents of agents as code). */
    async all(orgId: string): Promise<McpServerView[]> {
      const rows = await db
        .selectFrom('mcp_servers')
        .selectAll()
        .where('org_id', '=', orgId)
        .orderBy('created_at')
        .orderBy('id')
        .execute();
      return rows.map(store.view);
    },

    /**
     * The secrets a connector stores, in clear: only for comparing them with the values an apply supplies, never
     * to be answered or logged.
     */
    async storedSecrets(
      orgId: string,
      id: string,
    ): Promise<{ headers: Record<string, string>; clientSecret: string | null; preRegistered: boolean }> {
      const row = await mustFind(orgId, id);
      const client = store.openOAuthClient(row.oauth_client);
      return {
        headers: store.openHeaders(row.headers),
        clientSecret: client?.client_secret ?? null,
        preRegistered: client?.registration === 'pre_registered',
      };
    },

    async get(orgId: string, id: string): Promise<McpServerView> {
      return store.view(await mustFind(orgId, id));
    },

    /** Changes name, url or headers; a new url or new headers are discovered first (a failure changes nothing). */
    async update(
      orgId: string,
      id: string,
      input: McpServerUpdateInput,
      audit: AuditContext = SYSTEM_AUDIT,
    ): Promise<McpServerView> {
      const row = await mustFind(orgId, id);
      checkName(input.name);
      if (input.url !== undefined) checkUrl(input.url, 'url');
      const url = input.url ?? row.url;
      const headers = input.headers === undefined ? undefined : (input.headers ?? {});
      let discovery: Discovery | undefined;
      const signsIn = input.oauth === undefined ? row.auth === 'oauth' : input.oauth !== null;
      if (!signsIn && (url !== row.url || headers !== undefined)) {
        discovery = await discoverOrThrow(
          { url, headers: headers ?? store.openHeaders(row.headers) },
          url === row.url ? row.protocol : null,
          url !== row.url ? 'url' : 'headers',
        );
      }
      try {
        await db.transaction().execute(async (trx) => {
          await store.update(
            trx,
            row.id,
            {
              ...(input.name === undefined ? {} : { name: input.name }),
              ...(url === row.url ? {} : { url }),
              ...(headers === undefined ? {} : { headers }),
              ...(discovery === undefined ? {} : { discovery }),
              ...(input.oauth === undefined ? {} : { oauth: input.oauth }),
            },
            Math.max(clock.now(), row.updated_at + 1),
          );
          // Header values are secrets: only that they changed is recorded, never what they are.
          const changed = [
            ...(input.name === undefined || input.name === row.name ? [] : ['name']),
            ...(url === row.url ? [] : ['url']),
            ...(headers === undefined ? [] : ['headers']),
            ...(input.oauth === undefined ? [] : ['oauth']),
          ];
          await appendAudit(
            trx,
            audit,
            {
              orgId,
              action: 'mcp_server.updated',
              ...target(row.id),
              before: { name: row.name, url: row.url },
              after: { name: input.name ?? row.name, url, changed_fields: changed },
            },
            clock,
          );
        });
      } catch (error) {
        if (isUniqueViolation(error)) {
          throw new AppError('mcp_server_exists', `the organization already has an MCP server at ${url}`, {
            param: 'url',
            cause: error,
          });
        }
        throw error;
      }
      if (url !== row.url || headers !== undefined || input.oauth !== undefined) closeConnections(id);
      return store.view(await mustFind(orgId, id));
    },

    async delete(
      orgId: string,
      id: string,
      audit: AuditContext = SYSTEM_AUDIT,
    ): Promise<{ id: string; object: 'mcp_server.deleted'; deleted: true }> {
      await db.transaction().execute(async (trx) => {
        const found = await mustFind(orgId, id, trx);
        const users = await store.usedBy(trx, id, 3);
        const inUse = () =>
          new AppError(
            'mcp_server_in_use',
            `the MCP server is used by agent${users.length > 1 ? 's' : ''} ${users.map((agent) => `${agent.name} (${agent.id})`).join(', ')}; remove it from them first`,
          );
        if (users.length > 0) throw inUse();
        try {
          await store.delete(trx, orgId, id);
        } catch (error) {
          // An agent linked between the check and the delete: the foreign key refuses.
          if (isForeignKeyViolation(error)) {
            throw new AppError('mcp_server_in_use', 'the MCP server is used by an agent; remove it from it first', {
              cause: error,
            });
          }
          throw error;
        }
        const before = { name: found.name, url: found.url };
        await appendAudit(trx, audit, { orgId, action: 'mcp_server.deleted', ...target(found.id), before }, clock);
      });
      closeConnections(id);
      return { id, object: 'mcp_server.deleted', deleted: true };
    },

    /** Lists the server's tools now; a failure is recorded on the connector and answered 502. */
    async refresh(orgId: string, id: string): Promise<McpServerView> {
      const row = await mustFind(orgId, id);
      let discovery: Discovery;
      try {
        discovery = await deps.discover(
          { url: row.url, headers: store.openHeaders(row.headers) },
          { prefer: row.protocol },
        );
      } catch (error) {
        const code = error instanceof DiscoveryError ? error.code : 'unreachable';
        await store.recordFailure(db, row.id, { code, message: describeFailure(error) });
        throw new AppError('mcp_server_unreachable', `the MCP server could not be listed: ${describeFailure(error)}`, {
          cause: error,
        });
      }
      await store.recordListing(db, row.id, discovery, clock.now());
      return store.view(await mustFind(orgId, id));
    },

    async prepareEntries(orgId: string, entries: McpServer[]): Promise<PreparedEntries> {
      const urls = entries.flatMap((entry) => ('type' in entry ? [entry.url] : []));
      const known = new Set((await store.findByUrls(db, orgId, urls)).map((row) => row.url));
      const discovered = new Map<string, Discovery>();
      const pending = entries.flatMap((entry, index) =>
        'type' in entry && !known.has(entry.url) ? [{ url: entry.url, index }] : [],
      );
      await Promise.all(
        pending.map(async ({ url, index }) => {
          discovered.set(url, await discoverOrThrow({ url, headers: {} }, null, `mcpServers[${index}].url`));
        }),
      );
      return { entries, discovered };
    },

    async commitEntries(
      trx: Executor,
      orgId: string,
      prepared: PreparedEntries,
    ): Promise<{ entries: McpServer[]; serverIds: string[] }> {
      const now = clock.now();
      const out: McpServer[] = [];
      const serverIds: string[] = [];
      const customIds = prepared.entries.flatMap((entry) =>
        !('type' in entry) && entry.kind === 'custom' ? [entry.serverId] : [],
      );
      const existing = new Set((await store.findMany(trx, orgId, customIds)).map((row) => row.id));
      for (const [index, entry] of prepared.entries.entries()) {
        if ('type' in entry) {
          const discovery = prepared.discovered.get(entry.url) ?? null;
          const { row } = await store.insert(
            trx,
            { orgId, name: entry.name, url: entry.url, headers: {}, discovery },
            now,
          );
          const { type: _type, url: _url, ...kept } = entry;
          // The entry's name and sampling opt-in stay with it.
          out.push({ kind: 'custom', serverId: row.id, ...kept });
          serverIds.push(row.id);
        } else if (entry.kind === 'custom') {
          if (!existing.has(entry.serverId)) {
            throw validationError(
              `mcpServers[${index}].serverId`,
              `mcpServers[${index}].serverId names no MCP server of this organization: ${entry.serverId}`,
            );
          }
          out.push(entry);
          serverIds.push(entry.serverId);
        } else out.push(entry);
      }
      const seen = new Map<string, number>();
      for (const [index, entry] of out.entries()) {
        if ('type' in entry || entry.kind !== 'custom') continue;
        const first = seen.get(entry.serverId);
        if (first !== undefined) {
          throw validationError(
            `mcpServers[${index}]`,
            `mcpServers[${index}] uses the same MCP server as mcpServers[${first}]`,
          );
        }
        seen.set(entry.serverId, index);
      }
      return { entries: out, serverIds };
    },

    linkAgent: (trx: Executor, agentId: string, serverIds: string[]) => store.linkAgent(trx, agentId, serverIds),
  };
}

export type McpServerService = ReturnType<typeof createMcpServerService>;

const target = (id: string) => ({ targetType: 'mcp_server', targetId: id });
