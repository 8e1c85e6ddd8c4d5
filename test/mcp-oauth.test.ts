/**
 * MCP connectors that sign in with OAuth (docs/mcp-auth.md), against a real authorization server (the MCP SDK's
 * `mcpAuthRouter`, test/helpers/oauth-server.ts) guarding a real MCP server, driven through the API, the public
 * callback (the browser is plain fetch, stopping at the redirect to Agentry) and Responses turns with the
 * `scripted` model. Once per dialect.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flows, type Json } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';
import { type McpTestServer, startModernMcpServer } from './helpers/mcp-servers.ts';
import { type OAuthTestServer, startOAuthServer } from './helpers/oauth-server.ts';

const PUBLIC = 'https://agentry.test';

describe.each(dialects())('MCP sign-in with OAuth (%s)', (dialect) => {
  let h: Harness;
  let as: OAuthTestServer;
  let dcrAs: OAuthTestServer;
  let server: McpTestServer;
  let dcrServer: McpTestServer;
  let requiredScope: string | undefined;
  const flow = flows(() => h);

  /** The harness serves what a browser or authorization server asks of https://agentry.test. */
  const local = async (url: string, harness: Harness = h) => {
    expect(url.startsWith(`${PUBLIC}/`)).toBe(true);
    return harness.request('GET', url.slice(PUBLIC.length), { key: null });
  };

  /** The person approves at the authorization server: follow its redirect back to Agentry's callback. */
  const approve = async (authorizationUrl: string, harness: Harness = h) => {
    const answer = await fetch(authorizationUrl, { redirect: 'manual' });
    expect(answer.status, await answer.clone().text()).toBe(302);
    return local(answer.headers.get('location') ?? '', harness);
  };

  const createConnector = async (url: string, oauth: Json = {}, key?: string) => {
    const res = await h.request('POST', '/v1/mcp_servers', {
      body: { name: `srv${Math.random().toString(36).slice(2, 8)}`, url, oauth },
      ...(key === undefined ? {} : { key }),
    });
    expect(res.status, res.text).toBe(201);
    return json(res);
  };

  const connect = async (id: string, user?: string, key?: string) => {
    const res = await h.request('POST', `/v1/mcp_servers/${id}/connect`, {
      body: user === undefined ? {} : { user },
      ...(key === undefined ? {} : { key }),
    });
    expect(res.status, res.text).toBe(200);
    return json(res);
  };

  /** A Response of an agent using the connector; the scripted model calls `echo` and replies with its result. */
  const callEcho = async (agentId: string, text: string, user?: string) => {
    const res = await h.request('POST', '/v1/responses', {
      body: { model: agentId, input: `call echo {"text":"${text}"}`, ...(user === undefined ? {} : { user }) },
    });
    expect(res.status, res.text).toBe(200);
    const body = json(res);
    const call = body.output.find((item: Json) => item.type === 'mcp_call');
    return { text: String(body.output_text ?? ''), call, body };
  };

  const agentWith = (serverId: string) =>
    flow.createAgent({ mcpServers: [{ kind: 'custom', serverId, name: 'docs' }] });

  const credentials = async (id: string) => json(await h.request('GET', `/v1/mcp_servers/${id}/credentials`)).data;

  beforeAll(async () => {
    let harness: Harness | undefined;
    const resolveDocument = async (url: string) => json(await local(url, harness));
    as = await startOAuthServer({ resolveDocument });
    dcrAs = await startOAuthServer({ metadataDocuments: false });
    server = await startModernMcpServer({
      name: 'protected',
      guard: (req, res) =>
        as.protect(
          () => server.url,
          () => requiredScope,
        )(req, res),
    });
    dcrServer = await startModernMcpServer({
      name: 'dcr',
      guard: (req, res) => dcrAs.protect(() => dcrServer.url)(req, res),
    });
    h = await createHarness(dialect, { AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true', AGENTRY_PUBLIC_URL: PUBLIC });
    harness = h;
  });
  afterAll(async () => {
    await h.close();
    await Promise.all([as.close(), dcrAs.close(), server.close(), dcrServer.close()]);
  });

  it('serves its Client ID Metadata Document publicly', async () => {
    const res = await h.request('GET', '/v1/oauth/client-metadata.json', { key: null });
    expect(res.status).toBe(200);
    expect(json(res)).toMatchObject({
      client_id: `${PUBLIC}/v1/oauth/client-metadata.json`,
      redirect_uris: [`${PUBLIC}/v1/oauth/callback`],
      grant_types: ['authorization_code', 'refresh_token'],
      token_endpoint_auth_method: 'none',
    });
  });

  it('connects with a metadata document: discovery, PKCE S256, resource, callback, tools listed', async () => {
    const connector = await createConnector(server.url);
    expect(connector).toMatchObject({ auth: 'oauth', tools: [], oauth: { client_id: null, registration: null } });
    const started = await connect(connector.id);
    const url = new URL(started.authorization_url);
    expect(url.origin).toBe(as.issuer);
    expect(url.searchParams.get('code_challenge_method')).toBe('S256');
    expect(url.searchParams.get('client_id')).toBe(`${PUBLIC}/v1/oauth/client-metadata.json`);
    expect(url.searchParams.get('resource')).toBe(server.url);
    expect(url.searchParams.get('redirect_uri')).toBe(`${PUBLIC}/v1/oauth/callback`);
    const registrations = as.counts.registrations;
    const done = await approve(started.authorization_url);
    expect(done.status, done.text).toBe(200);
    expect(done.text).toContain('connected for your organization');
    expect(as.counts.registrations).toBe(registrations);
    expect(as.counts.documents).toBeGreaterThan(0);
    const after = json(await h.request('GET', `/v1/mcp_servers/${connector.id}`));
    expect(after.tools.map((tool: Json) => tool.name)).toContain('echo');
    // The metadata document is Agentry's client id: nothing registered is kept.
    expect(after.oauth).toMatchObject({ client_id: null, registration: null });
    expect(await credentials(connector.id)).toEqual([
      expect.objectContaining({ object: 'mcp_server.credential', user: null, status: 'active', url: server.url }),
    ]);
    // Tokens are never returned.
    expect(JSON.stringify(after)).not.toContain(as.accessTokens.at(-1));

    const agentId = await agentWith(connector.id);
    const { text } = await callEcho(agentId, 'hello');
    expect(text).toContain('echo: hello');
  });

  it('falls back to dynamic registration and keeps the registered client', async () => {
    const connector = await createConnector(dcrServer.url);
    const started = await connect(connector.id);
    expect(dcrAs.counts.registrations).toBe(1);
    const clientId = new URL(started.authorization_url).searchParams.get('client_id');
    expect(clientId).toMatch(/^dcr-/);
    expect(json(await h.request('GET', `/v1/mcp_servers/${connector.id}`)).oauth).toMatchObject({
      client_id: clientId,
      registration: 'dynamic',
    });
    expect((await approve(started.authorization_url)).status).toBe(200);
    // A second sign-in reuses the registration.
    await connect(connector.id, 'someone');
    expect(dcrAs.counts.registrations).toBe(1);
  });

  it('uses a pre-registered client id when the connector names one', async () => {
    const connector = await createConnector(dcrServer.url.replace('/mcp', '/mcp?pre=1'), {
      client_id: 'preset-client',
    });
    expect(connector.oauth).toMatchObject({ client_id: 'preset-client', registration: 'pre_registered' });
    const started = await connect(connector.id);
    expect(new URL(started.authorization_url).searchParams.get('client_id')).toBe('preset-client');
    // Still the operator's client: the sign-in registered nothing.
    const after = json(await h.request('GET', `/v1/mcp_servers/${connector.id}`));
    expect(after.oauth).toMatchObject({ client_id: 'preset-client', registration: 'pre_registered' });
  });

  it('completes a sign-in started before a restart (the state is in the database)', async () => {
    const connector = await createConnector(server.url.replace('/mcp', '/mcp?restart=1'));
    const started = await connect(connector.id);
    const { config } = h.deps;
    const second = await createHarness(dialect, {
      AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true',
      AGENTRY_PUBLIC_URL: PUBLIC,
      AGENTRY_DATA_DIR: config.dataDir,
      AGENTRY_BOOTSTRAP_KEY: h.key,
      ...(config.databaseUrl === null
        ? {}
        : { DATABASE_URL: config.databaseUrl, AGENTRY_DATABASE_SCHEMA: config.databaseSchema ?? '' }),
    });
    try {
      const done = await approve(started.authorization_url, second);
      expect(done.status, done.text).toBe(200);
    } finally {
      await second.app.close();
      await second.engine.stop(5000);
      await second.deps.close();
      await second.deps.storage.close();
    }
    expect(await credentials(connector.id)).toEqual([expect.objectContaining({ user: null, status: 'active' })]);
  });

  it('refuses a callback with an unknown or reused state, an error answer, or the wrong issuer', async () => {
    const unknown = await h.request('GET', '/v1/oauth/callback?state=nope&code=x', { key: null });
    expect(unknown.status).toBe(400);
    expect(json(unknown).error.code).toBe('mcp_authorization_failed');

    const connector = await createConnector(server.url.replace('/mcp', '/mcp?callback=1'));
    const started = await connect(connector.id);
    const answer = await fetch(started.authorization_url, { redirect: 'manual' });
    const location = new URL(answer.headers.get('location') ?? '');
    const wrongIss = new URL(location.href);
    wrongIss.searchParams.set('iss', 'https://evil.example');
    const mixUp = await local(wrongIss.href);
    expect(mixUp.status).toBe(400);
    expect(json(mixUp).error.message).toMatch(/iss/i);
    // The state was used by the refused attempt.
    expect((await local(location.href)).status).toBe(400);

    const denied = await connect(connector.id);
    const state = new URL(denied.authorization_url).searchParams.get('state') ?? '';
    const error = await h.request(
      'GET',
      `/v1/oauth/callback?state=${encodeURIComponent(state)}&error=access_denied&error_description=${encodeURIComponent('<b>no</b>')}`,
      { key: null },
    );
    expect(error.status).toBe(400);
    expect(json(error).error.message).toContain('access_denied');
    expect(await credentials(connector.id)).toEqual([]);
  });

  it('refreshes on a 401 once, and two concurrent refreshes make one request', async () => {
    const connector = await createConnector(server.url.replace('/mcp', '/mcp?refresh=1'));
    expect((await approve((await connect(connector.id)).authorization_url)).status).toBe(200);
    const agentId = await agentWith(connector.id);
    expect((await callEcho(agentId, 'before')).text).toContain('echo: before');
    as.expireAccessTokens();
    as.refreshDelayMs = 300;
    const refreshes = as.counts.refreshes;
    const [one, two] = await Promise.all([callEcho(agentId, 'one'), callEcho(agentId, 'two')]);
    as.refreshDelayMs = 0;
    expect(one.text).toContain('echo: one');
    expect(two.text).toContain('echo: two');
    expect(as.counts.refreshes - refreshes).toBe(1);
  });

  it('refreshes before expiry', async () => {
    const shortAs = await startOAuthServer({ accessTtlSeconds: 30, metadataDocuments: false });
    const shortServer: McpTestServer = await startModernMcpServer({
      name: 'short',
      guard: (req, res) => shortAs.protect(() => shortServer.url)(req, res),
    });
    try {
      const connector = await createConnector(shortServer.url);
      expect((await approve((await connect(connector.id)).authorization_url)).status).toBe(200);
      const agentId = await agentWith(connector.id);
      // 30 s left is inside the refresh margin: the turn refreshes first, without a 401.
      const refreshes = shortAs.counts.refreshes;
      expect((await callEcho(agentId, 'soon')).text).toContain('echo: soon');
      expect(shortAs.counts.refreshes - refreshes).toBe(1);
      expect(shortServer.state.http.filter((line) => line.startsWith('POST')).length).toBeGreaterThan(0);
    } finally {
      await shortServer.close();
      await shortAs.close();
    }
  });

  it('a revoked refresh token gives authorization_required and one webhook event, other tools unaffected', async () => {
    const hook = await h.request('POST', '/v1/webhook_endpoints', {
      body: {
        name: 'hook',
        url: 'https://hooks.example.com/agentry',
        event_types: ['mcp_server.authorization_required'],
      },
    });
    expect(hook.status, hook.text).toBe(200);
    const connector = await createConnector(server.url.replace('/mcp', '/mcp?revoked=1'));
    expect((await approve((await connect(connector.id)).authorization_url)).status).toBe(200);
    const agentId = await agentWith(connector.id);
    as.expireAccessTokens();
    as.revokeRefreshTokens();
    const first = await callEcho(agentId, 'x');
    expect(first.call?.error ?? first.call?.output ?? first.text).toContain('authorization_required');
    expect(JSON.stringify(first.body)).toContain(connector.id);
    const again = await callEcho(agentId, 'y');
    expect(JSON.stringify(again.body)).toContain('authorization_required');
    expect(await credentials(connector.id)).toEqual([
      expect.objectContaining({ user: null, status: 'authorization_required' }),
    ]);
    const events = await h.deps.storage.db
      .selectFrom('webhook_events')
      .selectAll()
      .where('type', '=', 'mcp_server.authorization_required')
      .execute();
    const mine = events.filter((event) => JSON.parse(event.data).id === connector.id);
    expect(mine).toHaveLength(1);
    expect(JSON.parse(mine[0]?.data ?? '{}')).toMatchObject({ id: connector.id, user: null });
    // Connecting again makes the server usable again.
    expect((await approve((await connect(connector.id)).authorization_url)).status).toBe(200);
    expect((await callEcho(agentId, 'back')).text).toContain('echo: back');
  });

  it("uses the end user's credential, else the organization's, never another user's or org's", async () => {
    const connector = await createConnector(server.url.replace('/mcp', '/mcp?users=1'));
    const started = await connect(connector.id, 'alice');
    expect(started.user).toBe('alice');
    expect((await approve(started.authorization_url)).text).toContain('user alice');
    const aliceToken = as.accessTokens.at(-1);
    const agentId = await agentWith(connector.id);
    const before = server.calls.length;
    expect((await callEcho(agentId, 'as alice', 'alice')).text).toContain('echo: as alice');
    expect(server.calls.slice(before).at(-1)).toBeDefined();
    // Bob has none and the organization has none: sign-in required, never Alice's token.
    const bob = await callEcho(agentId, 'as bob', 'bob');
    expect(JSON.stringify(bob.body)).toContain('authorization_required');
    // The organization's credential serves users without their own.
    expect((await approve((await connect(connector.id)).authorization_url)).status).toBe(200);
    const orgToken = as.accessTokens.at(-1);
    expect(orgToken).not.toBe(aliceToken);
    expect((await callEcho(agentId, 'as bob again', 'bob')).text).toContain('echo: as bob again');
    expect(await credentials(connector.id)).toEqual([
      expect.objectContaining({ user: null }),
      expect.objectContaining({ user: 'alice' }),
    ]);

    // Another organization sees neither the connector nor its credentials.
    const other = await h.createOrg('other');
    expect((await h.request('GET', `/v1/mcp_servers/${connector.id}/credentials`, { key: other.key })).status).toBe(
      404,
    );
    expect(
      (await h.request('POST', `/v1/mcp_servers/${connector.id}/connect`, { body: {}, key: other.key })).status,
    ).toBe(404);
    expect(
      (await h.request('DELETE', `/v1/mcp_servers/${connector.id}/credentials?user=alice`, { key: other.key })).status,
    ).toBe(404);
    // Removing Alice's credential: she now uses the organization's.
    expect((await h.request('DELETE', `/v1/mcp_servers/${connector.id}/credentials?user=alice`)).status).toBe(200);
    expect((await h.request('DELETE', `/v1/mcp_servers/${connector.id}/credentials?user=alice`)).status).toBe(404);
  });

  it('asks for sign-in again with the larger scope on insufficient_scope', async () => {
    const connector = await createConnector(server.url.replace('/mcp', '/mcp?scope=1'), { scope: 'read' });
    expect((await approve((await connect(connector.id)).authorization_url)).status).toBe(200);
    const agentId = await agentWith(connector.id);
    requiredScope = 'write';
    try {
      const refused = await callEcho(agentId, 'needs write');
      expect(JSON.stringify(refused.body)).toContain('authorization_required');
      expect(json(await h.request('GET', `/v1/mcp_servers/${connector.id}`)).oauth.scope).toBe('read write');
      const again = await connect(connector.id);
      expect(new URL(again.authorization_url).searchParams.get('scope')).toBe('read write');
      expect((await approve(again.authorization_url)).status).toBe(200);
      expect((await callEcho(agentId, 'has write')).text).toContain('echo: has write');
    } finally {
      requiredScope = undefined;
    }
  });

  it('refuses hostile input on the new fields with a 400 naming the field', async () => {
    const bad = async (path: string, body: Json) => {
      const res = await h.request('POST', path, { body });
      expect(res.status, res.text).toBe(400);
      return json(res).error;
    };
    const connector = await createConnector(server.url.replace('/mcp', '/mcp?hostile=1'));
    expect((await bad('/v1/mcp_servers', { name: 'x', url: server.url, oauth: { client_id: 'a b' } })).param).toContain(
      'client_id',
    );
    expect((await bad('/v1/mcp_servers', { name: 'x', url: server.url, oauth: { scope: 'a\nb' } })).param).toContain(
      'scope',
    );
    expect((await bad('/v1/mcp_servers', { name: 'x', url: server.url, oauth: { extra: 1 } })).param).toBeDefined();
    expect((await bad(`/v1/mcp_servers/${connector.id}/connect`, { user: '' })).param).toContain('user');
    expect((await bad(`/v1/mcp_servers/${connector.id}/connect`, { user: 'x'.repeat(300) })).param).toContain('user');
    expect((await bad(`/v1/mcp_servers/${connector.id}/connect`, { user: 'a\u0000b' })).param).toContain('user');
    const long = await h.request('GET', `/v1/oauth/callback?state=${'s'.repeat(600)}&code=x`, { key: null });
    expect(long.status).toBe(400);
  });

  it('says how to configure the public URL when it is not set', async () => {
    const bare = await createHarness(dialect, { AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true' });
    try {
      const created = await bare.request('POST', '/v1/mcp_servers', {
        body: { name: 'bare', url: server.url, oauth: {} },
      });
      expect(created.status, created.text).toBe(201);
      const res = await bare.request('POST', `/v1/mcp_servers/${json(created).id}/connect`, { body: {} });
      expect(res.status).toBe(409);
      expect(json(res).error).toMatchObject({ code: 'mcp_oauth_not_configured' });
      expect(json(res).error.message).toContain('AGENTRY_PUBLIC_URL');
    } finally {
      await bare.close();
    }
  });
});
