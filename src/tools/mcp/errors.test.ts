import { ProtocolError, SdkError, SdkErrorCode, SdkHttpError } from '@modelcontextprotocol/client';
import { describe, expect, it } from 'vitest';
import { EgressError } from '../../lib/egress.ts';
import { McpError } from './errors.ts';
import { classifyMcpFailure } from './failures.ts';

const http = (status: number) => new SdkHttpError(SdkErrorCode.ClientHttpNotImplemented, `HTTP ${status}`, { status });

describe('classifyMcpFailure', () => {
  it.each([
    [401, 'auth_failed', false],
    [403, 'auth_failed', false],
    [408, 'unreachable', false],
    [429, 'unreachable', false],
    [500, 'unreachable', false],
    [503, 'unreachable', false],
    [400, 'protocol', true],
    [404, 'protocol', true],
    [405, 'protocol', true],
    [415, 'protocol', true],
  ] as const)('HTTP %i is %s (protocol mismatch: %s)', (status, code, mismatch) => {
    const classified = classifyMcpFailure(http(status));
    expect(classified.error.code).toBe(code);
    expect(classified.error.status).toBe(status);
    expect(classified.mismatch).toBe(mismatch);
  });

  it('reads an EgressError anywhere in the cause chain, or as observed by the fetch', () => {
    const blocked = new EgressError('destination_blocked', 'x resolves to a private address');
    const wrapped = new SdkError(SdkErrorCode.EraNegotiationFailed, 'probe failed', undefined, { cause: blocked });
    expect(classifyMcpFailure(wrapped)).toMatchObject({ error: { code: 'blocked' }, mismatch: false });
    expect(classifyMcpFailure(new Error('SSE error: flattened'), blocked).error.code).toBe('blocked');
    const refused = new EgressError('connect_failed', 'connection failed (ECONNREFUSED)');
    expect(classifyMcpFailure(refused).error).toMatchObject({ code: 'unreachable', retriable: true });
    expect(classifyMcpFailure(new EgressError('timeout', 'slow')).error.code).toBe('timeout');
  });

  it('judges a failed negotiation by what made it fail', () => {
    const network = new SdkError(SdkErrorCode.EraNegotiationFailed, 'probe failed', undefined, {
      cause: new TypeError('fetch failed'),
    });
    expect(classifyMcpFailure(network)).toMatchObject({ error: { code: 'unreachable' }, mismatch: false });
    const html = new SdkError(SdkErrorCode.EraNegotiationFailed, 'unusable reply', undefined, {
      cause: new SdkError(SdkErrorCode.ClientHttpUnexpectedContent, 'Unexpected content type: text/html'),
    });
    expect(classifyMcpFailure(html)).toMatchObject({ error: { code: 'protocol' }, mismatch: true });
  });

  it('maps timeouts, closed connections, JSON-RPC errors and our own errors', () => {
    expect(classifyMcpFailure(new SdkError(SdkErrorCode.RequestTimeout, 'timed out')).error.code).toBe('timeout');
    expect(classifyMcpFailure(new SdkError(SdkErrorCode.ConnectionClosed, 'closed')).error.code).toBe('unreachable');
    expect(classifyMcpFailure(new ProtocolError(-32022, 'Unsupported protocol version'))).toMatchObject({
      error: { code: 'protocol' },
      mismatch: true,
    });
    const own = new McpError('aborted', 'stop');
    expect(classifyMcpFailure(own).error).toBe(own);
  });

  it('bounds the message of a server that answered with a whole page', () => {
    const page = new SdkHttpError(SdkErrorCode.ClientHttpNotImplemented, `Error POSTing: ${'<p>'.repeat(1000)}`, {
      status: 404,
    });
    expect(classifyMcpFailure(page).error.message.length).toBeLessThan(400);
  });
});
