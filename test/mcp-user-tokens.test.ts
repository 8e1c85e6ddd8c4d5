/**
 * Static credentials of MCP connectors in the vault (docs/mcp-auth.md): a bearer token or headers stored for the
 * organization or for one end user with PUT /v1/mcp_servers/{id}/credentials, never returned, sent as the turn's
 * end user when they have one, else as the organization, never as another user or another organization. The MCP
 * server records the Authorization header of every request. Once per dialect.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flows, type Json } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';
import { type ResourceServer, startResourceServer } from './helpers/mcp-resource-server.ts';

describe.each(dialects())('MCP static credentials per user (%s)', (dialect) => {
  let h: Harness;
  let server: ResourceServer;
  let connectorId: string;
  let agentId: string;
  const flow = flows(() => h);

  const put = (body: Json, key?: string, id = connectorId) =>
    h.request('PUT', `/v1/mcp_servers/${id}/credentials`, { body, ...(key === undefined ? {} : { key }) });

  /** A Response as `user` whose model calls `whoami`; returns what the server answered and the tokens it saw. */
  const whoami = async (user?: string, agent = agentId, key?: string) => {
    const seen = server.tokens.length;
    const res = await h.request('POST', '/v1/responses', {
      body: { model: agent, input: 'call whoami {}', ...(user === undefined ? {} : { user }) },
      ...(key === undefined ? {} : { key }),
    });
    expect(res.status, res.text).toBe(200);
    const call = json(res).output.find((item: Json) => item.type === 'mcp_call');
    return { output: String(call?.output ?? ''), tokens: new Set(server.tokens.slice(seen)) };
  };

  beforeAll(async () => {
    server = await startResourceServer();
    h = await createHarness(dialect, { AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true' });
    const created = await h.request('POST', '/v1/mcp_servers', { body: { name: 'crm', url: server.url } });
    expect(created.status, created.text).toBe(201);
    connectorId = json(created).id;
    agentId = await flow.createAgent({ mcpServers: [{ kind: 'custom', serverId: connectorId, name: 'crm' }] });
  });
  afterAll(async () => {
    await h.close();
    await server.close();
  });

  it('validates the body, naming the field', async () => {
    const both = await put({ bearer_token: 'a', headers: { 'X-Key': 'b' } });
    expect(both.status, both.text).toBe(400);
    expect(json(both).error.param).toBe('headers');
    const neither = await put({ user: 'alice' });
    expect(neither.status, neither.text).toBe(400);
    expect(json(neither).error.param).toBe('bearer_token');
    const badHeader = await put({ headers: { 'bad header': 'x' } });
    expect(badHeader.status).toBe(400);
  });

  it("uses the end user's token, else the organization's, never another user's", async () => {
    // Without any credential the connector's own headers (none) are sent.
    expect((await whoami('alice')).output).toContain('token=none');

    const org = await put({ bearer_token: 'org-token' });
    expect(org.status, org.text).toBe(200);
    expect(json(org)).toEqual({
      object: 'mcp_server.credential',
      user: null,
      kind: 'static',
      status: 'active',
      header_names: ['Authorization'],
    });
    expect((await put({ user: 'alice', bearer_token: 'alice-token' })).status).toBe(200);
    expect((await put({ user: 'bob', headers: { Authorization: 'Bearer bob-token' } })).status).toBe(200);

    const alice = await whoami('alice');
    expect(alice.output).toContain('token=Bearer alice-token');
    expect(alice.tokens).toEqual(new Set(['Bearer alice-token']));
    const bob = await whoami('bob');
    expect(bob.output).toContain('token=Bearer bob-token');
    expect(bob.tokens).toEqual(new Set(['Bearer bob-token']));
    const carol = await whoami('carol');
    expect(carol.output).toContain('token=Bearer org-token');
    expect(carol.tokens).toEqual(new Set(['Bearer org-token']));
    expect((await whoami()).tokens).toEqual(new Set(['Bearer org-token']));

    // Listed by owner and kind; the tokens are never returned.
    const listed = await h.request('GET', `/v1/mcp_servers/${connectorId}/credentials`);
    expect(listed.text).not.toContain('-token');
    expect(json(listed).data).toEqual([
      expect.objectContaining({ user: null, kind: 'static', status: 'active', expires_at: null }),
      expect.objectContaining({ user: 'alice', kind: 'static' }),
      expect.objectContaining({ user: 'bob', kind: 'static' }),
    ]);

    // A replaced token is used from the next call on; a removed one falls back to the organization's.
    expect((await put({ user: 'alice', bearer_token: 'alice-token-2' })).status).toBe(200);
    expect((await whoami('alice')).tokens).toEqual(new Set(['Bearer alice-token-2']));
    expect((await h.request('DELETE', `/v1/mcp_servers/${connectorId}/credentials?user=alice`)).status).toBe(200);
    expect((await whoami('alice')).tokens).toEqual(new Set(['Bearer org-token']));
  });

  it('never crosses organizations, even for the same server and user id', async () => {
    const other = await h.createOrg('other');
    expect((await put({ user: 'bob', bearer_token: 'stolen' }, other.key)).status).toBe(404);
    expect((await h.request('GET', `/v1/mcp_servers/${connectorId}/credentials`, { key: other.key })).status).toBe(404);

    const created = await h.request('POST', '/v1/mcp_servers', {
      body: { name: 'crm', url: server.url },
      key: other.key,
    });
    expect(created.status, created.text).toBe(201);
    const otherConnector = json(created).id;
    const otherAgent = await flow.createAgent(
      { mcpServers: [{ kind: 'custom', serverId: otherConnector, name: 'crm' }] },
      other.key,
    );
    // The other organization has no credential: bob there is sent nothing.
    expect((await whoami('bob', otherAgent, other.key)).tokens).toEqual(new Set([null]));
    expect((await put({ bearer_token: 'other-org-token' }, other.key, otherConnector)).status).toBe(200);
    expect((await whoami('bob', otherAgent, other.key)).tokens).toEqual(new Set(['Bearer other-org-token']));
    // And this organization's bob still gets his own.
    expect((await whoami('bob')).tokens).toEqual(new Set(['Bearer bob-token']));
  });
});
