/**
 * The conversation log of a session: user inputs, assistant steps, tool calls and tool outputs, in order.
 * The model's context is rebuilt from it at every step, so what the model saw is always what was stored.
 * This module says what an item is (its content, the guard its stored JSON is read through, its row); the log's
 * reads and writes are item-store.ts, the calls that wait in it pending-calls.ts, the model context built from it
 * context-builder.ts.
 */
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
import type { IncompleteReason } from '../../models/types.ts';
import { parseJsonColumn } from '../../storage/json-column.ts';
import type { ItemRow } from '../../storage/schema.ts';

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
