/**
 * Fitting a model context into the model's window (docs/context.md). Tokens are estimated, not counted: a
 * message's text (and a tool call's name and arguments) at 4 characters a token, plus a fixed overhead per message
 * and per tool call or result for the roles and framing, and a fixed cost per image (less at low detail). The estimate of a message is
 * kept with it, so a session's next step estimates only its new messages.
 *
 * The truncation policy drops the oldest messages first, in whole units: a user input, an assistant step without
 * tool calls, or an assistant step with its tool calls together with their results (a call is never sent without
 * its output, nor an output without its call). It always keeps the latest user input and the newest unit (the
 * step whose calls were just answered, or whose calls are pending), whose tool outputs are cut, with a note saying
 * so, when together they would take more than half the room.
 */
import type { ContextMessage, ToolResult, ToolSpec } from './types.ts';

/**
 * How a turn keeps its context within the model's window: `truncation` drops the oldest messages (the default),
 * `compaction` summarises the older part of the log into a compaction item once the context passes a threshold
 * (engine/compaction.ts), `none` sends the whole log (a context too long fails the turn with
 * `model_context_exceeded`).
 */
export const CONTEXT_POLICIES = ['truncation', 'compaction', 'none'] as const;
export type ContextPolicy = (typeof CONTEXT_POLICIES)[number];
export const DEFAULT_CONTEXT_POLICY: ContextPolicy = 'truncation';

/** Characters per token of the estimate. */
export const CHARS_PER_TOKEN = 4;
/** Tokens of each message's (and each tool call's or result's) framing beyond its text. */
export const MESSAGE_OVERHEAD_TOKENS = 8;
/** Tokens an image is counted as, whatever its size. */
export const IMAGE_TOKENS = 1_000;
/** Tokens of an image sent with `detail: "low"`, which providers read at one fixed low resolution (OpenAI: 85). */
export const LOW_DETAIL_IMAGE_TOKENS = 85;

const textTokens = (text: string): number => Math.ceil(text.length / CHARS_PER_TOKEN);

const estimates = new WeakMap<ContextMessage, number>();

function measure(message: ContextMessage): number {
  if (message.role === 'user') {
    let tokens = MESSAGE_OVERHEAD_TOKENS;
    for (const part of message.content) {
      if (part.type === 'text') tokens += textTokens(part.text);
      else if (part.type === 'image') tokens += part.detail === 'low' ? LOW_DETAIL_IMAGE_TOKENS : IMAGE_TOKENS;
      else tokens += textTokens(part.filename) + Math.ceil(part.data.byteLength / CHARS_PER_TOKEN);
    }
    return tokens;
  }
  if (message.role === 'assistant') {
    let tokens = MESSAGE_OVERHEAD_TOKENS + textTokens(message.text);
    for (const call of message.toolCalls)
      tokens += MESSAGE_OVERHEAD_TOKENS + textTokens(call.name) + textTokens(call.arguments) + textTokens(call.callId);
    return tokens;
  }
  let tokens = 0;
  for (const result of message.results) tokens += resultTokens(result);
  return tokens;
}

const resultTokens = (result: ToolResult): number =>
  MESSAGE_OVERHEAD_TOKENS + textTokens(result.output) + textTokens(result.callId);

/** The estimated tokens of one context message (kept with the message object). */
export function messageTokens(message: ContextMessage): number {
  let tokens = estimates.get(message);
  if (tokens === undefined) {
    tokens = measure(message);
    estimates.set(message, tokens);
  }
  return tokens;
}

/** Totals of whole contexts their builder summed as it grew (see `withKnownTokens`). */
const totals = new WeakMap<readonly ContextMessage[], number>();

/**
 * Records the estimated tokens of a whole context whose builder kept the sum as it grew
 * (domain/turns/context-builder.ts), so fitting it does not walk a long session's every message again to learn that
 * it fits. The context must not change afterwards.
 */
export function withKnownTokens(context: ContextMessage[], tokens: number): ContextMessage[] {
  totals.set(context, tokens);
  return context;
}

/** The context fitted to `room` (all of it when `room` is null: the `none` policy). */
export function fittedContext(context: ContextMessage[], room: number | null): FitResult {
  if (room === null) return { context, dropped: 0, tokens: 0 };
  return fitContext(context, room);
}

/** The estimated tokens of what a request sends besides its context: the instructions and the tools offered. */
export function fixedTokens(instructions: string, tools: readonly ToolSpec[]): number {
  let tokens = MESSAGE_OVERHEAD_TOKENS + textTokens(instructions);
  for (const tool of tools) tokens += MESSAGE_OVERHEAD_TOKENS + textTokens(JSON.stringify(tool));
  return tokens;
}

/** The estimated tokens of a whole context. */
export const contextTokens = (context: readonly ContextMessage[]): number =>
  context.reduce((sum, message) => sum + messageTokens(message), 0);

/** Where a unit of the context starts: a tool message belongs to the assistant step before it. */
export function unitStart(context: readonly ContextMessage[], end: number): number {
  const last = context[end - 1];
  return last?.role === 'tool' && end >= 2 && context[end - 2]?.role === 'assistant' ? end - 2 : end - 1;
}

/** `output` cut to about `tokens` tokens, with a note of how much was left out. */
function cutOutput(output: string, tokens: number): string {
  const keep = Math.max(0, (tokens - MESSAGE_OVERHEAD_TOKENS - 30) * CHARS_PER_TOKEN);
  return `${output.slice(0, keep)}\n[output truncated to fit the model's context window: ${keep} of ${output.length} characters kept]`;
}

/**
 * A tool message whose outputs are cut so that together they take at most half of `room` (each its share): the
 * message itself when they fit.
 */
function withOutputsCut(message: ContextMessage, room: number): ContextMessage {
  if (message.role !== 'tool') return message;
  const limit = Math.max(1, Math.floor(room / 2 / Math.max(1, message.results.length)));
  if (message.results.every((result) => resultTokens(result) <= limit)) return message;
  return {
    role: 'tool',
    results: message.results.map((result) =>
      resultTokens(result) <= limit ? result : { ...result, output: cutOutput(result.output, limit) },
    ),
  };
}

export interface FitResult {
  context: ContextMessage[];
  /** Messages left out from the start of the context. */
  dropped: number;
  /** The estimated tokens of the context sent. */
  tokens: number;
}

/** The index of the latest user input in `context`, or -1. */
function latestUser(context: readonly ContextMessage[]): number {
  for (let index = context.length - 1; index >= 0; index--) if (context[index]?.role === 'user') return index;
  return -1;
}

/**
 * The context as it is when all of it fits in `budget` and nothing in it would change (it starts with a user input
 * and its newest unit needs no cut): the common case, answered without copying. Null otherwise, or as soon as the
 * sum passes the budget.
 */
function wholeContext(context: readonly ContextMessage[], budget: number, reserved: number): FitResult | null {
  if (context[0]?.role !== 'user') return null;
  let tokens = totals.get(context) ?? -1;
  if (tokens > budget) return null;
  if (tokens < 0) {
    tokens = 0;
    for (let index = context.length - 1; index >= 0; index--) {
      tokens += messageTokens(context[index] as ContextMessage);
      if (tokens > budget) return null;
    }
  }
  for (let index = unitStart(context, context.length); index < context.length; index++) {
    const message = context[index] as ContextMessage;
    if (withOutputsCut(message, budget - reserved) !== message) return null;
  }
  return { context: context as ContextMessage[], dropped: 0, tokens };
}

/**
 * The newest part of `context` that fits in `budget` estimated tokens, in whole units. The latest user input and
 * the newest unit are kept whatever they cost (the user input in front of what fits when the units between them do
 * not), and what is sent starts with a user input (when the context has one). Reads the context from its end and stops where the budget runs out, so the cost follows what is sent, not
 * the session's length.
 */
export function fitContext(context: readonly ContextMessage[], budget: number): FitResult {
  const userIndex = latestUser(context);
  const user = context[userIndex];
  const reserved = user === undefined ? 0 : messageTokens(user);
  const whole = wholeContext(context, budget, reserved);
  if (whole !== null) return whole;
  const kept: ContextMessage[][] = [];
  let tokens = reserved;
  let end = context.length;
  while (end > 0) {
    const start = unitStart(context, end);
    const unit = context.slice(start, end);
    // The newest unit is sent whatever it costs: its outputs are cut to fit beside the latest input.
    if (kept.length === 0)
      unit.splice(0, unit.length, ...unit.map((message) => withOutputsCut(message, budget - reserved)));
    const unitTokens = start === userIndex ? 0 : contextTokens(unit);
    if (kept.length > 0 && tokens + unitTokens > budget) break;
    kept.push(unit);
    tokens += unitTokens;
    end = start;
  }
  // The latest user input, before the cut: kept in front of what fits (it says what the turn is about).
  if (user !== undefined && end > userIndex) kept.push([user]);
  // What is sent starts with a user input, as some providers require: older steps left over before it go too.
  while (kept.length > 1 && kept.at(-1)?.[0]?.role !== 'user') {
    const leading = kept.pop() ?? [];
    tokens -= contextTokens(leading);
    end += leading.length;
  }
  return { context: kept.reverse().flat(), dropped: end, tokens };
}
