/**
 * The approval deadline (`toolApprovals.timeoutSeconds`): each poll of the engine denies the approvals whose
 * deadline passed, and wakes the turns that no longer wait. Every worker process runs it; the decision is a
 * conditional update, so each approval is decided once even when several processes see it due.
 */
import { findAgentVersion } from '../domain/agents/agent-repo.ts';
import { expireApprovals } from '../domain/approvals/approvals.ts';
import { afterCommit } from '../domain/outbox.ts';
import type { TurnDeps } from './turn-context.ts';

export async function denyExpiredApprovals(deps: Omit<TurnDeps, 'owner'>): Promise<void> {
  const result = await expireApprovals(
    deps.db,
    { subscriptions: deps.subscriptions, hooks: deps.turnHooks },
    deps.clock.now(),
    async (trx, message) => {
      if (message.agent_version === null) return undefined;
      return (await findAgentVersion(trx, message.agent_id, message.agent_version))?.toolApprovals.timeoutSeconds;
    },
  );
  const woken = new Set(result.wake);
  for (const { sessionId, events } of result.events) afterCommit(deps.bus, sessionId, events, woken.delete(sessionId));
  for (const sessionId of woken) afterCommit(deps.bus, sessionId, [], true);
}
