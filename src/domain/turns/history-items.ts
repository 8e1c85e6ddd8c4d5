/**
 * Conversation history a client replays with its input (OpenAI compatibility) and the log items it becomes, stored
 * before the new input of the message that brings it.
 */
import { messageTokens } from '../../models/context-fit.ts';
import { summaryMessage } from './context-builder.ts';
import type { Attachment, ItemContent, NewItem } from './items.ts';

/** Conversation history a client replays (OpenAI compatibility), stored before the new input. */
export type HistoryItem =
  | { type: 'user_message'; text: string; attachments?: Attachment[] }
  | { type: 'assistant_message'; text: string }
  | { type: 'function_call'; callId: string; name: string; arguments: string }
  | { type: 'function_call_output'; callId: string; output: string }
  /**
   * A summary of the conversation before it, as POST /v1/responses/compact returns it (a `compaction` input item):
   * the model reads the summary instead of what precedes it.
   */
  | { type: 'compaction'; summary: string };

/** A compaction the client gives back: everything before it gives way to its summary (`keptFrom` null). */
function compactionGiven(summary: string): ItemContent {
  const tokens = messageTokens(summaryMessage(summary));
  return { type: 'compaction', summary, keptFrom: null, reason: 'request', tokensBefore: tokens, tokensAfter: tokens };
}

/**
 * History items get steps of their own (negative, so they never meet the turn's steps): consecutive assistant
 * items form one step, and an output joins the step of its call.
 */
export function historyItems(messageId: string, history: HistoryItem[]): NewItem[] {
  const out: NewItem[] = [];
  const stepOfCall = new Map<string, number>();
  let step = 0;
  let open = false;
  for (const item of history) {
    if (item.type === 'compaction') {
      open = false;
      out.push({ messageId, step: 0, content: compactionGiven(item.summary) });
    } else if (item.type === 'user_message') {
      open = false;
      const { text, attachments } = item;
      out.push({
        messageId,
        step: 0,
        content:
          attachments === undefined || attachments.length === 0
            ? { type: 'user_message', text }
            : { type: 'user_message', text, attachments },
      });
    } else if (item.type === 'function_call_output') {
      open = false;
      out.push({
        messageId,
        step: stepOfCall.get(item.callId) ?? step,
        callId: item.callId,
        content: { type: 'function_call_output', name: '', output: item.output, isError: false, source: 'client' },
      });
    } else {
      if (!open) step -= 1;
      open = true;
      if (item.type === 'assistant_message') {
        out.push({ messageId, step, content: { type: 'assistant_message', text: item.text } });
      } else {
        stepOfCall.set(item.callId, step);
        out.push({
          messageId,
          step,
          callId: item.callId,
          content: { type: 'function_call', name: item.name, arguments: item.arguments, kind: 'client', actionId: -1 },
        });
      }
    }
  }
  // Outputs carry the name of their call, as the model context needs it.
  const names = new Map(
    history.flatMap((item) => (item.type === 'function_call' ? [[item.callId, item.name] as const] : [])),
  );
  for (const item of out) {
    if (item.content.type === 'function_call_output' && item.callId !== undefined)
      item.content.name = names.get(item.callId) ?? '';
  }
  return out;
}
