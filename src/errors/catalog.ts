/**
 * The one catalog of error codes. Every error the API returns carries one of these codes; the HTTP status and
 * the OpenAI-style `type` come from here and nowhere else. `docs/errors.md` is checked against it by a test.
 */
export const errorCatalog = {
  validation_error: {
    status: 400,
    type: 'invalid_request_error',
    description: 'A path, query, header or body value is invalid; `param` names it.',
  },
  invalid_json: { status: 400, type: 'invalid_request_error', description: 'The request body is not valid JSON.' },
  unsupported_content_type: {
    status: 400,
    type: 'invalid_request_error',
    description:
      'The Content-Type header names a media type this route does not accept (JSON routes need application/json; POST /v1/files needs multipart/form-data).',
  },
  missing_api_key: {
    status: 401,
    type: 'authentication_error',
    description: 'No API key was sent (Authorization: Bearer, API_KEY or X-API-Key header).',
  },
  invalid_api_key: {
    status: 401,
    type: 'authentication_error',
    description: 'The API key is unknown, expired or revoked.',
  },
  invalid_metrics_token: {
    status: 401,
    type: 'authentication_error',
    description:
      'GET /metrics is protected (AGENTRY_METRICS_TOKEN) and the request did not send `Authorization: Bearer <that token>`.',
  },
  invalid_admin_token: {
    status: 401,
    type: 'authentication_error',
    description:
      'A /v1/admin route was called without `Authorization: Bearer <AGENTRY_ADMIN_TOKEN>` or with another token. API keys are not accepted there.',
  },
  insufficient_scopes: {
    status: 403,
    type: 'permission_error',
    description: 'The API key lacks a scope the route requires.',
  },
  limit_exceeded: {
    status: 400,
    type: 'invalid_request_error',
    description: 'An organization limit was reached, e.g. a 21st webhook endpoint (the maximum is 20).',
  },
  not_found: { status: 404, type: 'not_found_error', description: 'The resource does not exist in this organization.' },
  route_not_found: { status: 404, type: 'not_found_error', description: 'No route matches this method and path.' },
  insufficient_credits: {
    status: 402,
    type: 'billing_error',
    description: "The organization's credit balance is spent and the agent's model is priced.",
  },
  rate_limit_exceeded: {
    status: 429,
    type: 'rate_limit_error',
    description:
      'The API key or its organization sent more requests this minute than its limit allows (docs/operations.md, Limits). `Retry-After` says when the window resets; the `RateLimit` and `RateLimit-Policy` headers give the limit and what is left.',
  },
  budget_exceeded: {
    status: 402,
    type: 'billing_error',
    description:
      "A budget of the turn's agent, session or schedule is spent: the message is refused, or the turn ends failed before its next model call.",
  },
  client_tool_output_required: {
    status: 409,
    type: 'conflict_error',
    description: 'A client tool call is waiting for its output; submit it before new input.',
  },
  function_call_output_conflict: {
    status: 409,
    type: 'conflict_error',
    description: 'A different output was already recorded for this call_id.',
  },
  version_conflict: {
    status: 409,
    type: 'conflict_error',
    description:
      'The agent changed since the version named by If-Match (or the body `version`); `error.details.currentVersion` is the version now current. Read it again and retry.',
  },
  agent_required: {
    status: 409,
    type: 'conflict_error',
    description:
      'The Session was created as a Conversation without an agent (POST /v1/conversations); a Response (POST /v1/responses with model) fixes its agent first.',
  },
  conversation_busy: {
    status: 409,
    type: 'conflict_error',
    description:
      'The Conversation has an unfinished Response (queued, running or waiting for tool outputs); its items can be deleted once it ended.',
  },
  action_not_waiting: {
    status: 409,
    type: 'conflict_error',
    description: 'The action does not exist on this message, belongs to another message, or is no longer waiting.',
  },
  idempotency_conflict: {
    status: 409,
    type: 'conflict_error',
    description: 'The Idempotency-Key was already used with a different request.',
  },
  agent_in_use: {
    status: 409,
    type: 'conflict_error',
    description: 'The Agent cannot be deleted while Sessions reference it.',
  },
  default_agent: {
    status: 409,
    type: 'conflict_error',
    description: "The organization's default Agent cannot be deleted.",
  },
  sandbox_provisioned: {
    status: 409,
    type: 'conflict_error',
    description: "skills and networkPolicy cannot change after the Agent's workspace has been provisioned.",
  },
  workspace_reserved: {
    status: 409,
    type: 'conflict_error',
    description:
      'POST /v1/tasks named a workspaceId that is the Session of the Agents API; only workspaces of earlier Tasks can be reused.',
  },
  mcp_server_exists: {
    status: 409,
    type: 'conflict_error',
    description:
      'The organization already has an MCP server at this URL (one connector per URL; agents with that URL reuse it).',
  },
  mcp_oauth_not_configured: {
    status: 409,
    type: 'conflict_error',
    description:
      'MCP servers cannot be connected with OAuth on this deployment: AGENTRY_PUBLIC_URL (where the authorization server sends the browser back) is not set.',
  },
  mcp_authorization_failed: {
    status: 400,
    type: 'invalid_request_error',
    description:
      'GET /v1/oauth/callback could not complete a sign-in: the state is unknown, used or expired, the authorization server answered an error or the wrong issuer, or it refused the code; the message says which. Start again with POST /v1/mcp_servers/{id}/connect.',
  },
  mcp_server_in_use: {
    status: 409,
    type: 'conflict_error',
    description: 'The MCP server cannot be deleted while agents use it; the message names them.',
  },
  malformed_request: {
    status: 400,
    type: 'invalid_request_error',
    description:
      'The request is not valid HTTP/1.1 (its request line or a header could not be parsed); the connection is closed.',
  },
  request_timeout: {
    status: 408,
    type: 'invalid_request_error',
    description: 'The client did not send the request headers in time; the connection is closed.',
  },
  headers_too_large: {
    status: 431,
    type: 'invalid_request_error',
    description: "The request's headers exceed Node's header size limit (16 KiB); the connection is closed.",
  },
  payload_too_large: {
    status: 413,
    type: 'invalid_request_error',
    description:
      'The request body exceeds the configured size limit (AGENTRY_BODY_LIMIT_BYTES), or an uploaded file exceeds AGENTRY_MAX_UPLOAD_BYTES.',
  },
  response_timeout: {
    status: 504,
    type: 'server_error',
    description:
      'A synchronous Response or chat completion took longer than AGENTRY_RESPONSES_SYNC_TIMEOUT_MS; the turn goes on and stays retrievable with GET /v1/responses/{id} (a chat completion: its Run, GET /v1/runs/{id}).',
  },
  turn_failed: {
    status: 502,
    type: 'server_error',
    description:
      "POST /v1/chat/completions: the agent's turn failed or was cancelled (its model or a tool ended it) before it produced a reply; the message gives the turn's error and the Run to look at (GET /v1/runs/{id}). Streamed, it arrives as an error frame.",
  },
  webhook_test_failed: {
    status: 502,
    type: 'server_error',
    description:
      'POST /v1/webhook_endpoints/{id}/test got no HTTP answer from the receiver (DNS, connection, TLS or 10 s timeout); the message says which. The attempt is recorded in the event history.',
  },
  invalid_output: {
    status: 502,
    type: 'server_error',
    description:
      "The model's final reply did not have the structure the turn asked for (Responses `text.format`, a message's or agent's `outputFormat`): not JSON, or not matching the schema; the message names the first violation. It ends a turn `failed` (its Response `failed` with this error code), keeping the text; an API that answers with a turn's outcome answers with it.",
  },
  compaction_failed: {
    status: 502,
    type: 'server_error',
    description:
      "POST /v1/responses/compact: the agent's model could not write the summary (the provider's error, the 120 s limit of a call, or an empty summary); the message says which. Nothing is charged.",
  },
  mcp_server_unreachable: {
    status: 502,
    type: 'server_error',
    description:
      "POST /v1/mcp_servers/{id}/refresh could not list the server's tools, GET /v1/mcp_servers/{id}/resources or /prompts could not ask the server, or a message's mcp_prompt part could not be asked of its server (connection, authentication, protocol or timeout); the message says which. After a failed refresh the connector keeps its last list and shows the error in last_error.",
  },
  mcp_authorization_unavailable: {
    status: 502,
    type: 'server_error',
    description:
      'POST /v1/mcp_servers/{id}/connect could not start a sign-in: the MCP server or its authorization server could not be discovered, or client registration failed; the message says which.',
  },
  internal_error: {
    status: 500,
    type: 'server_error',
    description:
      'An unexpected server error; the body never carries internal details. The request id identifies it in the logs.',
  },
  insufficient_storage: {
    status: 507,
    type: 'server_error',
    description:
      "The server's disk (or its database's) is full: nothing was written. Reads are still served; writes are refused until space is freed, and `Retry-After` says when to try again (docs/operations.md, When the disk is full).",
  },
  service_unavailable: {
    status: 503,
    type: 'server_error',
    description:
      'The server is starting, shutting down or cannot reach its database; from GET /readyz also: it is read-only because the disk is full.',
  },
} as const satisfies Record<string, { status: number; type: string; description: string }>;

export type ErrorCode = keyof typeof errorCatalog;

export function isErrorCode(value: string): value is ErrorCode {
  return Object.hasOwn(errorCatalog, value);
}
