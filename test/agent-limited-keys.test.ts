/**
 * Keys limited to named agents and read-only keys (docs/operations.md#api-key-scopes), over HTTP, once per
 * dialect. The routes come from the OpenAPI document, so none is missed: every authenticated route is classified
 * by http/agent-limits.ts; every route whose URL names an agent or a resource of one answers a key limited to
 * agent A with 404 for agent B's (as for another organization's); the lists leave B out; the bodies that name B
 * (sessions, Responses, Chat Completions, schedules) are refused; what acts on every agent is 403. And every write
 * route (POST, PUT, PATCH, DELETE) refuses a read-only key with 403. The CLI makes such keys.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SCOPES } from '../src/domain/auth/scopes.ts';
import { routeClass } from '../src/http/agent-limits.ts';
import { flows, type Json } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';
import { runCli } from './helpers/server-process.ts';

const METHODS = ['get', 'post', 'put', 'patch', 'delete'] as const;
const UNKNOWN = '00000000-0000-4000-8000-000000000000';

describe.each(dialects())('agent-limited and read-only keys (%s)', (dialect) => {
  let h: Harness;
  const flow = flows(() => h);
  let document: Json;
  let orgId: string;
  let agentA: string;
  let agentB: string;
  let limited: string;
  /** The resources of agent B, by the lookup names of http/agent-limits.ts. */
  const ofB: Record<string, string> = {};
  const ofA: Record<string, string> = {};

  const operations = () =>
    Object.entries(document.paths as Record<string, Json>).flatMap(([path, item]) =>
      METHODS.filter((method) => item[method] !== undefined).map((method) => ({
        path,
        method,
        url: path.replace(/\{(\w+)\}/g, ':$1'),
      })),
    );

  async function resourcesOf(agentId: string, into: Record<string, string>): Promise<void> {
    const { sessionId, accepted } = await flow.turn(agentId, `hello from ${agentId}`);
    into.session = sessionId;
    into.message = accepted.id;
    const run = await h.deps.storage.db
      .selectFrom('runs')
      .select('id')
      .where('session_id', '=', sessionId)
      .executeTakeFirstOrThrow();
    into.run = run.id;
    const response = await h.request('POST', '/v1/responses', { body: { model: agentId, input: 'hi' } });
    expect(response.status, response.text).toBe(200);
    into.response = json(response).id;
    into.conversation = `conv_${sessionId}`;
    const schedule = await h.request('POST', '/v1/schedules', {
      body: { name: 'nightly', agent_id: agentId, input: 'hello', interval_seconds: 86_400, enabled: false },
    });
    expect(schedule.status, schedule.text).toBe(201);
    into.schedule = json(schedule).id;
    const task = await h.request('POST', '/v1/tasks', { body: { prompt: 'hello', agentId } });
    expect(task.status, task.text).toBeLessThan(300);
    const taskId: string = json(task).id;
    into.task = taskId;
    into.workspace = (
      await h.deps.storage.db
        .selectFrom('tasks')
        .select('workspace_id')
        .where('id', '=', taskId)
        .executeTakeFirstOrThrow()
    ).workspace_id;
  }

  /** The path with its parameters filled with the resources of `of`. */
  function fill(path: string, of: Record<string, string>, agentId: string): string {
    const value = (name: string): string => {
      if (path.startsWith('/v1/agents/sessions/')) return of.session ?? UNKNOWN;
      if (path.startsWith('/v1/agents/{id}') && name === 'id') return agentId;
      if (name === 'agent_id') return agentId;
      if (name === 'conversation_id') return of.conversation ?? UNKNOWN;
      if (path.startsWith('/v1/sessions/') && name === 'id') return of.session ?? UNKNOWN;
      if (name === 'messageId') return of.message ?? UNKNOWN;
      if (path.startsWith('/v1/responses/') && name === 'id') return of.response ?? UNKNOWN;
      if (path.startsWith('/v1/runs/') && name === 'id') return of.run ?? UNKNOWN;
      if (path.startsWith('/v1/schedules/') && (name === 'id' || name === 'schedule_id')) {
        return path.includes('{schedule_id}') && name === 'id' ? UNKNOWN : (of.schedule ?? UNKNOWN);
      }
      if (path.startsWith('/v1/tasks/') && name === 'id') return of.task ?? UNKNOWN;
      if (name === 'project_id') return '1';
      return UNKNOWN;
    };
    return path.replace(/\{(\w+)\}/g, (_match, name: string) => value(name));
  }

  beforeAll(async () => {
    h = await createHarness(dialect);
    document = json(await h.request('GET', '/v1/openapi.json', { key: null }));
    const principal = await h.deps.auth.authenticate(h.key, Date.now());
    if (principal === null) throw new Error('harness key does not authenticate');
    orgId = principal.orgId;
    agentA = await flow.createAgent({ name: 'alpha' });
    agentB = await flow.createAgent({ name: 'bravo' });
    limited = await h.deps.orgs.createKey(orgId, SCOPES, undefined, null, [agentA]);
    await resourcesOf(agentA, ofA);
    await resourcesOf(agentB, ofB);
  });
  afterAll(() => h.close());

  it('classifies every authenticated route of the OpenAPI document', async () => {
    const unclassified: string[] = [];
    for (const { method, path, url } of operations()) {
      const anonymous = await h.request(method.toUpperCase(), fill(path, ofA, agentA), { key: null, body: {} });
      if (anonymous.status !== 401) continue;
      if (routeClass(method, url) === null) unclassified.push(`${method.toUpperCase()} ${path}`);
    }
    expect(unclassified).toEqual([]);
  });

  it("answers 404 for another agent's resources on every route that names one, and serves the key's own", async () => {
    const wrong: string[] = [];
    let checked = 0;
    for (const { method, path, url } of operations()) {
      if (routeClass(method, url) !== 'agent') continue;
      const target = fill(path, ofB, agentB);
      // The other agent's resource exists: the admin key does not get 404 for it on a GET.
      const response = await h.request(method.toUpperCase(), target, { key: limited, body: {} });
      checked += 1;
      // No workflow run is made here (they come from the older API's tool runs): an unknown id, whatever answers.
      if (path.startsWith('/v1/workflow-agents/') && response.status === 400) continue;
      if (response.status !== 404) wrong.push(`${method.toUpperCase()} ${target}: ${response.status}`);
    }
    expect(wrong).toEqual([]);
    expect(checked).toBeGreaterThan(30);
    // The key's own agent and its resources are served.
    for (const path of [
      `/v1/agents/${agentA}`,
      `/v1/sessions/${ofA.session}`,
      `/v1/sessions/${ofA.session}/messages`,
      `/v1/runs/${ofA.run}`,
      `/v1/runs/${ofA.run}/trace`,
      `/v1/responses/${ofA.response}`,
      `/v1/conversations/${ofA.conversation}`,
      `/v1/schedules/${ofA.schedule}`,
      `/v1/agents/${agentA}/versions`,
    ]) {
      const response = await h.request('GET', path, { key: limited });
      expect(response.status, `${path}: ${response.text}`).toBe(200);
    }
    // The same other-agent resources are there for a key of every agent.
    expect((await h.request('GET', `/v1/sessions/${ofB.session}`)).status).toBe(200);
    expect((await h.request('GET', `/v1/runs/${ofB.run}`)).status).toBe(200);
  });

  it('leaves the other agents out of the lists', async () => {
    const ids = async (path: string) => {
      const response = await h.request('GET', path, { key: limited });
      expect(response.status, `${path}: ${response.text}`).toBe(200);
      const body = json(response);
      const list = (Object.values(body).find(Array.isArray) ?? []) as Json[];
      return JSON.stringify(list);
    };
    for (const path of ['/v1/agents', '/v1/sessions', '/v1/runs', '/v1/schedules', '/v1/models', '/v1/a2a/agents']) {
      const listed = await ids(path);
      expect(listed, path).not.toContain(agentB);
    }
    expect(await ids('/v1/agents')).toContain(agentA);
    expect(await ids('/v1/sessions')).toContain(ofA.session);
    expect(await ids('/v1/runs')).toContain(ofA.run);
    expect(await ids('/v1/schedules')).toContain(ofA.schedule);
    // The admin key still sees both.
    const all = JSON.stringify(json(await h.request('GET', '/v1/agents')));
    expect(all).toContain(agentB);
  });

  it('refuses bodies that name another agent, and what acts on every agent', async () => {
    const refused: [string, string, Json, number][] = [
      ['POST', '/v1/sessions', { agentId: agentB }, 404],
      ['POST', '/v1/responses', { model: agentB, input: 'hi' }, 404],
      ['POST', '/v1/responses', { model: 'bravo', input: 'hi' }, 404],
      ['POST', '/v1/responses', { model: agentA, input: 'hi', conversation: ofB.conversation }, 404],
      ['POST', '/v1/responses', { model: agentA, input: 'hi', previous_response_id: ofB.response }, 404],
      ['POST', '/v1/responses/input_tokens', { model: agentB, input: 'hi' }, 404],
      ['POST', '/v1/chat/completions', { model: agentB, messages: [{ role: 'user', content: 'hi' }] }, 404],
      ['POST', '/v1/schedules', { name: 'x', agent_id: agentB, input: 'hi', interval_seconds: 3600 }, 404],
      ['PATCH', `/v1/schedules/${ofA.schedule}`, { agent_id: agentB }, 404],
      ['POST', '/v1/conversations', { agent: agentB }, 404],
      ['POST', '/v1/tasks', { prompt: 'hi' }, 404],
      ['POST', '/v1/tasks', { prompt: 'hi', agentId: agentA, workspaceId: ofB.workspace }, 404],
      [
        'POST',
        '/v1/schedules',
        { name: 'x', agent_id: agentA, input: 'hi', interval_seconds: 60, session_id: ofB.session },
        404,
      ],
      ['GET', `/v1/runs?agent_id=${agentB}`, {}, 404],
      ['GET', `/v1/runs?conversation_id=${ofB.conversation}`, {}, 404],
      ['GET', `/v1/sessions?agentId=${agentB}`, {}, 404],
      ['GET', '/v1/models/bravo', {}, 404],
      ['GET', `/v1/models/${agentB}`, {}, 404],
      ['POST', '/v1/agents', { name: 'charlie' }, 403],
      ['POST', '/v1/apply', { agents: [] }, 403],
      ['POST', '/v1/mcp', { jsonrpc: '2.0', id: 1, method: 'tools/list' }, 403],
    ];
    for (const [method, path, body, status] of refused) {
      const response = await h.request(method, path, method === 'GET' ? { key: limited } : { key: limited, body });
      expect(response.status, `${method} ${path} ${JSON.stringify(body)}: ${response.text}`).toBe(status);
    }
    const own = await h.request('POST', '/v1/sessions', { key: limited, body: { agentId: agentA } });
    expect(own.status, own.text).toBe(201);
    const reply = await h.request('POST', '/v1/responses', { key: limited, body: { model: 'alpha', input: 'hi' } });
    expect(reply.status, reply.text).toBe(200);
  });

  it('refuses a read-only key on every write route, and serves its reads', async () => {
    const readOnly = await h.deps.orgs.createKey(
      orgId,
      SCOPES.filter((scope) => scope.endsWith(':read')),
    );
    const accepted: string[] = [];
    let checked = 0;
    for (const { method, path } of operations()) {
      // Counting a Response's input tokens is a read (sessions:read), sent as a POST for its body.
      if (method === 'get' || path === '/v1/responses/input_tokens') continue;
      const target = fill(path, ofA, agentA);
      const anonymous = await h.request(method.toUpperCase(), target, { key: null, body: {} });
      if (anonymous.status !== 401) continue;
      const response = await h.request(method.toUpperCase(), target, { key: readOnly, body: {} });
      checked += 1;
      if (response.status !== 403) accepted.push(`${method.toUpperCase()} ${path}: ${response.status}`);
    }
    expect(accepted).toEqual([]);
    expect(checked).toBeGreaterThan(40);
    for (const path of [
      '/v1/agents',
      `/v1/sessions/${ofA.session}`,
      '/v1/runs',
      '/v1/files',
      '/v1/webhook_endpoints',
    ]) {
      const response = await h.request('GET', path, { key: readOnly });
      expect(response.status, `${path}: ${response.text}`).toBe(200);
    }
  });

  it('agentry keys create --agents --read-only makes such a key; an unknown agent is refused', async () => {
    const { config } = h.deps;
    const env: Record<string, string> = { AGENTRY_DATA_DIR: config.dataDir, LOG_LEVEL: 'warn' };
    if (config.databaseUrl !== null) env.DATABASE_URL = config.databaseUrl;
    if (config.databaseSchema !== null) env.AGENTRY_DATABASE_SCHEMA = config.databaseSchema;
    const made = runCli(['keys', 'create', '--org', 'default', '--agents', agentA, '--read-only'], env);
    expect(made.status, made.stderr).toBe(0);
    const key = made.stdout.trim();
    const unknown = runCli(['keys', 'create', '--org', 'default', '--agents', `${agentA},${UNKNOWN}`], env);
    expect(unknown.status).toBe(1);
    expect(unknown.stderr).toContain(UNKNOWN);
    const listed = runCli(['keys', 'list', '--org', 'default'], env);
    expect(listed.stdout).toContain(agentA);
    const agents = JSON.stringify(json(await h.request('GET', '/v1/agents', { key })));
    expect(agents).toContain(agentA);
    expect(agents).not.toContain(agentB);
    expect((await h.request('GET', `/v1/agents/${agentB}`, { key })).status).toBe(404);
    expect((await h.request('POST', '/v1/sessions', { key, body: { agentId: agentA } })).status).toBe(403);
    const organization = json(await h.request('GET', '/v1/organization', { key }));
    expect(organization.api_key.scopes.every((scope: string) => scope.endsWith(':read'))).toBe(true);
  });
});
