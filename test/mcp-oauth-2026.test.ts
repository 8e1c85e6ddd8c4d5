/**
 * OAuth sign-in to MCP servers of the 2026-07-28 revision (docs/mcp-auth.md): the protected server is a stateless
 * v2 `@modelcontextprotocol/server` that answers only that revision (`initialize` refused), behind a real
 * authorization server (test/helpers/oauth-server.ts). Covered: discovery from the 401's `resource_metadata`,
 * sign-in by dynamic registration (with the `application_type` the revision has clients declare), the negotiated
 * revision, tools listed and called with the token on every stateless request, refresh on a 401 and before
 * expiry; and the revision's authorization-server binding: a client registered at one authorization server is
 * never presented to another (the server moved: Agentry registers again), and the callback's `iss` must name the
 * server the sign-in started at. Driven through the API, the public callback and Responses turns with the
 * `scripted` model. Once per dialect.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flows, type Json } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';
import { type McpTestServer, startModernMcpServer } from './helpers/mcp-servers.ts';
import { type OAuthTestServer, startOAuthServer } from './helpers/oauth-server.ts';

const PUBLIC = 'https://agentry.test';

describe.each(dialects())('MCP sign-in with OAuth to a 2026-07-28 server (%s)', (dialect) => {
  let h: Harness;
  let first: OAuthTestServer;
  let second: OAuthTestServer;
  let wrongIss: OAuthTestServer;
  let shortLived: OAuthTestServer;
  /** The authorization server guarding `server` now (the migration test moves it). */
  let guarding: () => OAuthTestServer;
  let server: McpTestServer;
  let shortServer: McpTestServer;
  let wrongIssServer: McpTestServer;
  const flow = flows(() => h);

  const local = async (url: string) => {
    expect(url.startsWith(`${PUBLIC}/`), url).toBe(true);
    return h.request('GET', url.slice(PUBLIC.length), { key: null });
  };

  /** The person approves at the authorization server: its redirect is followed back to Agentry's callback. */
  const approve = async (authorizationUrl: string) => {
    const answer = await fetch(authorizationUrl, { redirect: 'manual' });
    expect(answer.status, await answer.clone().text()).toBe(302);
    return local(answer.headers.get('location') ?? '');
  };

  const createConnector = async (url: string) => {
    const res = await h.request('POST', '/v1/mcp_servers', {
      body: { name: `srv${Math.random().toString(36).slice(2, 8)}`, url, oauth: {} },
    });
    expect(res.status, res.text).toBe(201);
    return json(res);
  };

  const connect = async (id: string) => {
    const res = await h.request('POST', `/v1/mcp_servers/${id}/connect`, { body: {} });
    expect(res.status, res.text).toBe(200);
    return json(res);
  };

  const signIn = async (id: string) => {
    const done = await approve((await connect(id)).authorization_url);
    expect(done.status, done.text).toBe(200);
  };

  /** A Response of the agent: the scripted model calls the tool and replies with its result. */
  const call = async (agentId: string, input: string) => {
    const res = await h.request('POST', '/v1/responses', { body: { model: agentId, input } });
    expect(res.status, res.text).toBe(200);
    return String(json(res).output_text ?? '');
  };

  const agentWith = (serverId: string) =>
    flow.createAgent({ mcpServers: [{ kind: 'custom', serverId, name: 'docs' }] });

  beforeAll(async () => {
    // Dynamic registration (no metadata documents): the client is bound to the server that registered it.
    first = await startOAuthServer({ metadataDocuments: false });
    second = await startOAuthServer({ metadataDocuments: false });
    wrongIss = await startOAuthServer({ metadataDocuments: false, issOverride: 'https://mix-up.example' });
    shortLived = await startOAuthServer({ metadataDocuments: false, accessTtlSeconds: 30 });
    guarding = () => first;
    server = await startModernMcpServer({
      name: 'protected-2026',
      guard: (req, res) => guarding().protect(() => server.url)(req, res),
    });
    shortServer = await startModernMcpServer({
      name: 'short-2026',
      guard: (req, res) => shortLived.protect(() => shortServer.url)(req, res),
    });
    wrongIssServer = await startModernMcpServer({
      name: 'mixed-up-2026',
      guard: (req, res) => wrongIss.protect(() => wrongIssServer.url)(req, res),
    });
    h = await createHarness(dialect, { AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true', AGENTRY_PUBLIC_URL: PUBLIC });
  });
  afterAll(async () => {
    await h.close();
    await Promise.all(
      [first, second, wrongIss, shortLived, server, shortServer, wrongIssServer].map((each) => each.close()),
    );
  });

  it('discovers from the 401, signs in, lists and calls tools over the 2026-07-28 revision, and refreshes on a 401', async () => {
    const connector = await createConnector(server.url);
    const before = server.state.http.length;
    const started = await connect(connector.id);
    // The unauthenticated probe met the guard's 401, whose `resource_metadata` led to the authorization server.
    expect(server.state.http.slice(before)).toContain('POST /mcp');
    expect(server.state.http.slice(before)).toContain('GET /.well-known/oauth-protected-resource/mcp');
    const url = new URL(started.authorization_url);
    expect(url.origin).toBe(first.issuer);
    expect(url.searchParams.get('resource')).toBe(server.url);
    expect(url.searchParams.get('code_challenge_method')).toBe('S256');
    // Registered dynamically, declaring its application type (the revision's client registration).
    expect(first.registered).toHaveLength(1);
    expect(first.registrationRequests).toEqual([
      expect.objectContaining({ redirect_uris: [`${PUBLIC}/v1/oauth/callback`], application_type: 'web' }),
    ]);
    expect(url.searchParams.get('client_id')).toBe(first.registered[0]?.client_id);

    const done = await approve(started.authorization_url);
    expect(done.status, done.text).toBe(200);
    const after = json(await h.request('GET', `/v1/mcp_servers/${connector.id}`));
    expect(after.protocol).toBe('2026-07-28');
    expect(after.oauth).toMatchObject({ registration: 'dynamic', client_id: first.registered[0]?.client_id });
    expect(after.tools.map((tool: Json) => tool.name)).toEqual(expect.arrayContaining(['echo', 'whoami']));

    const agentId = await agentWith(connector.id);
    expect(await call(agentId, 'call echo {"text":"hello"}')).toContain('echo: hello');
    // Stateless: every request carries the token; the one the server saw is the last one minted.
    expect(await call(agentId, 'call whoami {}')).toContain(`Bearer ${first.accessTokens.at(-1)}`);

    first.expireAccessTokens();
    const refreshes = first.counts.refreshes;
    expect(await call(agentId, 'call echo {"text":"after expiry"}')).toContain('echo: after expiry');
    expect(first.counts.refreshes - refreshes).toBe(1);
    expect(await call(agentId, 'call whoami {}')).toContain(`Bearer ${first.accessTokens.at(-1)}`);
    expect(first.counts.refreshes - refreshes).toBe(1);
  });

  it('refreshes before expiry, without a 401', async () => {
    const connector = await createConnector(shortServer.url);
    await signIn(connector.id);
    const agentId = await agentWith(connector.id);
    const refreshes = shortLived.counts.refreshes;
    // 30 s left is inside the refresh margin: the turn refreshes first.
    expect(await call(agentId, 'call echo {"text":"soon"}')).toContain('echo: soon');
    expect(shortLived.counts.refreshes - refreshes).toBe(1);
    expect(await call(agentId, 'call whoami {}')).toContain(`Bearer ${shortLived.accessTokens.at(-1)}`);
  });

  it('registers again when the server moves to another authorization server, never presenting the old client', async () => {
    const connector = await createConnector(server.url.replace('/mcp', '/mcp?moved=1'));
    await signIn(connector.id);
    const registeredAtFirst = json(await h.request('GET', `/v1/mcp_servers/${connector.id}`)).oauth.client_id;
    expect(registeredAtFirst).toMatch(/^dcr-/);

    guarding = () => second;
    try {
      const started = await connect(connector.id);
      const url = new URL(started.authorization_url);
      expect(url.origin).toBe(second.issuer);
      expect(second.registered).toHaveLength(1);
      expect(url.searchParams.get('client_id')).toBe(second.registered[0]?.client_id);
      expect(url.searchParams.get('client_id')).not.toBe(registeredAtFirst);
      const done = await approve(started.authorization_url);
      expect(done.status, done.text).toBe(200);
      const after = json(await h.request('GET', `/v1/mcp_servers/${connector.id}`));
      expect(after.oauth).toMatchObject({ registration: 'dynamic', client_id: second.registered[0]?.client_id });
      const agentId = await agentWith(connector.id);
      expect(await call(agentId, 'call whoami {}')).toContain(`Bearer ${second.accessTokens.at(-1)}`);
    } finally {
      guarding = () => first;
    }
  });

  it('refuses a callback whose iss names another authorization server', async () => {
    const connector = await createConnector(wrongIssServer.url);
    const done = await approve((await connect(connector.id)).authorization_url);
    expect(done.status, done.text).toBe(400);
    expect(done.text).toContain('mcp_authorization_failed');
    expect(wrongIss.counts.tokens).toBe(0);
    const credentials = json(await h.request('GET', `/v1/mcp_servers/${connector.id}/credentials`)).data;
    expect(credentials).toEqual([]);
  });
});
