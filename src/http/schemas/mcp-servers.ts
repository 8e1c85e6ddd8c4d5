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
const Headers = Type.Record(
  Type.String({ pattern: "^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$" }),
  Type.String({ maxLength: 8192, pattern: '^[^\\r\\n\\u0000]*$' }),
  {
    maxProperties: 32,
    additionalProperties: false,
    description:
      'Static headers sent with every request to the server (e.g. Authorization). Stored encrypted; never returned.',
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
  { name: Name, url: Url, headers: Type.Optional(Headers) },
  { additionalProperties: false },
);

export const McpServerUpdateBody = Type.Object(
  {
    name: Type.Optional(Name),
    url: Type.Optional(Url),
    headers: Type.Optional(
      Type.Union([Headers, Type.Null()], { description: 'Replaces every header; null removes them' }),
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
