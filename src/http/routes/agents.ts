import type { Deps } from '../../deps.ts';
import { parseMcpServers } from '../../domain/agents/agent-validation.ts';
import { validationError } from '../../errors/app-error.ts';
import { actorOf, auditOf, hasScope, orgOf, requireScope } from '../auth.ts';
import { ignoreEmptyJsonBody } from '../bodiless.ts';
import {
  AgentCreateBody,
  AgentList,
  AgentUpdateBody,
  AgentUpdateHeaders,
  AgentVersion,
  AgentVersionList,
  AgentVersionListQuery,
  AgentVersionParams,
  AgentVersionQuery,
  AgentView,
} from '../schemas/agents.ts';
import { errorResponses, IdempotencyHeaders, IdParams, NoContent } from '../schemas/common.ts';
import { ApplyBody, ApplyResult, ExportResult } from '../schemas/documents.ts';
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

/**
 * The version a PATCH expects to replace: If-Match (`"3"` or `3`, as the schema admits) or the body's `version`;
 * both must agree when both are sent.
 */
function expectedVersion(header: string | undefined, body: number | undefined): number | undefined {
  const fromHeader = header === undefined ? undefined : Number(header.trim().replaceAll('"', ''));
  if (fromHeader !== undefined && body !== undefined && fromHeader !== body) {
    throw validationError('version', `version ${body} and If-Match ${fromHeader} disagree`);
  }
  return fromHeader ?? body;
}

const expecting = (version: number | undefined) => (version === undefined ? {} : { expectedVersion: version });

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
      const result = await deps.agents.create(
        orgOf(request),
        request.body,
        request.headers['idempotency-key'],
        actorOf(request),
        auditOf(request),
      );
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
        'Changes the given fields (at least one) and stores a new version (a change of budget alone keeps the version: budgets are not versioned, docs/budgets.md); affects future turns of existing and new sessions that are not pinned to a version. With If-Match: "<version>" (or a body `version`) the change applies only if that version is current, else 409 version_conflict with error.details.currentVersion. skills and networkPolicy cannot change once the workspace is provisioned (409 sandbox_provisioned).',
      tags,
      params: IdParams,
      headers: AgentUpdateHeaders,
      body: AgentUpdateBody,
      response: { 200: AgentView, ...errorResponses(400, 401, 403, 404, 409, 413) },
    },
    preValidation: async (request) => checkMcpServersFirst(request, deps),
    handler: async (request) => {
      const { version, ...change } = request.body;
      if (Object.keys(change).length === 0) throw validationError('body', 'name at least one field to change');
      return deps.agents.update(orgOf(request), request.params.id.toLowerCase(), change, {
        actor: actorOf(request),
        audit: auditOf(request),
        ...expecting(expectedVersion(request.headers['if-match'], version)),
      });
    },
  });

  app.route({
    method: 'GET',
    url: '/v1/agents/:id/versions',
    config: { scopes: ['agents:read'] },
    schema: {
      summary: 'List agent versions',
      description: 'Every kept version of the agent, newest first, with its config, who made it and when.',
      tags,
      params: IdParams,
      querystring: AgentVersionListQuery,
      response: { 200: AgentVersionList, ...errorResponses(400, 401, 403, 404) },
    },
    handler: async (request) => {
      const { limit, cursor } = request.query;
      return deps.agents.versions(orgOf(request), request.params.id.toLowerCase(), {
        limit,
        ...(cursor === undefined ? {} : { cursor }),
      });
    },
  });

  app.route({
    method: 'GET',
    url: '/v1/agents/:id/versions/:version',
    config: { scopes: ['agents:read'] },
    schema: {
      summary: 'Get an agent version',
      description:
        'One kept version. With diff_from=<n>, also `diff`: the fields changed from version n to this one, as JSON-pointer paths with before and after.',
      tags,
      params: AgentVersionParams,
      querystring: AgentVersionQuery,
      response: { 200: AgentVersion, ...errorResponses(400, 401, 403, 404) },
    },
    handler: async (request) =>
      deps.agents.version(
        orgOf(request),
        request.params.id.toLowerCase(),
        request.params.version,
        request.query.diff_from,
      ),
  });

  app.route({
    method: 'POST',
    url: '/v1/agents/:id/versions/:version/restore',
    config: { scopes: ['agents:write'] },
    schema: {
      summary: 'Restore an agent version',
      description:
        'Stores a new version whose config equals version n (later versions are kept). Honours If-Match like PATCH. Sessions that follow the latest version run it from their next turn.',
      tags,
      params: AgentVersionParams,
      headers: AgentUpdateHeaders,
      response: { 200: AgentView, ...errorResponses(400, 401, 403, 404, 409) },
    },
    onRequest: ignoreEmptyJsonBody,
    handler: async (request) =>
      deps.agents.restore(orgOf(request), request.params.id.toLowerCase(), request.params.version, {
        actor: actorOf(request),
        audit: auditOf(request),
        ...expecting(expectedVersion(request.headers['if-match'], undefined)),
      }),
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
      await deps.agents.delete(orgOf(request), request.params.id.toLowerCase(), auditOf(request));
      return reply.code(204).send(null);
    },
  });

  app.route({
    method: 'GET',
    url: '/v1/export',
    config: { scopes: ['agents:read'] },
    schema: {
      summary: 'Export agents, connectors, schedules and webhook endpoints as documents',
      description: `Agents as code (docs/agents-as-code.md): every MCP connector, agent, schedule and webhook endpoint of the organization as the document POST /v1/apply takes (applied back, it changes nothing), oldest first per kind, and the lock of their state now (agent versions, change markers of the others). Secrets are never written: connector secrets appear as \${NAME} references.`,
      tags,
      response: { 200: ExportResult, ...errorResponses(401, 403) },
    },
    handler: async (request) =>
      deps.agentApply.exportDocuments(orgOf(request), { endpoints: hasScope(request, 'webhooks:read') }),
  });

  app.route({
    method: 'POST',
    url: '/v1/apply',
    config: { scopes: ['agents:write'] },
    schema: {
      summary: 'Apply documents of agents, connectors, schedules and webhook endpoints',
      description: `Agents as code (docs/agents-as-code.md): plans each document against the resource of its kind and name (create, update with the changed fields, or unchanged) and, unless dry_run, applies the plan: connectors, then agents, then schedules and webhook endpoints. A resource changed since the lock recorded it is refused with 409 version_conflict (details name them) unless force. Connector secrets come from secrets (\${NAME} references). Answers the plan (with the signing secret of each webhook endpoint created, shown only there) and the new lock.`,
      tags,
      body: ApplyBody,
      response: { 200: ApplyResult, ...errorResponses(400, 401, 403, 409, 413) },
    },
    handler: async (request) => {
      const { documents, dry_run: dryRun = false, force = false, lock = null, secrets } = request.body;
      if (documents.some((document) => document.kind === 'webhook_endpoint')) {
        requireScope(request, 'webhooks:write', 'webhook endpoint documents');
      }
      const result = await deps.agentApply.apply(orgOf(request), documents, {
        dryRun,
        force,
        lock,
        ...(secrets === undefined ? {} : { secrets }),
        actor: actorOf(request),
        audit: auditOf(request),
      });
      return { dry_run: result.dryRun, plan: result.plan, lock: result.lock };
    },
  });
}
