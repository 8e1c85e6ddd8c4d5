/**
 * A chat completion's turn in OpenAI's Chat Completions shapes, projected from the Responses events of the turn
 * (responses/response-stream.ts, which already reads the session's events without losing any): the final Response
 * becomes a `chat.completion`, and the stream's text and function call events become `chat.completion.chunk`s.
 * Calls the agent ran itself (MCP, sandbox, built-in tools) happen inside the turn and are not shown; the client's
 * function calls are the reply's `tool_calls`, with finish_reason "tool_calls"; a reply cut short at the output
 * token limit (an `incomplete` Response) ends with "length", one cut by a content filter with "content_filter".
 */
import { AppError } from '../../errors/app-error.ts';
import { flatMapAsync } from '../../lib/async-map.ts';
import type { OpenAIItem } from '../responses/openai-items.ts';
import type { ResponseStreamEvent } from '../responses/response-stream.ts';
import type { ResponseObject } from '../responses/response-view.ts';

export interface ChatToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

export interface ChatUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details: { cached_tokens: number };
  completion_tokens_details: { reasoning_tokens: number };
}

export type FinishReason = 'stop' | 'tool_calls' | 'length' | 'content_filter';

/** Why the completion's turn stopped, in Chat Completions' words. */
function finishReason(response: ResponseObject, calls: number): FinishReason {
  const cut = response.incomplete_details?.reason;
  if (cut === 'max_output_tokens') return 'length';
  if (cut === 'content_filter') return 'content_filter';
  return calls === 0 ? 'stop' : 'tool_calls';
}

export interface ChatCompletion {
  id: string;
  object: 'chat.completion';
  created: number;
  model: string;
  choices: {
    index: 0;
    message: { role: 'assistant'; content: string | null; refusal: null; tool_calls?: ChatToolCall[] };
    logprobs: null;
    finish_reason: FinishReason;
  }[];
  usage: ChatUsage;
  service_tier: 'default';
  system_fingerprint: null;
}

export interface ChatDelta {
  role?: 'assistant';
  content?: string;
  refusal?: null;
  tool_calls?: { index: number; id?: string; type?: 'function'; function: { name?: string; arguments: string } }[];
}

export interface ChatChunk {
  id: string;
  object: 'chat.completion.chunk';
  created: number;
  model: string;
  choices: { index: 0; delta: ChatDelta; logprobs: null; finish_reason: FinishReason | null }[];
  usage?: ChatUsage | null;
  service_tier: 'default';
  system_fingerprint: null;
}

/** What every completion and chunk of one call repeats. */
export interface CompletionHeader {
  id: string;
  created: number;
  model: string;
}

/** A streamed completion that failed: OpenAI's in-stream error frame (its clients throw it as an API error). */
export interface ChatStreamError {
  error: { message: string; type: 'server_error'; code: 'turn_failed'; param: null };
}

type FunctionCall = Extract<OpenAIItem, { type: 'function_call' }>;
const functionCalls = (output: OpenAIItem[]): FunctionCall[] =>
  output.filter((item): item is FunctionCall => item.type === 'function_call');

function usageOf(response: ResponseObject): ChatUsage {
  const usage = response.usage;
  const prompt = usage?.input_tokens ?? 0;
  const completion = usage?.output_tokens ?? 0;
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
    prompt_tokens_details: { cached_tokens: usage?.input_tokens_details.cached_tokens ?? 0 },
    completion_tokens_details: { reasoning_tokens: usage?.output_tokens_details.reasoning_tokens ?? 0 },
  };
}

/** A call of the agent that waits for a person's approval, which a chat completion cannot give. */
export const approvalWaitedFor = (response: ResponseObject) =>
  response.output.find((item) => item.type === 'mcp_approval_request');

/** Why a turn gave no completion (with the run to look at), or null when it gave one. */
function failureOf(response: ResponseObject, runId: string): string | null {
  const approval = approvalWaitedFor(response);
  if (approval !== undefined) {
    return `the agent's call of ${approval.name} (${approval.server_label}) needs an approval, which chat completions cannot give, so the turn was cancelled; use /v1/responses or the Sessions API for this agent (GET /v1/runs/${runId} shows the turn)`;
  }
  if (response.status === 'completed' || response.status === 'incomplete') return null;
  const reason = response.error?.message ?? `the turn ended ${response.status}`;
  return `the agent's turn failed: ${reason} (GET /v1/runs/${runId} shows it)`;
}

/** The final Response of a completion's turn as a `chat.completion`; a failed or cancelled turn is a 502. */
export function completionOf(response: ResponseObject, header: CompletionHeader, runId: string): ChatCompletion {
  const failure = failureOf(response, runId);
  if (failure !== null) throw new AppError('turn_failed', failure);
  const calls = functionCalls(response.output).map(
    (call): ChatToolCall => ({
      id: call.call_id,
      type: 'function',
      function: { name: call.name, arguments: call.arguments },
    }),
  );
  const text = response.output_text;
  return {
    ...header,
    object: 'chat.completion',
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: text === '' && calls.length > 0 ? null : text,
          refusal: null,
          ...(calls.length === 0 ? {} : { tool_calls: calls }),
        },
        logprobs: null,
        finish_reason: finishReason(response, calls.length),
      },
    ],
    usage: usageOf(response),
    service_tier: 'default',
    system_fingerprint: null,
  };
}

/**
 * The chunks of a streamed completion, from the Responses events that carry something a chat client shows: the
 * role first, text deltas, each function call (its id and name, then its arguments), the finish reason; with
 * `includeUsage`, every chunk has `usage: null` and a last chunk with no choices carries the usage. A failed turn
 * ends with an error frame instead. `afterFinal` runs once the final event arrived, before the last chunks.
 */
export function completionChunks(
  events: AsyncIterable<ResponseStreamEvent>,
  header: CompletionHeader,
  options: { includeUsage: boolean; runId: string; afterFinal: (response: ResponseObject) => Promise<void> },
): AsyncIterableIterator<ChatChunk | ChatStreamError> {
  const usageField = options.includeUsage ? { usage: null } : {};
  const chunk = (delta: ChatDelta, finish: FinishReason | null = null): ChatChunk => ({
    ...header,
    object: 'chat.completion.chunk',
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
    ...usageField,
    service_tier: 'default',
    system_fingerprint: null,
  });
  /** Output index of each function call → its index among the completion's tool calls. */
  const callIndex = new Map<number, number>();
  type Out = { values: (ChatChunk | ChatStreamError)[]; last: boolean };
  const some = (...values: ChatChunk[]): Out => ({ values, last: false });
  const last = async (response: ResponseObject): Promise<Out> => {
    await options.afterFinal(response);
    const message = failureOf(response, options.runId);
    if (message !== null) {
      const error: ChatStreamError = { error: { message, type: 'server_error', code: 'turn_failed', param: null } };
      return { values: [error], last: true };
    }
    const finish = chunk({}, finishReason(response, functionCalls(response.output).length));
    const usage = options.includeUsage ? [{ ...chunk({}), choices: [], usage: usageOf(response) }] : [];
    return { values: [finish, ...usage], last: true };
  };
  return flatMapAsync<ResponseStreamEvent, ChatChunk | ChatStreamError>(events, async (event) => {
    switch (event.type) {
      case 'response.created':
        return some(chunk({ role: 'assistant', content: '', refusal: null }));
      case 'response.output_text.delta':
        return some(chunk({ content: event.delta }));
      case 'response.output_item.added': {
        if (event.item.type !== 'function_call') return some();
        const index = callIndex.size;
        callIndex.set(event.output_index, index);
        const { call_id: id, name } = event.item;
        return some(chunk({ tool_calls: [{ index, id, type: 'function', function: { name, arguments: '' } }] }));
      }
      case 'response.function_call_arguments.delta': {
        const index = callIndex.get(event.output_index);
        return index === undefined
          ? some()
          : some(chunk({ tool_calls: [{ index, function: { arguments: event.delta } }] }));
      }
      case 'response.completed':
      case 'response.incomplete':
      case 'response.failed':
        return last(event.response);
      default:
        return some();
    }
  });
}
