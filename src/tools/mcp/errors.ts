/**
 * MCP failures as one error type with a closed set of codes. failures.ts reads the SDK's error shapes into it;
 * this module does not import the SDK, so the code that only names these errors does not load it.
 */

export const MCP_ERROR_CODES = [
  'unreachable',
  'auth_failed',
  'protocol',
  'timeout',
  'aborted',
  'tool_error',
  'blocked',
  'too_large',
] as const;
export type McpErrorCode = (typeof MCP_ERROR_CODES)[number];

/**
 * Whether another attempt later could succeed. A transport-level verdict only: a tool call is not idempotent,
 * so callers must not re-run a call because its error is retriable.
 */
const RETRIABLE: Record<McpErrorCode, boolean> = {
  unreachable: true,
  auth_failed: false,
  protocol: false,
  timeout: true,
  aborted: false,
  tool_error: false,
  blocked: false,
  too_large: false,
};

/** The JSON-RPC error code of the answer that stands in for a message too large to read (bounded-response.ts). */
export const TOO_LARGE_RPC_CODE = -32099;

export interface McpErrorOptions extends ErrorOptions {
  /** The HTTP status behind the failure, when there was one. */
  status?: number | undefined;
}

export class McpError extends Error {
  readonly code: McpErrorCode;
  readonly retriable: boolean;
  readonly status: number | undefined;

  constructor(code: McpErrorCode, message: string, options?: McpErrorOptions) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
    this.retriable = RETRIABLE[code];
    this.status = options?.status;
  }
}

export function isMcpError(error: unknown): error is McpError {
  return error instanceof McpError;
}
