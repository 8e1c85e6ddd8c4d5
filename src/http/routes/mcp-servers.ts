/** Organization MCP connectors (`/v1/mcp_servers`, docs/tools.md): the MCP servers an org's agents may use. */
import type { Deps } from '../../deps.ts';
import { orgOf } from '../auth.ts';
import { errorResponses } from '../schemas/common.ts';
import {
  McpServer,
  McpServerCreateBody,
  McpServerDeleted,
  McpServerList,
  McpServerListQuery,
  McpServerParams,
  McpServerUpdateBody,
} from '../schemas/mcp-servers.ts';
import type { App } from '../types.ts';

const tags = ['MCP servers'];

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
    handler: async (request, reply) => reply.code(201).send(await service.create(orgOf(request), request.body)),
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
    handler: async (request) => service.update(orgOf(request), request.params.id.toLowerCase(), request.body),
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
    handler: async (request) => service.delete(orgOf(request), request.params.id.toLowerCase()),
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
}
