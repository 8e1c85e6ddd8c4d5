/**
 * A real OAuth 2.1 authorization server on loopback for MCP sign-in tests, built on the MCP SDK's server auth
 * module (`mcpAuthRouter` of `@modelcontextprotocol/sdk`: authorization, token with local PKCE S256 checking,
 * dynamic registration, revocation). This file adds what a test needs around it: an in-memory provider that
 * consents at once (the authorization endpoint redirects straight back with a code, `state` and `iss`), or after
 * a sign-in form for browser tests (`signIn`), Client
 * ID Metadata Documents (a client id that is an https URL is read from that URL, through `resolveDocument`),
 * metadata that advertises them and the RFC 9207 `iss` parameter, counters of what was asked, and switches to
 * expire or revoke tokens. `protect` guards a test MCP server with the tokens it issues: 401 with the
 * `resource_metadata` challenge, 403 `insufficient_scope` when a scope is required, and the RFC 9728 document.
 */
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import { InvalidGrantError, InvalidTokenError } from '@modelcontextprotocol/sdk/server/auth/errors.js';
import type { OAuthServerProvider } from '@modelcontextprotocol/sdk/server/auth/provider.js';
import { mcpAuthRouter } from '@modelcontextprotocol/sdk/server/auth/router.js';
import type { OAuthClientInformationFull } from '@modelcontextprotocol/sdk/shared/auth.js';

interface MiniResponse {
  json(body: unknown): void;
}
interface MiniApp {
  use(handler: unknown): void;
  get(path: string, handler: (req: unknown, res: MiniResponse) => void): void;
  post(path: string, handler: (req: IncomingMessage, res: ServerResponse) => void): void;
  listen(port: number, host: string, callback: () => void): Server;
}
// express ships no types of its own; the SDK's router is what matters here.
const express = createRequire(import.meta.url)('express') as (() => MiniApp) & { json: () => unknown };

interface Grant {
  clientId: string;
  scopes: string[];
  resource: string | undefined;
}

interface IssuedToken extends Grant {
  expiresAt: number;
  revoked: boolean;
}

export interface OAuthTestServerOptions {
  /** Advertise Client ID Metadata Documents (default true). */
  metadataDocuments?: boolean;
  /** Access token lifetime (default 3600 s). */
  accessTtlSeconds?: number;
  /** Reads a client's metadata document (the test maps Agentry's public URL to where it listens). */
  resolveDocument?: (url: string) => Promise<unknown>;
  /** Scopes advertised. */
  scopes?: string[];
  /** The issuer the authorization endpoint names in `iss` (default: its own; a mix-up test changes it). */
  issOverride?: string;
  /**
   * A person signs in before consenting: the authorization endpoint shows a page with a form (Username,
   * Password, "Sign in and allow") that must be submitted with these credentials, instead of redirecting at once.
   */
  signIn?: { username: string; password: string };
}

export interface OAuthTestServer {
  issuer: string;
  counts: { authorizations: number; tokens: number; refreshes: number; registrations: number; documents: number };
  /** Each authorization request's `resource`, `code_challenge_method` and client id. */
  authorizations: { resource: string | null; method: string | null; clientId: string; scope: string | null }[];
  /** Each access token minted, oldest first. */
  accessTokens: string[];
  /** Each client registered dynamically, as registered. */
  registered: OAuthClientInformationFull[];
  /** Each dynamic registration's request body as sent (with fields the SDK's router drops, e.g. `application_type`). */
  registrationRequests: unknown[];
  /** Every access token stops working now (its server answers 401). */
  expireAccessTokens(): void;
  /** Refresh tokens stop working now (refresh answers invalid_grant). */
  revokeRefreshTokens(): void;
  /** Delay of the token endpoint's refresh answers (to make concurrent refreshes overlap). */
  refreshDelayMs: number;
  /**
   * Guards a test MCP server: the RFC 9728 document for `resourceUrl` and the bearer check. Returns true when it
   * answered the request itself.
   */
  protect(
    resourceUrl: () => string,
    requiredScope?: () => string | undefined,
  ): (req: IncomingMessage, res: ServerResponse) => boolean;
  close(): Promise<void>;
}

const token = () => randomBytes(24).toString('base64url');

export async function startOAuthServer(options: OAuthTestServerOptions = {}): Promise<OAuthTestServer> {
  const clients = new Map<string, OAuthClientInformationFull>();
  const codes = new Map<string, Grant & { challenge: string; redirectUri: string }>();
  const access = new Map<string, IssuedToken>();
  const refresh = new Map<string, IssuedToken>();
  const counts = { authorizations: 0, tokens: 0, refreshes: 0, registrations: 0, documents: 0 };
  const authorizations: OAuthTestServer['authorizations'] = [];
  const accessTokens: string[] = [];
  const registered: OAuthClientInformationFull[] = [];
  const registrationRequests: unknown[] = [];
  const ttl = options.accessTtlSeconds ?? 3600;
  let issuer = '';
  const state = { refreshDelayMs: 0 };
  /** Authorizations waiting for the sign-in form: pending id → the redirect back to the client. */
  const signIns = new Map<string, string>();

  const mint = (grant: Grant) => {
    const accessToken = token();
    const refreshToken = token();
    const issued = { ...grant, expiresAt: Date.now() + ttl * 1000, revoked: false };
    access.set(accessToken, issued);
    refresh.set(refreshToken, { ...issued, expiresAt: Number.POSITIVE_INFINITY });
    accessTokens.push(accessToken);
    return {
      access_token: accessToken,
      token_type: 'Bearer',
      expires_in: ttl,
      refresh_token: refreshToken,
      ...(grant.scopes.length === 0 ? {} : { scope: grant.scopes.join(' ') }),
    };
  };

  const provider: OAuthServerProvider = {
    clientsStore: {
      async getClient(clientId) {
        const known = clients.get(clientId);
        if (known !== undefined || !clientId.startsWith('https://') || options.resolveDocument === undefined) {
          return known;
        }
        counts.documents += 1;
        const document = (await options.resolveDocument(clientId)) as Record<string, unknown>;
        if (document.client_id !== clientId) return undefined;
        return {
          client_id: clientId,
          redirect_uris: (document.redirect_uris as string[]) ?? [],
          token_endpoint_auth_method: 'none',
          grant_types: (document.grant_types as string[]) ?? ['authorization_code'],
          response_types: ['code'],
        };
      },
      registerClient(client) {
        counts.registrations += 1;
        const full: OAuthClientInformationFull = {
          ...client,
          client_id: `dcr-${token()}`,
          client_id_issued_at: Math.floor(Date.now() / 1000),
        };
        clients.set(full.client_id, full);
        registered.push(full);
        return full;
      },
    },
    async authorize(client, params, res) {
      counts.authorizations += 1;
      const code = token();
      codes.set(code, {
        clientId: client.client_id,
        scopes: params.scopes ?? [],
        resource: params.resource?.href,
        challenge: params.codeChallenge,
        redirectUri: params.redirectUri,
      });
      const target = new URL(params.redirectUri);
      target.searchParams.set('code', code);
      if (params.state !== undefined) target.searchParams.set('state', params.state);
      target.searchParams.set('iss', options.issOverride ?? issuer);
      if (options.signIn === undefined) {
        res.redirect(302, target.href);
        return;
      }
      const pending = token();
      signIns.set(pending, target.href);
      res
        .status(200)
        .type('html')
        .send(
          `<!doctype html><html lang="en"><head><title>Sign in</title></head><body><main><h1>Sign in to the test authorization server</h1>` +
            `<form method="post" action="/sign-in"><input type="hidden" name="pending" value="${pending}">` +
            `<label>Username <input name="username" autocomplete="username"></label>` +
            `<label>Password <input name="password" type="password" autocomplete="current-password"></label>` +
            `<button type="submit">Sign in and allow</button></form></main></body></html>`,
        );
    },
    async challengeForAuthorizationCode(_client, code) {
      const grant = codes.get(code);
      if (grant === undefined) throw new InvalidGrantError('unknown code');
      return grant.challenge;
    },
    async exchangeAuthorizationCode(client, code, _verifier, redirectUri) {
      const grant = codes.get(code);
      codes.delete(code);
      if (grant === undefined || grant.clientId !== client.client_id) throw new InvalidGrantError('unknown code');
      if (redirectUri !== undefined && redirectUri !== grant.redirectUri) throw new InvalidGrantError('redirect_uri');
      counts.tokens += 1;
      return mint(grant);
    },
    async exchangeRefreshToken(client, refreshToken) {
      counts.refreshes += 1;
      if (state.refreshDelayMs > 0) await new Promise((resolve) => setTimeout(resolve, state.refreshDelayMs));
      const grant = refresh.get(refreshToken);
      if (grant === undefined || grant.revoked || grant.clientId !== client.client_id) {
        throw new InvalidGrantError('the refresh token is revoked');
      }
      refresh.delete(refreshToken);
      return mint(grant);
    },
    async verifyAccessToken(accessToken) {
      const issued = access.get(accessToken);
      if (issued === undefined || issued.revoked || issued.expiresAt < Date.now()) {
        throw new InvalidTokenError('the access token is not valid');
      }
      return {
        token: accessToken,
        clientId: issued.clientId,
        scopes: issued.scopes,
        expiresAt: Math.floor(issued.expiresAt / 1000),
        ...(issued.resource === undefined ? {} : { resource: new URL(issued.resource) }),
      };
    },
  };

  const app = express();
  // Metadata first: it adds what the SDK's router does not advertise (metadata documents, the iss parameter).
  app.get('/.well-known/oauth-authorization-server', (_req, res) => {
    res.json({
      issuer,
      authorization_endpoint: `${issuer}/authorize`,
      token_endpoint: `${issuer}/token`,
      registration_endpoint: `${issuer}/register`,
      response_types_supported: ['code'],
      grant_types_supported: ['authorization_code', 'refresh_token'],
      code_challenge_methods_supported: ['S256'],
      token_endpoint_auth_methods_supported: ['none', 'client_secret_post', 'client_secret_basic'],
      scopes_supported: options.scopes ?? ['read', 'write'],
      authorization_response_iss_parameter_supported: true,
      client_id_metadata_document_supported: options.metadataDocuments ?? true,
    });
  });
  // The sign-in form's submission: the right credentials send the browser back to the client with its code.
  app.post('/sign-in', (req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => {
      body += chunk;
    });
    req.on('end', () => {
      const form = new URLSearchParams(body);
      const target = signIns.get(form.get('pending') ?? '');
      const expected = options.signIn;
      if (
        target === undefined ||
        expected === undefined ||
        form.get('username') !== expected.username ||
        form.get('password') !== expected.password
      ) {
        res.writeHead(401, { 'content-type': 'text/plain' });
        res.end('wrong username or password');
        return;
      }
      signIns.delete(form.get('pending') ?? '');
      res.writeHead(302, { location: target });
      res.end();
    });
  });
  const server = await new Promise<Server>((resolve) => {
    const listening: Server = app.listen(0, '127.0.0.1', () => resolve(listening));
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('the OAuth test server is not on TCP');
  issuer = `http://127.0.0.1:${address.port}`;
  // Registration bodies are read (as JSON) before the router, which then finds them parsed.
  app.use(express.json());
  app.use((req: IncomingMessage & { body?: unknown }, _res: ServerResponse, next: () => void) => {
    if (req.method === 'POST' && new URL(req.url ?? '/', issuer).pathname === '/register') {
      registrationRequests.push(req.body);
    }
    next();
  });
  app.use(
    mcpAuthRouter({
      provider,
      issuerUrl: new URL(issuer),
      authorizationOptions: { rateLimit: false },
      tokenOptions: { rateLimit: false },
      clientRegistrationOptions: { rateLimit: false },
    }),
  );

  const result: OAuthTestServer = {
    issuer,
    counts,
    authorizations,
    accessTokens,
    registered,
    registrationRequests,
    get refreshDelayMs() {
      return state.refreshDelayMs;
    },
    set refreshDelayMs(value: number) {
      state.refreshDelayMs = value;
    },
    expireAccessTokens() {
      for (const issued of access.values()) issued.revoked = true;
    },
    revokeRefreshTokens() {
      for (const issued of refresh.values()) issued.revoked = true;
    },
    protect(resourceUrl, requiredScope) {
      return (req, res) => {
        const url = new URL(req.url ?? '/', 'http://127.0.0.1');
        const resource = new URL(resourceUrl());
        const documentPath = `/.well-known/oauth-protected-resource${resource.pathname}`;
        if (url.pathname === documentPath || url.pathname === '/.well-known/oauth-protected-resource') {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(
            JSON.stringify({
              resource: resource.href,
              authorization_servers: [issuer],
              scopes_supported: options.scopes ?? ['read', 'write'],
            }),
          );
          return true;
        }
        const header = req.headers.authorization ?? '';
        const presented = header.startsWith('Bearer ') ? header.slice(7) : '';
        const issued = access.get(presented);
        const challenge = `Bearer resource_metadata="${resource.origin}${documentPath}"`;
        if (issued === undefined || issued.revoked || issued.expiresAt < Date.now()) {
          res.writeHead(401, { 'content-type': 'application/json', 'www-authenticate': challenge });
          res.end(JSON.stringify({ error: 'invalid_token' }));
          return true;
        }
        const scope = requiredScope?.();
        if (scope !== undefined && !issued.scopes.includes(scope)) {
          res.writeHead(403, {
            'content-type': 'application/json',
            'www-authenticate': `Bearer error="insufficient_scope", scope="${scope}", resource_metadata="${resource.origin}${documentPath}"`,
          });
          res.end(JSON.stringify({ error: 'insufficient_scope' }));
          return true;
        }
        return false;
      };
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  // Authorization requests are recorded as the router sees them (query of GET /authorize).
  const recordAuthorization = (req: IncomingMessage) => {
    const url = new URL(req.url ?? '/', issuer);
    if (url.pathname !== '/authorize') return;
    authorizations.push({
      resource: url.searchParams.get('resource'),
      method: url.searchParams.get('code_challenge_method'),
      clientId: url.searchParams.get('client_id') ?? '',
      scope: url.searchParams.get('scope'),
    });
  };
  server.prependListener('request', recordAuthorization);
  return result;
}
