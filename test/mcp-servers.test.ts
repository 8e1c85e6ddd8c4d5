/**
 * Organization MCP connectors (`/v1/mcp_servers`) and the registration of an agent's `{type:"url"}` entries,
 * against real MCP servers on loopback (a 2026-07-28-only server and a 2025 one), once per dialect.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ASK_USER_QUESTION_SERVER, flows, type Json } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';
import { type McpTestServer, startLegacyMcpServer, startModernMcpServer } from './helpers/mcp-servers.ts';

const SECRET = 'Bearer connector-secret-7f3a';

describe.each(dialects())('MCP connectors (%s)', (dialect) => {
  let h: Harness;
  let modern: McpTestServer;
  let legacy: McpTestServer;
  let guarded: McpTestServer;
  const flow = flows(() => h);

  const post = (path: string, body: unknown, key?: string) =>
    h.request('POST', path, { body, ...(key === undefined ? {} : { key }) });
  const connectors = async (key?: string): Promise<Json[]> =>
    json(await h.request('GET', '/v1/mcp_servers?limit=100', key === undefined ? {} : { key })).data;

  beforeAll(async () => {
    [modern, legacy, guarded] = await Promise.all([
      startModernMcpServer({ name: 'modern' }),
      startLegacyMcpServer({ name: 'legacy' }),
      startModernMcpServer({ name: 'guarded', auth: SECRET }),
    ]);
    h = await createHarness(dialect, { AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true' });
  });
  afterAll(async () => {
    await h.close();
    await Promise.all([modern.close(), legacy.close(), guarded.close()]);
  });

  describe('agents with URL entries', () => {
    it('discovers the server at create and stores the entry as {kind:"custom", serverId, name}', async () => {
      const res = await post('/v1/agents', {
        name: 'docs',
        mcpServers: [{ type: 'url', name: 'docs', url: modern.url }],
      });
      expect(res.status, res.text).toBe(201);
      const entry = json(res).agent.mcpServers[0];
      expect(entry).toEqual({ kind: 'custom', serverId: expect.stringMatching(/^[0-9a-f-]{36}$/), name: 'docs' });
      const connector = json(await h.request('GET', `/v1/mcp_servers/${entry.serverId}`));
      expect(connector).toMatchObject({
        object: 'mcp_server',
        url: modern.url,
        protocol: '2026-07-28',
        header_names: [],
      });
      expect(connector.tools.map((tool: Json) => tool.name)).toEqual(expect.arrayContaining(['echo', 'add', 'hang']));
      expect(connector.tools_fetched_at).toEqual(expect.any(Number));
    });

    it('negotiates the 2025 protocol with an older server', async () => {
      const res = await post('/v1/agents', {
        name: 'old',
        mcpServers: [{ type: 'url', name: 'old', url: legacy.url }],
      });
      expect(res.status, res.text).toBe(201);
      const connector = json(await h.request('GET', `/v1/mcp_servers/${json(res).agent.mcpServers[0].serverId}`));
      expect(connector.protocol).toBe('streamable-http-2025');
    });

    it('reuses the organization connector at the same URL, without discovering again', async () => {
      const first = json(
        await post('/v1/agents', { name: 'a', mcpServers: [{ type: 'url', name: 'a', url: modern.url }] }),
      );
      const lists = modern.listRequests;
      const second = await post('/v1/agents', { name: 'b', mcpServers: [{ type: 'url', name: 'b', url: modern.url }] });
      expect(second.status, second.text).toBe(201);
      expect(json(second).agent.mcpServers[0]).toEqual({
        kind: 'custom',
        serverId: first.agent.mcpServers[0].serverId,
        name: 'b',
      });
      expect(modern.listRequests).toBe(lists);
      expect((await connectors()).filter((connector) => connector.url === modern.url)).toHaveLength(1);
    });

    it('a failing discovery is a 400 naming the entry, and nothing is written', async () => {
      const agentsBefore = json(await h.request('GET', '/v1/agents')).data.length;
      const connectorsBefore = (await connectors()).length;
      const res = await post('/v1/agents', {
        name: 'broken',
        mcpServers: [ASK_USER_QUESTION_SERVER, { type: 'url', name: 'down', url: 'http://127.0.0.1:9/mcp' }],
      });
      expect(res.status, res.text).toBe(400);
      expect(json(res).error).toMatchObject({ code: 'validation_error', param: 'mcpServers[1].url' });
      expect(json(res).error.message).toMatch(/mcpServers\[1\]\.url: the MCP server could not be used/);
      expect(json(await h.request('GET', '/v1/agents')).data.length).toBe(agentsBefore);
      expect((await connectors()).length).toBe(connectorsBefore);
    });

    it('a server that needs a header it was not given is a 400 at create', async () => {
      const res = await post('/v1/agents', { name: 'x', mcpServers: [{ type: 'url', name: 'g', url: guarded.url }] });
      expect(res.status).toBe(400);
      expect(json(res).error.param).toBe('mcpServers[0].url');
      expect(json(res).error.message).toMatch(/401|auth/i);
    });

    it('PATCH registers new URL entries too, and a failure leaves the agent unchanged', async () => {
      const agentId = await flow.createAgent({ name: 'patched' });
      const bad = await h.request('PATCH', `/v1/agents/${agentId}`, {
        body: { mcpServers: [{ type: 'url', name: 'down', url: 'http://127.0.0.1:9/mcp' }] },
      });
      expect(bad.status).toBe(400);
      expect(json(bad).error.param).toBe('mcpServers[0].url');
      expect(json(await h.request('GET', `/v1/agents/${agentId}`)).agent).toMatchObject({ version: 1, mcpServers: [] });
      const ok = await h.request('PATCH', `/v1/agents/${agentId}`, {
        body: { mcpServers: [{ type: 'url', name: 'old', url: legacy.url }] },
      });
      expect(ok.status, ok.text).toBe(200);
      expect(json(ok).agent.mcpServers[0]).toMatchObject({ kind: 'custom', name: 'old' });
    });

    it('replays an Idempotency-Key without discovering again', async () => {
      const server = await startModernMcpServer({ name: 'once' });
      try {
        const body = { name: 'idem', mcpServers: [{ type: 'url', name: 'once', url: server.url }] };
        const headers = { 'idempotency-key': `idem-${dialect}` };
        const first = await h.request('POST', '/v1/agents', { body, headers });
        expect(first.status, first.text).toBe(201);
        const lists = server.listRequests;
        const again = await h.request('POST', '/v1/agents', { body, headers });
        expect(again.status).toBe(201);
        expect(again.headers['idempotent-replayed']).toBe('true');
        expect(json(again)).toEqual(json(first));
        expect(server.listRequests).toBe(lists);
      } finally {
        await server.close();
      }
    });
  });

  describe('/v1/mcp_servers', () => {
    let guardedId: string;

    it('creates a connector with a secret header that is never returned, stored encrypted', async () => {
      const res = await post('/v1/mcp_servers', { name: 'crm', url: guarded.url, headers: { Authorization: SECRET } });
      expect(res.status, res.text).toBe(201);
      const connector = json(res);
      guardedId = connector.id;
      expect(connector).toMatchObject({
        name: 'crm',
        header_names: ['Authorization'],
        protocol: '2026-07-28',
        last_error: null,
      });
      expect(res.text).not.toContain('connector-secret');
      const read = await h.request('GET', `/v1/mcp_servers/${guardedId}`);
      expect(read.text).not.toContain('connector-secret');
      const row = await h.deps.storage.db
        .selectFrom('mcp_servers')
        .select('headers')
        .where('id', '=', guardedId)
        .executeTakeFirstOrThrow();
      expect(row.headers).toMatch(/^v1\./);
      expect(row.headers).not.toContain('connector-secret');
    });

    it('refuses a connector whose discovery fails, naming url, and one at a URL the org already has', async () => {
      const noAuth = await post('/v1/mcp_servers', {
        name: 'crm2',
        url: guarded.url.replace('127.0.0.1', 'localhost'),
      });
      expect(noAuth.status).toBe(400);
      expect(json(noAuth).error.param).toBe('url');
      const twice = await post('/v1/mcp_servers', {
        name: 'again',
        url: guarded.url,
        headers: { Authorization: SECRET },
      });
      expect(twice.status).toBe(409);
      expect(json(twice).error.code).toBe('mcp_server_exists');
    });

    it('validates bodies: headers with CR/LF, too many, unknown fields, a bad URL', async () => {
      const cases: [Json, string][] = [
        [{ name: 'x', url: modern.url, headers: { 'X-A': 'a\r\nb' } }, 'headers'],
        [{ name: 'x', url: modern.url, headers: { 'bad name': 'a' } }, 'headers'],
        [{ name: 'x', url: modern.url, extra: 1 }, 'extra'],
        [{ name: '', url: modern.url }, 'name'],
        [{ name: 'x', url: 'not a url' }, 'url'],
        [{ name: 'x' }, 'url'],
      ];
      for (const [body, param] of cases) {
        const res = await post('/v1/mcp_servers', body);
        expect(res.status, JSON.stringify(body)).toBe(400);
        expect(json(res).error.param ?? '').toContain(param);
      }
    });

    it('lists with cursor pagination, newest first', async () => {
      const all = await connectors();
      expect(all.length).toBeGreaterThanOrEqual(3);
      const page = json(await h.request('GET', '/v1/mcp_servers?limit=1'));
      expect(page).toMatchObject({ object: 'list', has_more: true });
      expect(page.data[0].id).toBe(all[0]?.id);
      const next = json(await h.request('GET', `/v1/mcp_servers?limit=1&after=${page.last_id}`));
      expect(next.data[0].id).toBe(all[1]?.id);
    });

    it('updates: a new header is checked by listing, a wrong one is refused and changes nothing', async () => {
      const wrong = await post(`/v1/mcp_servers/${guardedId}`, { headers: { Authorization: 'Bearer wrong' } });
      expect(wrong.status).toBe(400);
      expect(json(wrong).error.param).toBe('headers');
      const renamed = await post(`/v1/mcp_servers/${guardedId}`, { name: 'crm-renamed' });
      expect(renamed.status, renamed.text).toBe(200);
      expect(json(renamed)).toMatchObject({ name: 'crm-renamed', header_names: ['Authorization'] });
      const empty = await post(`/v1/mcp_servers/${guardedId}`, {});
      expect(empty.status).toBe(400);
    });

    it('refresh lists again; a server that went away is a 502 recorded in last_error', async () => {
      const server = await startModernMcpServer({ name: 'fleeting' });
      const created = json(await post('/v1/mcp_servers', { name: 'fleeting', url: server.url }));
      const lists = server.listRequests;
      const refreshed = await post(`/v1/mcp_servers/${created.id}/refresh`, {});
      expect(refreshed.status, refreshed.text).toBe(200);
      expect(server.listRequests).toBe(lists + 1);
      await server.close();
      const failed = await post(`/v1/mcp_servers/${created.id}/refresh`, {});
      expect(failed.status).toBe(502);
      expect(json(failed).error.code).toBe('mcp_server_unreachable');
      const after = json(await h.request('GET', `/v1/mcp_servers/${created.id}`));
      expect(after.last_error).toMatchObject({ code: expect.any(String), message: expect.any(String) });
      expect(after.tools.length).toBeGreaterThan(0);
    });

    it('custom entries must name a connector of the organization; delete is refused while an agent uses it', async () => {
      const agent = await post('/v1/agents', {
        name: 'crm agent',
        mcpServers: [{ kind: 'custom', serverId: guardedId }],
      });
      expect(agent.status, agent.text).toBe(201);
      const agentId = json(agent).agent.id;
      const refused = await h.request('DELETE', `/v1/mcp_servers/${guardedId}`);
      expect(refused.status).toBe(409);
      expect(json(refused).error).toMatchObject({ code: 'mcp_server_in_use' });
      expect(json(refused).error.message).toContain(agentId);
      const patched = await h.request('PATCH', `/v1/agents/${agentId}`, { body: { mcpServers: [] } });
      expect(patched.status).toBe(200);
      const deleted = await h.request('DELETE', `/v1/mcp_servers/${guardedId}`);
      expect(deleted.status, deleted.text).toBe(200);
      expect(json(deleted)).toEqual({ id: guardedId, object: 'mcp_server.deleted', deleted: true });
      expect((await h.request('GET', `/v1/mcp_servers/${guardedId}`)).status).toBe(404);
      const gone = await post('/v1/agents', { name: 'late', mcpServers: [{ kind: 'custom', serverId: guardedId }] });
      expect(gone.status).toBe(400);
      expect(json(gone).error.param).toBe('mcpServers[0].serverId');
    });

    it("keeps a connector's connection between turns, and closes it when the connector is deleted", async () => {
      const server = await startLegacyMcpServer({ name: 'closing' });
      try {
        const created = await post('/v1/mcp_servers', { name: 'closing', url: server.url });
        expect(created.status, created.text).toBe(201);
        const serverId = json(created).id;
        const agentId = await flow.createAgent({ name: 'closing', mcpServers: [{ kind: 'custom', serverId }] });
        const initializes = () => server.state.methods.filter((method) => method === 'initialize').length;
        const turn = async (text: string) => {
          const res = await post('/v1/responses', { model: agentId, input: `call echo {"text":"${text}"}` });
          expect(res.status, res.text).toBe(200);
        };
        await turn('one');
        const connected = initializes();
        await turn('two');
        expect(server.calls.map((call) => call.arguments)).toEqual([{ text: 'one' }, { text: 'two' }]);
        expect(initializes()).toBe(connected);
        // Sessions ended so far (the discovery's at create): the turns' connection is not among them.
        const ended = () => server.state.http.filter((request) => request === 'DELETE /mcp').length;
        const before = ended();
        expect(before).toBeLessThan(connected);
        const patched = await h.request('PATCH', `/v1/agents/${agentId}`, { body: { mcpServers: [] } });
        expect(patched.status, patched.text).toBe(200);
        expect(ended()).toBe(before);
        const deleted = await h.request('DELETE', `/v1/mcp_servers/${serverId}`);
        expect(deleted.status, deleted.text).toBe(200);
        await server.waitFor(() => ended() === before + 1);
      } finally {
        await server.close();
      }
    });

    it("isolates organizations: another org's connector is a 404 and not a usable serverId", async () => {
      const mine = (await connectors())[0];
      const other = await h.createOrg(`mcp-other-${dialect}`);
      for (const [method, path] of [
        ['GET', `/v1/mcp_servers/${mine?.id}`],
        ['POST', `/v1/mcp_servers/${mine?.id}`],
        ['POST', `/v1/mcp_servers/${mine?.id}/refresh`],
        ['DELETE', `/v1/mcp_servers/${mine?.id}`],
      ] as const) {
        const res = await h.request(method, path, {
          key: other.key,
          ...(method === 'POST' ? { body: { name: 'x' } } : {}),
        });
        expect(res.status, `${method} ${path}`).toBe(404);
      }
      expect(await connectors(other.key)).toEqual([]);
      const foreign = await post(
        '/v1/agents',
        { name: 'f', mcpServers: [{ kind: 'custom', serverId: mine?.id }] },
        other.key,
      );
      expect(foreign.status).toBe(400);
    });

    it('needs tasks scopes', async () => {
      const orgId = (
        await h.deps.storage.db.selectFrom('orgs').select('id').where('name', '=', 'default').executeTakeFirstOrThrow()
      ).id;
      const reader = await h.deps.orgs.createKey(orgId, ['tasks:read']);
      expect((await h.request('GET', '/v1/mcp_servers', { key: reader })).status).toBe(200);
      const res = await post('/v1/mcp_servers', { name: 'x', url: modern.url }, reader);
      expect(res.status).toBe(403);
    });
  });

  it('in strict mode, a loopback MCP URL is refused before any connection', async () => {
    const strict = await createHarness(dialect);
    try {
      const lists = modern.listRequests;
      const res = await strict.request('POST', '/v1/mcp_servers', { body: { name: 'local', url: modern.url } });
      expect(res.status).toBe(400);
      expect(json(res).error.param).toBe('url');
      const agent = await strict.request('POST', '/v1/agents', {
        body: { name: 'local', mcpServers: [{ type: 'url', name: 'l', url: modern.url }] },
      });
      expect(agent.status).toBe(400);
      expect(modern.listRequests).toBe(lists);
    } finally {
      await strict.close();
    }
  });
});
