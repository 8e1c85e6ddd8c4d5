/**
 * MCP connectors as documents. A connector's secrets (static header values, a pre-registered OAuth client's
 * secret) never leave the server: an export writes each as a `${NAME}` reference, and an apply resolves references
 * from the values it is given (POST /v1/apply `secrets`; the CLI, its environment). A reference the apply is not
 * given keeps the value an existing connector stores, so applying an export back changes nothing; creating a
 * connector needs every value. Resolved values are compared with the stored ones here, on the server, so that an
 * apply with the same values changes nothing and one with a new value says which header it changes.
 */
import { validationError } from '../../errors/app-error.ts';
import { jsonEqual } from '../../lib/hash.ts';
import type { McpServerService } from '../mcp-servers/mcp-server-service.ts';
import type { McpOAuthInput, McpServerView } from '../mcp-servers/mcp-server-types.ts';
import { markerOf } from './apply-types.ts';
import type { Existing, PlanContext, ResourceKind } from './resource-kind.ts';

export interface McpServerDocument {
  kind: 'mcp_server';
  name: string;
  url: string;
  headers?: Record<string, string>;
  oauth?: McpOAuthInput | null;
}

const REFERENCE = /\$\{([A-Z_][A-Z0-9_]*)\}/g;

/** `MCP_<CONNECTOR>_<WHAT>`: the name an export gives the reference of a connector's secret. */
export function referenceName(connector: string, what: string): string {
  const part = (text: string) =>
    text
      .toUpperCase()
      .replace(/[^A-Z0-9]+/g, '_')
      .replace(/^_+|_+$/g, '');
  return `MCP_${part(connector) || 'SERVER'}_${part(what) || 'SECRET'}`.slice(0, 128);
}

/** The text with its references replaced, or the first reference the secrets do not hold. */
function resolve(text: string, secrets: Record<string, string>): { value: string } | { missing: string } {
  for (const match of text.matchAll(REFERENCE)) {
    const name = match[1] ?? '';
    if (!Object.hasOwn(secrets, name)) return { missing: name };
  }
  return { value: text.replace(REFERENCE, (_all, name: string) => secrets[name] ?? '') };
}

const notGiven = (param: string, name: string) =>
  validationError(
    param,
    `${param} references \${${name}}, which the apply was not given (POST /v1/apply secrets; agentry apply: the environment)`,
  );

const escapeKey = (key: string): string => key.replaceAll('~', '~0').replaceAll('/', '~1');

export function connectorKind(deps: { mcpServers: McpServerService }): ResourceKind<McpServerDocument> {
  const { mcpServers } = deps;

  async function documentOf(orgId: string, view: McpServerView): Promise<McpServerDocument> {
    const stored = await mcpServers.storedSecrets(orgId, view.id);
    const headers = Object.fromEntries(
      view.header_names.map((name) => [name, `\${${referenceName(view.name, name)}}`]),
    );
    const oauth: McpOAuthInput | null =
      view.oauth === null
        ? null
        : {
            ...(stored.preRegistered && view.oauth.client_id !== null ? { client_id: view.oauth.client_id } : {}),
            ...(stored.preRegistered && stored.clientSecret !== null
              ? { client_secret: `\${${referenceName(view.name, 'client_secret')}}` }
              : {}),
            ...(view.oauth.scope === null ? {} : { scope: view.oauth.scope }),
          };
    return {
      kind: 'mcp_server',
      name: view.name,
      url: view.url,
      ...(view.header_names.length === 0 ? {} : { headers }),
      ...(oauth === null ? {} : { oauth }),
    };
  }

  /** The headers the document asks for, in clear; a reference not given keeps the stored value of that header. */
  function desiredHeaders(
    document: McpServerDocument,
    secrets: Record<string, string>,
    stored: Record<string, string>,
  ): Record<string, string> | undefined {
    if (document.headers === undefined) return undefined;
    const out: Record<string, string> = {};
    for (const [name, text] of Object.entries(document.headers)) {
      const resolved = resolve(text, secrets);
      if ('value' in resolved) out[name] = resolved.value;
      else if (Object.hasOwn(stored, name)) out[name] = stored[name] ?? '';
      else throw notGiven(`headers.${name}`, resolved.missing);
    }
    return out;
  }

  /** The OAuth settings the document asks for, the client secret in clear (or the stored one, kept). */
  function desiredOAuth(
    document: McpServerDocument,
    secrets: Record<string, string>,
    storedSecret: string | null,
  ): McpOAuthInput | null {
    const oauth = document.oauth ?? null;
    if (oauth === null) return null;
    if (oauth.client_secret !== undefined && oauth.client_id === undefined) {
      throw validationError('oauth.client_secret', 'oauth.client_secret needs oauth.client_id');
    }
    let secret: string | undefined;
    if (oauth.client_secret !== undefined) {
      const resolved = resolve(oauth.client_secret, secrets);
      if ('value' in resolved) secret = resolved.value;
      else if (storedSecret !== null) secret = storedSecret;
      else throw notGiven('oauth.client_secret', resolved.missing);
    }
    return {
      ...(oauth.client_id === undefined ? {} : { client_id: oauth.client_id }),
      ...(secret === undefined ? {} : { client_secret: secret }),
      ...(oauth.scope === undefined ? {} : { scope: oauth.scope }),
    };
  }

  return {
    kind: 'mcp_server',
    noun: 'MCP connector',

    async existing(orgId: string): Promise<Existing<McpServerDocument>[]> {
      const views = await mcpServers.all(orgId);
      return Promise.all(
        views.map(async (view) => {
          const document = await documentOf(orgId, view);
          // updated_at moves with every change of the configuration, secrets included, which the document omits.
          return { id: view.id, name: view.name, document, marker: markerOf({ document, at: view.updated_at }) };
        }),
      );
    },

    async plan(context: PlanContext, document: McpServerDocument, current) {
      const { orgId, secrets } = context;
      if (current === undefined) {
        const headers = desiredHeaders(document, secrets, {});
        const oauth = desiredOAuth(document, secrets, null);
        return {
          changes: [],
          write: async ({ audit }) => {
            const input = {
              name: document.name,
              url: document.url,
              ...(headers === undefined ? {} : { headers }),
              ...(oauth === null ? {} : { oauth }),
            };
            return { id: (await mcpServers.create(orgId, input, audit)).id };
          },
        };
      }
      const view = await mcpServers.get(orgId, current.id);
      const stored = await mcpServers.storedSecrets(orgId, current.id);
      const changes: string[] = [];
      if (document.url !== view.url) changes.push('/url');
      const headers = desiredHeaders(document, secrets, stored.headers);
      if (headers !== undefined) {
        const names = [...new Set([...Object.keys(headers), ...Object.keys(stored.headers)])].sort();
        for (const name of names) {
          if (headers[name] !== stored.headers[name]) changes.push(`/headers/${escapeKey(name)}`);
        }
      }
      const headersChanged = changes.some((path) => path.startsWith('/headers/'));
      const oauth = desiredOAuth(document, secrets, stored.preRegistered ? stored.clientSecret : null);
      const before = changes.length;
      if (oauth === null || view.oauth === null) {
        if ((oauth === null) !== (view.oauth === null)) changes.push('/oauth');
      } else {
        const now = {
          client_id: stored.preRegistered ? view.oauth.client_id : null,
          client_secret: stored.preRegistered ? stored.clientSecret : null,
          scope: view.oauth.scope,
        };
        for (const field of ['client_id', 'client_secret', 'scope'] as const) {
          if (!jsonEqual(oauth[field] ?? null, now[field])) changes.push(`/oauth/${field}`);
        }
      }
      const oauthChanged = changes.length > before;
      return {
        changes,
        write: async ({ audit }) => {
          if (changes.length > 0) {
            await mcpServers.update(
              orgId,
              current.id,
              {
                ...(document.url === view.url ? {} : { url: document.url }),
                ...(headersChanged && headers !== undefined ? { headers } : {}),
                ...(oauthChanged ? { oauth } : {}),
              },
              audit,
            );
          }
          return { id: current.id };
        },
      };
    },
  };
}
