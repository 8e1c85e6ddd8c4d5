import type { Deps } from '../../deps.ts';
import { parseMcpServers } from '../../domain/agents/agent-validation.ts';
import { orgOf } from '../auth.ts';
import { AgentCreateBody, AgentList, AgentUpdateBody, AgentView } from '../schemas/agents.ts';
import { errorResponses, IdempotencyHeaders, IdParams, NoContent } from '../schemas/common.ts';
import type { App } from '../types.ts';

const tags = ['Agents'];

/**
 * mcpServers entries are a union of four exact shapes; checking them before schema validation gives a precise
 * message ("mcpServers[2].toolkit must not have leading or trailing whitespace") instead of "must match anyOf".
 */
function checkMcpServersFirst(request: { body: unknown }, deps: Deps): void {
  const body = request.body;
  if (typeof body === 'object' && body !== null && 'mcpServers' in body && Array.isArray(body.mcpServers)) {
    parseMcpServers(body.mcpServers, {
      models: deps.models,
      allowInsecureDestinations: deps.config.allowInsecureDestinations,
    });
  }
}

export function agentRoutes(app: App, deps: Deps): void {
  app.route({
    method: 'GET',
    url: '/v1/agents',
    config: { scopes: ['agents:read'] },
    schema: { summary: 'List agents', tags, response: { 200: AgentList, ...errorResponses(401, 403) } },
    handler: async (request) => ({ data: await deps.agents.list(orgOf(request)) }),
  });

  app.route({
    method: 'POST',
    url: '/v1/agents',
    config: { scopes: ['agents:write'] },
    schema: {
      summary: 'Create an agent',
      description:
        'Creates a reusable Agent. An Idempotency-Key makes retries return the same Agent (201 again). Each {type:"url"} MCP server is discovered first (an unreachable server is a 400 naming mcpServers[i].url, and nothing is written) and registered as an organization connector, reused by URL; it is returned as {kind:"custom", serverId, name}.',
      tags,
      headers: IdempotencyHeaders,
      body: AgentCreateBody,
      response: { 201: AgentView, ...errorResponses(400, 401, 402, 403, 409, 413) },
    },
    preValidation: async (request) => checkMcpServersFirst(request, deps),
    handler: async (request, reply) => {
      const result = await deps.agents.create(orgOf(request), request.body, request.headers['idempotency-key']);
      if (result.replayed) reply.header('idempotent-replayed', 'true');
      return reply.code(201).send(result.body);
    },
  });

  app.route({
    method: 'GET',
    url: '/v1/agents/:id',
    config: { scopes: ['agents:read'] },
    schema: {
      summary: 'Get an agent',
      description:
        'The agent, with warnings: what it configures that this deployment cannot run, as every message accepted for it says (tool_unavailable, skill_unavailable, …), and model_not_configured when its model provider has no API key here.',
      tags,
      params: IdParams,
      response: { 200: AgentView, ...errorResponses(400, 401, 403, 404) },
    },
    handler: async (request) => deps.agents.view(orgOf(request), request.params.id.toLowerCase()),
  });

  app.route({
    method: 'PATCH',
    url: '/v1/agents/:id',
    config: { scopes: ['agents:write'] },
    schema: {
      summary: 'Update an agent',
      description:
        'Changes the given fields (at least one) and stores a new version; affects future turns of existing and new sessions. skills and networkPolicy cannot change once the workspace is provisioned (409 sandbox_provisioned).',
      tags,
      params: IdParams,
      body: AgentUpdateBody,
      response: { 200: AgentView, ...errorResponses(400, 401, 403, 404, 409, 413) },
    },
    preValidation: async (request) => checkMcpServersFirst(request, deps),
    handler: async (request) => deps.agents.update(orgOf(request), request.params.id.toLowerCase(), request.body),
  });

  app.route({
    method: 'DELETE',
    url: '/v1/agents/:id',
    config: { scopes: ['agents:write'] },
    schema: {
      summary: 'Delete an agent',
      description: "409 while sessions reference the agent, and for the organization's default agent.",
      tags,
      params: IdParams,
      response: { 204: NoContent, ...errorResponses(400, 401, 403, 404, 409) },
    },
    handler: async (request, reply) => {
      await deps.agents.delete(orgOf(request), request.params.id.toLowerCase());
      return reply.code(204).send(null);
    },
  });
}
