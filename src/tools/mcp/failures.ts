/**
 * The one place that reads the MCP SDK's many error shapes (SdkError/SdkHttpError codes and statuses, SseError,
 * JSON-RPC ProtocolError, schema errors, EgressError from the guarded fetch, plain network TypeErrors) into an
 * McpError. At connect time the classification also says whether the failure means "this server does not speak
 * that protocol", the only kind of failure that moves negotiation on to the next protocol: an auth wall, a timeout,
 * a refused destination or a server error never does. It imports the SDK, so it is loaded with it (client.ts).
 */
import {
  ProtocolError,
  SdkError,
  SdkErrorCode,
  SdkHttpError,
  SseError,
  UnauthorizedError,
} from '@modelcontextprotocol/client';
import { EgressError } from '../../lib/egress.ts';
import { McpError, TOO_LARGE_RPC_CODE } from './errors.ts';

function* causes(error: unknown): Generator<unknown> {
  let current = error;
  for (let depth = 0; depth < 8 && current !== undefined && current !== null; depth++) {
    yield current;
    current = current instanceof Error ? current.cause : undefined;
  }
}

const MAX_DETAIL = 300;

/** An error's message, bounded: some carry a whole HTML error page from the server. */
function messageOf(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.length > MAX_DETAIL ? `${message.slice(0, MAX_DETAIL)}…` : message;
}

function fromEgress(error: EgressError): McpError {
  if (error.code === 'destination_blocked' || error.code === 'invalid_url') {
    return new McpError('blocked', `destination refused: ${error.message}`, { cause: error });
  }
  if (error.code === 'timeout') return new McpError('timeout', error.message, { cause: error });
  if (error.code === 'aborted') return new McpError('aborted', error.message, { cause: error });
  return new McpError('unreachable', error.message, { cause: error });
}

function fromStatus(status: number, detail: string, error: unknown): { error: McpError; mismatch: boolean } {
  if (status === 401 || status === 403) {
    return {
      error: new McpError('auth_failed', `the server refused the credentials (HTTP ${status})`, {
        cause: error,
        status,
      }),
      mismatch: false,
    };
  }
  if (status === 408 || status === 429 || status >= 500) {
    return {
      error: new McpError('unreachable', `the server answered HTTP ${status}`, { cause: error, status }),
      mismatch: false,
    };
  }
  if (status >= 400) {
    return { error: new McpError('protocol', `HTTP ${status}: ${detail}`, { cause: error, status }), mismatch: true };
  }
  // A 2xx/3xx that still failed: the answer was not the protocol's (wrong content type, a redirect elsewhere).
  return { error: new McpError('protocol', detail, { cause: error, status }), mismatch: true };
}

export interface Classified {
  error: McpError;
  /** True when the failure means the server does not speak the protocol that was tried. */
  mismatch: boolean;
}

/**
 * Reads any failure from the SDK or the fetch under it. `observedEgress` is an EgressError the connection's fetch
 * threw during this operation, for transports that flatten the cause chain (the SSE transport keeps only text).
 */
export function classifyMcpFailure(error: unknown, observedEgress?: EgressError): Classified {
  if (error instanceof McpError) return { error, mismatch: false };
  for (const cause of causes(error)) {
    if (cause instanceof McpError) return { error: cause, mismatch: false };
    if (cause instanceof ProtocolError && cause.code === TOO_LARGE_RPC_CODE) {
      return { error: new McpError('too_large', cause.message, { cause }), mismatch: false };
    }
  }
  for (const cause of causes(error)) {
    if (cause instanceof EgressError) return { error: fromEgress(cause), mismatch: false };
  }
  if (observedEgress !== undefined) return { error: fromEgress(observedEgress), mismatch: false };
  const detail = messageOf(error);
  if (error instanceof UnauthorizedError) {
    return {
      error: new McpError('auth_failed', `the server requires authorization (${detail})`, { cause: error }),
      mismatch: false,
    };
  }
  if (error instanceof SdkHttpError) return fromStatus(error.status, detail, error);
  if (error instanceof SseError) {
    if (error.code !== undefined) return fromStatus(error.code, detail, error);
    return { error: new McpError('unreachable', detail, { cause: error }), mismatch: false };
  }
  if (error instanceof ProtocolError) {
    // A JSON-RPC error answer: the server speaks JSON-RPC but refused (e.g. -32022 unsupported protocol version).
    return {
      error: new McpError('protocol', `the server answered with error ${error.code}: ${detail}`, { cause: error }),
      mismatch: true,
    };
  }
  if (error instanceof SdkError) {
    switch (error.code) {
      case SdkErrorCode.RequestTimeout:
        return { error: new McpError('timeout', detail, { cause: error }), mismatch: false };
      case SdkErrorCode.ConnectionClosed:
      case SdkErrorCode.NotConnected:
      case SdkErrorCode.SendFailed:
        return { error: new McpError('unreachable', detail, { cause: error }), mismatch: false };
      case SdkErrorCode.ClientHttpAuthentication:
      case SdkErrorCode.ClientHttpForbidden:
        return { error: new McpError('auth_failed', detail, { cause: error }), mismatch: false };
      default:
        break;
    }
    // EraNegotiationFailed wraps the probe's real failure; judge by that when there is one.
    if (error.cause !== undefined && error.code === SdkErrorCode.EraNegotiationFailed) {
      const inner = classifyMcpFailure(error.cause);
      return {
        error: new McpError(inner.error.code, detail, { cause: error, status: inner.error.status }),
        mismatch: inner.mismatch,
      };
    }
    return { error: new McpError('protocol', detail, { cause: error }), mismatch: true };
  }
  if (error instanceof TypeError && detail === 'fetch failed') {
    return {
      error: new McpError('unreachable', `could not reach the server (${messageOf(error.cause)})`, { cause: error }),
      mismatch: false,
    };
  }
  if (error instanceof Error && error.name === 'ZodError') {
    // A JSON answer that is not JSON-RPC: not an MCP server of this kind.
    return {
      error: new McpError('protocol', 'the server answered with something that is not JSON-RPC', { cause: error }),
      mismatch: true,
    };
  }
  return { error: new McpError('protocol', detail, { cause: error }), mismatch: false };
}
