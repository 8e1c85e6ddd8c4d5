/**
 * The conversation log of a session: user inputs, assistant steps, tool calls and tool outputs, in order.
 * The model's context is rebuilt from it at every step, so what the model saw is always what was stored.
 */
import { AppError } from '../../errors/app-error.ts';
import {
  CALL_KINDS,
  type CallKind,
  ELICITATION_ACTIONS,
  ELICITATION_MODES,
  type ElicitationAction,
  type ElicitationMode,
} from '../../events/session-values.ts';
import {
  isAbsentOr,
  isArrayOf,
  isJsonObject,
  isNullableNumber,
  isNullableString,
  isNumber,
  isOneOf,
  isString,
} from '../../lib/guards.ts';
import { newId } from '../../lib/ids.ts';
import { type FitResult, fitContext, fittedContext, messageTokens, withKnownTokens } from '../../models/context-fit.ts';
import type { ContextMessage, IncompleteReason, ToolCall, ToolResult, UserPart } from '../../models/types.ts';
import type { Executor } from '../../storage/db.ts';
import { parseJsonColumn } from '../../storage/json-column.ts';
import { prepare, prepareNumberedInsert } from '../../storage/prepared.ts';
import type { ItemRow } from '../../storage/schema.ts';
import { transactionMemo } from '../../storage/transaction-memo.ts';
import { createdInTransaction } from '../sessions/new-sessions.ts';
import { firstOpenMessage } from './open-messages.ts';

const insertItems = prepareNumberedInsert('items', 'session_id');

/** The last item seq a session got from the open transaction (which holds the session: no one else appends). */
const writtenSeqs = transactionMemo<number>();

const itemsAfter = prepare((db, p: { sessionId: string; afterSeq: number }) =>
  db
    .selectFrom('items')
    .leftJoin('messages', 'messages.id', 'items.message_id')
    .selectAll('items')
    .select('messages.seq as message_seq')
    .where('items.session_id', '=', p.sessionId)
    .where('items.seq', '>', p.afterSeq)
    .orderBy('items.seq'),
);

export { CALL_KINDS, type CallKind };

/** A file attached to user input (Responses `input_image` / `input_file`), resolved when the context is built. */
export interface Attachment {
  kind: 'image' | 'file';
  fileId: string;
  detail?: string;
}

/** The server behind a server call: its connector (if any), its label, and the tool's own name there. */
export interface CallServer {
  id: string | null;
  label: string;
  tool: string;
}

/** A tool as an `mcp_list_tools` item records it. */
export interface ListedTool {
  name: string;
  description: string | null;
  inputSchema: Record<string, unknown>;
}

export type ItemContent =
  | { type: 'user_message'; text: string; attachments?: Attachment[] }
  /** `chunks`: the lengths of the live text deltas it was streamed in (absent for replayed history, older rows). */
  /** `incomplete`: the model's reply was cut short (models/types.ts IncompleteReason). */
  | { type: 'assistant_message'; text: string; chunks?: number[]; incomplete?: IncompleteReason }
  | {
      type: 'function_call';
      name: string;
      arguments: string;
      kind: CallKind;
      actionId: number;
      /** Server calls only: where the call runs (absent in logs written before tool servers existed). */
      server?: CallServer;
      /** Server calls that waited for approval: the approval's id (`mcpr_…`, Responses `approval_request_id`). */
      approval?: { id: string; expiresAt: number | null };
    }
  /**
   * The one decision on a call that needed approval (Responses `mcp_approval_response`); not model context. A
   * denial is followed by the call's output saying so, which the model reads.
   */
  | {
      type: 'approval_decision';
      approvalId: string;
      approved: boolean;
      reason: string | null;
      by: DecisionSource;
    }
  /**
   * An MCP server asked for input during the server call `callId` (the call's `index`-th request, counted from 0 in
   * each run of the call); not model context. The call waits, without output, until an `elicitation_response`
   * answers it, and then runs again (docs/mcp-auth.md "Elicitation").
   */
  | {
      type: 'elicitation';
      elicitationId: string;
      actionId: number;
      index: number;
      server: string;
      mode: ElicitationMode;
      message: string;
      requestedSchema: Record<string, unknown> | null;
      url: string | null;
    }
  /** The answer to an elicitation, given back to the server when the call runs again; not model context. */
  | {
      type: 'elicitation_response';
      elicitationId: string;
      action: ElicitationAction;
      content: Record<string, unknown> | null;
      by: DecisionSource;
    }
  /** The tools of a server as first offered in this conversation (Responses `mcp_list_tools`); not model context. */
  | { type: 'tool_list'; server: { id: string | null; label: string }; tools: ListedTool[] }
  /**
   * Marks items deleted from the log (DELETE /v1/conversations/{id}/items/{item_id}): their rows are gone, and
   * this marker tells the logs processes keep (context-cache.ts) to drop them too. Not model context, not listed.
   */
  | { type: 'item_removed'; itemIds: string[] }
  /**
   * The older part of the log summarised (docs/context.md): a step's context is the latest compaction's summary,
   * then the items from `keptFrom` on (null: none of the items before the compaction are kept). Written by the
   * compaction policy (engine/compaction.ts) with its span and usage in one transaction.
   */
  | {
      type: 'compaction';
      summary: string;
      keptFrom: string | null;
      reason: CompactionReason;
      /** Estimated tokens of the conversation before and after. */
      tokensBefore: number;
      tokensAfter: number;
    }
  | {
      type: 'function_call_output';
      name: string;
      output: string;
      isError: boolean;
      source: OutputSource;
      /** The answer exactly as submitted (any JSON value), for questions. */
      answer?: unknown;
    };

/**
 * Why the log was compacted: it passed the threshold, the provider refused it as too long, or a client asked for
 * it (POST /v1/responses/compact).
 */
export const COMPACTION_REASONS = ['threshold', 'overflow', 'request'] as const;
export type CompactionReason = (typeof COMPACTION_REASONS)[number];

const DECISION_SOURCES = ['answer', 'responses', 'timeout'] as const;
type DecisionSource = (typeof DECISION_SOURCES)[number];
const OUTPUT_SOURCES = ['server', 'client', 'answer', 'cancelled'] as const;
type OutputSource = (typeof OUTPUT_SOURCES)[number];

const isAttachment = (value: unknown): value is Attachment =>
  isJsonObject(value) &&
  (value.kind === 'image' || value.kind === 'file') &&
  typeof value.fileId === 'string' &&
  isAbsentOr(value.detail, isString);

const isCallServer = (value: unknown): value is CallServer =>
  isJsonObject(value) &&
  isNullableString(value.id) &&
  typeof value.label === 'string' &&
  typeof value.tool === 'string';

const isCallApproval = (value: unknown): boolean =>
  isJsonObject(value) && typeof value.id === 'string' && isNullableNumber(value.expiresAt);

const isListedTool = (value: unknown): value is ListedTool =>
  isJsonObject(value) &&
  typeof value.name === 'string' &&
  isNullableString(value.description) &&
  isJsonObject(value.inputSchema);

type JsonObject = Record<string, unknown>;

/** The fields each variant of ItemContent needs, by its `type` (every type has one: the record is exhaustive). */
const CONTENT_FIELDS: Record<ItemContent['type'], (value: JsonObject) => boolean> = {
  user_message: (value) =>
    typeof value.text === 'string' && (value.attachments === undefined || isArrayOf(value.attachments, isAttachment)),
  assistant_message: (value) =>
    typeof value.text === 'string' &&
    isAbsentOr(value.chunks, (chunks) => isArrayOf(chunks, isNumber)) &&
    isAbsentOr(value.incomplete, (reason) => reason === 'max_output_tokens' || reason === 'content_filter'),
  function_call: (value) =>
    typeof value.name === 'string' &&
    typeof value.arguments === 'string' &&
    isOneOf(CALL_KINDS, value.kind) &&
    typeof value.actionId === 'number' &&
    isAbsentOr(value.server, isCallServer) &&
    isAbsentOr(value.approval, isCallApproval),
  approval_decision: (value) =>
    typeof value.approvalId === 'string' &&
    typeof value.approved === 'boolean' &&
    isNullableString(value.reason) &&
    isOneOf(DECISION_SOURCES, value.by),
  elicitation: (value) =>
    typeof value.elicitationId === 'string' &&
    typeof value.actionId === 'number' &&
    typeof value.index === 'number' &&
    typeof value.server === 'string' &&
    isOneOf(ELICITATION_MODES, value.mode) &&
    typeof value.message === 'string' &&
    (value.requestedSchema === null || isJsonObject(value.requestedSchema)) &&
    isNullableString(value.url),
  elicitation_response: (value) =>
    typeof value.elicitationId === 'string' &&
    isOneOf(ELICITATION_ACTIONS, value.action) &&
    (value.content === null || isJsonObject(value.content)) &&
    isOneOf(DECISION_SOURCES, value.by),
  tool_list: (value) =>
    isJsonObject(value.server) &&
    isNullableString(value.server.id) &&
    typeof value.server.label === 'string' &&
    isArrayOf(value.tools, isListedTool),
  function_call_output: (value) =>
    typeof value.name === 'string' &&
    typeof value.output === 'string' &&
    typeof value.isError === 'boolean' &&
    isOneOf(OUTPUT_SOURCES, value.source),
  item_removed: (value) => isArrayOf(value.itemIds, isString),
  compaction: (value) =>
    typeof value.summary === 'string' &&
    isNullableString(value.keptFrom) &&
    isOneOf(COMPACTION_REASONS, value.reason) &&
    typeof value.tokensBefore === 'number' &&
    typeof value.tokensAfter === 'number',
};

/** CONTENT_FIELDS as a map: a `type` that is no variant's (`toString`, a number) finds nothing, not a prototype key. */
const CONTENT_CHECKS = new Map<unknown, (value: JsonObject) => boolean>(Object.entries(CONTENT_FIELDS));

/**
 * What `items.content` holds: the `type` discriminant and the fields its variant needs. Runs for every item a
 * turn loads, so it checks shapes only (no schema library, no deep walk of tool schemas or answers).
 */
export function isItemContent(value: unknown): value is ItemContent {
  if (!isJsonObject(value)) return false;
  const check = CONTENT_CHECKS.get(value.type);
  return check?.(value) === true;
}

export interface Item {
  id: string;
  messageId: string;
  seq: number;
  step: number;
  callId: string | null;
  createdAt: number;
  content: ItemContent;
}

const PREFIX: Record<ItemContent['type'], string> = {
  user_message: 'msg',
  assistant_message: 'msg',
  function_call: 'fc',
  function_call_output: 'fco',
  tool_list: 'mcpl',
  approval_decision: 'mcpa',
  elicitation: 'elic',
  elicitation_response: 'elicr',
  item_removed: 'rm',
  compaction: 'cmp',
};

export function itemFromRow(row: ItemRow): Item {
  return {
    id: row.id,
    messageId: row.message_id,
    seq: row.seq,
    step: row.step,
    callId: row.call_id,
    createdAt: row.created_at,
    content: parseJsonColumn(row.content, isItemContent, 'items.content'),
  };
}

/** Ids of the items a model step produces are derived, so a live stream can name them before they are stored. */
export const assistantItemId = (messageId: string, step: number): string =>
  `msg_${messageId.replaceAll('-', '')}_${step}`;
export const callItemId = (messageId: string, actionId: number): string =>
  `fc_${messageId.replaceAll('-', '')}_${actionId}`;

export interface NewItem {
  /** Defaults to a random id with the type's prefix. */
  id?: string;
  messageId: string;
  step: number;
  callId?: string;
  content: ItemContent;
}

/** Appends items at the end of the session's log (callers hold the session's row lock or lease). */
export async function appendItems(
  trx: Executor,
  target: { orgId: string; sessionId: string; now: number },
  items: NewItem[],
): Promise<Item[]> {
  if (items.length === 0) return [];
  const known = writtenSeqs.get(trx, target.sessionId) ?? (createdInTransaction(trx, target.sessionId) ? 0 : undefined);
  const unnumbered = items.map((item) => ({
    id: item.id ?? `${PREFIX[item.content.type]}_${newId().replaceAll('-', '')}`,
    org_id: target.orgId,
    session_id: target.sessionId,
    message_id: item.messageId,
    step: item.step,
    type: item.content.type,
    call_id: item.callId ?? null,
    content: JSON.stringify(item.content),
    created_at: target.now,
  }));
  // Unknown to this transaction: numbered by the insert itself, with no read of the last seq before it.
  const base = await insertItems.run(trx, target.sessionId, unnumbered, known);
  const rows: ItemRow[] = unnumbered.map((row, index) => ({ ...row, seq: base + index + 1 }));
  writtenSeqs.set(trx, target.sessionId, base + rows.length);
  return rows.map(itemFromRow);
}

/**
 * `message_id` of items added to a conversation outside any turn (user and assistant messages, function calls and
 * outputs sent to POST /v1/conversations/{id}/items): the next accepted message adopts them as its history.
 */
export const UNATTACHED = '';

/** Steps of unattached items: far below any turn's own history steps, apart per batch (keyed by its first seq). */
export const unattachedStep = (firstSeq: number, step: number): number =>
  step === 0 ? 0 : -(1_000_000 + firstSeq * 64) + step + 1;

/** Makes the session's unattached items history of `messageId` (in the caller's transaction, session locked). */
export async function adoptUnattachedItems(trx: Executor, sessionId: string, messageId: string): Promise<void> {
  await adoptItems.run(trx, { sessionId, messageId, unattached: UNATTACHED });
}

const adoptItems = prepare((db, p: { sessionId: string; messageId: string; unattached: string }) =>
  db
    .updateTable('items')
    .set({ message_id: p.messageId })
    .where('session_id', '=', p.sessionId)
    .where('message_id', '=', p.unattached),
);

/**
 * Deletes items of the session's log (callers hold the session's row lock, and no turn of the session is
 * unfinished) and appends an `item_removed` marker naming them, with the session's last message (unattached when
 * it has none yet), so that a process that kept the session's log reads it at once and drops the items.
 */
export async function removeItems(
  trx: Executor,
  target: { orgId: string; sessionId: string; now: number },
  itemIds: string[],
): Promise<void> {
  if (itemIds.length === 0) return;
  await trx.deleteFrom('items').where('session_id', '=', target.sessionId).where('id', 'in', itemIds).execute();
  const last = await trx
    .selectFrom('messages')
    .select('id')
    .where('session_id', '=', target.sessionId)
    .orderBy('seq', 'desc')
    .limit(1)
    .executeTakeFirst();
  const marker: NewItem = { messageId: last?.id ?? UNATTACHED, step: 0, content: { type: 'item_removed', itemIds } };
  await appendItems(trx, target, [marker]);
}

/**
 * Deletes the item `itemId` of the session's log with the items that belong to it: a call, its output and the
 * decision on its approval (one call_id) go together, so the log never holds an output without its call. Callers
 * hold the session's row lock. 409 `conversation_busy` while a turn of the session is unfinished (its steps read
 * the log); false when the log has no such item.
 */
export async function removeLogItem(
  trx: Executor,
  target: { orgId: string; sessionId: string; now: number },
  itemId: string,
): Promise<boolean> {
  const row = await trx
    .selectFrom('items')
    .select(['id', 'call_id', 'type'])
    .where('session_id', '=', target.sessionId)
    .where('id', '=', itemId)
    .executeTakeFirst();
  if (row === undefined || row.type === 'item_removed') return false;
  if ((await firstOpenMessage(trx, target.sessionId)) !== undefined) {
    throw new AppError(
      'conversation_busy',
      'the conversation has an unfinished response (queued, running or waiting for tool outputs): delete items once it ended, or cancel it (POST /v1/responses/{id}/cancel)',
    );
  }
  const together =
    row.call_id === null
      ? [row]
      : await trx
          .selectFrom('items')
          .select('id')
          .where('session_id', '=', target.sessionId)
          .where('call_id', '=', row.call_id)
          .execute();
  await removeItems(
    trx,
    target,
    together.map((item) => item.id),
  );
  return true;
}

/** The whole log in order: every message's items, then the items added since the last message. */
export async function loadLogItems(db: Executor, sessionId: string): Promise<Item[]> {
  const attached = await loadContextItems(db, sessionId, 2_147_483_647);
  const unattached = await db
    .selectFrom('items')
    .selectAll()
    .where('session_id', '=', sessionId)
    .where('message_id', '=', UNATTACHED)
    .orderBy('seq')
    .execute();
  return [...attached, ...unattached.map(itemFromRow)];
}

/**
 * The log as a turn sees it: items of this message and of the messages before it, grouped by message in
 * submission order. A later message's input (already queued) is not part of an earlier turn, and an answer that
 * arrives after it still belongs to its own message.
 */
export async function loadContextItems(db: Executor, sessionId: string, upToMessageSeq: number): Promise<Item[]> {
  const rows = await contextItems.all(db, { sessionId, upToMessageSeq });
  return rows.map(itemFromRow);
}

const contextItems = prepare((db, p: { sessionId: string; upToMessageSeq: number }) =>
  db
    .selectFrom('items')
    .innerJoin('messages', 'messages.id', 'items.message_id')
    .selectAll('items')
    .where('items.session_id', '=', p.sessionId)
    .where('messages.seq', '<=', p.upToMessageSeq)
    .orderBy('messages.seq')
    .orderBy('items.seq'),
);

/** Items of a session past `afterSeq` in log order, each with its message's seq (null while not adopted yet). */
export async function loadItemsAfter(
  db: Executor,
  sessionId: string,
  afterSeq: number,
): Promise<(ItemRow & { message_seq: number | null })[]> {
  return itemsAfter.all(db, { sessionId, afterSeq });
}

export async function loadItem(db: Executor, itemId: string): Promise<Item | undefined> {
  const row = await db.selectFrom('items').selectAll().where('id', '=', itemId).executeTakeFirst();
  return row === undefined ? undefined : itemFromRow(row);
}

/** The output item of a tool call of the session, once stored. */
export async function loadCallOutput(db: Executor, sessionId: string, callId: string): Promise<Item | undefined> {
  const row = await db
    .selectFrom('items')
    .selectAll()
    .where('session_id', '=', sessionId)
    .where('call_id', '=', callId)
    .where('type', '=', 'function_call_output')
    .executeTakeFirst();
  return row === undefined ? undefined : itemFromRow(row);
}

export async function loadMessageItems(db: Executor, messageId: string): Promise<Item[]> {
  const rows = await messageItems.all(db, { messageId });
  return rows.map(itemFromRow);
}

const messageItems = prepare((db, p: { messageId: string }) =>
  db.selectFrom('items').selectAll().where('message_id', '=', p.messageId).orderBy('seq'),
);

export interface PendingCall {
  item: Item;
  callId: string;
  name: string;
  arguments: string;
  kind: CallKind;
  actionId: number;
  /**
   * Server calls that need approval: `pending` until decided, then `approved` (a denied call has its output).
   * Absent for calls that run without asking.
   */
  approval?: { id: string; state: 'pending' | 'approved'; expiresAt: number | null };
  /**
   * Server calls during which the server asked for input: every request so far, in order, with its answer once
   * given. The call waits (runs no more) while the last one has none.
   */
  elicitations?: CallElicitation[];
}

export interface CallElicitation {
  item: Item;
  id: string;
  actionId: number;
  index: number;
  answer: { action: ElicitationAction; content: Record<string, unknown> | null } | null;
}

/** The elicitations of each call in `items`, with their answers, by call id. */
function elicitationsByCall(items: Item[]): Map<string, CallElicitation[]> {
  const byCall = new Map<string, CallElicitation[]>();
  const byId = new Map<string, CallElicitation>();
  for (const item of items) {
    const content = item.content;
    if (content.type === 'elicitation' && item.callId !== null) {
      const entry: CallElicitation = {
        item,
        id: content.elicitationId,
        actionId: content.actionId,
        index: content.index,
        answer: null,
      };
      byId.set(entry.id, entry);
      byCall.set(item.callId, [...(byCall.get(item.callId) ?? []), entry]);
    } else if (content.type === 'elicitation_response') {
      const entry = byId.get(content.elicitationId);
      if (entry !== undefined) entry.answer = { action: content.action, content: content.content };
    }
  }
  return byCall;
}

/**
 * Action ids a message's items took so far: one per call item and per elicitation, numbered from 0 in the order
 * they were made, so the next one made takes this number.
 */
export function actionsTaken(items: Item[]): number {
  return items.filter((item) => item.content.type === 'function_call' || item.content.type === 'elicitation').length;
}

/** The elicitation a call waits for (its last one, unanswered), if any. */
export function waitingElicitation(call: PendingCall): CallElicitation | undefined {
  const last = call.elicitations?.at(-1);
  return last !== undefined && last.answer === null ? last : undefined;
}

/** Text the assistant produced in a turn so far (not replayed history, whose steps are negative). */
export function turnText(items: Item[]): string {
  return items
    .filter((item) => item.step >= 0)
    .map((item) => (item.content.type === 'assistant_message' ? item.content.text : ''))
    .filter((text) => text !== '')
    .join('\n');
}

/**
 * The items of the message `messageId` in a turn's context (context-cache.ts, loadContextItems): the log is in
 * message order and that message is the context's last, so they are its tail. Found from the end, so a turn's
 * cost does not grow with the session's history.
 */
export function ownItems(items: Item[], messageId: string): Item[] {
  let start = items.length;
  while (start > 0 && items[start - 1]?.messageId === messageId) start -= 1;
  return items.slice(start);
}

/** Tool calls that have no output yet, in call order. */
export function pendingCalls(items: Item[]): PendingCall[] {
  const answered = new Set(
    items.filter((item) => item.content.type === 'function_call_output').map((item) => item.callId),
  );
  const approved = new Set(
    items.flatMap((item) =>
      item.content.type === 'approval_decision' && item.content.approved ? [item.content.approvalId] : [],
    ),
  );
  const elicitations = elicitationsByCall(items);
  const pending: PendingCall[] = [];
  for (const item of items) {
    const content = item.content;
    if (content.type !== 'function_call' || item.callId === null || answered.has(item.callId)) continue;
    const asked = elicitations.get(item.callId);
    pending.push({
      ...(asked === undefined ? {} : { elicitations: asked }),
      item,
      callId: item.callId,
      name: content.name,
      arguments: content.arguments,
      kind: content.kind,
      actionId: content.actionId,
      ...(content.approval === undefined
        ? {}
        : {
            approval: {
              id: content.approval.id,
              state: approved.has(content.approval.id) ? ('approved' as const) : ('pending' as const),
              expiresAt: content.approval.expiresAt ?? null,
            },
          }),
    });
  }
  return pending;
}

export interface AttachedFile {
  mediaType: string;
  filename: string;
  data: Uint8Array;
}

/** User content with its attachments: images as image parts, text files as text (what models read best). */
function userContent(
  text: string,
  attachments: Attachment[] | undefined,
  files: ReadonlyMap<string, AttachedFile>,
): UserPart[] {
  const parts: UserPart[] = text === '' ? [] : [{ type: 'text', text }];
  for (const attachment of attachments ?? []) {
    const file = files.get(attachment.fileId);
    if (file === undefined) {
      parts.push({ type: 'text', text: `[file ${attachment.fileId} is no longer available]` });
    } else if (attachment.kind === 'image') {
      const { detail } = attachment;
      parts.push({
        type: 'image',
        mediaType: file.mediaType,
        data: file.data,
        ...(detail === undefined ? {} : { detail }),
      });
    } else {
      parts.push({ type: 'text', text: `--- ${file.filename} ---\n${new TextDecoder().decode(file.data)}` });
    }
  }
  return parts.length === 0 ? [{ type: 'text', text: '' }] : parts;
}

const NO_FILES: ReadonlyMap<string, AttachedFile> = new Map();

const sameStep = (a: Item, b: Item) => a.messageId === b.messageId && a.step === b.step;

/** How the model reads a compaction's summary: a user entry opening the context. */
export const SUMMARY_HEADER = '[Summary of the earlier conversation, written when it no longer fitted the context]';

export const summaryMessage = (summary: string): ContextMessage => ({
  role: 'user',
  content: [{ type: 'text', text: `${SUMMARY_HEADER}\n${summary}` }],
});

/**
 * The model context of a log, built item by item so that a session's next step only adds what is new: one user
 * entry per input, one assistant entry per step (its text and tool calls), one tool entry per step's outputs. The
 * entries of the last step stay open (a later item of the same step joins them) until an item of another step
 * arrives. User entries with attachments are rendered again by each `build`, with the files of that moment.
 */
export class ContextBuilder {
  #count = 0;
  #closed: ContextMessage[] = [];
  /** The id of the first item of each entry of `#closed`. */
  #closedIds: string[] = [];
  /** The estimated tokens of `#closed` (models/context-fit.ts), kept as it grows so a fit need not sum them. */
  #closedTokens = 0;
  #assistant: { item: Item; text: string; toolCalls: ToolCall[] } | null = null;
  #results: { item: Item; results: ToolResult[] } | null = null;
  #attachments = new Set<string>();
  /** Entries of `#closed` that show files: rendered by `build`. */
  #withFiles: { index: number; text: string; attachments: Attachment[] }[] = [];

  /** Items appended so far. */
  get count(): number {
    return this.#count;
  }

  append(item: Item): void {
    this.#count += 1;
    const content = item.content;
    if (
      content.type === 'tool_list' ||
      content.type === 'approval_decision' ||
      content.type === 'item_removed' ||
      content.type === 'elicitation' ||
      content.type === 'elicitation_response'
    )
      return;
    if (content.type === 'compaction') {
      this.#compact(item.id, content.summary, content.keptFrom);
      return;
    }
    if (content.type === 'user_message') {
      this.#close();
      const attachments = content.attachments ?? [];
      if (attachments.length > 0) {
        for (const attachment of attachments) this.#attachments.add(attachment.fileId);
        this.#withFiles.push({ index: this.#closed.length, text: content.text, attachments });
      }
      this.#push({ role: 'user', content: userContent(content.text, undefined, NO_FILES) }, item.id);
      return;
    }
    if (content.type === 'function_call_output') {
      let results = this.#results;
      if (results === null || !sameStep(results.item, item)) {
        if (results !== null || (this.#assistant !== null && !sameStep(this.#assistant.item, item))) this.#close();
        results = { item, results: [] };
        this.#results = results;
      }
      results.results.push({
        callId: item.callId ?? '',
        name: content.name,
        output: content.output,
        isError: content.isError,
      });
      return;
    }
    if (this.#assistant === null || !sameStep(this.#assistant.item, item) || this.#results !== null) {
      this.#close();
      this.#assistant = { item, text: '', toolCalls: [] };
    }
    const assistant = this.#assistant;
    if (content.type === 'assistant_message') assistant.text += content.text;
    else assistant.toolCalls.push({ callId: item.callId ?? '', name: content.name, arguments: content.arguments });
  }

  /**
   * A compaction: the entries before the one that starts with the item `keptFrom` (all of them when null or gone)
   * give way to the summary.
   */
  #compact(itemId: string, summary: string, keptFrom: string | null): void {
    this.#close();
    const found = keptFrom === null ? -1 : this.#closedIds.indexOf(keptFrom);
    const from = found === -1 ? this.#closed.length : found;
    this.#closed = [summaryMessage(summary), ...this.#closed.slice(from)];
    this.#closedIds = [itemId, ...this.#closedIds.slice(from)];
    this.#closedTokens = this.#closed.reduce((sum, message) => sum + messageTokens(message), 0);
    this.#withFiles = this.#withFiles
      .filter((entry) => entry.index >= from)
      .map((entry) => ({ ...entry, index: entry.index - from + 1 }));
    this.#attachments = new Set(this.#withFiles.flatMap((entry) => entry.attachments.map((file) => file.fileId)));
  }

  /** The id of the first item of each entry `build` returns (a summary's: its compaction item). */
  entryItemIds(): string[] {
    const ids = this.#closedIds.slice();
    if (this.#assistant !== null) ids.push(this.#assistant.item.id);
    if (this.#results !== null) ids.push(this.#results.item.id);
    return ids;
  }

  /** File ids attached to user input in the items appended. */
  attachmentIds(): string[] {
    return [...this.#attachments];
  }

  /** The context of the items appended so far; later appends do not change it. */
  build(files: ReadonlyMap<string, AttachedFile> = NO_FILES): ContextMessage[] {
    const context = this.#closed.slice();
    for (const entry of this.#withFiles)
      context[entry.index] = { role: 'user', content: userContent(entry.text, entry.attachments, files) };
    const tokens = this.#appendOpen(context);
    // Inputs shown with their files weigh what the files do: those contexts are summed when fitted.
    return this.#withFiles.length === 0 ? withKnownTokens(context, tokens) : context;
  }

  /**
   * The context of the items appended so far fitted to `room` estimated tokens (models/context-fit.ts; all of it when
   * `room` is null). Where the fit keeps only the newest part, the log's older messages are not copied: what a
   * truncated turn costs follows what it sends, not the session's length.
   */
  fit(room: number | null, files: ReadonlyMap<string, AttachedFile> = NO_FILES): FitResult {
    if (room === null || this.#withFiles.length > 0) return fittedContext(this.build(files), room);
    const closed = this.#closed;
    const before = closed.length;
    try {
      const fitted = fitContext(withKnownTokens(closed, this.#appendOpen(closed)), room);
      // All of it fits: the context sent is a copy, which later appends leave as it is.
      return fitted.context === closed ? { ...fitted, context: closed.slice() } : fitted;
    } finally {
      closed.length = before;
    }
  }

  /** Appends the step still open (its text and calls, its outputs) to `context`; the estimated tokens of the whole. */
  #appendOpen(context: ContextMessage[]): number {
    let tokens = this.#closedTokens;
    const open: ContextMessage[] = [];
    if (this.#assistant !== null) {
      const { text, toolCalls } = this.#assistant;
      open.push({ role: 'assistant', text, toolCalls: toolCalls.slice() });
    }
    if (this.#results !== null) open.push({ role: 'tool', results: this.#results.results.slice() });
    for (const message of open) {
      context.push(message);
      tokens += messageTokens(message);
    }
    return tokens;
  }

  #push(message: ContextMessage, itemId: string): void {
    this.#closed.push(message);
    this.#closedIds.push(itemId);
    this.#closedTokens += messageTokens(message);
  }

  #close(): void {
    if (this.#assistant !== null) {
      const { item, text, toolCalls } = this.#assistant;
      this.#push({ role: 'assistant', text, toolCalls }, item.id);
    }
    if (this.#results !== null) this.#push({ role: 'tool', results: this.#results.results }, this.#results.item.id);
    this.#assistant = null;
    this.#results = null;
  }
}
