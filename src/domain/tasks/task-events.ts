/**
 * The normalized events of a Task's prompts, derived from what the engine persisted (the message rows and the
 * conversation log), so the event stream and `content?include=events` say the same thing and survive restarts.
 * Per prompt: `init` when its turn starts, `text` / `tool_use` / `tool_result` for each step's items in log order,
 * and `result` once it has finished. Turns of one workspace run one at a time, so the sequence only ever grows.
 */
import { iso } from '../../lib/clock.ts';
import type { Executor } from '../../storage/db.ts';
import type { MessageRow } from '../../storage/schema.ts';
import { itemFromRow } from '../turns/items.ts';
import type { TaskStreamEvent, TaskStreamEventBody } from './task-stream-schema.ts';
import { isPromptFinished, promptStatusOf } from './task-types.ts';

type PromptRow = Pick<
  MessageRow,
  | 'id'
  | 'status'
  | 'run_id'
  | 'agent_id'
  | 'response_text'
  | 'error'
  | 'input_tokens'
  | 'output_tokens'
  | 'started_at'
  | 'completed_at'
  | 'created_at'
>;

/** Parses a stored `{code, message}` error column. */
export function storedError(text: string | null): { code: string; message: string } | null {
  if (text === null) return null;
  try {
    const value: unknown = JSON.parse(text);
    if (typeof value === 'object' && value !== null && 'code' in value && 'message' in value) {
      return { code: String(value.code), message: String(value.message) };
    }
  } catch {
    // Older rows may hold plain text.
  }
  return { code: 'error', message: text };
}

/** Every normalized event of these prompts (in submission order), numbered from 1 across the Task. */
export async function taskEvents(db: Executor, prompts: readonly PromptRow[]): Promise<TaskStreamEvent[]> {
  const ids = prompts.map((prompt) => prompt.id);
  const itemRows =
    ids.length === 0
      ? []
      : await db
          .selectFrom('items')
          .selectAll()
          .where('message_id', 'in', ids)
          .where('type', 'in', ['assistant_message', 'function_call', 'function_call_output'])
          .orderBy('seq')
          .execute();
  const items = itemRows.map(itemFromRow);
  const out: TaskStreamEvent[] = [];
  const push = (promptId: string, at: number, body: TaskStreamEventBody) =>
    out.push({ seq: out.length + 1, timestamp: iso(at), promptId, ...body });
  for (const prompt of prompts) {
    if (prompt.started_at !== null) {
      push(prompt.id, prompt.started_at, {
        eventType: 'init',
        payload: { runId: prompt.run_id, agentId: prompt.agent_id },
      });
    }
    for (const item of items) {
      if (item.messageId !== prompt.id) continue;
      const content = item.content;
      if (content.type === 'assistant_message') {
        push(prompt.id, item.createdAt, { eventType: 'text', payload: { text: content.text } });
      } else if (content.type === 'function_call') {
        push(prompt.id, item.createdAt, {
          eventType: 'tool_use',
          payload: { callId: item.callId, name: content.name, arguments: content.arguments, kind: content.kind },
        });
      } else if (content.type === 'function_call_output') {
        push(prompt.id, item.createdAt, {
          eventType: 'tool_result',
          payload: { callId: item.callId, name: content.name, output: content.output, isError: content.isError },
        });
      }
    }
    const status = promptStatusOf(prompt.status);
    if (isPromptFinished(status)) {
      push(prompt.id, prompt.completed_at ?? prompt.created_at, {
        eventType: 'result',
        payload: {
          status,
          result: prompt.response_text,
          error: storedError(prompt.error),
          usage: { inputTokens: prompt.input_tokens, outputTokens: prompt.output_tokens },
        },
      });
    }
  }
  return out;
}
