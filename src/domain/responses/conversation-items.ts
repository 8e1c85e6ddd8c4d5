/**
 * Items added to a Conversation without running its agent (POST /v1/conversations and
 * POST /v1/conversations/{id}/items). Strict mode takes only `function_call_output` items for client calls the
 * conversation holds (spec 4.1). Compatibility mode also takes what the OpenAI Agents SDKs' conversation sessions
 * store after each run: user and assistant messages, `function_call` items with their outputs, and `mcp_call`
 * items; reasoning, `mcp_list_tools` and item references carry nothing the log keeps and are skipped. Such items
 * are appended outside any turn and become history of the next turn (item-store.ts `UNATTACHED`).
 */
import { AppError, validationError } from '../../errors/app-error.ts';
import { newId } from '../../lib/ids.ts';
import type { Executor } from '../../storage/db.ts';
import type { SessionEvent } from '../outbox.ts';
import { pendingClientCalls, recordOutputs } from '../turns/client-outputs.ts';
import { type HistoryItem, historyItems } from '../turns/history-items.ts';
import { appendItems, UNATTACHED, unattachedStep } from '../turns/item-store.ts';
import type { Item, NewItem } from '../turns/items.ts';
import type { TurnListeners } from '../turns/turn-hooks.ts';

export type ConversationItemInput =
  | { kind: 'output'; callId: string; output: string }
  | { kind: 'user'; text: string }
  | { kind: 'assistant'; text: string }
  | { kind: 'call'; callId: string; name: string; arguments: string }
  | { kind: 'server_call'; name: string; arguments: string; output: string | null; error: string | null };

const COMPAT_HINT = 'send the header `Agentry-Compat: openai` (OpenAI compatibility mode) to have it accepted';
const MAX_TEXT = 100_000;
const MAX_OUTPUT = 1_000_000;
const SKIPPED = ['reasoning', 'mcp_list_tools', 'item_reference'];
const STATUSES = ['in_progress', 'completed', 'incomplete'];

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

function only(item: Record<string, unknown>, param: string, allowed: string[]): void {
  for (const key of Object.keys(item)) {
    if (!allowed.includes(key)) throw validationError(`${param}.${key}`, `${param}.${key} is not a recognised field`);
  }
}

function string(value: unknown, param: string, min: number, max: number): string {
  if (typeof value !== 'string') throw validationError(param, `${param} must be a string`);
  if (value.length < min || value.length > max)
    throw validationError(param, `${param} must be ${min}-${max} characters`);
  return value;
}

function outputText(value: unknown, param: string, compat: boolean): string {
  if (typeof value === 'string') return string(value, param, 0, MAX_OUTPUT);
  if (compat && Array.isArray(value)) {
    return value
      .map((part) => (isRecord(part) && typeof part.text === 'string' ? part.text : JSON.stringify(part)))
      .join('\n');
  }
  throw validationError(param, `${param} must be a string`);
}

function messageText(value: unknown, param: string): string {
  if (typeof value === 'string') return string(value, param, 0, MAX_TEXT);
  if (!Array.isArray(value)) throw validationError(param, `${param} must be a string or an array of text parts`);
  return value
    .map((part, index) => {
      const p = `${param}[${index}]`;
      if (!isRecord(part) || !['input_text', 'output_text', 'text'].includes(String(part.type))) {
        throw validationError(`${p}.type`, `${p}.type must be input_text or output_text (a conversation keeps text)`);
      }
      return string(part.text, `${p}.text`, 0, MAX_TEXT);
    })
    .join('\n');
}

function parseItem(raw: unknown, param: string, compat: boolean): ConversationItemInput | null {
  if (!isRecord(raw)) throw validationError(param, `${param} must be an object`);
  const type = raw.type ?? (raw.role !== undefined ? 'message' : undefined);
  if (type === 'function_call_output') {
    only(raw, param, ['type', 'call_id', 'output', 'id', 'status']);
    const callId = string(raw.call_id, `${param}.call_id`, 1, 512);
    const output = outputText(raw.output, `${param}.output`, compat);
    if (raw.id !== undefined && raw.id !== null && (typeof raw.id !== 'string' || raw.id.length > 200)) {
      throw validationError(`${param}.id`, `${param}.id must be a string`);
    }
    if (raw.status !== undefined && raw.status !== null && !STATUSES.includes(String(raw.status))) {
      throw validationError(`${param}.status`, `${param}.status must be one of ${STATUSES.join(', ')}`);
    }
    return { kind: 'output', callId, output };
  }
  if (!compat) {
    const what = typeof type === 'string' ? `${param}.type ${type}` : `${param}.type`;
    if (typeof type === 'string' && ['message', 'function_call', 'mcp_call', ...SKIPPED].includes(type)) {
      throw validationError(
        `${param}.type`,
        `${what} is not part of the strict items body (only "function_call_output"); ${COMPAT_HINT}`,
      );
    }
    throw validationError(
      `${param}.type`,
      `${param}.type must be "function_call_output": only function call outputs can be added to a conversation`,
    );
  }
  if (type === 'message') {
    if (raw.role === 'user') return { kind: 'user', text: messageText(raw.content, `${param}.content`) };
    if (raw.role === 'assistant') return { kind: 'assistant', text: messageText(raw.content, `${param}.content`) };
    throw validationError(
      `${param}.role`,
      `${param}.role must be user or assistant (system and developer messages are instructions of a Response)`,
    );
  }
  if (type === 'function_call') {
    return {
      kind: 'call',
      callId: string(raw.call_id, `${param}.call_id`, 1, 512),
      name: string(raw.name, `${param}.name`, 1, 256),
      arguments: typeof raw.arguments === 'string' ? raw.arguments : '{}',
    };
  }
  if (type === 'mcp_call') {
    const error =
      raw.error === undefined || raw.error === null
        ? null
        : typeof raw.error === 'string'
          ? raw.error
          : JSON.stringify(raw.error);
    return {
      kind: 'server_call',
      name: string(raw.name, `${param}.name`, 1, 256),
      arguments: typeof raw.arguments === 'string' ? raw.arguments : '{}',
      output: typeof raw.output === 'string' ? raw.output : null,
      error,
    };
  }
  if (typeof type === 'string' && SKIPPED.includes(type)) return null;
  throw validationError(
    `${param}.type`,
    `${param}.type must be message, function_call, function_call_output or mcp_call`,
  );
}

/** Checks the `items` of a request; null entries are items accepted and skipped. */
export function parseConversationItems(value: unknown, compat: boolean, max: number): (ConversationItemInput | null)[] {
  if (!Array.isArray(value) || value.length > max) {
    throw validationError('items', `items must be an array of at most ${max} items`);
  }
  return value.map((raw, index) => parseItem(raw, `items[${index}]`, compat));
}

/**
 * Stores parsed items in the caller's transaction (session row locked). Outputs for calls the conversation
 * already holds go through recordOutputs (idempotent retries, 409 on a different output, a waiting turn ends
 * completed); everything else is appended as unattached history. Returns the stored items in request order.
 */
export async function storeConversationItems(
  trx: Executor,
  listeners: TurnListeners,
  target: { orgId: string; sessionId: string; now: number },
  parsed: (ConversationItemInput | null)[],
): Promise<{ items: Item[]; events: SessionEvent[]; resumed: boolean }> {
  const batchCalls = new Map<string, string>();
  for (const item of parsed) if (item?.kind === 'call') batchCalls.set(item.callId, item.name);
  const known: { callId: string; output: string; index: number }[] = [];
  parsed.forEach((item, index) => {
    if (item?.kind === 'output' && !batchCalls.has(item.callId))
      known.push({ callId: item.callId, output: item.output, index });
  });
  let recorded: Awaited<ReturnType<typeof recordOutputs>> = { items: [], events: [], resumed: false, unblocked: [] };
  if (known.length > 0) {
    try {
      recorded = await recordOutputs(trx, listeners, target, known, { mode: 'persist', kinds: ['client', 'question'] });
    } catch (error) {
      // recordOutputs names positions among the outputs it was given: map them back to positions in `items`.
      if (error instanceof AppError && error.param !== null) {
        const match = /^\[(\d+)\](.*)$/.exec(error.param);
        const position = match === null ? undefined : known[Number(match[1])]?.index;
        if (position !== undefined) {
          throw new AppError(error.code, error.message, {
            param: `items[${position}]${match?.[2] ?? ''}`,
            cause: error,
          });
        }
      }
      throw error;
    }
  }
  const fresh = parsed.filter((item) => item !== null && (item.kind !== 'output' || batchCalls.has(item.callId)));
  if (fresh.some((item) => item?.kind === 'user') && (await pendingClientCalls(trx, target.sessionId)).length > 0) {
    throw new AppError(
      'client_tool_output_required',
      'a client function call of this conversation is waiting for its output; add it before new user input',
    );
  }
  type Entry = { entry: HistoryItem; server?: true; isError?: boolean };
  const history = fresh.flatMap((item): Entry[] => {
    if (item === null) return [];
    if (item.kind === 'user') return [{ entry: { type: 'user_message', text: item.text } }];
    if (item.kind === 'assistant') return [{ entry: { type: 'assistant_message', text: item.text } }];
    if (item.kind === 'call') {
      return [{ entry: { type: 'function_call', callId: item.callId, name: item.name, arguments: item.arguments } }];
    }
    if (item.kind === 'output') {
      return [{ entry: { type: 'function_call_output', callId: item.callId, output: item.output } }];
    }
    // Our own call id: the one a client replays belongs to the conversation that ran the call.
    const callId = `call_${newId().replaceAll('-', '')}`;
    return [
      { entry: { type: 'function_call', callId, name: item.name, arguments: item.arguments }, server: true },
      {
        entry: { type: 'function_call_output', callId, output: item.output ?? item.error ?? '' },
        isError: item.error !== null,
      },
    ];
  });
  const last = await trx
    .selectFrom('items')
    .select((eb) => eb.fn.max<number | null>('seq').as('seq'))
    .where('session_id', '=', target.sessionId)
    .executeTakeFirst();
  const firstSeq = Number(last?.seq ?? 0) + 1;
  const rows: NewItem[] = historyItems(
    UNATTACHED,
    history.map(({ entry }) => entry),
  ).map((item, index) => {
    const source = history[index];
    const content = item.content;
    if (source?.server === true && content.type === 'function_call') content.kind = 'server';
    if (source?.isError !== undefined && content.type === 'function_call_output') {
      content.isError = source.isError;
      content.source = 'server';
    }
    return { ...item, step: unattachedStep(firstSeq, item.step) };
  });
  const appended = await appendItems(trx, target, rows);
  // In request order: the outputs recorded for known calls where they were given, the rest as appended.
  const byIndex = new Map(known.map((entry, position) => [entry.index, recorded.items[position]]));
  const queue = [...appended];
  const items: Item[] = [];
  parsed.forEach((item, index) => {
    if (item === null) return;
    const stored = byIndex.get(index);
    if (stored !== undefined) {
      items.push(stored);
      return;
    }
    const count = item.kind === 'server_call' ? 2 : 1;
    items.push(...queue.splice(0, count));
  });
  return { items, events: recorded.events, resumed: recorded.resumed };
}
