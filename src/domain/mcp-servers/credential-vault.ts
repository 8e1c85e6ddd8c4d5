/**
 * The credential vault (docs/mcp-auth.md): the OAuth tokens and static credentials (`kind` `static`: a bearer token
 * or headers, never refreshed) of MCP connectors, sealed at rest (lib/secret-box.ts),
 * never returned by the API, bound to the connector URL they were issued for, and owned by the organization
 * (`end_user` '') or by one end user. The one writer of `mcp_credentials`.
 *
 * Refreshing: a credential is refreshed before it expires (within `REFRESH_AHEAD_MS`) and when a server answers
 * 401 to the current access token, once. A worker refreshes only after taking the row's lock with a conditional
 * UPDATE (`lock_until` free and `version` unchanged); any other worker wanting the same credential waits for the
 * version to move and uses the tokens the winner stored, so one refresh request reaches the authorization server.
 * A refresh the server refuses marks the credential `failed` and records one `mcp_server.authorization_required`
 * webhook event (only the transition records it); a person connects the server again.
 */
import type { Logger } from 'pino';
import { isJsonObject, isString } from '../../lib/guards.ts';
import { newId } from '../../lib/ids.ts';
import type { SecretBox } from '../../lib/secret-box.ts';
import type { Executor } from '../../storage/db.ts';
import type { McpCredentialRow } from '../../storage/schema.ts';
import type { Connector, ConnectorCredentials, CredentialResult } from '../../tools/mcp/connectors.ts';
import { OAuthFlowError, type OAuthTokenSet, refreshTokenSet, scopeUnion } from '../../tools/mcp/oauth.ts';
import { recordWebhookEvents } from '../outbox.ts';
import type { WebhookSubscriptions } from '../webhooks/subscriptions.ts';

/** A token expiring within this is refreshed before use. */
export const REFRESH_AHEAD_MS = 60_000;
/** How long a refresh may hold the lock; a worker that died holding it is taken over after this. */
const LOCK_MS = 30_000;
const WAIT_STEP_MS = 50;

export interface CredentialVaultDeps {
  secrets: SecretBox;
  clock: { now(): number };
  /** The guarded fetch (token requests go through the egress guard). */
  fetch: typeof fetch;
  subscriptions: WebhookSubscriptions;
  logger?: Pick<Logger, 'warn'> | undefined;
}

/** `kind` of a credential that is a fixed bearer token or header set (no expiry, no refresh). */
const STATIC = 'static';

/** The organization's own credential is stored under this end user. */
const ORG = '';

const ownerOf = (endUser: string | null | undefined): string => endUser ?? ORG;

export function createCredentialVault(deps: CredentialVaultDeps) {
  const { secrets, clock } = deps;
  const open = (row: McpCredentialRow): OAuthTokenSet => JSON.parse(secrets.open(row.secret)) as OAuthTokenSet;
  const keyOf = (row: McpCredentialRow) => `${row.id}:${row.version}`;
  const openStatic = (row: McpCredentialRow): Record<string, string> => {
    const parsed: unknown = JSON.parse(secrets.open(row.secret));
    if (!isJsonObject(parsed)) return {};
    return Object.fromEntries(Object.entries(parsed).filter((entry): entry is [string, string] => isString(entry[1])));
  };

  const byId = (db: Executor, id: string) =>
    db.selectFrom('mcp_credentials').selectAll().where('id', '=', id).executeTakeFirst();

  /** The end user's credential for the connector, else the organization's; never another user's. */
  async function credentialOf(db: Executor, connector: Connector, endUser: string | null) {
    const owners = endUser === null ? [ORG] : [endUser, ORG];
    const rows = await db
      .selectFrom('mcp_credentials')
      .selectAll()
      .where('org_id', '=', connector.orgId)
      .where('server_id', '=', connector.id)
      .where('end_user', 'in', owners)
      .execute();
    // A credential issued for another URL of the connector is not sent to this one.
    const usable = rows.filter((row) => row.server_url === connector.url);
    return usable.find((row) => row.end_user !== ORG) ?? usable.find((row) => row.end_user === ORG);
  }

  /** Marks the credential failed; the transition (not a repeat) records the webhook event. */
  async function fail(db: Executor, row: McpCredentialRow, connector: Connector, reason: string): Promise<void> {
    const now = clock.now();
    await db.transaction().execute(async (trx) => {
      const changed = await trx
        .updateTable('mcp_credentials')
        .set({ status: 'failed', lock_until: null, version: row.version + 1, updated_at: now })
        .where('id', '=', row.id)
        .where('status', '=', 'active')
        .executeTakeFirst();
      if (Number(changed.numUpdatedRows) === 0) return;
      await recordWebhookEvents(
        trx,
        { orgId: row.org_id, now },
        {
          subscriptions: deps.subscriptions,
          events: [
            {
              type: 'mcp_server.authorization_required',
              data: {
                id: connector.id,
                name: connector.name,
                user: row.end_user === ORG ? null : row.end_user,
                reason,
              },
            },
          ],
        },
      );
    });
  }

  const required = (connector: Connector, endUser: string | null, why: string): CredentialResult => ({
    ok: false,
    message: `the MCP server "${connector.name}" (${connector.id}) needs sign-in${endUser === null ? '' : ` for user ${JSON.stringify(endUser)}`}: ${why}; connect it again (POST /v1/mcp_servers/${connector.id}/connect)`,
  });

  const headersOf = (row: McpCredentialRow, tokens: OAuthTokenSet): CredentialResult => ({
    ok: true,
    key: keyOf(row),
    headers: { Authorization: `Bearer ${tokens.access_token}` },
  });

  /** Refreshes `row` under its lock, or waits for whoever holds it; returns the row to use next. */
  async function refresh(db: Executor, row: McpCredentialRow, connector: Connector): Promise<'retry' | string> {
    const now = clock.now();
    const claimed = await db
      .updateTable('mcp_credentials')
      .set({ lock_until: now + LOCK_MS })
      .where('id', '=', row.id)
      .where('version', '=', row.version)
      .where('status', '=', 'active')
      .where((eb) => eb.or([eb('lock_until', 'is', null), eb('lock_until', '<', now)]))
      .executeTakeFirst();
    if (Number(claimed.numUpdatedRows) === 0) {
      await new Promise((resolve) => setTimeout(resolve, WAIT_STEP_MS));
      return 'retry';
    }
    let refreshed: OAuthTokenSet;
    try {
      refreshed = await refreshTokenSet({ fetch: deps.fetch }, open(row), clock.now());
    } catch (error) {
      if (error instanceof OAuthFlowError && error.kind === 'refused') {
        await fail(db, row, connector, error.message);
        return error.message;
      }
      await db.updateTable('mcp_credentials').set({ lock_until: null }).where('id', '=', row.id).execute();
      throw error;
    }
    await db
      .updateTable('mcp_credentials')
      .set({
        secret: secrets.seal(JSON.stringify(refreshed)),
        expires_at: refreshed.expires_at,
        lock_until: null,
        version: row.version + 1,
        updated_at: clock.now(),
      })
      .where('id', '=', row.id)
      .where('version', '=', row.version)
      .execute();
    return 'retry';
  }

  const vault = {
    async headersFor(db, connector, endUser, rejected): Promise<CredentialResult> {
      let row = await credentialOf(db, connector, endUser);
      if (row === undefined) {
        // A connector without OAuth works with its own headers alone when nobody stored a credential.
        if (connector.auth !== 'oauth') return { ok: true, key: '', headers: {} };
        return required(connector, endUser, 'no credential is stored');
      }
      if (row.kind === STATIC) {
        if (rejected === keyOf(row)) {
          return required(connector, endUser, 'the server refused the stored bearer token or headers');
        }
        return { ok: true, key: keyOf(row), headers: openStatic(row) };
      }
      const deadline = clock.now() + LOCK_MS + 5000;
      const first = row.version;
      while (clock.now() < deadline) {
        if (row.status !== 'active') return required(connector, endUser, 'its credential can no longer be refreshed');
        // Once refreshed (here or by another worker), a token is used until it expires: a lifetime shorter than
        // the margin must not refresh again and again.
        const margin = row.version === first ? REFRESH_AHEAD_MS : 0;
        const expiring = row.expires_at !== null && row.expires_at - clock.now() < margin;
        if (!expiring && rejected !== keyOf(row)) return headersOf(row, open(row));
        const outcome = await refresh(db, row, connector);
        if (outcome !== 'retry') return required(connector, endUser, outcome);
        const next = await byId(db, row.id);
        if (next === undefined) return required(connector, endUser, 'its credential was removed');
        row = next;
      }
      throw new Error(`the credential of MCP server "${connector.name}" stayed locked by another refresh`);
    },

    async needsScope(db, connector, endUser, key, scope): Promise<string> {
      const row = await credentialOf(db, connector, endUser);
      if (row !== undefined && keyOf(row) === key) {
        await db
          .updateTable('mcp_servers')
          .set({ oauth_scope: scopeUnion(connector.oauthScope, open(row).scope, scope) ?? null })
          .where('id', '=', connector.id)
          .execute();
        await fail(db, row, connector, `the server asks for scope "${scope}"`);
      }
      const result = required(connector, endUser, `the server asks for scope "${scope}"`);
      return result.ok ? '' : result.message;
    },
  } satisfies ConnectorCredentials;

  return {
    ...vault,

    /** Stores (or replaces) the credential of `endUser` (null: the organization) for the connector. */
    async save(
      db: Executor,
      input: { orgId: string; serverId: string; serverUrl: string; endUser: string | null; tokens: OAuthTokenSet },
    ): Promise<void> {
      const now = clock.now();
      const secret = secrets.seal(JSON.stringify(input.tokens));
      await db
        .insertInto('mcp_credentials')
        .values({
          id: newId(),
          org_id: input.orgId,
          server_id: input.serverId,
          end_user: ownerOf(input.endUser),
          server_url: input.serverUrl,
          kind: 'oauth',
          secret,
          expires_at: input.tokens.expires_at,
          status: 'active',
          lock_until: null,
          version: 1,
          created_at: now,
          updated_at: now,
        })
        .onConflict((conflict) =>
          conflict.columns(['server_id', 'end_user']).doUpdateSet((eb) => ({
            server_url: input.serverUrl,
            secret,
            expires_at: input.tokens.expires_at,
            status: 'active',
            lock_until: null,
            version: eb('mcp_credentials.version', '+', 1),
            updated_at: now,
          })),
        )
        .execute();
    },

    /**
     * Stores (or replaces) a static credential of `endUser` (null: the organization) for the connector: headers sent
     * on every request as that user (`Authorization: Bearer …` for a bearer token). It replaces an OAuth credential
     * of the same owner.
     */
    async saveStatic(
      db: Executor,
      input: {
        orgId: string;
        serverId: string;
        serverUrl: string;
        endUser: string | null;
        headers: Record<string, string>;
      },
    ): Promise<void> {
      const now = clock.now();
      const secret = secrets.seal(JSON.stringify(input.headers));
      const stored = { server_url: input.serverUrl, kind: STATIC, secret, expires_at: null, status: 'active' };
      await db
        .insertInto('mcp_credentials')
        .values({
          ...stored,
          id: newId(),
          org_id: input.orgId,
          server_id: input.serverId,
          end_user: ownerOf(input.endUser),
          lock_until: null,
          version: 1,
          created_at: now,
          updated_at: now,
        })
        .onConflict((conflict) =>
          conflict.columns(['server_id', 'end_user']).doUpdateSet((eb) => ({
            ...stored,
            lock_until: null,
            version: eb('mcp_credentials.version', '+', 1),
            updated_at: now,
          })),
        )
        .execute();
    },

    /** Who holds a credential for the connector, and in what state (never the secret). */
    async list(db: Executor, orgId: string, serverId: string) {
      const rows = await db
        .selectFrom('mcp_credentials')
        .select(['end_user', 'kind', 'status', 'expires_at', 'server_url', 'updated_at'])
        .where('org_id', '=', orgId)
        .where('server_id', '=', serverId)
        .orderBy('end_user')
        .execute();
      return rows.map((row) => ({
        user: row.end_user === ORG ? null : row.end_user,
        kind: row.kind === STATIC ? ('static' as const) : ('oauth' as const),
        status: row.status === 'active' ? ('active' as const) : ('authorization_required' as const),
        expires_at: row.expires_at === null ? null : Math.floor(row.expires_at / 1000),
        url: row.server_url,
        updated_at: Math.floor(row.updated_at / 1000),
      }));
    },

    /** Removes the credential of `endUser` (null: the organization's); false when there was none. */
    async remove(db: Executor, orgId: string, serverId: string, endUser: string | null): Promise<boolean> {
      const result = await db
        .deleteFrom('mcp_credentials')
        .where('org_id', '=', orgId)
        .where('server_id', '=', serverId)
        .where('end_user', '=', ownerOf(endUser))
        .executeTakeFirst();
      return result.numDeletedRows > 0n;
    },
  };
}

export type CredentialVault = ReturnType<typeof createCredentialVault>;
