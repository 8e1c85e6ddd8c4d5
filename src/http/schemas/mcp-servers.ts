import { Type } from 'typebox';
import { CursorList, NON_BLANK, Uuid } from './common.ts';

const UnixSeconds = Type.Integer({ description: 'Unix time in seconds' });
const Name = Type.String({ minLength: 1, maxLength: 100, pattern: NON_BLANK });
const Url = Type.String({
  format: 'uri',
  maxLength: 2000,
  description:
    'Streamable-HTTP (or legacy SSE) MCP endpoint: public HTTPS, no credentials, no fragment, no private destination',
});
export const Headers = Type.Record(
  Type.String({ pattern: "^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$" }),
  Type.String({ maxLength: 8192, pattern: '^[^\\r\\n\\u0000]*$' }),
  {
    maxProperties: 32,
    additionalProperties: false,
    description:
      'Static headers sent with every request to the server (e.g. Authorization). Stored encrypted; never returned.',
  },
);

const Token = (description: string) =>
  Type.String({ minLength: 1, maxLength: 2000, pattern: '^[\\x21-\\x7e]+$', description });
const EndUser = Type.String({
  minLength: 1,
  maxLength: 256,
  pattern: '^[^\\u0000-\\u001f]+$',
  description: "An end user's id (a Response's safety_identifier or user)",
});
export const OAuthSettings = Type.Object(
  {
    client_id: Type.Optional(Token('A client id registered beforehand at the authorization server')),
    client_secret: Type.Optional(Token('Its secret, for a confidential client. Stored encrypted; never returned')),
    scope: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 1000,
        pattern: '^[\\x21\\x23-\\x5b\\x5d-\\x7e]+( [\\x21\\x23-\\x5b\\x5d-\\x7e]+)*$',
        description: 'Space-separated scopes to ask for',
      }),
    ),
  },
  {
    additionalProperties: false,
    description:
      'The server signs in with OAuth (docs/mcp-auth.md): it is registered without listing its tools, which happens once connected. Without client_id Agentry registers itself (Client ID Metadata Document, else dynamic registration).',
  },
);

export const McpServerParams = Type.Object({ id: Uuid });

export const McpServer = Type.Object(
  {
    id: Uuid,
    object: Type.Literal('mcp_server'),
    name: Type.String(),
    url: Type.String(),
    header_names: Type.Array(Type.String(), { description: 'Names of the static headers; values are never returned' }),
    protocol: Type.Union([Type.String(), Type.Null()], {
      description: 'The MCP protocol negotiated: 2026-07-28, streamable-http-2025 or sse-2024',
    }),
    tools: Type.Array(
      Type.Object(
        {
          name: Type.String(),
          title: Type.Union([Type.String(), Type.Null()]),
          description: Type.Union([Type.String(), Type.Null()]),
          input_schema: Type.Record(Type.String(), Type.Unknown()),
        },
        { additionalProperties: false },
      ),
      { description: 'The cached tool list' },
    ),
    tools_fetched_at: Type.Union([UnixSeconds, Type.Null()], { description: 'When the tool list was fetched' }),
    auth: Type.Union([Type.Literal('none'), Type.Literal('oauth')], {
      description: 'oauth: connections carry a credential from the vault (POST /v1/mcp_servers/{id}/connect)',
    }),
    oauth: Type.Union(
      [
        Type.Object(
          {
            client_id: Type.Union([Type.String(), Type.Null()], {
              description: 'The client Agentry uses at the authorization server, once known',
            }),
            registration: Type.Union([Type.Literal('pre_registered'), Type.Literal('dynamic'), Type.Null()], {
              description:
                'How the client is known to the authorization server; null: not yet, or by the Client ID Metadata Document',
            }),
            scope: Type.Union([Type.String(), Type.Null()]),
          },
          { additionalProperties: false },
        ),
        Type.Null(),
      ],
      { description: 'OAuth settings (auth oauth); secrets are never returned' },
    ),
    last_error: Type.Union(
      [Type.Object({ code: Type.String(), message: Type.String() }, { additionalProperties: false }), Type.Null()],
      { description: 'Why the last listing failed, until one succeeds' },
    ),
    created_at: UnixSeconds,
    updated_at: UnixSeconds,
  },
  { additionalProperties: false },
);

export const McpServerList = CursorList(McpServer, 'MCP servers of the organization, newest first');

export const McpServerCreateBody = Type.Object(
  { name: Name, url: Url, headers: Type.Optional(Headers), oauth: Type.Optional(OAuthSettings) },
  { additionalProperties: false },
);

export const McpServerConnectBody = Type.Object(
  {
    user: Type.Optional(
      Type.Union([EndUser, Type.Null()], {
        description: "Whose credential this sign-in creates: an end user's, or (absent, null) the organization's",
      }),
    ),
  },
  { additionalProperties: false },
);

export const McpServerAuthorization = Type.Object(
  {
    object: Type.Literal('mcp_server.authorization'),
    server_id: Uuid,
    user: Type.Union([Type.String(), Type.Null()]),
    authorization_url: Type.String({ description: 'Send the person here to sign in; valid until expires_at' }),
    expires_at: UnixSeconds,
  },
  { additionalProperties: false },
);

export const McpCredentialList = Type.Object(
  {
    object: Type.Literal('list'),
    data: Type.Array(
      Type.Object(
        {
          object: Type.Literal('mcp_server.credential'),
          user: Type.Union([Type.String(), Type.Null()], { description: "null: the organization's credential" }),
          kind: Type.Union([Type.Literal('oauth'), Type.Literal('static')], {
            description: 'oauth: tokens from a sign-in, refreshed; static: a bearer token or headers stored by PUT',
          }),
          status: Type.Union([Type.Literal('active'), Type.Literal('authorization_required')]),
          expires_at: Type.Union([UnixSeconds, Type.Null()], { description: 'When the access token expires' }),
          url: Type.String({ description: 'The server URL the credential was issued for' }),
          updated_at: UnixSeconds,
        },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false, description: 'Who holds a credential for the server; tokens are never returned' },
);

export const McpCredentialPutBody = Type.Object(
  {
    user: Type.Optional(
      Type.Union([EndUser, Type.Null()], {
        description: "Whose credential this is: an end user's, or (absent, null) the organization's",
      }),
    ),
    bearer_token: Type.Optional(Token('Sent as Authorization: Bearer <token>. Stored encrypted; never returned')),
    headers: Type.Optional(Headers),
  },
  {
    additionalProperties: false,
    description: 'A static credential: exactly one of bearer_token and headers',
  },
);

export const McpCredentialSaved = Type.Object(
  {
    object: Type.Literal('mcp_server.credential'),
    user: Type.Union([Type.String(), Type.Null()]),
    kind: Type.Literal('static'),
    status: Type.Literal('active'),
    header_names: Type.Array(Type.String()),
  },
  { additionalProperties: false },
);

export const McpCredentialQuery = Type.Object({ user: Type.Optional(EndUser) }, { additionalProperties: false });

export const McpCredentialDeleted = Type.Object(
  {
    object: Type.Literal('mcp_server.credential.deleted'),
    user: Type.Union([Type.String(), Type.Null()]),
    deleted: Type.Literal(true),
  },
  { additionalProperties: false },
);

export const OAuthCallbackQuery = Type.Object(
  {
    state: Type.Optional(Type.String({ maxLength: 512 })),
    code: Type.Optional(Type.String({ maxLength: 4096 })),
    iss: Type.Optional(Type.String({ maxLength: 2000 })),
    error: Type.Optional(Type.String({ maxLength: 200 })),
    error_description: Type.Optional(Type.String({ maxLength: 2000 })),
    error_uri: Type.Optional(Type.String({ maxLength: 2000 })),
  },
  { additionalProperties: true },
);

export const ClientMetadataDocument = Type.Object(
  {
    client_id: Type.String(),
    client_name: Type.String(),
    redirect_uris: Type.Array(Type.String()),
    grant_types: Type.Array(Type.String()),
    response_types: Type.Array(Type.String()),
    token_endpoint_auth_method: Type.String(),
  },
  { description: 'OAuth Client ID Metadata Document of this deployment' },
);

export const McpServerUpdateBody = Type.Object(
  {
    name: Type.Optional(Name),
    url: Type.Optional(Url),
    headers: Type.Optional(
      Type.Union([Headers, Type.Null()], { description: 'Replaces every header; null removes them' }),
    ),
    oauth: Type.Optional(
      Type.Union([OAuthSettings, Type.Null()], {
        description: 'Replaces the OAuth settings (stored credentials stay); null: the server no longer signs in',
      }),
    ),
  },
  { additionalProperties: false, minProperties: 1 },
);

export const McpServerDeleted = Type.Object(
  { id: Uuid, object: Type.Literal('mcp_server.deleted'), deleted: Type.Literal(true) },
  { additionalProperties: false },
);

export const McpServerListQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 20 })),
    after: Type.Optional(Uuid),
  },
  { additionalProperties: false },
);

export const McpCatalogQuery = Type.Object(
  { cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 4096, description: "The page's next_cursor" })) },
  { additionalProperties: false },
);

const Optional = (description: string) => Type.Optional(Type.String({ description }));

const catalogPage = <T extends ReturnType<typeof Type.Object>>(item: T, description: string) =>
  Type.Object(
    {
      object: Type.Literal('list'),
      data: Type.Array(item),
      has_more: Type.Boolean(),
      next_cursor: Type.Union([Type.String(), Type.Null()], { description: 'Pass as cursor for the next page' }),
    },
    { additionalProperties: false, description },
  );

export const McpResourceList = catalogPage(
  Type.Object(
    {
      uri: Type.String(),
      name: Type.String(),
      title: Optional('A display name'),
      description: Optional('What the resource holds'),
      mimeType: Optional('Its media type'),
      size: Type.Optional(Type.Number({ description: 'Its size in bytes, when the server says' })),
    },
    { additionalProperties: false },
  ),
  "A page of the server's resources (resources/list), as the organization sees them",
);

export const McpPromptList = catalogPage(
  Type.Object(
    {
      name: Type.String(),
      title: Optional('A display name'),
      description: Optional('What the prompt is for'),
      arguments: Type.Array(
        Type.Object(
          { name: Type.String(), description: Optional('What to pass'), required: Type.Boolean() },
          { additionalProperties: false },
        ),
      ),
    },
    { additionalProperties: false },
  ),
  "A page of the server's prompts (prompts/list), as the organization sees them",
);
