/**
 * Keys limited to named agents (`agentry keys create --agents a,b`; docs/operations.md#api-key-scopes): such a key
 * sees and uses only those agents. Every route falls into one class, by its URL pattern (`routeClass`):
 * - `agent`: the URL names an agent, or a resource of one (a session, conversation, Response, run, schedule,
 *   Task, workflow run): another agent's is a 404, as another organization's is;
 * - `list`: the answer lists agents or what belongs to them: the other agents' entries are left out;
 * - `refused`: what acts on agents the key is not limited to (creating agents, agents as code and its export,
 *   the organization's MCP endpoint, which serves every agent, usage over every agent, the audit log of the
 *   whole organization): 403;
 * - `free`: touches no agent (files, webhooks, connectors, the organization, the probes).
 * On every route, an agent named in the body or query (`agentId`, `agent_id`, `agent`, the `model` of the
 * OpenAI-shaped doors, a `conversation` or `previous_response_id`) must be one of the key's, and a request that
 * names none where the organization's default agent is used must be allowed that agent.
 * test/agent-limited-keys.test.ts classifies every route of the OpenAPI document with `routeClass`, so a new route
 * cannot be left out.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Deps } from '../deps.ts';
import { agentRefOf } from '../domain/responses/agent-ref.ts';
import { AppError } from '../errors/app-error.ts';
import type { Executor } from '../storage/db.ts';

export type RouteClass = 'agent' | 'list' | 'refused' | 'free';

/** What a path parameter names, and how to find its agent. */
type Lookup = (db: Executor, orgId: string, value: string) => Promise<string | null | undefined>;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const withoutPrefix = (value: string, prefix: string) =>
  (value.startsWith(prefix) ? value.slice(prefix.length) : value).toLowerCase();

/** The agent of a resource: its id, null when it has none (yet), undefined when there is no such resource. */
const sessionAgent: Lookup = async (db, orgId, id) =>
  (
    await db
      .selectFrom('sessions')
      .select('agent_id')
      .where('id', '=', id.toLowerCase())
      .where('org_id', '=', orgId)
      .executeTakeFirst()
  )?.agent_id;

const LOOKUPS = {
  agent: async (_db, _orgId, id) => id.toLowerCase(),
  session: sessionAgent,
  conversation: (db, orgId, id) => sessionAgent(db, orgId, withoutPrefix(id, 'conv_')),
  response: async (db, orgId, id) =>
    (
      await db
        .selectFrom('messages')
        .select('agent_id')
        .where('id', '=', withoutPrefix(id, 'resp_'))
        .where('org_id', '=', orgId)
        .executeTakeFirst()
    )?.agent_id,
  run: async (db, orgId, id) =>
    (
      await db
        .selectFrom('runs')
        .select('agent_id')
        .where('id', '=', id.toLowerCase())
        .where('org_id', '=', orgId)
        .executeTakeFirst()
    )?.agent_id,
  schedule: async (db, orgId, id) =>
    (
      await db
        .selectFrom('schedules')
        .select('agent_id')
        .where('id', '=', id.toLowerCase())
        .where('org_id', '=', orgId)
        .executeTakeFirst()
    )?.agent_id,
  task: async (db, orgId, id) =>
    (
      await db
        .selectFrom('tasks')
        .select('agent_id')
        .where('id', '=', id.toLowerCase())
        .where('org_id', '=', orgId)
        .executeTakeFirst()
    )?.agent_id,
  workflowRun: async (db, orgId, id) =>
    (
      await db
        .selectFrom('workflow_runs')
        .select('agent_id')
        .where('id', '=', id.toLowerCase())
        .where('org_id', '=', orgId)
        .executeTakeFirst()
    )?.agent_id,
} satisfies Record<string, Lookup>;

/** URL prefixes whose parameter names an agent or a resource of one: the first that matches applies. */
const PARAMETERS: readonly [prefix: string, param: string, lookup: Lookup][] = [
  ['/v1/agents/sessions/:id', 'id', LOOKUPS.session],
  ['/v1/agents/:id', 'id', LOOKUPS.agent],
  ['/api/sdk/p/:project_id/a/:agent_id', 'agent_id', LOOKUPS.agent],
  ['/v1/sessions/:id', 'id', LOOKUPS.session],
  ['/v1/conversations/:conversation_id', 'conversation_id', LOOKUPS.conversation],
  ['/v1/responses/:id', 'id', LOOKUPS.response],
  ['/v1/runs/:id', 'id', LOOKUPS.run],
  ['/v1/schedules/:schedule_id', 'schedule_id', LOOKUPS.schedule],
  ['/v1/schedules/:id', 'id', LOOKUPS.schedule],
  ['/v1/tasks/:id', 'id', LOOKUPS.task],
  ['/v1/workflow-agents/runs/:id', 'id', LOOKUPS.workflowRun],
];

/** Lists of agents or of what belongs to them (GET), filtered to the key's agents. */
const LISTS = new Set([
  '/v1/agents',
  '/v1/a2a/agents',
  '/v1/sessions',
  '/v1/runs',
  '/v1/schedules',
  '/v1/approvals',
  '/v1/tasks',
  '/v1/tools',
  '/v1/models',
  '/v1/models/:id',
  '/api/sdk/threads/:thread_id/messages',
]);

/** Routes a limited key may not call: `METHOD url`, or `* url` for every method. */
const REFUSED = new Set([
  'POST /v1/agents',
  'POST /v1/apply',
  '* /v1/export',
  '* /v1/mcp',
  '* /v1/usage',
  // Changes to every agent and to the organization, whoever made them.
  '* /v1/audit_log',
]);

/**
 * Routes with no agent in their URL: they touch none (files, webhooks, connectors, the organization), or name
 * their agent in the body (creating sessions, schedules, Tasks, Responses, Chat Completions, conversations), which
 * the hook checks on every route.
 */
const FREE_PREFIXES = [
  '/v1/files',
  '/api/sdk/files',
  '/api/sdk/threads',
  '/v1/webhook_endpoints',
  '/v1/webhook_event_types',
  '/v1/webhooks',
  '/v1/mcp_servers',
  '/v1/oauth',
  '/v1/organization',
  '/v1/openapi',
  '/v1/conversations',
  '/v1/responses',
  '/v1/chat/completions',
  '/v1/sessions',
  '/v1/schedules',
  '/v1/tasks',
  '/v1/tools',
];

const under = (url: string, prefix: string) => url === prefix || url.startsWith(`${prefix}/`);

/**
 * The class of a route, by its method and URL pattern (as Fastify and the OpenAPI document spell it); null for a
 * route none of the tables covers, which a limited key may not call (test/agent-limited-keys.test.ts finds none).
 */
export function routeClass(method: string, url: string): RouteClass | null {
  if (REFUSED.has(`${method.toUpperCase()} ${url}`) || REFUSED.has(`* ${url}`)) return 'refused';
  if (method.toUpperCase() === 'GET' && LISTS.has(url)) return 'list';
  if (PARAMETERS.some(([prefix]) => under(url, prefix))) return 'agent';
  if (FREE_PREFIXES.some((prefix) => under(url, prefix))) return 'free';
  return null;
}

const limitedMessage = 'This API key is limited to named agents';

function notFoundFor(url: string): AppError {
  return new AppError(
    'not_found',
    `${
      url
        .split('/')
        .filter((part) => part !== '' && !part.startsWith(':'))
        .pop() ?? 'resource'
    } not found`,
  );
}

/** The string fields of a body or query that name an agent, or a resource of one. */
function namedResources(value: unknown): [lookup: Lookup, id: string][] {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return [];
  const fields = value as Record<string, unknown>;
  const found: [Lookup, string][] = [];
  for (const name of ['agentId', 'agent_id', 'agent']) {
    const field = fields[name];
    if (typeof field === 'string' && field !== '') found.push([LOOKUPS.agent, field]);
  }
  for (const name of ['sessionId', 'session_id', 'workspaceId']) {
    const field = fields[name];
    if (typeof field === 'string' && field !== '') found.push([LOOKUPS.session, field]);
  }
  const conversation = fields.conversation ?? fields.conversation_id;
  const conversationId =
    typeof conversation === 'string'
      ? conversation
      : typeof conversation === 'object' &&
          conversation !== null &&
          typeof (conversation as { id?: unknown }).id === 'string'
        ? (conversation as { id: string }).id
        : null;
  if (conversationId !== null) found.push([LOOKUPS.conversation, conversationId]);
  if (typeof fields.previous_response_id === 'string') found.push([LOOKUPS.response, fields.previous_response_id]);
  return found;
}

/** The routes that run the organization's default agent when the body names none. */
const DEFAULT_AGENT_FIELDS: Record<string, string> = {
  'POST /v1/sessions': 'agentId',
  'POST /v1/tasks': 'agentId',
};
/** The routes whose body's `model` names the agent (agent-ref.ts). */
const MODEL_ROUTES = new Set([
  'POST /v1/responses',
  'POST /v1/responses/input_tokens',
  'POST /v1/responses/compact',
  'POST /v1/chat/completions',
]);

export function createAgentLimitHook(deps: Pick<Deps, 'storage' | 'agents'>) {
  const db = () => deps.storage.db;

  async function defaultAgentId(orgId: string): Promise<string | undefined> {
    return (
      await db()
        .selectFrom('agents')
        .select('id')
        .where('org_id', '=', orgId)
        .where('is_default', '=', 1)
        .executeTakeFirst()
    )?.id;
  }

  return {
    /** preValidation: refuses what the key's agents do not cover, before the body is validated (a 404 whatever it holds). */
    async check(request: FastifyRequest, _reply: FastifyReply): Promise<void> {
      const principal = request.principal;
      if (principal === null || principal.agentIds === null) return;
      const allowed = principal.agentIds;
      const { orgId } = principal;
      const url = request.routeOptions.url ?? '';
      const method = request.method.toUpperCase();
      const kind = routeClass(method, url);
      if (kind === 'refused' || kind === null) {
        throw new AppError('insufficient_scopes', `${limitedMessage}: ${method} ${url} is not limited to agents`);
      }
      const refuse = (agentId: string | null | undefined) => {
        if (agentId !== null && agentId !== undefined && !allowed.has(agentId.toLowerCase())) throw notFoundFor(url);
      };
      const params = (request.params ?? {}) as Record<string, string>;
      for (const [prefix, param, lookup] of PARAMETERS) {
        if (!under(url, prefix)) continue;
        const value = params[param];
        if (typeof value === 'string') refuse(await lookup(db(), orgId, value));
        break;
      }
      if (url === '/v1/models/:id' && typeof params.id === 'string') {
        const ref = agentRefOf(params.id);
        for (const id of 'id' in ref ? [ref.id] : await deps.agents.idsNamed(orgId, ref.name)) refuse(id);
      }
      for (const source of [request.body, request.query]) {
        for (const [lookup, value] of namedResources(source)) refuse(await lookup(db(), orgId, value));
      }
      const body = (typeof request.body === 'object' && request.body !== null ? request.body : {}) as Record<
        string,
        unknown
      >;
      const defaultField = DEFAULT_AGENT_FIELDS[`${method} ${url}`];
      if (defaultField !== undefined && (body[defaultField] === undefined || body[defaultField] === null)) {
        refuse((await defaultAgentId(orgId)) ?? null);
      }
      if (MODEL_ROUTES.has(`${method} ${url}`)) {
        const model = body.model;
        if (typeof model !== 'string' || model === '') refuse((await defaultAgentId(orgId)) ?? null);
        else {
          const ref = agentRefOf(model);
          const ids = 'id' in ref ? [ref.id] : await deps.agents.idsNamed(orgId, ref.name);
          for (const id of ids) refuse(id);
        }
      }
    },

    /** preSerialization: the entries of a list that belong to other agents are left out. */
    async filter(request: FastifyRequest, _reply: FastifyReply, payload: unknown): Promise<unknown> {
      const principal = request.principal;
      if (principal === null || principal.agentIds === null) return payload;
      const url = request.routeOptions.url ?? '';
      if (routeClass(request.method, url) !== 'list') return payload;
      return filtered(payload, principal.agentIds, url);
    },
  };
}

/** The agent an entry of a list belongs to, or null when it names none. */
function agentOfEntry(entry: unknown, url: string): string | null {
  if (typeof entry !== 'object' || entry === null) return null;
  const fields = entry as Record<string, unknown>;
  for (const name of ['agent_id', 'agentId']) {
    if (typeof fields[name] === 'string') return fields[name] as string;
  }
  const agent = fields.agent;
  if (typeof agent === 'object' && agent !== null && typeof (agent as { id?: unknown }).id === 'string') {
    return (agent as { id: string }).id;
  }
  // An agent card names its agent as its skill.
  const skills = fields.skills;
  if (url === '/v1/a2a/agents' && Array.isArray(skills)) {
    const skill: unknown = skills[0];
    if (typeof skill === 'object' && skill !== null && typeof (skill as { id?: unknown }).id === 'string') {
      return (skill as { id: string }).id;
    }
  }
  // Agents (and the agents /v1/models lists as models) are their own entries.
  if (
    (url === '/v1/agents' || url.startsWith('/v1/models') || url === '/v1/a2a/agents') &&
    typeof fields.id === 'string'
  ) {
    return UUID.test(fields.id) ? fields.id : null;
  }
  return null;
}

function filtered(payload: unknown, allowed: ReadonlySet<string>, url: string): unknown {
  if (typeof payload !== 'object' || payload === null) return payload;
  if (Array.isArray(payload)) {
    return payload.filter((entry) => {
      const agent = agentOfEntry(entry, url);
      return agent === null || allowed.has(agent.toLowerCase());
    });
  }
  // A single model (GET /v1/models/:id) is checked before the handler; a list is the first array of the answer.
  const out: Record<string, unknown> = { ...(payload as Record<string, unknown>) };
  for (const [key, value] of Object.entries(out)) {
    if (Array.isArray(value)) {
      out[key] = filtered(value, allowed, url);
      break;
    }
  }
  return out;
}
