/**
 * The one writer of `mcp_servers` and `agent_mcp_servers`. Every function takes a database handle or an open
 * transaction. Headers are sealed here (lib/secret-box.ts) and opened only for a connection, never for a view.
 */
import { unixSeconds } from '../../lib/clock.ts';
import { isJsonObject, isString } from '../../lib/guards.ts';
import { newId } from '../../lib/ids.ts';
import type { SecretBox } from '../../lib/secret-box.ts';
import type { Executor } from '../../storage/db.ts';
import { readJsonColumn } from '../../storage/json-column.ts';
import type { McpServerRow } from '../../storage/schema.ts';
import { type Connector, TOOLS_TRUNCATED } from '../../tools/mcp/connectors.ts';
import type { ServerOffers } from '../../tools/mcp/discovery-types.ts';
import type { Discovery, ListedMcpTool, McpOAuthInput, McpServerView } from './mcp-server-types.ts';

function parseTools(text: string | null): ListedMcpTool[] {
  if (text === null) return [];
  const parsed = readJsonColumn(text, 'mcp_servers.tools');
  if (!Array.isArray(parsed)) return [];
  return parsed.flatMap((entry: unknown): ListedMcpTool[] => {
    if (!isJsonObject(entry)) return [];
    const { name, inputSchema, title, description, annotations } = entry;
    if (typeof name !== 'string' || typeof inputSchema !== 'object' || inputSchema === null) return [];
    return [
      {
        name,
        inputSchema: { ...inputSchema },
        ...(typeof title === 'string' ? { title } : {}),
        ...(typeof description === 'string' ? { description } : {}),
        ...(typeof annotations === 'object' && annotations !== null ? { annotations: { ...annotations } } : {}),
      },
    ];
  });
}

function parseNames(text: string): string[] {
  const parsed = readJsonColumn(text, 'mcp_servers.header_names');
  return Array.isArray(parsed) ? parsed.filter(isString) : [];
}

function parseError(text: string | null): { code: string; message: string } | null {
  if (text === null) return null;
  const parsed = readJsonColumn(text, 'mcp_servers.last_error');
  if (!isJsonObject(parsed)) return null;
  const { code, message } = parsed;
  return typeof code === 'string' && typeof message === 'string' ? { code, message } : null;
}

function parseOffers(text: string | null): ServerOffers | null {
  if (text === null) return null;
  const parsed = readJsonColumn(text, 'mcp_servers.capabilities');
  if (!isJsonObject(parsed)) return null;
  return { resources: parsed.resources === true, prompts: parsed.prompts === true };
}

/** The `capabilities` column after a listing (unchanged when the listing did not say). */
const offersColumn = (discovery: Discovery) =>
  discovery.offers === undefined ? {} : { capabilities: JSON.stringify(discovery.offers) };

/** `last_error` after a successful listing: the note on tools left out, if any. */
function listingNote(discovery: Discovery): string | null {
  const note = discovery.note ?? null;
  return note === null ? null : JSON.stringify({ code: TOOLS_TRUNCATED, message: `the server ${note}` });
}

export function connectorFromRow(row: McpServerRow): Connector {
  const lastError = parseError(row.last_error);
  return {
    id: row.id,
    orgId: row.org_id,
    name: row.name,
    url: row.url,
    sealedHeaders: row.headers,
    protocol: row.protocol,
    tools: row.tools === null ? null : parseTools(row.tools),
    toolsFetchedAt: row.tools_fetched_at,
    toolsTtlMs: row.tools_ttl_ms,
    offers: parseOffers(row.capabilities),
    toolsNote: lastError?.code === TOOLS_TRUNCATED ? lastError.message : null,
    auth: row.auth === 'oauth' ? 'oauth' : 'none',
    oauthScope: row.oauth_scope,
    updatedAt: row.updated_at,
  };
}

/** The OAuth client a connector stores, sealed; null when it has none. */
export interface StoredOAuthClient {
  client_id: string;
  client_secret?: string | undefined;
  registration: 'pre_registered' | 'dynamic';
  issuer?: string | undefined;
}

export function viewOf(row: McpServerRow, secrets?: SecretBox): McpServerView {
  const client =
    row.oauth_client === null || secrets === undefined
      ? null
      : (JSON.parse(secrets.open(row.oauth_client)) as StoredOAuthClient);
  return {
    id: row.id,
    object: 'mcp_server',
    name: row.name,
    url: row.url,
    header_names: parseNames(row.header_names),
    protocol: row.protocol,
    tools: parseTools(row.tools).map((tool) => ({
      name: tool.name,
      title: tool.title ?? null,
      description: tool.description ?? null,
      input_schema: tool.inputSchema,
    })),
    tools_fetched_at: row.tools_fetched_at === null ? null : unixSeconds(row.tools_fetched_at),
    auth: row.auth === 'oauth' ? 'oauth' : 'none',
    oauth:
      row.auth !== 'oauth'
        ? null
        : {
            client_id: client?.client_id ?? null,
            registration: client?.registration ?? null,
            scope: row.oauth_scope,
          },
    last_error: parseError(row.last_error),
    created_at: unixSeconds(row.created_at),
    updated_at: unixSeconds(row.updated_at),
  };
}

export function createMcpServerStore(secrets: SecretBox) {
  const sealHeaders = (headers: Record<string, string>): string | null =>
    Object.keys(headers).length === 0 ? null : secrets.seal(JSON.stringify(headers));

  /** The columns of a connector's OAuth settings (`undefined`: it does not sign in). */
  const oauthColumns = (oauth: McpOAuthInput | undefined) => ({
    auth: oauth === undefined ? 'none' : 'oauth',
    oauth_client:
      oauth?.client_id === undefined
        ? null
        : secrets.seal(
            JSON.stringify({
              client_id: oauth.client_id,
              client_secret: oauth.client_secret,
              registration: 'pre_registered',
            } satisfies StoredOAuthClient),
          ),
    oauth_scope: oauth?.scope ?? null,
  });

  async function findMany(db: Executor, orgId: string, ids: string[]): Promise<McpServerRow[]> {
    if (ids.length === 0) return [];
    return db.selectFrom('mcp_servers').selectAll().where('org_id', '=', orgId).where('id', 'in', ids).execute();
  }

  async function findByUrls(db: Executor, orgId: string, urls: string[]): Promise<McpServerRow[]> {
    if (urls.length === 0) return [];
    return db.selectFrom('mcp_servers').selectAll().where('org_id', '=', orgId).where('url', 'in', urls).execute();
  }

  return {
    /** The headers of a connector in clear, for a connection. */
    openHeaders(sealed: string | null): Record<string, string> {
      if (sealed === null) return {};
      const parsed: unknown = JSON.parse(secrets.open(sealed));
      const headers: Record<string, string> = {};
      if (typeof parsed === 'object' && parsed !== null) {
        for (const [name, value] of Object.entries(parsed)) if (typeof value === 'string') headers[name] = value;
      }
      return headers;
    },

    /** The OAuth client of a connector in clear (its secret included), to compare with a document's; never a view. */
    openOAuthClient(sealed: string | null): StoredOAuthClient | null {
      return sealed === null ? null : (JSON.parse(secrets.open(sealed)) as StoredOAuthClient);
    },

    async find(db: Executor, orgId: string, id: string): Promise<McpServerRow | undefined> {
      return db
        .selectFrom('mcp_servers')
        .selectAll()
        .where('org_id', '=', orgId)
        .where('id', '=', id)
        .executeTakeFirst();
    },

    findMany,
    findByUrls,

    /** The API view of a connector (its OAuth client id, never its secret). */
    view: (row: McpServerRow): McpServerView => viewOf(row, secrets),

    /** The connectors with these ids, as the tool layer reads them (tools/mcp/connectors.ts). */
    async connectors(db: Executor, orgId: string, ids: string[]): Promise<Connector[]> {
      return (await findMany(db, orgId, ids)).map(connectorFromRow);
    },

    /** The connectors at these URLs, as the tool layer reads them. */
    async connectorsAt(db: Executor, orgId: string, urls: string[]): Promise<Connector[]> {
      return (await findByUrls(db, orgId, urls)).map(connectorFromRow);
    },

    /**
     * Inserts a connector unless the organization already has one at this URL; returns the row that holds the URL
     * either way (a concurrent create of the same URL finds the winner's row).
     */
    async insert(
      db: Executor,
      input: {
        orgId: string;
        name: string;
        url: string;
        headers: Record<string, string>;
        discovery: Discovery | null;
        oauth?: McpOAuthInput | undefined;
      },
      now: number,
    ): Promise<{ row: McpServerRow; created: boolean }> {
      const id = newId();
      const result = await db
        .insertInto('mcp_servers')
        .values({
          id,
          org_id: input.orgId,
          name: input.name,
          url: input.url,
          headers: sealHeaders(input.headers),
          header_names: JSON.stringify(Object.keys(input.headers)),
          protocol: input.discovery?.protocol ?? null,
          tools: input.discovery === null ? null : JSON.stringify(input.discovery.tools),
          tools_fetched_at: input.discovery === null ? null : now,
          tools_ttl_ms: input.discovery?.ttlMs ?? null,
          last_error: input.discovery === null ? null : listingNote(input.discovery),
          ...(input.discovery === null ? {} : offersColumn(input.discovery)),
          ...oauthColumns(input.oauth),
          created_at: now,
          updated_at: now,
        })
        .onConflict((conflict) => conflict.columns(['org_id', 'url']).doNothing())
        .executeTakeFirst();
      const row = await db
        .selectFrom('mcp_servers')
        .selectAll()
        .where('org_id', '=', input.orgId)
        .where('url', '=', input.url)
        .executeTakeFirstOrThrow();
      return { row, created: Number(result.numInsertedOrUpdatedRows ?? 0n) > 0 && row.id === id };
    },

    async update(
      db: Executor,
      id: string,
      change: {
        name?: string;
        url?: string;
        headers?: Record<string, string>;
        discovery?: Discovery;
        oauth?: McpOAuthInput | null;
      },
      now: number,
    ): Promise<void> {
      await db
        .updateTable('mcp_servers')
        .set({
          ...(change.name === undefined ? {} : { name: change.name }),
          ...(change.url === undefined ? {} : { url: change.url }),
          ...(change.headers === undefined
            ? {}
            : { headers: sealHeaders(change.headers), header_names: JSON.stringify(Object.keys(change.headers)) }),
          ...(change.oauth === undefined ? {} : oauthColumns(change.oauth ?? undefined)),
          ...(change.discovery === undefined
            ? {}
            : {
                protocol: change.discovery.protocol,
                tools: JSON.stringify(change.discovery.tools),
                tools_fetched_at: now,
                tools_ttl_ms: change.discovery.ttlMs,
                last_error: listingNote(change.discovery),
                ...offersColumn(change.discovery),
              }),
          updated_at: now,
        })
        .where('id', '=', id)
        .execute();
    },

    /** Records a listing (tools, protocol, hint) without touching `updated_at`, which versions the configuration. */
    async recordListing(db: Executor, id: string, discovery: Discovery, now: number): Promise<void> {
      await db
        .updateTable('mcp_servers')
        .set({
          protocol: discovery.protocol,
          tools: JSON.stringify(discovery.tools),
          tools_fetched_at: now,
          tools_ttl_ms: discovery.ttlMs,
          last_error: listingNote(discovery),
          ...offersColumn(discovery),
        })
        .where('id', '=', id)
        .execute();
    },

    async recordFailure(db: Executor, id: string, error: { code: string; message: string }): Promise<void> {
      await db
        .updateTable('mcp_servers')
        .set({ last_error: JSON.stringify(error) })
        .where('id', '=', id)
        .execute();
    },

    /** Marks the cached list stale (a `list_changed` notification): every process lists again on next use. */
    async markStale(db: Executor, id: string): Promise<void> {
      await db.updateTable('mcp_servers').set({ tools_fetched_at: 0 }).where('id', '=', id).execute();
    },

    async delete(db: Executor, orgId: string, id: string): Promise<boolean> {
      const result = await db
        .deleteFrom('mcp_servers')
        .where('org_id', '=', orgId)
        .where('id', '=', id)
        .executeTakeFirst();
      return result.numDeletedRows > 0n;
    },

    /** Names of the agents whose current version uses the connector (at most `limit`). */
    async usedBy(db: Executor, id: string, limit: number): Promise<{ id: string; name: string }[]> {
      return db
        .selectFrom('agent_mcp_servers')
        .innerJoin('agents', 'agents.id', 'agent_mcp_servers.agent_id')
        .select(['agents.id as id', 'agents.name as name'])
        .where('agent_mcp_servers.server_id', '=', id)
        .orderBy('agents.created_at')
        .limit(limit)
        .execute();
    },

    /** Makes the agent's links exactly `serverIds` (its current version's connectors). */
    async linkAgent(db: Executor, agentId: string, serverIds: string[]): Promise<void> {
      await db.deleteFrom('agent_mcp_servers').where('agent_id', '=', agentId).execute();
      const unique = [...new Set(serverIds)];
      if (unique.length === 0) return;
      await db
        .insertInto('agent_mcp_servers')
        .values(unique.map((serverId) => ({ agent_id: agentId, server_id: serverId })))
        .execute();
    },
  };
}

export type McpServerStore = ReturnType<typeof createMcpServerStore>;
