/**
 * Signing MCP connectors in with OAuth (docs/mcp-auth.md): `connect` starts an authorization for the organization
 * or one end user and returns the URL to send the person to; the authorization server sends the browser back to
 * `GET /v1/oauth/callback`, where `complete` redeems the code, stores the tokens in the vault and lists the
 * server's tools with them. What the callback needs (PKCE verifier, discovery results, the client) is stored
 * sealed in `mcp_oauth_states` under the `state`, so a restart between the two still completes; a state is used
 * once and expires after `STATE_TTL_MS`.
 */

import { randomBytes } from 'node:crypto';
import { AppError, notFound, validationError } from '../../errors/app-error.ts';
import type { Clock } from '../../lib/clock.ts';
import type { SecretBox } from '../../lib/secret-box.ts';
import type { Executor } from '../../storage/db.ts';
import type { McpServerRow } from '../../storage/schema.ts';
import {
  beginAuthorization,
  clientMetadata,
  completeAuthorization,
  OAuthFlowError,
  type OAuthSettings,
  type PendingAuthorization,
} from '../../tools/mcp/oauth.ts';
import { type AuditContext, appendAudit, SYSTEM_AUDIT } from '../audit/audit-log.ts';
import type { CredentialVault } from './credential-vault.ts';
import type { McpServerStore, StoredOAuthClient } from './mcp-server-store.ts';
import type { Discover } from './mcp-server-types.ts';

/** How long a started authorization waits for its callback. */
export const STATE_TTL_MS = 15 * 60_000;

export interface McpOAuthServiceDeps {
  db: Executor;
  clock: Clock;
  secrets: SecretBox;
  store: McpServerStore;
  vault: CredentialVault;
  discover: Discover;
  /** The guarded fetch. */
  fetch: typeof fetch;
  /** AGENTRY_PUBLIC_URL, or null (then `connect` refuses). */
  publicUrl: string | null;
}

export interface AuthorizationStart {
  object: 'mcp_server.authorization';
  server_id: string;
  user: string | null;
  authorization_url: string;
  expires_at: number;
}

const CLIENT_NAME = 'Agentry';

export function createMcpOAuthService(deps: McpOAuthServiceDeps) {
  const { db, clock, secrets, store } = deps;

  function settings(): OAuthSettings {
    const base = deps.publicUrl;
    if (base === null) {
      throw new AppError(
        'mcp_oauth_not_configured',
        'set AGENTRY_PUBLIC_URL to the URL this deployment is reached at: the authorization server sends the browser back to <it>/v1/oauth/callback',
      );
    }
    return {
      fetch: deps.fetch,
      redirectUrl: `${base}/v1/oauth/callback`,
      // A Client ID Metadata Document must be served over https.
      ...(base.startsWith('https://') ? { clientMetadataUrl: `${base}/v1/oauth/client-metadata.json` } : {}),
      clientName: CLIENT_NAME,
    };
  }

  const openClient = (row: McpServerRow): StoredOAuthClient | undefined =>
    row.oauth_client === null ? undefined : (JSON.parse(secrets.open(row.oauth_client)) as StoredOAuthClient);

  // A dynamically registered client names the authorization server it was registered at: it is not presented to
  // another one (the server moved to a new authorization server: the sign-in registers again).
  const sdkClient = (client: StoredOAuthClient | undefined) =>
    client === undefined
      ? undefined
      : {
          client_id: client.client_id,
          ...(client.client_secret === undefined ? {} : { client_secret: client.client_secret }),
          ...(client.registration === 'dynamic' && client.issuer !== undefined ? { issuer: client.issuer } : {}),
        };

  const failed = (message: string, cause?: unknown) =>
    new AppError('mcp_authorization_failed', message, cause === undefined ? {} : { cause });

  return {
    /** The Client ID Metadata Document served at `/v1/oauth/client-metadata.json`. */
    clientMetadataDocument() {
      const current = settings();
      const metadata = clientMetadata(current);
      return {
        client_id: `${deps.publicUrl}/v1/oauth/client-metadata.json`,
        client_name: CLIENT_NAME,
        redirect_uris: metadata.redirect_uris,
        grant_types: metadata.grant_types ?? [],
        response_types: metadata.response_types ?? [],
        token_endpoint_auth_method: metadata.token_endpoint_auth_method ?? 'none',
      };
    },

    /** Who holds a credential for the connector (never the tokens). */
    async credentials(orgId: string, serverId: string) {
      const row = await store.find(db, orgId, serverId);
      if (row === undefined) throw notFound('mcp server', serverId);
      const data = await deps.vault.list(db, orgId, row.id);
      return {
        object: 'list' as const,
        data: data.map((entry) => ({ object: 'mcp_server.credential' as const, ...entry })),
      };
    },

    /**
     * Stores a static credential (a bearer token or headers) of `user` (null: the organization) for the connector,
     * replacing the owner's previous one. 400 naming the field unless exactly one of them is given.
     */
    async saveStaticCredential(
      orgId: string,
      serverId: string,
      input: { user?: string | null; bearer_token?: string; headers?: Record<string, string> },
      audit: AuditContext = SYSTEM_AUDIT,
    ) {
      const row = await store.find(db, orgId, serverId);
      if (row === undefined) throw notFound('mcp server', serverId);
      if ((input.bearer_token === undefined) === (input.headers === undefined)) {
        throw validationError(
          input.bearer_token === undefined ? 'bearer_token' : 'headers',
          'give exactly one of bearer_token and headers',
        );
      }
      const headers = input.headers ?? { Authorization: `Bearer ${input.bearer_token ?? ''}` };
      if (Object.keys(headers).length === 0) throw validationError('headers', 'headers must name at least one header');
      const user = input.user ?? null;
      await db.transaction().execute(async (trx) => {
        await deps.vault.saveStatic(trx, { orgId, serverId: row.id, serverUrl: row.url, endUser: user, headers });
        await appendAudit(
          trx,
          audit,
          {
            orgId,
            action: 'mcp_server.credential_saved',
            targetType: 'mcp_server',
            targetId: row.id,
            after: { name: row.name, user, kind: 'static', header_names: Object.keys(headers).sort() },
          },
          clock,
        );
      });
      return {
        object: 'mcp_server.credential' as const,
        user,
        kind: 'static' as const,
        status: 'active' as const,
        header_names: Object.keys(headers).sort(),
      };
    },

    /** Removes the credential of `user` (null: the organization's); 404 when there is none. */
    async removeCredential(orgId: string, serverId: string, user: string | null, audit: AuditContext = SYSTEM_AUDIT) {
      const row = await store.find(db, orgId, serverId);
      if (row === undefined) throw notFound('mcp server', serverId);
      await db.transaction().execute(async (trx) => {
        if (!(await deps.vault.remove(trx, orgId, row.id, user))) {
          throw notFound('mcp server credential', user ?? 'organization');
        }
        await appendAudit(
          trx,
          audit,
          {
            orgId,
            action: 'mcp_server.credential_removed',
            targetType: 'mcp_server',
            targetId: row.id,
            before: { name: row.name, user },
          },
          clock,
        );
      });
      return { object: 'mcp_server.credential.deleted' as const, user, deleted: true as const };
    },

    /** Starts a sign-in to the connector for `user` (null: the organization's credential). */
    async connect(
      orgId: string,
      serverId: string,
      user: string | null,
      audit: AuditContext = SYSTEM_AUDIT,
    ): Promise<AuthorizationStart> {
      const row = await store.find(db, orgId, serverId);
      if (row === undefined) throw notFound('mcp server', serverId);
      const current = settings();
      const state = randomBytes(32).toString('base64url');
      const client = openClient(row);
      let started: Awaited<ReturnType<typeof beginAuthorization>>;
      try {
        started = await beginAuthorization(current, {
          serverUrl: row.url,
          state,
          client: sdkClient(client),
          scope: row.oauth_scope ?? undefined,
        });
      } catch (error) {
        throw new AppError(
          'mcp_authorization_unavailable',
          `the sign-in to ${row.url} could not start: ${error instanceof Error ? error.message : String(error)}`,
          { cause: error },
        );
      }
      const now = clock.now();
      if (started.registered !== null) {
        // Dynamic registration: kept for the next sign-in to this server.
        const registered: StoredOAuthClient = {
          client_id: started.registered.client_id,
          client_secret: started.registered.client_secret,
          registration: 'dynamic',
          issuer: started.pending.discovery?.authorizationServerMetadata?.issuer,
        };
        await db
          .updateTable('mcp_servers')
          .set({ oauth_client: secrets.seal(JSON.stringify(registered)) })
          .where('id', '=', row.id)
          .execute();
      }
      const expiresAt = now + STATE_TTL_MS;
      await db
        .insertInto('mcp_oauth_states')
        .values({
          state,
          org_id: orgId,
          server_id: row.id,
          end_user: user ?? '',
          secret: secrets.seal(JSON.stringify(started.pending)),
          expires_at: expiresAt,
          created_at: now,
        })
        .execute();
      // Expired authorizations are removed as new ones start.
      await db.deleteFrom('mcp_oauth_states').where('expires_at', '<', now).execute();
      await appendAudit(
        db,
        audit,
        {
          orgId,
          action: 'mcp_server.connect_started',
          targetType: 'mcp_server',
          targetId: row.id,
          after: { name: row.name, user },
        },
        clock,
      );
      return {
        object: 'mcp_server.authorization',
        server_id: row.id,
        user,
        authorization_url: started.authorizationUrl,
        expires_at: Math.floor(expiresAt / 1000),
      };
    },

    /**
     * The callback: redeems the code of the authorization `state` names (once), stores the credential and lists
     * the server's tools with it. Returns which connector was signed in.
     */
    async complete(query: {
      state?: string | undefined;
      code?: string | undefined;
      iss?: string | undefined;
      error?: string | undefined;
      error_description?: string | undefined;
    }): Promise<{ serverId: string; name: string; user: string | null; tools: number | null }> {
      const current = settings();
      if (query.state === undefined || query.state === '') throw failed('the callback carries no state');
      const stateRow = await db
        .selectFrom('mcp_oauth_states')
        .selectAll()
        .where('state', '=', query.state)
        .executeTakeFirst();
      // Used once: whoever deletes the row completes it.
      const deleted =
        stateRow === undefined
          ? 0n
          : (await db.deleteFrom('mcp_oauth_states').where('state', '=', query.state).executeTakeFirst())
              .numDeletedRows;
      if (stateRow === undefined || deleted === 0n) {
        throw failed('the state names no sign-in in progress (unknown, already used or expired)');
      }
      if (stateRow.expires_at < clock.now()) throw failed('the sign-in expired; start it again');
      if (query.error !== undefined) {
        const detail = query.error_description === undefined ? '' : `: ${query.error_description.slice(0, 300)}`;
        throw failed(`the authorization server answered ${query.error.slice(0, 100)}${detail}`);
      }
      if (query.code === undefined || query.code === '') throw failed('the callback carries no code');
      const row = await store.find(db, stateRow.org_id, stateRow.server_id);
      if (row === undefined) throw failed('the MCP server was deleted during the sign-in');
      const pending = JSON.parse(secrets.open(stateRow.secret)) as PendingAuthorization;
      if (pending.serverUrl !== row.url) throw failed('the MCP server changed its URL during the sign-in');
      let tokens: Awaited<ReturnType<typeof completeAuthorization>>;
      try {
        tokens = await completeAuthorization(current, { pending, code: query.code, iss: query.iss, now: clock.now() });
      } catch (error) {
        const message = error instanceof OAuthFlowError || error instanceof Error ? error.message : String(error);
        throw failed(message, error);
      }
      const user = stateRow.end_user === '' ? null : stateRow.end_user;
      await deps.vault.save(db, { orgId: row.org_id, serverId: row.id, serverUrl: row.url, endUser: user, tokens });
      await db.updateTable('mcp_servers').set({ auth: 'oauth' }).where('id', '=', row.id).execute();
      // The callback carries no API key: the sign-in the person completed is recorded as the system's doing (the
      // key that started it is on the `mcp_server.connect_started` entry).
      await appendAudit(
        db,
        SYSTEM_AUDIT,
        {
          orgId: row.org_id,
          action: 'mcp_server.credential_connected',
          targetType: 'mcp_server',
          targetId: row.id,
          after: { name: row.name, user },
        },
        clock,
      );
      let tools: number | null = null;
      try {
        const discovery = await deps.discover(
          {
            url: row.url,
            headers: { ...store.openHeaders(row.headers), Authorization: `Bearer ${tokens.access_token}` },
          },
          { prefer: row.protocol },
        );
        await store.recordListing(db, row.id, discovery, clock.now());
        tools = discovery.tools.length;
      } catch (error) {
        await store.recordFailure(db, row.id, {
          code: 'unreachable',
          message: `signed in, but the tools could not be listed: ${error instanceof Error ? error.message : String(error)}`,
        });
      }
      return { serverId: row.id, name: row.name, user, tools };
    },
  };
}

export type McpOAuthService = ReturnType<typeof createMcpOAuthService>;
