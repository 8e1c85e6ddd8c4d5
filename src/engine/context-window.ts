/**
 * The context a step sends, fitted to the model's window (docs/context.md): the window less the output reserved,
 * less the instructions and tools, is the room for the conversation, which the truncation policy fills from the
 * newest message back. When the provider still refuses the request as too long, the step fits the context to a
 * smaller room and calls once more (`smallerRoom`).
 */
import { type FitResult, fitContext, fixedTokens } from '../models/context-fit.ts';
import { statedContextLimit } from '../models/provider-errors.ts';
import type { ContextMessage, ModelError, ToolSpec } from '../models/types.ts';
import type { Turn } from './turn-context.ts';

/** What a step sends besides its context. */
export interface StepFrame {
  instructions: string;
  tools: ToolSpec[];
}

/** The estimated tokens the conversation of a step may take, or null when the turn does not fit its context. */
export function contextRoom(turn: Turn, frame: StepFrame): number | null {
  if (turn.contextPolicy === 'none') return null;
  const window = turn.deps.models.window(turn.agent.model);
  const reserve = Math.min(
    turn.settings?.maxOutputTokens ?? window.maxOutputTokens,
    Math.floor(window.contextWindow / 4),
  );
  return Math.max(1, window.contextWindow - reserve - fixedTokens(frame.instructions, frame.tools));
}

/** The context fitted to `room` (all of it when `room` is null). */
export function fittedContext(context: ContextMessage[], room: number | null): FitResult {
  if (room === null) return { context, dropped: 0, tokens: 0 };
  return fitContext(context, room);
}

/**
 * The room of the one retry after the provider refused a context of `sent` estimated tokens as too long: scaled by
 * the limit the provider states against the tokens it counted when it says both, else 75 % of what was sent.
 */
export function smallerRoom(error: ModelError, sent: number): number {
  const limit = statedContextLimit(error.message);
  const counted = /resulted in (\d+) tokens/i.exec(error.message);
  const ratio = limit !== null && counted !== null ? limit / Number(counted[1]) : 0.75;
  return Math.max(1, Math.floor(sent * Math.min(ratio * 0.9, 0.75)));
}
