/**
 * Agentry as an MCP server (docs/mcp-server.md): Streamable HTTP at /v1/mcp (the organization's agents, through
 * `list_agents` and `message_agent`) and at /v1/agents/{id}/mcp (one agent, one `message` tool).
 *
 * Both protocol generations are served: 2026-07-28 requests (stateless, `server/discover`, the Mcp-Method and
 * Mcp-Name headers) by the SDK's per-request handler, 2025-era ones (`initialize`, sessions) by transports kept per
 * session (http/mcp/legacy-sessions.ts). A request is authenticated by the API key as any other route is; without
 * one the 401 carries a WWW-Authenticate header naming the protected-resource metadata (RFC 9728) served here, which
 * says a bearer API key is how to call. An Origin header naming a foreign host is refused (DNS rebinding).
 */
import { Readable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { Deps } from '../../deps.ts';
import { orgOf } from '../auth.ts';
import type { McpEndpoint, ToolScope } from '../mcp/endpoint.ts';
import { errorResponses, IdParams } from '../schemas/common.ts';
import type { App } from '../types.ts';

const tags = ['MCP'];
const METADATA_PREFIX = '/.well-known/oauth-protected-resource';

const McpBody = Type.Unknown({ description: 'A JSON-RPC message (or a batch of them) of the MCP protocol' });

const McpResponse = Type.Unsafe({
  description:
    'The JSON-RPC response, or (text/event-stream) the messages of the request ending with its response: progress notifications while an agent works, then the tool result',
  content: {
    'application/json': { schema: { type: 'object', additionalProperties: true } },
    'text/event-stream': { schema: { type: 'string' } },
  },
});

const JsonRpcError = Type.Object(
  {
    jsonrpc: Type.Literal('2.0'),
    error: Type.Object({ code: Type.Integer(), message: Type.String(), data: Type.Optional(Type.Unknown()) }),
    id: Type.Union([Type.String(), Type.Number(), Type.Null()]),
  },
  { description: 'A JSON-RPC error of the MCP transport' },
);

const ResourceMetadata = Type.Object(
  {
    resource: Type.String({ description: 'The MCP endpoint this document describes' }),
    resource_name: Type.String(),
    bearer_methods_supported: Type.Array(Type.String(), { description: '`header`: Authorization: Bearer <API key>' }),
    authorization_servers: Type.Array(Type.String(), {
      description: 'Empty: no OAuth authorization server issues tokens; an Agentry API key is the bearer token',
    }),
    scopes_supported: Type.Array(Type.String()),
    resource_documentation: Type.String(),
  },
  { additionalProperties: true, description: 'OAuth 2.0 Protected Resource Metadata (RFC 9728)' },
);

function baseUrl(request: FastifyRequest): string {
  return `${request.protocol}://${request.host}`;
}

/**
 * The metadata document of the endpoint a request is for: /v1/mcp has its own; the agent endpoints share the
 * server's (its resource, the origin, covers each of them, and it names no agent a public route could not check).
 */
function metadataPath(request: FastifyRequest): string {
  const path = new URL(request.url, 'http://x').pathname.replace(/\/+$/, '');
  return path === '/v1/mcp' ? `${METADATA_PREFIX}/v1/mcp` : METADATA_PREFIX;
}

/** A 401 of an MCP endpoint names its metadata document, so clients learn a bearer API key is what to send. */
async function challenge(request: FastifyRequest, reply: FastifyReply, payload: unknown) {
  if (reply.statusCode === 401) {
    const metadata = `${baseUrl(request)}${metadataPath(request)}`;
    reply.header('www-authenticate', `Bearer resource_metadata="${metadata}"`);
  }
  return payload;
}

function webRequest(request: FastifyRequest, signal: AbortSignal): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(request.headers)) {
    if (typeof value === 'string') headers.set(name, value);
    else if (Array.isArray(value)) for (const each of value) headers.append(name, each);
  }
  return new Request(`${baseUrl(request)}${request.url}`, { method: request.method, headers, signal });
}

function sendWeb(reply: FastifyReply, response: Response): FastifyReply {
  reply.code(response.status);
  response.headers.forEach((value, name) => {
    reply.header(name, value);
  });
  if (response.body === null) return reply.send();
  // Streamed as it comes: an SSE response carries progress while the agent works.
  return reply.send(Readable.fromWeb(response.body));
}

export function mcpEndpointRoutes(app: App, deps: Deps): void {
  /** The SDK side, loaded on the first MCP request (http/mcp/endpoint.ts). */
  let endpoint: Promise<McpEndpoint> | null = null;
  const load = (): Promise<McpEndpoint> => {
    endpoint ??= import('../mcp/endpoint.ts').then(({ createMcpEndpoint }) =>
      createMcpEndpoint(
        deps,
        (error) => app.log.error({ err: error }, 'MCP tool call failed'),
        (error) => app.log.debug({ err: error }, 'MCP request rejected'),
      ),
    );
    return endpoint;
  };
  app.addHook('preClose', async () => {
    if (endpoint !== null) await (await endpoint).close();
  });

  async function serve(request: FastifyRequest, reply: FastifyReply, scope: ToolScope, owner: string) {
    // The request's signal aborts when the client goes away, which cancels the call (and so the agent's turn).
    const gone = new AbortController();
    const onClose = () => {
      if (!reply.raw.writableFinished) gone.abort();
    };
    reply.raw.once('close', onClose);
    const web = webRequest(request, gone.signal);
    const served = await load();
    return sendWeb(reply, await served.serve(web, request.body ?? undefined, scope, owner));
  }

  const responses = { 200: McpResponse, 202: Type.Null({ description: 'A notification or response accepted' }) };
  // Refusals of the MCP transport (Accept, session, protocol version, Origin) are JSON-RPC errors; those of the API
  // (key, scopes, agent, body size) are the API's errors.
  const either = Type.Union([errorResponses(400)[400] ?? Type.Never(), JsonRpcError]);
  const errors = {
    ...errorResponses(401),
    ...Object.fromEntries([400, 403, 404, 405, 406, 409, 413, 415].map((status) => [status, either])),
  };
  const methods = [
    ['POST', 'Send an MCP message'],
    ['GET', 'Open the MCP event stream (2025-era sessions)'],
    ['DELETE', 'End an MCP session (2025-era sessions)'],
  ] as const;

  for (const [method, summary] of methods) {
    app.route({
      method,
      url: '/v1/mcp',
      config: { scopes: ['sessions:read', 'sessions:write'] },
      schema: {
        summary: `${summary}: the organization's agents`,
        description:
          'The MCP server of the organization (Streamable HTTP; protocol revisions 2026-07-28, 2025-11-25 and 2025-06-18). Tools: `list_agents`, and `message_agent`, which runs one turn of an agent (a Run with source `mcp`) and answers its reply with the session_id to continue the conversation; on 2025-11-25 sessions a long turn can run as an MCP task (tasks/get, tasks/result, tasks/list, tasks/cancel). See docs/mcp-server.md.',
        tags,
        ...(method === 'POST' ? { body: McpBody } : {}),
        response: { ...responses, ...errors },
      },
      onSend: challenge,
      handler: async (request, reply) => {
        const orgId = orgOf(request);
        return serve(request, reply, { orgId, agent: null }, `${orgId}:org`);
      },
    });

    app.route({
      method,
      url: '/v1/agents/:id/mcp',
      config: { scopes: ['sessions:read', 'sessions:write'] },
      schema: {
        summary: `${summary}: one agent`,
        description:
          "The MCP server of one agent (Streamable HTTP; protocol revisions 2026-07-28, 2025-11-25 and 2025-06-18) with one tool, `message`, which runs one turn of the agent (a Run with source `mcp`) and answers its reply with the session_id to continue the conversation (or, on 2025-11-25 sessions, runs it as an MCP task). 404 when the agent is not the organization's. See docs/mcp-server.md.",
        tags,
        params: IdParams,
        ...(method === 'POST' ? { body: McpBody } : {}),
        response: { ...responses, ...errors },
      },
      onSend: challenge,
      handler: async (request, reply) => {
        const orgId = orgOf(request);
        const agent = await deps.agents.get(orgId, request.params.id.toLowerCase());
        return serve(request, reply, { orgId, agent }, `${orgId}:${agent.id}`);
      },
    });
  }

  const metadata = (request: FastifyRequest, path: string) => ({
    resource: `${baseUrl(request)}${path}`,
    resource_name: 'Agentry MCP server',
    bearer_methods_supported: ['header'],
    authorization_servers: [],
    scopes_supported: ['sessions:read', 'sessions:write'],
    resource_documentation: `${baseUrl(request)}/docs#mcp`,
  });

  app.route({
    method: 'GET',
    url: `${METADATA_PREFIX}/v1/mcp`,
    config: { public: true },
    schema: {
      summary: 'MCP protected-resource metadata: the organization endpoint',
      description:
        'OAuth 2.0 Protected Resource Metadata (RFC 9728) of /v1/mcp: an Agentry API key with the scopes sessions:read and sessions:write (or tasks:read and tasks:write, which include them), sent as Authorization: Bearer, is how to call it (no OAuth authorization server issues tokens).',
      tags,
      response: { 200: ResourceMetadata },
    },
    handler: async (request) => metadata(request, '/v1/mcp'),
  });

  app.route({
    method: 'GET',
    url: METADATA_PREFIX,
    config: { public: true },
    schema: {
      summary: 'MCP protected-resource metadata: the agent endpoints',
      description:
        'OAuth 2.0 Protected Resource Metadata (RFC 9728) of the server as a whole, which covers every /v1/agents/{id}/mcp endpoint (it says how to authenticate, not which agents exist): an Agentry API key with the scopes sessions:read and sessions:write (or tasks:read and tasks:write, which include them), sent as Authorization: Bearer.',
      tags,
      response: { 200: ResourceMetadata },
    },
    handler: async (request) => metadata(request, '/'),
  });
}
