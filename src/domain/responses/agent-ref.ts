/**
 * The agent that `model` names on the OpenAI-shaped doors (/v1/responses, /v1/chat/completions): an agent id, the
 * name of exactly one agent of the organization, or `agent:<name>`. One lookup, so both doors answer an unknown model alike.
 */
import { validationError } from '../../errors/app-error.ts';
import { isUuid } from '../../lib/ids.ts';
import type { Executor } from '../../storage/db.ts';
import type { AgentService } from '../agents/agent-service.ts';

/** The agent `model` names: its id, or its name, resolved in the organization later. */
export type AgentRef = { id: string } | { name: string };

/** Where a user finds what `model` may be. */
export const AGENTS_LISTED = 'GET /v1/models or GET /v1/agents lists them';

/** `value` quoted for a message, cut short when long. */
export const quoted = (value: string) => JSON.stringify(value.length > 100 ? `${value.slice(0, 100)}…` : value);

/** `model: "agent:<name>"` names an agent by its name (also a name that looks like an id). */
const AGENT_PREFIX = 'agent:';

/** A `model` value as an agent reference: `agent:<name>` and anything but a UUID a name, a UUID an id. */
export function agentRefOf(model: string): AgentRef {
  if (model.startsWith(AGENT_PREFIX)) return { name: model.slice(AGENT_PREFIX.length) };
  return isUuid(model) ? { id: model.toLowerCase() } : { name: model };
}

/**
 * The id of the agent `ref` names: an id as given (an unknown one is a 404 when the agent is read), a name when
 * exactly one agent has it; otherwise a 400 on `model` saying where the agents are listed.
 */
export async function resolveAgentId(
  agents: Pick<AgentService, 'idsNamed'>,
  trx: Executor,
  orgId: string,
  ref: AgentRef,
): Promise<string> {
  if ('id' in ref) return ref.id;
  const ids = await agents.idsNamed(orgId, ref.name, trx);
  const [id] = ids;
  if (id === undefined) {
    throw validationError(
      'model',
      `model names one of your agents (its id, its name or agent:<name>); no agent is named ${quoted(ref.name)} (${AGENTS_LISTED})`,
    );
  }
  if (ids.length > 1) {
    throw validationError(
      'model',
      `several of your agents are named ${quoted(ref.name)}; use the id of the one you mean as model (${AGENTS_LISTED})`,
    );
  }
  return id;
}
