/**
 * The context window of a model and the output it may produce in one call: what a step's context is fitted to
 * (docs/context.md), as the model catalogue (`catalogue.ts`) describes it; AGENTRY_CONTEXT_WINDOW sets the window
 * of every model.
 */
import { modelInfo } from './catalogue.ts';

export interface ModelWindow {
  /** Tokens the model reads and writes in one call (input plus output). */
  contextWindow: number;
  /** The most output tokens one call may produce. */
  maxOutputTokens: number;
}

/**
 * What the steps of a session learnt of a model's count (kept with the session's log): the window its refusal
 * stated, and how many tokens it counted per token estimated (at least 1: an estimate too high is left as it is).
 */
export interface WindowCorrection {
  limit: number | null;
  scale: number;
}

/**
 * The window of `modelId` from the model catalogue (built in, the operator's, or the defaults); `override`
 * (AGENTRY_CONTEXT_WINDOW, 0 when unset) replaces every model's.
 */
export function modelWindowOf(modelId: string, override: number): ModelWindow {
  const { contextWindow, maxOutputTokens } = modelInfo(modelId);
  return { contextWindow: override > 0 ? override : contextWindow, maxOutputTokens };
}

/**
 * The input tokens a step may send: the window less the output it reserves (the turn's `maxOutputTokens`, else
 * the model's, at most a quarter of the window).
 */
export function inputBudget(window: ModelWindow, maxOutputTokens: number | undefined): number {
  const reserve = Math.min(maxOutputTokens ?? window.maxOutputTokens, Math.floor(window.contextWindow / 4));
  return window.contextWindow - reserve;
}
