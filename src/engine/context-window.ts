/**
 * The context a step sends, fitted to the model's window (docs/context.md): the window less the output reserved,
 * less the instructions and tools, is the room for the conversation, which the truncation policy fills from the
 * newest message back. When the provider still refuses the request as too long, the step fits the context to a
 * smaller room and calls once more (`smallerRoom`). What the provider's refusals and usage tell of its count is
 * kept with the session's log for its next steps.
 */
import { fixedTokens } from '../models/context-fit.ts';
import type { WindowCorrection } from '../models/context-window.ts';
import { statedContextLimit } from '../models/provider-errors.ts';
import type { ModelError, ToolSpec } from '../models/types.ts';
import type { Turn } from './turn-context.ts';

/** What a step sends besides its context. */
export interface StepFrame {
  instructions: string;
  tools: ToolSpec[];
}

/**
 * The estimated tokens the conversation of a step may take, or null when the turn does not fit its context: the
 * window (or the smaller one the provider stated) less the output reserved, divided by the provider's count per
 * estimated token, less the instructions and tools.
 */
export function contextRoom(turn: Turn, frame: StepFrame): number | null {
  if (turn.contextPolicy === 'none') return null;
  const window = turn.deps.models.window(turn.agent.model);
  const learnt = turn.log.corrections.get(turn.agent.model);
  const contextWindow = Math.min(window.contextWindow, learnt?.limit ?? Number.POSITIVE_INFINITY);
  const reserve = Math.min(turn.settings?.maxOutputTokens ?? window.maxOutputTokens, Math.floor(contextWindow / 4));
  const room = Math.floor((contextWindow - reserve) / (learnt?.scale ?? 1));
  return Math.max(1, room - fixedTokens(frame.instructions, frame.tools));
}

function correction(turn: Turn): WindowCorrection {
  const { corrections } = turn.log;
  let learnt = corrections.get(turn.agent.model);
  if (learnt === undefined) {
    learnt = { limit: null, scale: 1 };
    corrections.set(turn.agent.model, learnt);
  }
  return learnt;
}

/**
 * The room of the one retry after the provider refused a context of `sent` estimated tokens as too long: the room
 * of the window the provider stated (remembered for the session's next steps), scaled by 90 % of that window over
 * the tokens it counted, and at most 75 % of `sent` (75 % when the message states neither).
 */
export function smallerRoom(turn: Turn, frame: StepFrame, error: ModelError, sent: number): number {
  const limit = statedContextLimit(error.message);
  if (limit !== null) correction(turn).limit = limit;
  const counted = /resulted in (\d+) tokens/i.exec(error.message);
  const ratio = limit !== null && counted !== null ? limit / Number(counted[1]) : 0.75;
  const scaled = Math.max(1, Math.floor(sent * Math.min(ratio * 0.9, 0.75)));
  return Math.min(scaled, contextRoom(turn, frame) ?? scaled);
}

/**
 * Learns from the input tokens the provider reported for a step how many it counts per estimated token (between 1
 * and 4), so that the session's next steps fit their context to what the provider will count.
 */
export function learnInputCount(turn: Turn, frame: StepFrame, sent: number, inputTokens: number): void {
  if (sent <= 0 || inputTokens <= 0) return;
  const estimated = sent + fixedTokens(frame.instructions, frame.tools);
  const scale = Math.min(4, Math.max(1, inputTokens / estimated));
  if (scale !== 1 || turn.log.corrections.has(turn.agent.model)) correction(turn).scale = scale;
}
