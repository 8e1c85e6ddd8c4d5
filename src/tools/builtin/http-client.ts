/**
 * The `http_client` internal tool: `http_request {method, url, headers?, body?}` under the agent's network policy
 * (policy-fetch.ts: the policy by name and port, the egress guard by address, every redirect hop checked anew).
 * The model gets the status, the headers and the body as text, cut at the configured size with a note; a binary
 * body is described, not dumped. Whatever the server answers (4xx and 5xx included) is a result, not an error;
 * a refused destination, a failed connection or a timeout is an error the model can read.
 */
import { Type } from 'typebox';
import { EgressError } from '../../lib/egress.ts';
import type { EgressFetch } from '../../lib/egress-fetch.ts';
import { egressEnabled } from '../network/network-policy.ts';
import type { ToolOutput, ToolProvider, ToolSource } from '../types.ts';
import { builtinTool, internalEntry, toolError } from './define-tool.ts';
import { fetchUnderPolicy, NetworkRefusal, type PolicyFetchLimits, type PolicyResponse } from './policy-fetch.ts';

export interface NetworkToolDeps {
  /** The guarded fetch (egress guard, plain http allowed, pinned connections). */
  fetch: EgressFetch;
  limits: PolicyFetchLimits;
}

export const HTTP_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;
/** Most header bytes shown; a response with more is summarised. */
const MAX_HEADER_CHARS = 16_384;

const BINARY_TYPES = /^(image|audio|video|font)\/|^application\/(octet-stream|zip|gzip|x-gzip|pdf|x-tar|wasm|x-7z)/i;

/** Whether a body is better described than shown: a binary media type, or a NUL byte near the start. */
export function isBinaryBody(contentType: string | null, body: Buffer): boolean {
  if (contentType !== null && BINARY_TYPES.test(contentType.trim())) return true;
  return body.subarray(0, 8192).includes(0);
}

/** Turns what the policy refused, or a network failure, into an error result; anything else propagates. */
export async function networkOutcome(work: () => Promise<ToolOutput>): Promise<ToolOutput> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof NetworkRefusal) return toolError(`refused: ${error.message}`);
    if (error instanceof EgressError) {
      return toolError(error.code === 'destination_blocked' ? `refused: ${error.message}` : error.message);
    }
    throw error;
  }
}

/** A warning for a network tool of an agent whose policy allows no egress: it is offered, and refuses. */
export function egressOffWarning(label: string, policy: Parameters<typeof egressEnabled>[0]): ToolSource[] {
  if (egressEnabled(policy)) return [];
  return [
    {
      label: `${label} network`,
      available: false,
      warning: {
        code: 'network_egress_disabled',
        message: `${label} is configured on the agent, but its networkPolicy allows no network access, so every request it makes is refused`,
      },
    },
  ];
}

function headerLines(headers: [string, string][]): string[] {
  const lines: string[] = [];
  let chars = 0;
  for (const [name, value] of headers) {
    const line = `${name}: ${value}`;
    chars += line.length + 1;
    if (chars > MAX_HEADER_CHARS) {
      lines.push(`[${headers.length - lines.length} more headers not shown]`);
      break;
    }
    lines.push(line);
  }
  return lines;
}

/** The model-facing text of one response. */
export function describeResponse(response: PolicyResponse): string {
  const lines = response.redirects.map((hop) => `redirected: ${hop.status} ${hop.from} -> ${hop.to}`);
  lines.push(`HTTP ${response.status}${response.statusText === '' ? '' : ` ${response.statusText}`}`);
  lines.push(...headerLines(response.headers));
  if (response.unfollowed !== null) {
    lines.push(`[redirect to ${response.unfollowed.location} not followed: ${response.unfollowed.reason}]`);
  }
  lines.push('');
  const type = response.headers.find(([name]) => name === 'content-type')?.[1] ?? null;
  const declared = response.headers.find(([name]) => name === 'content-length')?.[1];
  if (isBinaryBody(type, response.body)) {
    lines.push(
      `[binary body: ${declared ?? `at least ${response.body.byteLength}`} bytes of ${type ?? 'unknown type'}; not shown]`,
    );
  } else {
    lines.push(response.body.toString('utf8'));
    if (response.truncated) {
      const total = declared === undefined ? '' : ` of ${declared}`;
      lines.push(`[body truncated: the first ${response.body.byteLength}${total} bytes are shown]`);
    }
  }
  return lines.join('\n');
}

export function createHttpClientProvider(deps: NetworkToolDeps): ToolProvider {
  const label = 'internal tool "http_client"';
  const tool = builtinTool({
    name: 'http_request',
    server: 'http_client',
    // GET and HEAD only read; any other method may change something at the destination.
    changes: (args) => !['GET', 'HEAD'].includes(args.method.toUpperCase()),
    description: `Make an HTTP request and read the response (status, headers, body). Only destinations your network policy allows can be reached; redirects are followed when their target is allowed too. Bodies over ${deps.limits.maxResponseBytes} bytes are cut.`,
    parameters: Type.Object(
      {
        method: Type.String({ description: `One of ${HTTP_METHODS.join(', ')}`, pattern: '^[A-Za-z]{1,10}$' }),
        url: Type.String({ minLength: 1, maxLength: 8192, description: 'Absolute http or https URL' }),
        headers: Type.Optional(
          Type.Record(Type.String(), Type.String(), { description: 'Request headers, name to value' }),
        ),
        body: Type.Optional(Type.String({ description: 'Request body (text, e.g. JSON)' })),
      },
      { additionalProperties: false },
    ),
    async run(args, context) {
      const method = args.method.toUpperCase();
      if (!HTTP_METHODS.some((known) => known === method)) {
        return toolError(`method must be one of ${HTTP_METHODS.join(', ')}`);
      }
      return networkOutcome(async () => {
        const response = await fetchUnderPolicy(
          deps.fetch,
          { method, url: args.url, headers: args.headers, body: args.body },
          { policy: context.egress.policy, limits: deps.limits, signal: context.signal },
        );
        return { output: describeResponse(response), isError: false };
      });
    },
  });
  return {
    name: 'http_client',
    claims: internalEntry('http_client'),
    async sources(agent, claimed) {
      if (claimed.length === 0) return [];
      return [
        { label, available: true, load: async () => ({ tools: [tool] }) },
        ...egressOffWarning(label, agent.networkPolicy),
      ];
    },
  };
}
