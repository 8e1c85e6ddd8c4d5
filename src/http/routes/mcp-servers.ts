/**
 * Organization MCP connectors (`/v1/mcp_servers`, docs/tools.md): the MCP servers an org's agents may use; and
 * their sign-in (docs/mcp-auth.md): connect, the credentials held, the public OAuth callback and client metadata.
 */
import { Type } from 'typebox';
import type { Deps } from '../../deps.ts';
import { auditOf, orgOf } from '../auth.ts';
import { errorResponses } from '../schemas/common.ts';
import {
  ClientMetadataDocument,
  McpCatalogQuery,
  McpCredentialDeleted,
  McpCredentialList,
  McpCredentialPutBody,
  McpCredentialQuery,
  McpCredentialSaved,
  McpPromptList,
  McpResourceList,
  McpServer,
  McpServerAuthorization,
  McpServerConnectBody,
  McpServerCreateBody,
  McpServerDeleted,
  McpServerList,
  McpServerListQuery,
  McpServerParams,
  McpServerUpdateBody,
  OAuthCallbackQuery,
} from '../schemas/mcp-servers.ts';
import type { App } from '../types.ts';

const tags = ['MCP servers'];

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (char) => `&#${char.charCodeAt(0)};`);

const page = (title: string, body: string) =>
  `<!doctype html><html><head><meta charset="utf-8"><title>${escapeHtml(title)}</title></head><body><h1>${escapeHtml(title)}</h1><p>${escapeHtml(body)}</p></body></html>`;

export function mcpServerRoutes(app: App, deps: Deps): void {
  const service = deps.mcpServers;

  app.route({
    method: 'POST',
    url: '/v1/mcp_servers',
    config: { scopes: ['agents:write'] },
    schema: {
      summary: 'Register an MCP server',
      description:
        'Connects to the server and lists its tools first: an unreachable server, a refused destination or a failed authentication is a 400 naming url, and nothing is stored. One per URL (409 mcp_server_exists).',
      tags,
      body: McpServerCreateBody,
      response: { 201: McpServer, ...errorResponses(400, 401, 403, 409, 413) },
    },
    handler: async (request, reply) =>
      reply.code(201).send(await service.create(orgOf(request), request.body, auditOf(request))),
  });

  app.route({
    method: 'GET',
    url: '/v1/mcp_servers',
    config: { scopes: ['agents:read'] },
    schema: {
      summary: 'List MCP servers',
      description: 'Newest first; pass last_id as after for the next page.',
      tags,
      querystring: McpServerListQuery,
      response: { 200: McpServerList, ...errorResponses(400, 401, 403) },
    },
    handler: async (request) => {
      const { limit = 20, after } = request.query;
      return service.list(orgOf(request), after === undefined ? { limit } : { limit, after: after.toLowerCase() });
    },
  });

  app.route({
    method: 'GET',
    url: '/v1/mcp_servers/:id',
    config: { scopes: ['agents:read'] },
    schema: {
      summary: 'Get an MCP server',
      description: 'With its cached tool list and when it was fetched; header values are never returned.',
      tags,
      params: McpServerParams,
      response: { 200: McpServer, ...errorResponses(400, 401, 403, 404) },
    },
    handler: async (request) => service.get(orgOf(request), request.params.id.toLowerCase()),
  });

  app.route({
    method: 'POST',
    url: '/v1/mcp_servers/:id',
    config: { scopes: ['agents:write'] },
    schema: {
      summary: 'Update an MCP server',
      description:
        'Changes name, url or headers (headers replace all; null removes them). A new url or new headers are checked by listing the tools first; a failure is a 400 and changes nothing.',
      tags,
      params: McpServerParams,
      body: McpServerUpdateBody,
      response: { 200: McpServer, ...errorResponses(400, 401, 403, 404, 409, 413) },
    },
    handler: async (request) =>
      service.update(orgOf(request), request.params.id.toLowerCase(), request.body, auditOf(request)),
  });

  app.route({
    method: 'DELETE',
    url: '/v1/mcp_servers/:id',
    config: { scopes: ['agents:write'] },
    schema: {
      summary: 'Delete an MCP server',
      description: '409 mcp_server_in_use while an agent uses it (the message names the agents).',
      tags,
      params: McpServerParams,
      response: { 200: McpServerDeleted, ...errorResponses(400, 401, 403, 404, 409) },
    },
    handler: async (request) => service.delete(orgOf(request), request.params.id.toLowerCase(), auditOf(request)),
  });

  app.route({
    method: 'POST',
    url: '/v1/mcp_servers/:id/refresh',
    config: { scopes: ['agents:write'] },
    schema: {
      summary: 'List the tools of an MCP server again',
      description:
        'Replaces the cached tool list now. 502 mcp_server_unreachable when the server cannot be listed; the connector keeps its last list and shows the error in last_error.',
      tags,
      params: McpServerParams,
      response: { 200: McpServer, ...errorResponses(400, 401, 403, 404, 502) },
    },
    handler: async (request) => service.refresh(orgOf(request), request.params.id.toLowerCase()),
  });

  app.route({
    method: 'GET',
    url: '/v1/mcp_servers/:id/resources',
    config: { scopes: ['agents:read'] },
    schema: {
      summary: 'List the resources of an MCP server',
      description:
        "One page of the resources the server offers (asked of it now, with the organization's credential); next_cursor asks for the next. An empty list when the server offers no resources. 400 naming cursor when the server refuses it; 502 mcp_server_unreachable when the server cannot be asked.",
      tags,
      params: McpServerParams,
      querystring: McpCatalogQuery,
      response: { 200: McpResourceList, ...errorResponses(400, 401, 403, 404, 502) },
    },
    handler: async (request) =>
      deps.mcpCatalog.resources(orgOf(request), request.params.id.toLowerCase(), request.query.cursor ?? null),
  });

  app.route({
    method: 'GET',
    url: '/v1/mcp_servers/:id/prompts',
    config: { scopes: ['agents:read'] },
    schema: {
      summary: 'List the prompts of an MCP server',
      description:
        "One page of the prompt templates the server offers, with their arguments (asked of it now, with the organization's credential); next_cursor asks for the next. An empty list when the server offers no prompts. 400 naming cursor when the server refuses it; 502 mcp_server_unreachable when the server cannot be asked.",
      tags,
      params: McpServerParams,
      querystring: McpCatalogQuery,
      response: { 200: McpPromptList, ...errorResponses(400, 401, 403, 404, 502) },
    },
    handler: async (request) =>
      deps.mcpCatalog.prompts(orgOf(request), request.params.id.toLowerCase(), request.query.cursor ?? null),
  });

  app.route({
    method: 'POST',
    url: '/v1/mcp_servers/:id/connect',
    config: { scopes: ['agents:write'] },
    schema: {
      summary: 'Start signing an MCP server in (OAuth)',
      description:
        "Discovers the server's authorization server, registers Agentry as a client when needed and returns the URL to send the person to. After they approve, the authorization server sends the browser to GET /v1/oauth/callback, which stores the credential (the organization's, or the named user's) and lists the server's tools. 409 mcp_oauth_not_configured without AGENTRY_PUBLIC_URL; 502 mcp_authorization_unavailable when discovery or registration fails.",
      tags,
      params: McpServerParams,
      body: Type.Optional(McpServerConnectBody),
      response: { 200: McpServerAuthorization, ...errorResponses(400, 401, 403, 404, 409, 502) },
    },
    handler: async (request) =>
      deps.mcpOAuth.connect(
        orgOf(request),
        request.params.id.toLowerCase(),
        request.body?.user ?? null,
        auditOf(request),
      ),
  });

  app.route({
    method: 'GET',
    url: '/v1/mcp_servers/:id/credentials',
    config: { scopes: ['agents:read'] },
    schema: {
      summary: 'List who holds a credential for an MCP server',
      description:
        'The organization (user null) and end users signed in to the server, and the state of each; tokens are never returned.',
      tags,
      params: McpServerParams,
      response: { 200: McpCredentialList, ...errorResponses(400, 401, 403, 404) },
    },
    handler: async (request) => deps.mcpOAuth.credentials(orgOf(request), request.params.id.toLowerCase()),
  });

  app.route({
    method: 'PUT',
    url: '/v1/mcp_servers/:id/credentials',
    config: { scopes: ['agents:write'] },
    schema: {
      summary: 'Store a static credential for an MCP server',
      description:
        "Stores a bearer token (sent as Authorization: Bearer) or a set of headers for the named end user, or without user for the organization, replacing that owner's credential. A turn sends its end user's credential when one exists, the organization's otherwise, never another user's; they are sent on top of the connector's own headers. Stored encrypted; never returned.",
      tags,
      params: McpServerParams,
      body: McpCredentialPutBody,
      response: { 200: McpCredentialSaved, ...errorResponses(400, 401, 403, 404) },
    },
    handler: async (request) =>
      deps.mcpOAuth.saveStaticCredential(
        orgOf(request),
        request.params.id.toLowerCase(),
        request.body,
        auditOf(request),
      ),
  });

  app.route({
    method: 'DELETE',
    url: '/v1/mcp_servers/:id/credentials',
    config: { scopes: ['agents:write'] },
    schema: {
      summary: 'Remove a credential of an MCP server',
      description: "Removes the named user's credential, or without user the organization's. 404 when there is none.",
      tags,
      params: McpServerParams,
      querystring: McpCredentialQuery,
      response: { 200: McpCredentialDeleted, ...errorResponses(400, 401, 403, 404) },
    },
    handler: async (request) =>
      deps.mcpOAuth.removeCredential(
        orgOf(request),
        request.params.id.toLowerCase(),
        request.query.user ?? null,
        auditOf(request),
      ),
  });

  app.route({
    method: 'GET',
    url: '/v1/oauth/callback',
    config: { public: true },
    schema: {
      summary: 'OAuth callback of MCP sign-in',
      description:
        'Where authorization servers send the browser back (public: the state names the sign-in). Completes it once: stores the credential and lists the tools. 400 mcp_authorization_failed for an unknown, used or expired state, an error answer, a wrong issuer or a refused code.',
      tags,
      querystring: OAuthCallbackQuery,
      response: {
        200: Type.Unsafe<string>({
          description: 'A page telling the person the server is connected',
          content: { 'text/html': { schema: { type: 'string' } } },
        }),
        ...errorResponses(400, 409),
      },
    },
    handler: async (request, reply) => {
      const done = await deps.mcpOAuth.complete(request.query);
      const who = done.user === null ? 'your organization' : `user ${done.user}`;
      const tools = done.tools === null ? 'its tools will be listed on first use' : `${done.tools} tools listed`;
      return reply
        .type('text/html; charset=utf-8')
        .serializer((text: unknown) => String(text))
        .send(
          page(
            `Connected ${done.name}`,
            `The MCP server is connected for ${who} (${tools}). You can close this window.`,
          ),
        );
    },
  });

  app.route({
    method: 'GET',
    url: '/v1/oauth/client-metadata.json',
    config: { public: true },
    schema: {
      summary: 'OAuth Client ID Metadata Document of this deployment',
      description:
        'Authorization servers that accept Client ID Metadata Documents read Agentry as a client here (its URL is the client_id, when AGENTRY_PUBLIC_URL is https). 409 mcp_oauth_not_configured without AGENTRY_PUBLIC_URL.',
      tags,
      response: { 200: ClientMetadataDocument, ...errorResponses(409) },
    },
    handler: async () => deps.mcpOAuth.clientMetadataDocument(),
  });
}
