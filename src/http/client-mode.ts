/**
 * Which rules a Responses or Conversations request gets, and whether its stream carries the vendor events.
 * The official OpenAI SDKs (Python and Node, and the Agents SDKs built on them) announce themselves with their
 * User-Agent and `X-Stainless-*` headers; they send fields the spec's strict body refuses (instructions, tools,
 * include, history), so they get OpenAI compatibility mode unless something says otherwise. In order, the first
 * that decides: the request's `Agentry-Compat` header, the API key's `compat` setting, AGENTRY_RESPONSES_COMPAT;
 * `auto` (the default) then looks at the client.
 */
import type { FastifyRequest } from 'fastify';
import type { CompatSetting } from '../config.ts';

export type CompatMode = 'strict' | 'openai';

/** `OpenAI/JS 7.57.0`, `OpenAI/Python 3.3.1`, `AsyncOpenAI/Python …`, `AzureOpenAI/…`, `Agents/Python 0.22.0`. */
const SDK_USER_AGENT = /^(?:Async)?(?:Azure)?OpenAI\/|^Agents\//;

function header(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** True for requests of the official OpenAI SDKs (a browser build sends no User-Agent, but still X-Stainless-Lang). */
export function isOfficialOpenAIClient(request: FastifyRequest): boolean {
  const agent = header(request, 'user-agent');
  if (agent !== undefined && SDK_USER_AGENT.test(agent)) return true;
  return (
    header(request, 'x-stainless-lang') !== undefined && header(request, 'x-stainless-package-version') !== undefined
  );
}

export function compatModeOf(request: FastifyRequest, deployment: CompatSetting): CompatMode {
  const asked = header(request, 'agentry-compat');
  if (asked === 'openai' || asked === 'strict') return asked;
  const setting = request.principal?.compat ?? deployment;
  if (setting !== 'auto') return setting;
  return isOfficialOpenAIClient(request) ? 'openai' : 'strict';
}

/**
 * The vendor `response.agentry_tool_call.*` events go out unless the client asked for standard events only, or
 * the deployment turned them off, or the request comes from an SDK stream helper (`X-Stainless-Helper-Method`):
 * openai-node's `responses.stream()` throws on event types it does not know. `Agentry-Stream-Events: all` asks
 * for them whatever else holds.
 */
export function vendorEventsWanted(request: FastifyRequest, deployment: 'all' | 'standard'): boolean {
  const asked = header(request, 'agentry-stream-events');
  if (asked === 'all') return true;
  if (asked === 'standard' || deployment === 'standard') return false;
  return header(request, 'x-stainless-helper-method') === undefined;
}
