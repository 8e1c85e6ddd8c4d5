/**
 * POST /v1/responses/compact (`responses.compact` of the openai package): the conversation a Response body names
 * (its `previous_response_id` or `conversation`, then its `input`) summarised by the agent's model, returned as
 * OpenAI returns it: the user messages, then one `compaction` item. Nothing is stored; the client sends that window
 * back as the `input` of its next Response, whose turn reads the summary instead of what precedes it
 * (docs/context.md). The summary is written in chunks that fit the model's window (models/summarise.ts).
 */
import type { ModelWindow } from '../../models/context-window.ts';
import type { ContextMessage, Usage } from '../../models/types.ts';
import { ContextBuilder, summaryMessage } from '../turns/context-builder.ts';
import type { Item } from '../turns/items.ts';
import type { InputItem } from './response-request.ts';
import { type ResponseUsage, responseUsage } from './response-view.ts';

/** A user message of the compacted window. */
interface CompactedUserMessage {
  id: string;
  type: 'message';
  role: 'user';
  status: 'completed';
  content: { type: 'input_text'; text: string }[];
}

/** The summary. Self-hosted, so not encrypted: `encrypted_content` holds it as plain text, repeated in `summary`. */
interface CompactionItem {
  id: string;
  type: 'compaction';
  encrypted_content: string;
  summary: string;
  created_by: 'agentry';
}

export interface CompactedResponse {
  id: string;
  object: 'response.compaction';
  created_at: number;
  output: (CompactedUserMessage | CompactionItem)[];
  usage: ResponseUsage;
}

/** What a compaction reads: the conversation as the model would, and its user messages (kept as they are). */
export interface CompactionWindow {
  context: ContextMessage[];
  users: { id: string | null; text: string }[];
}

/** The input items of a Response body as model context, in order. */
function inputContext(input: InputItem[]): ContextMessage[] {
  const names = new Map<string, string>();
  const out: ContextMessage[] = [];
  for (const item of input) {
    if (item.kind === 'user') out.push({ role: 'user', content: [{ type: 'text', text: item.text }] });
    else if (item.kind === 'output')
      out.push({
        role: 'tool',
        results: [{ callId: item.callId, name: names.get(item.callId) ?? '', output: item.output, isError: false }],
      });
    else if (item.kind === 'history') {
      const history = item.item;
      if (history.type === 'compaction') out.splice(0, out.length, summaryMessage(history.summary));
      else if (history.type === 'user_message')
        out.push({ role: 'user', content: [{ type: 'text', text: history.text }] });
      else if (history.type === 'assistant_message') out.push({ role: 'assistant', text: history.text, toolCalls: [] });
      else if (history.type === 'function_call') {
        names.set(history.callId, history.name);
        const call = { callId: history.callId, name: history.name, arguments: history.arguments };
        out.push({ role: 'assistant', text: '', toolCalls: [call] });
      } else
        out.push({
          role: 'tool',
          results: [
            { callId: history.callId, name: names.get(history.callId) ?? '', output: history.output, isError: false },
          ],
        });
    }
  }
  return out;
}

/** The user messages of the input, from its last compaction on (those before it are in its summary). */
function inputUsers(input: InputItem[]): CompactionWindow['users'] {
  const users: CompactionWindow['users'] = [];
  for (const item of input) {
    if (item.kind === 'user') users.push({ id: item.id, text: item.text });
    else if (item.kind === 'history' && item.item.type === 'user_message')
      users.push({ id: item.id, text: item.item.text });
    else if (item.kind === 'history' && item.item.type === 'compaction') users.length = 0;
  }
  return users;
}

/** The conversation log (items of the session, oldest first) followed by the body's input. */
export function compactionWindow(log: Item[], input: InputItem[]): CompactionWindow {
  const builder = new ContextBuilder();
  const users: CompactionWindow['users'] = [];
  for (const item of log) {
    builder.append(item);
    if (item.content.type === 'user_message') users.push({ id: item.id, text: item.content.text });
    else if (item.content.type === 'compaction') users.length = 0;
  }
  const given = inputContext(input);
  const restarts = input.some((item) => item.kind === 'history' && item.item.type === 'compaction');
  return {
    context: restarts ? given : [...builder.build(), ...given],
    users: restarts ? inputUsers(input) : [...users, ...inputUsers(input)],
  };
}

/** The conversation tokens one summarising call may read: the window less the output it may write. */
export function summaryRoom(window: ModelWindow): number {
  return Math.max(1, window.contextWindow - Math.min(window.maxOutputTokens, Math.floor(window.contextWindow / 4)));
}

/** The compacted window as the openai package reads it. */
export function compactedResponse(
  newId: () => string,
  window: CompactionWindow,
  summary: { text: string; usage: Usage },
  createdAt: number,
): CompactedResponse {
  const { usage } = summary;
  const users: CompactedUserMessage[] = window.users.map((user) => ({
    id: user.id ?? `msg_${newId().replaceAll('-', '')}`,
    type: 'message',
    role: 'user',
    status: 'completed',
    content: [{ type: 'input_text', text: user.text }],
  }));
  const compaction: CompactionItem = {
    id: `cmp_${newId().replaceAll('-', '')}`,
    type: 'compaction',
    encrypted_content: summary.text,
    summary: summary.text,
    created_by: 'agentry',
  };
  return {
    id: `resp_${newId()}`,
    object: 'response.compaction',
    created_at: Math.floor(createdAt / 1000),
    output: [...users, compaction],
    usage: responseUsage({
      input: usage.inputTokens,
      cachedInput: usage.cachedInputTokens ?? 0,
      output: usage.outputTokens,
    }),
  };
}
