/**
 * Invariants over the whole route table: every route is documented and guarded, the OpenAPI document is valid,
 * and no route that takes an id lets one organization reach another's resource.
 */
import { randomBytes } from 'node:crypto';
import SwaggerParser from '@apidevtools/swagger-parser';
import type { RouteOptions } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../src/app.ts';
import { createMcpServerStore } from '../src/domain/mcp-servers/mcp-server-store.ts';
import { createSecretBox } from '../src/lib/secret-box.ts';
import { createHarness, type Harness, json } from './helpers/harness.ts';

describe('API contract', () => {
  let h: Harness;
  let routes: RouteOptions[];
  beforeAll(async () => {
    h = await createHarness('sqlite');
    routes = (await buildApp(h.deps)).routes;
  });
  afterAll(() => h.close());

  it('has no duplicate METHOD path', () => {
    const keys = routes.map((route) => `${String(route.method)} ${route.url}`);
    expect(new Set(keys).size).toBe(keys.length);
  });

  it('gives every route a summary, tags, response schemas and either scopes, public or admin', () => {
    for (const route of routes) {
      const name = `${String(route.method)} ${route.url}`;
      const schema = route.schema as Record<string, unknown> | undefined;
      expect(schema, name).toBeDefined();
      expect(typeof schema?.summary, name).toBe('string');
      expect(Array.isArray(schema?.tags), name).toBe(true);
      expect(Object.keys((schema?.response as object | undefined) ?? {}).length, name).toBeGreaterThan(0);
      const config = route.config as
        | { scopes?: string[]; public?: boolean; anyKey?: boolean; admin?: boolean }
        | undefined;
      const guarded = (config?.scopes?.length ?? 0) > 0 || (config?.scopes !== undefined && config.anyKey === true);
      expect(
        guarded || config?.public === true || config?.admin === true,
        `${name} needs scopes, anyKey, public or admin`,
      ).toBe(true);
      if (route.url.includes(':')) expect(schema?.params, `${name} path params need a schema`).toBeDefined();
    }
  });

  it('serves a valid OpenAPI 3.1 document covering every route', async () => {
    const response = await h.request('GET', '/v1/openapi.json', { key: null });
    expect(response.status).toBe(200);
    const document = json(response);
    expect(document.openapi).toBe('3.1.0');
    await SwaggerParser.validate(structuredClone(document) as never);
    for (const route of routes) {
      const path = route.url.replace(/:([A-Za-z_]+)/g, '{$1}');
      expect(
        document.paths[path]?.[String(route.method).toLowerCase()],
        `${String(route.method)} ${path}`,
      ).toBeDefined();
    }
    expect(document.paths['/v1/agents'].post.security).toEqual([{ BearerAuth: [] }, { ApiKey: [] }]);
    expect(document.paths['/healthz'].get.security).toEqual([]);
  });

  it('serves the same document as Markdown', async () => {
    const response = await h.request('GET', '/v1/openapi.md', { key: null });
    expect(response.status).toBe(200);
    expect(String(response.headers['content-type'])).toContain('text/markdown');
    expect(response.text).toContain('### POST /v1/agents');
    expect(response.text).toContain('### DELETE /v1/sessions/{id}');
  });

  it('answers 404 on every id route when the id belongs to another organization', async () => {
    const other = await h.createOrg('contract-other');
    const agent = json(await h.request('POST', '/v1/agents', { key: other.key, body: { name: 'theirs' } })).agent;
    // Before the session, whose agent.session.created event it then subscribes to.
    const hook = json(
      await h.request('POST', '/v1/webhook_endpoints', {
        key: other.key,
        body: { name: 'theirs', url: 'https://93.184.215.14/hook', event_types: ['agent.session.created'] },
      }),
    );
    const session = json(
      await h.request('POST', '/v1/sessions', { key: other.key, body: { agentId: agent.id } }),
    ).session;
    const message = json(
      await h.request('POST', `/v1/sessions/${session.id}/messages`, {
        key: other.key,
        headers: { 'idempotency-key': 'contract' },
        body: { parts: [{ type: 'text', text: 'ask hello?' }] },
      }),
    );
    const item = await h.deps.storage.db
      .selectFrom('items')
      .select('id')
      .where('session_id', '=', session.id)
      .executeTakeFirstOrThrow();
    const boundary = 'contract-boundary';
    const file = json(
      await h.request('POST', '/v1/files', {
        key: other.key,
        headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
        rawBody: `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="theirs.txt"\r\nContent-Type: text/plain\r\n\r\ntheirs\r\n--${boundary}--\r\n`,
      }),
    );
    const event = await h.deps.storage.db
      .selectFrom('webhook_events')
      .select('id')
      .where('org_id', '=', other.orgId)
      .executeTakeFirstOrThrow();
    // Connectors are registered by discovering a real server (test/mcp-servers.test.ts); stored directly here.
    const connector = (
      await createMcpServerStore(createSecretBox({ configuredKey: randomBytes(32), keyFile: '/nonexistent' })).insert(
        h.deps.storage.db,
        { orgId: other.orgId, name: 'theirs', url: 'https://mcp.example.com/theirs', headers: {}, discovery: null },
        Date.now(),
      )
    ).row;
    const task = json(await h.request('POST', '/v1/tasks', { key: other.key, body: { prompt: 'theirs' } }));
    const legacyHook = json(
      await h.request('POST', '/v1/webhooks', {
        key: other.key,
        body: { url: 'https://93.184.215.14/legacy', events: ['task.created'] },
      }),
    );
    const thread = json(await h.request('POST', '/api/sdk/threads', { key: other.key, body: {} }));
    const otherProject = json(await h.request('GET', '/v1/organization', { key: other.key })).project_id;
    const toolRun = json(
      await h.request('POST', `/api/sdk/p/${otherProject}/a/${agent.id}/r`, {
        key: other.key,
        body: { inputs: ['theirs'], blocking: false },
      }),
    ).run;
    const schedule = json(
      await h.request('POST', '/v1/schedules', {
        key: other.key,
        body: { name: 'theirs', agent_id: agent.id, input: 'hi', cron: '0 0 1 1 *', enabled: false },
      }),
    );
    const memory = json(
      await h.request('POST', `/v1/agents/${agent.id}/memories`, { key: other.key, body: { content: 'theirs' } }),
    );
    const scheduleRun = json(await h.request('POST', `/v1/schedules/${schedule.id}/run`, { key: other.key, body: {} }));
    // A valid request for each route, so that only ownership can make it fail.
    const valid: Record<string, { body?: unknown; headers?: Record<string, string> }> = {
      'PATCH /v1/agents/:id': { body: { name: 'mine now' } },
      'PATCH /v1/sessions/:id': { body: { budget: { limitUsd: 1 } } },
      'POST /v1/agents/:id/memories': { body: { content: 'mine now' } },
      'PATCH /v1/agents/:id/memories/:memoryId': { body: { content: 'mine now' } },
      'POST /v1/sessions/:id/messages': {
        body: { parts: [{ type: 'text', text: 'hi' }] },
        headers: { 'idempotency-key': 'x' },
      },
      'POST /v1/sessions/:id/messages/:messageId/answer': { body: { actionId: 0, answer: 'yes' } },
      'POST /v1/sessions/:id/interrupt': {},
      'POST /v1/conversations/:conversation_id/items': {
        body: { items: [{ type: 'function_call_output', call_id: 'call_x', output: 'x' }] },
      },
      'POST /v1/conversations/:conversation_id': { body: { metadata: { mine: 'now' } } },
      'GET /v1/agents/sessions/:id': { headers: { 'agentry-beta': 'agents=v1' } },
      'POST /v1/webhook_endpoints/:id': { body: { name: 'mine now' } },
      'POST /v1/mcp_servers/:id': { body: { name: 'mine now' } },
      'POST /v1/schedules/:id': { body: { name: 'mine now' } },
      'POST /v1/schedules/:id/run': { body: {} },
      'POST /v1/webhook_endpoints/:id/rotate_secret': { body: {} },
      'POST /v1/webhook_endpoints/:id/test': { body: { event_type: 'agent.session.created' } },
      'POST /v1/webhook_endpoints/:id/events/:event_id/redeliver': {
        body: {},
        headers: { 'idempotency-key': 'x' },
      },
      'POST /v1/tasks/:id/prompts': { body: { prompt: 'mine now' } },
      'POST /v1/agents/:id/a2a': { body: { jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id: 'x' } } },
      'POST /v1/agents/:id/a2a/rest/:call': { body: {} },
      'POST /v1/agents/:id/a2a/rest/tasks/:taskRef/pushNotificationConfigs': { body: {} },
      'POST /api/sdk/threads/:thread_id': { body: { metadata: {} } },
      'POST /api/sdk/threads/:thread_id/messages': { body: { role: 'user', content: 'mine now' } },
      'POST /api/sdk/p/:project_id/a/:agent_id/r': { body: { inputs: ['mine now'] } },
      'GET /v1/workflow-agents/runs/:id': { headers: { 'agentry-beta': 'agents=v1' } },
      'POST /v1/workflow-agents/runs/:id/cancel': { headers: { 'agentry-beta': 'agents=v1' } },
      'POST /v1/workflow-agents/runs/:id/function_call_outputs': {
        headers: { 'agentry-beta': 'agents=v1' },
        body: { outputs: [{ call_id: 'call_x', output: 'x' }] },
      },
    };
    // The operator's /v1/admin routes take ids of every organization (test/rate-limits.test.ts), not a key's.
    const idRoutes = routes.filter(
      (route) => route.url.includes(':') && (route.config as { admin?: boolean } | undefined)?.admin !== true,
    );
    expect(idRoutes.length).toBeGreaterThan(5);
    for (const route of idRoutes) {
      const method = String(route.method);
      const id = route.url.startsWith('/v1/tasks')
        ? task.id
        : route.url.startsWith('/v1/webhooks/')
          ? legacyHook.id
          : route.url.startsWith('/v1/workflow-agents')
            ? toolRun.run_id
            : route.url.startsWith('/v1/agents/sessions')
              ? session.id
              : route.url.startsWith('/v1/webhook_endpoints')
                ? hook.id
                : route.url.startsWith('/v1/mcp_servers')
                  ? connector.id
                  : route.url.startsWith('/v1/agents')
                    ? agent.id
                    : route.url.startsWith('/v1/runs')
                      ? message.runId
                      : route.url.startsWith('/v1/responses')
                        ? `resp_${message.id}`
                        : route.url.startsWith('/v1/files')
                          ? file.id
                          : route.url.startsWith('/v1/schedules/:schedule_id')
                            ? scheduleRun.id
                            : route.url.startsWith('/v1/schedules')
                              ? schedule.id
                              : session.id;
      const url = route.url
        .replace(':schedule_id', schedule.id)
        .replace(':messageId', message.id)
        .replace(':memoryId', memory.id)
        .replace(':conversation_id', `conv_${session.id}`)
        .replace(':item_id', item.id)
        .replace(':event_id', event.id)
        .replace(':name', 'report.md')
        .replace(':thread_id', thread.id)
        .replace(':fileId', file.id)
        .replace(':project_id', String(otherProject))
        .replace(':agent_id', agent.id)
        .replace(':run_id', toolRun.run_id)
        .replace(':call', 'message%3Asend')
        .replace(':taskRef', message.id)
        .replace(':configId', 'c1')
        .replace(':version', '1')
        .replace(':id', id);
      expect(url, `prepare a foreign resource for ${route.url}`).not.toContain(':');
      const spec = valid[`${method} ${route.url}`] ?? {};
      const response = await h.request(method, url, spec);
      expect(response.status, `${method} ${route.url}`).toBe(404);
      expect(json(response).error.code).toBe('not_found');
    }
    // And the resources are untouched for their owner.
    expect((await h.request('GET', `/v1/agents/${agent.id}`, { key: other.key })).status).toBe(200);
    expect((await h.request('GET', `/v1/sessions/${session.id}`, { key: other.key })).status).toBe(200);
    const conversation = await h.request('GET', `/v1/conversations/conv_${session.id}`, { key: other.key });
    expect(json(conversation).metadata).toEqual({});
    expect((await h.request('GET', `/v1/responses/resp_${message.id}`, { key: other.key })).status).toBe(200);
    expect((await h.request('GET', `/v1/runs/${message.runId}/trace`, { key: other.key })).status).toBe(200);
    expect((await h.request('GET', `/v1/files/${file.id}`, { key: other.key })).status).toBe(200);
    expect((await h.request('GET', `/v1/webhook_endpoints/${hook.id}`, { key: other.key })).status).toBe(200);
    const theirSchedule = await h.request('GET', `/v1/schedules/${schedule.id}`, { key: other.key });
    expect(json(theirSchedule).name).toBe('theirs');
    const stillTheirs = await h.request('GET', `/v1/mcp_servers/${connector.id}`, { key: other.key });
    expect(json(stillTheirs).name).toBe('theirs');
  });
});
