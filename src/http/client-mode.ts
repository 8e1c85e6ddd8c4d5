/**
 * Which rules a Responses or Conversations request gets, and whether its stream carries the vendor events.
 * OpenAI compatibility mode is the default for every client (the OpenAI SDKs, the Vercel AI SDK, LangChain, curl):
 * they all send fields the spec's strict body refuses (instructions, system messages, tools, sampling settings,
 * history). Strict mode is asked for; in order, the first that decides: the request's `Agentry-Compat` header, the
 * API key's `compat` setting, AGENTRY_RESPONSES_COMPAT; `auto` (the default) is compatibility mode.
 */
import type { FastifyRequest } from 'fastify';
import type { CompatSetting } from '../config.ts';

export type CompatMode = 'strict' | 'openai';

function header(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

export function compatModeOf(request: FastifyRequest, deployment: CompatSetting): CompatMode {
  const asked = header(request, 'agentry-compat');
  if (asked === 'openai' || asked === 'strict') return asked;
  const setting = request.principal?.compat ?? deployment;
  return setting === 'auto' ? 'openai' : setting;
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
