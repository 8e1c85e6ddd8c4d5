/**
 * OAuth 2.1 for MCP connectors, as the MCP authorization specification asks of a client, on the SDK's auth module
 * (`@modelcontextprotocol/client`): protected-resource metadata discovery (RFC 9728, from the 401's
 * `WWW-Authenticate` or the well-known paths), authorization-server metadata (RFC 8414, OpenID discovery), client
 * registration by Client ID Metadata Document when the server supports it, else dynamic registration (RFC 7591),
 * else the connector's pre-registered client; authorization code with PKCE S256, the `resource` parameter
 * (RFC 8707), `iss` checked on the callback (RFC 9207), refresh tokens.
 *
 * Nothing here keeps state: `beginAuthorization` returns what the callback needs (`PendingAuthorization`), which
 * the caller stores durably; `completeAuthorization` takes it back. Every request goes through the caller's fetch
 * (the egress guard). Tokens are secrets: they are returned, never logged.
 */
import type {
  OAuthClientInformationMixed,
  OAuthClientMetadata,
  OAuthClientProvider,
  OAuthDiscoveryState,
  OAuthTokens,
  StoredOAuthClientInformation,
} from '@modelcontextprotocol/client';

const sdk = () => import('@modelcontextprotocol/client');

/** A token set as the vault keeps it. `expires_at`: epoch ms, or null when the server gave no lifetime. */
export interface OAuthTokenSet {
  access_token: string;
  refresh_token?: string | undefined;
  token_type?: string | undefined;
  scope?: string | undefined;
  expires_at: number | null;
  /** What a refresh needs again: the authorization server, its metadata, and the resource the tokens are for. */
  discovery: OAuthDiscoveryState;
  resource?: string | undefined;
  /** The client the tokens were issued to (a refresh authenticates as it). */
  client: OAuthClientInformationMixed;
}

/** What an authorization in progress must keep until its callback. */
export interface PendingAuthorization {
  serverUrl: string;
  codeVerifier: string;
  discovery?: OAuthDiscoveryState | undefined;
  client?: OAuthClientInformationMixed | undefined;
  scope?: string | undefined;
}

export interface OAuthSettings {
  /** The guarded fetch every OAuth request goes through. */
  fetch: typeof fetch;
  /** `<public URL>/v1/oauth/callback`. */
  redirectUrl: string;
  /** `<public URL>/v1/oauth/client-metadata.json`, when the public URL is https (the document's own rule). */
  clientMetadataUrl?: string | undefined;
  clientName: string;
}

/** The Client ID Metadata Document Agentry serves at `clientMetadataUrl` (also the body of a registration). */
export function clientMetadata(settings: Pick<OAuthSettings, 'redirectUrl' | 'clientName'>): OAuthClientMetadata {
  return {
    client_name: settings.clientName,
    redirect_uris: [settings.redirectUrl],
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    token_endpoint_auth_method: 'none',
  };
}

/** An OAuth failure: `refused` when the server said no (a person must connect again), else `unavailable`. */
export class OAuthFlowError extends Error {
  readonly kind: 'refused' | 'unavailable';
  constructor(kind: 'refused' | 'unavailable', message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'OAuthFlowError';
    this.kind = kind;
  }
}

/** OAuth error codes after which retrying the same grant cannot help. */
const REFUSALS = new Set(['invalid_grant', 'invalid_client', 'unauthorized_client', 'access_denied', 'invalid_scope']);

async function flowError(error: unknown, what: string): Promise<OAuthFlowError> {
  if (error instanceof OAuthFlowError) return error;
  const { OAuthError } = await sdk();
  const message = error instanceof Error ? error.message : String(error);
  if (error instanceof OAuthError) {
    const kind = REFUSALS.has(error.code) ? 'refused' : 'unavailable';
    return new OAuthFlowError(kind, `${what}: the authorization server answered ${error.code}: ${message}`, {
      cause: error,
    });
  }
  return new OAuthFlowError('unavailable', `${what}: ${message}`, { cause: error });
}

const expiresAt = (tokens: OAuthTokens, now: number): number | null =>
  typeof tokens.expires_in === 'number' && Number.isFinite(tokens.expires_in) ? now + tokens.expires_in * 1000 : null;

/**
 * The SDK's provider over plain values: it reads what the caller knows and records what the flow produces.
 * One instance serves one step (begin or complete).
 */
class StepProvider implements OAuthClientProvider {
  authorizationUrl: URL | undefined;
  codeVerifierValue: string | undefined;
  discovery: OAuthDiscoveryState | undefined;
  registered: OAuthClientInformationMixed | undefined;
  tokensSaved: OAuthTokens | undefined;
  clientMetadataUrl?: string;
  readonly settings: OAuthSettings;
  readonly known: { state?: string; client?: OAuthClientInformationMixed | undefined; pending?: PendingAuthorization };

  constructor(settings: OAuthSettings, known: StepProvider['known']) {
    this.settings = settings;
    this.known = known;
    // A pre-registered client wins over the metadata document.
    if (known.client === undefined && settings.clientMetadataUrl !== undefined) {
      this.clientMetadataUrl = settings.clientMetadataUrl;
    }
    this.discovery = known.pending?.discovery;
    this.registered = known.pending?.client ?? known.client;
  }

  get redirectUrl(): string {
    return this.settings.redirectUrl;
  }
  get clientMetadata(): OAuthClientMetadata {
    return clientMetadata(this.settings);
  }
  state(): string {
    return this.known.state ?? '';
  }
  /**
   * The client to present. A client registered by this flow carries the issuer it was registered at, and the SDK
   * does not present it to another authorization server (the server moved: it registers again). A pre-registered
   * client carries none: the operator registered it at this server's authorization server, whichever that is.
   */
  clientInformation(context?: { issuer: string }): StoredOAuthClientInformation | undefined {
    const registered = this.registered;
    if (registered === undefined || context === undefined || 'issuer' in registered) return registered;
    return { ...registered, issuer: context.issuer };
  }
  saveClientInformation(information: OAuthClientInformationMixed): void {
    this.registered = information;
  }
  tokens(): OAuthTokens | undefined {
    return this.tokensSaved;
  }
  saveTokens(tokens: OAuthTokens): void {
    this.tokensSaved = tokens;
  }
  redirectToAuthorization(url: URL): void {
    this.authorizationUrl = url;
  }
  saveCodeVerifier(verifier: string): void {
    this.codeVerifierValue = verifier;
  }
  codeVerifier(): string {
    const verifier = this.known.pending?.codeVerifier ?? this.codeVerifierValue;
    if (verifier === undefined) throw new OAuthFlowError('refused', 'no PKCE verifier for this authorization');
    return verifier;
  }
  saveDiscoveryState(state: OAuthDiscoveryState): void {
    this.discovery = state;
  }
  discoveryState(): OAuthDiscoveryState | undefined {
    return this.discovery;
  }
  invalidateCredentials(scope: 'all' | 'client' | 'tokens' | 'verifier' | 'discovery'): void {
    if (scope === 'all' || scope === 'client') this.registered = undefined;
    if (scope === 'all' || scope === 'tokens') this.tokensSaved = undefined;
    if (scope === 'all' || scope === 'discovery') this.discovery = undefined;
  }
}

/**
 * Starts an authorization: discovers the servers, registers the client when needed, and returns the URL to send
 * the person to, with what the callback needs. `resourceMetadataUrl`: from a 401's `WWW-Authenticate`, if one
 * was seen.
 */
export async function beginAuthorization(
  settings: OAuthSettings,
  input: {
    serverUrl: string;
    state: string;
    client?: OAuthClientInformationMixed | undefined;
    scope?: string | undefined;
    resourceMetadataUrl?: string | undefined;
  },
): Promise<{
  authorizationUrl: string;
  pending: PendingAuthorization;
  registered: OAuthClientInformationMixed | null;
}> {
  const { auth, IssuerMismatchError } = await sdk();
  // Without a challenge seen yet, ask the server for one: its `resource_metadata` and `scope` come first.
  const challenge = input.resourceMetadataUrl === undefined ? await probeChallenge(settings, input.serverUrl) : {};
  const resourceMetadataUrl = input.resourceMetadataUrl ?? challenge.resourceMetadata;
  const scope = input.scope ?? challenge.scope;
  const attempt = async (skipIssuerMetadataValidation: boolean) => {
    const provider = new StepProvider(settings, { state: input.state, client: input.client });
    const result = await auth(provider, {
      serverUrl: input.serverUrl,
      fetchFn: settings.fetch,
      ...(scope === undefined ? {} : { scope }),
      ...(resourceMetadataUrl === undefined ? {} : { resourceMetadataUrl: new URL(resourceMetadataUrl) }),
      ...(skipIssuerMetadataValidation ? { skipIssuerMetadataValidation } : {}),
    });
    return { provider, result };
  };
  let provider: StepProvider;
  let result: string;
  try {
    try {
      ({ provider, result } = await attempt(false));
    } catch (error) {
      // A 2025-03-26 server (no protected-resource metadata) is its own authorization server, and may serve its
      // metadata at the root with an issuer under a path of the same origin: accepted for that origin only.
      if (
        !(error instanceof IssuerMismatchError) ||
        error.kind !== 'metadata' ||
        !sameOrigin(error.received, input.serverUrl) ||
        (await hasResourceMetadata(settings, input.serverUrl, resourceMetadataUrl))
      ) {
        throw error;
      }
      ({ provider, result } = await attempt(true));
    }
  } catch (error) {
    throw await flowError(error, 'starting the authorization');
  }
  const verifier = provider.codeVerifierValue;
  if (result !== 'REDIRECT' || provider.authorizationUrl === undefined || verifier === undefined) {
    throw new OAuthFlowError('unavailable', 'the authorization server did not start an authorization code flow');
  }
  // A new client only when the flow registered one: not the known client (stamped with its issuer), nor the
  // metadata document's URL (nothing was registered; the next sign-in offers the document again).
  const fresh = provider.registered;
  const registered =
    fresh !== undefined && fresh.client_id !== input.client?.client_id && fresh.client_id !== settings.clientMetadataUrl
      ? fresh
      : null;
  return {
    authorizationUrl: provider.authorizationUrl.href,
    pending: {
      serverUrl: input.serverUrl,
      codeVerifier: verifier,
      discovery: provider.discovery,
      client: provider.registered,
      ...(scope === undefined ? {} : { scope }),
    },
    registered,
  };
}

/**
 * An unauthenticated request to the MCP server (an `initialize`, which any MCP server answers), for the
 * `WWW-Authenticate` challenge of its 401: where its protected-resource metadata is and which scope it needs.
 * A server that answers otherwise, or not at all, gives none (discovery then uses the well-known paths).
 */
async function probeChallenge(
  settings: Pick<OAuthSettings, 'fetch'>,
  serverUrl: string,
): Promise<{ resourceMetadata?: string; scope?: string }> {
  try {
    const res = await settings.fetch(serverUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 0,
        method: 'initialize',
        params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'agentry', version: '1.0.0' } },
      }),
      signal: AbortSignal.timeout(PROBE_TIMEOUT_MS),
    });
    await res.body?.cancel().catch(() => undefined);
    if (res.status !== 401 && res.status !== 403) return {};
    const { resourceMetadata, scope } = challengeOf(res.headers.get('www-authenticate'));
    return {
      ...(resourceMetadata === undefined ? {} : { resourceMetadata }),
      ...(scope === undefined ? {} : { scope }),
    };
  } catch {
    return {};
  }
}

const PROBE_TIMEOUT_MS = 10_000;

const sameOrigin = (a: string | undefined, b: string): boolean =>
  a !== undefined && URL.canParse(a) && URL.canParse(b) && new URL(a).origin === new URL(b).origin;

/** Whether the server publishes protected-resource metadata (RFC 9728). */
async function hasResourceMetadata(
  settings: Pick<OAuthSettings, 'fetch'>,
  serverUrl: string,
  resourceMetadataUrl: string | undefined,
): Promise<boolean> {
  const { discoverOAuthProtectedResourceMetadata } = await sdk();
  try {
    await discoverOAuthProtectedResourceMetadata(
      serverUrl,
      resourceMetadataUrl === undefined ? {} : { resourceMetadataUrl: new URL(resourceMetadataUrl) },
      settings.fetch,
    );
    return true;
  } catch {
    return false;
  }
}

/** Redeems the callback's code (checking `iss`) for tokens. */
export async function completeAuthorization(
  settings: OAuthSettings,
  input: { pending: PendingAuthorization; code: string; iss?: string | undefined; now: number },
): Promise<OAuthTokenSet> {
  const { auth, selectResourceURL } = await sdk();
  const provider = new StepProvider(settings, { pending: input.pending });
  try {
    const result = await auth(provider, {
      serverUrl: input.pending.serverUrl,
      authorizationCode: input.code,
      fetchFn: settings.fetch,
      ...(input.iss === undefined ? {} : { iss: input.iss }),
      ...(input.pending.scope === undefined ? {} : { scope: input.pending.scope }),
    });
    const tokens = provider.tokensSaved;
    const discovery = provider.discovery;
    const client = provider.registered;
    if (result !== 'AUTHORIZED' || tokens === undefined || discovery === undefined || client === undefined) {
      throw new OAuthFlowError('refused', 'the authorization server issued no tokens');
    }
    const resource = await selectResourceURL(input.pending.serverUrl, provider, discovery.resourceMetadata);
    return tokenSet(tokens, { discovery, client, resource: resource?.href, now: input.now });
  } catch (error) {
    throw await flowError(error, 'completing the authorization');
  }
}

function tokenSet(
  tokens: OAuthTokens,
  context: {
    discovery: OAuthDiscoveryState;
    client: OAuthClientInformationMixed;
    resource: string | undefined;
    now: number;
    previousRefresh?: string | undefined;
  },
): OAuthTokenSet {
  return {
    access_token: tokens.access_token,
    refresh_token: tokens.refresh_token ?? context.previousRefresh,
    token_type: tokens.token_type,
    scope: tokens.scope,
    expires_at: expiresAt(tokens, context.now),
    discovery: context.discovery,
    resource: context.resource,
    client: context.client,
  };
}

/** One refresh-token request; `refused` when the server will not refresh (revoked, expired, client gone). */
export async function refreshTokenSet(
  settings: Pick<OAuthSettings, 'fetch'>,
  tokens: OAuthTokenSet,
  now: number,
): Promise<OAuthTokenSet> {
  if (tokens.refresh_token === undefined) throw new OAuthFlowError('refused', 'the credential has no refresh token');
  const { refreshAuthorization } = await sdk();
  try {
    const refreshed = await refreshAuthorization(tokens.discovery.authorizationServerUrl, {
      ...(tokens.discovery.authorizationServerMetadata === undefined
        ? {}
        : { metadata: tokens.discovery.authorizationServerMetadata }),
      clientInformation: tokens.client,
      refreshToken: tokens.refresh_token,
      ...(tokens.resource === undefined ? {} : { resource: tokens.resource }),
      fetchFn: settings.fetch,
    });
    return tokenSet(refreshed, {
      discovery: tokens.discovery,
      client: tokens.client,
      resource: tokens.resource,
      now,
      previousRefresh: tokens.refresh_token,
    });
  } catch (error) {
    throw await flowError(error, 'refreshing the access token');
  }
}

/** The parameters of a `WWW-Authenticate: Bearer …` challenge that matter here. */
export function challengeOf(header: string | null): { error?: string; scope?: string; resourceMetadata?: string } {
  if (header === null) return {};
  const out: { error?: string; scope?: string; resourceMetadata?: string } = {};
  for (const match of header.matchAll(/([a-zA-Z_]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]+))/g)) {
    const value = (match[2] ?? match[3] ?? '').replace(/\\(.)/g, '$1');
    if (match[1] === 'error') out.error = value;
    else if (match[1] === 'scope') out.scope = value;
    else if (match[1] === 'resource_metadata') out.resourceMetadata = value;
  }
  return out;
}

/** The union of space-separated scope lists, each scope once, in first-seen order. */
export function scopeUnion(...scopes: (string | null | undefined)[]): string | undefined {
  const all = new Set(scopes.flatMap((scope) => (scope ?? '').split(/\s+/).filter((part) => part.length > 0)));
  return all.size === 0 ? undefined : [...all].join(' ');
}
