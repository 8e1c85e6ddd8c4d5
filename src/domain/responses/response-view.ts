/**
 * Response = Message (DESIGN section 5): `resp_<message uuid>` projected from the durable message and its items in
 * the exact shape of the Responses wire reference, so `openai`'s `responses.retrieve` and the terminal stream
 * events carry the same object.
 */
import { unixSeconds } from '../../lib/clock.ts';
import type { IncompleteReason } from '../../models/types.ts';
import type { Executor } from '../../storage/db.ts';
import { parseJsonColumn } from '../../storage/json-column.ts';
import type { MessageRow } from '../../storage/schema.ts';
import { responseFormatEcho } from '../output-format.ts';
import { loadMessageItems } from '../turns/item-store.ts';
import { type Item, itemFromRow } from '../turns/items.ts';
import { isMessageOptions, type MessageOptions } from '../turns/message-options.ts';
import { isMessageError, type MessageError } from '../turns/message-types.ts';
import { type OpenAIItem, toOpenAIItems } from './openai-items.ts';

export type ResponseStatus = 'queued' | 'in_progress' | 'completed' | 'failed' | 'cancelled' | 'incomplete';

export interface ResponseObject {
  id: string;
  object: 'response';
  created_at: number;
  status: ResponseStatus;
  completed_at: number | null;
  model: string;
  output: OpenAIItem[];
  output_text: string;
  error: MessageError | null;
  /** Why a Response is `incomplete`: its reply was cut short at the output token limit or by a content filter. */
  incomplete_details: { reason: IncompleteReason } | null;
  instructions: string | null;
  metadata: Record<string, string>;
  tools: Record<string, unknown>[];
  tool_choice: unknown;
  parallel_tool_calls: boolean;
  temperature: number;
  top_p: number;
  presence_penalty: number;
  frequency_penalty: number;
  top_logprobs: number;
  max_output_tokens: number | null;
  max_tool_calls: number | null;
  reasoning: { effort: string | null; summary: string | null };
  service_tier: string;
  safety_identifier: string | null;
  prompt_cache_key: string | null;
  previous_response_id: string | null;
  conversation: { id: string };
  store: boolean;
  background: boolean;
  /** The output format the turn ran with, in the wire shape it was asked in (free text: `{type: "text"}`). */
  text: { format: Record<string, unknown> };
  /** `auto`: the context was fitted to the model's window; `disabled`: sent whole. */
  truncation: 'auto' | 'disabled';
  usage: ResponseUsage | null;
}

/** A Response's token counts, as OpenAI writes them. */
export interface ResponseUsage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
}

export const responseUsage = (tokens: { input: number; cachedInput: number; output: number }): ResponseUsage => ({
  input_tokens: tokens.input,
  input_tokens_details: { cached_tokens: tokens.cachedInput },
  output_tokens: tokens.output,
  output_tokens_details: { reasoning_tokens: 0 },
  total_tokens: tokens.input + tokens.output,
});

export const responseIdOf = (messageId: string): string => `resp_${messageId}`;

const STATUS: Record<string, ResponseStatus> = {
  queued: 'queued',
  running: 'in_progress',
  // Waiting for a client tool output is not an error: the Response is complete and carries the function_call.
  requires_action: 'completed',
  completed: 'completed',
  failed: 'failed',
  cancelled: 'cancelled',
};

/**
 * Output items of a turn: what it produced (its steps), not the input or the outputs sent back to it. Calls of an
 * earlier Response that this one's input approved (loaded by `loadResponseItems`) come first: they ran first.
 */
export function outputItems(items: Item[], messageId?: string): OpenAIItem[] {
  const own = messageId ?? items.find((item) => item.step <= 0)?.messageId;
  const decided = items.filter((item) => item.content.type === 'approval_decision');
  const stepped = items.filter((item) => item.step > 0 || item.messageId !== own);
  return toOpenAIItems([...decided, ...stepped], {
    ...(own === undefined ? {} : { messageId: own }),
    elicitations: true,
  }).filter((item) => item.type !== 'function_call_output' && item.type !== 'mcp_approval_response');
}

/**
 * The items a Response is projected from: its message's own, plus the calls (and outputs) of earlier Responses
 * that its input approved with `mcp_approval_response`, which its turn ran.
 */
export async function loadResponseItems(db: Executor, message: Pick<MessageRow, 'id' | 'session_id'>): Promise<Item[]> {
  const own = await loadMessageItems(db, message.id);
  const carried = own.flatMap((item) =>
    item.content.type === 'approval_decision' && item.content.approved && item.callId !== null && item.step <= 0
      ? [item.callId]
      : [],
  );
  if (carried.length === 0) return own;
  const rows = await db
    .selectFrom('items')
    .selectAll()
    .where('session_id', '=', message.session_id)
    .where('call_id', 'in', carried)
    .where('message_id', '!=', message.id)
    .where('type', 'in', ['function_call', 'function_call_output'])
    .orderBy('seq')
    .execute();
  return [...rows.map(itemFromRow), ...own];
}

/** Why the turn's final reply was cut short (models/types.ts), or null: its last reply says so. */
export function incompleteReason(items: Item[], messageId: string): IncompleteReason | null {
  const replies = items.filter((item) => item.messageId === messageId && item.step > 0);
  for (let index = replies.length - 1; index >= 0; index--) {
    const content = replies[index]?.content;
    if (content?.type === 'assistant_message') return content.incomplete ?? null;
  }
  return null;
}

export function projectResponse(
  message: MessageRow,
  items: Item[],
  overrides: { status?: ResponseStatus; output?: OpenAIItem[] } = {},
): ResponseObject {
  const options: MessageOptions =
    message.options === null ? {} : parseJsonColumn(message.options, isMessageOptions, 'messages.options');
  const echo = options.echo;
  const output = overrides.output ?? outputItems(items, message.id);
  const cut = message.status === 'completed' ? incompleteReason(items, message.id) : null;
  const ended = STATUS[message.status] ?? 'in_progress';
  const status = overrides.status ?? (cut === null ? ended : 'incomplete');
  const error = message.error === null ? null : parseJsonColumn(message.error, isMessageError, 'messages.error');
  const outputText = output
    .flatMap((item) =>
      item.type === 'message' && item.role === 'assistant' ? item.content.map((part) => part.text) : [],
    )
    .join('');
  const finished = status === 'completed' || status === 'failed' || status === 'cancelled' || status === 'incomplete';
  return {
    id: responseIdOf(message.id),
    object: 'response',
    created_at: unixSeconds(message.created_at),
    status,
    completed_at: status === 'completed' ? unixSeconds(message.completed_at ?? message.updated_at) : null,
    model: message.agent_id,
    output,
    output_text: outputText,
    error: status === 'failed' || status === 'cancelled' ? error : null,
    incomplete_details: status === 'incomplete' && cut !== null ? { reason: cut } : null,
    instructions: options.instructions ?? null,
    metadata: echo?.metadata ?? {},
    // Rows accepted before the tools were recorded list the response's own function tools only.
    tools: echo?.tools ?? (options.tools ?? []).map((tool) => ({ type: 'function', ...tool })),
    tool_choice: echo?.toolChoice ?? 'auto',
    parallel_tool_calls: echo?.parallelToolCalls ?? true,
    // OpenAI's defaults when the request set none (Open Responses requires numbers here).
    temperature: echo?.temperature ?? 1,
    top_p: echo?.topP ?? 1,
    presence_penalty: echo?.presencePenalty ?? 0,
    frequency_penalty: echo?.frequencyPenalty ?? 0,
    top_logprobs: echo?.topLogprobs ?? 0,
    max_output_tokens: echo?.maxOutputTokens ?? null,
    max_tool_calls: echo?.maxToolCalls ?? null,
    reasoning: echo?.reasoning ?? { effort: null, summary: null },
    service_tier: echo?.serviceTier ?? 'default',
    safety_identifier: echo?.safetyIdentifier ?? null,
    prompt_cache_key: echo?.promptCacheKey ?? null,
    previous_response_id: echo?.previousResponseId ?? null,
    conversation: { id: `conv_${message.session_id}` },
    store: echo?.store ?? true,
    background: echo?.background ?? false,
    text: { format: responseFormatEcho(options.responseFormat) },
    truncation: echo?.truncation ?? 'disabled',
    usage: finished
      ? responseUsage({
          input: message.input_tokens,
          cachedInput: message.cached_input_tokens,
          output: message.output_tokens,
        })
      : null,
  };
}

export async function loadResponse(db: Executor, message: MessageRow): Promise<ResponseObject> {
  return projectResponse(message, await loadResponseItems(db, message));
}
