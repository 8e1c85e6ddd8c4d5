import type { MessageError, RequiredAction, Warning } from '../../events/session-values.ts';
import { isAbsentOr, isArrayOf, isJsonObject, isString } from '../../lib/guards.ts';
import { MESSAGE_STATUSES, type MessageStatus } from '../../storage/column-values.ts';
import { parseJsonColumn } from '../../storage/json-column.ts';

export type { MessageError, RequiredAction, Warning };
export { MESSAGE_STATUSES, type MessageStatus };

export const TERMINAL_STATUSES: readonly MessageStatus[] = ['completed', 'failed', 'cancelled'];
/** A message not yet terminal: the session's open turn or one queued behind it. */
export const OPEN_STATUSES: readonly MessageStatus[] = ['queued', 'running', 'requires_action'];
/** A message a worker can run (or is running): not waiting for input, not ended. */
export const RUNNABLE_STATUSES: readonly string[] = ['queued', 'running'];
/** Where a Response stops streaming: a terminal message, or one waiting for the client. */
export const RESPONSE_END_STATUSES: readonly MessageStatus[] = [...TERMINAL_STATUSES, 'requires_action'];

export function isTerminal(status: string): boolean {
  return (TERMINAL_STATUSES as readonly string[]).includes(status);
}

export function isMessageError(value: unknown): value is MessageError {
  return isJsonObject(value) && typeof value.code === 'string' && typeof value.message === 'string';
}

export interface TextPart {
  type: 'text';
  text: string;
}

const isTextPart = (value: unknown): value is TextPart =>
  isJsonObject(value) && value.type === 'text' && typeof value.text === 'string';

/** Text parts only (what a reply and most surfaces' messages hold). */
export const isTextParts = (value: unknown): value is TextPart[] => isArrayOf(value, isTextPart);

/** A part naming an MCP server's prompt, as submitted (docs/tools.md "Prompts as message templates"). */
export interface PromptRequestPart {
  type: 'mcp_prompt';
  server: string;
  name: string;
  arguments?: Record<string, string>;
}

/** A file attached to a submitted message, by id (docs/sessions.md "Attachments"). */
export type AttachmentRequestPart =
  | { type: 'image'; fileId: string; detail?: string }
  | { type: 'file'; fileId: string };

/**
 * A prompt part as the message keeps it: the part as sent, the text the prompt expanded to (what the model read)
 * and the files its images were stored as.
 */
export interface McpPromptPart {
  type: 'mcp_prompt';
  server: string;
  name: string;
  arguments: Record<string, string>;
  text: string;
  fileIds?: string[];
}

/** A file attached to a message: how the model reads it (`image` or `file`) and its name when it was attached. */
export interface AttachmentPart {
  type: 'image' | 'file';
  fileId: string;
  filename: string;
  detail?: string;
}

/** A part of a submitted message. */
export type RequestPart = TextPart | PromptRequestPart | AttachmentRequestPart;
/** A part as submitted, its prompt already expanded: what the accepting transaction checks and stores. */
export type ExpandedPart = TextPart | McpPromptPart | AttachmentRequestPart;
/** A part of a message as stored (`messages.parts`): its text and prompt parts in the order sent, then its files. */
export type MessagePart = TextPart | McpPromptPart | AttachmentPart;

const isStringRecord = (value: unknown): value is Record<string, string> =>
  isJsonObject(value) && Object.values(value).every(isString);

const isMcpPromptPart = (value: unknown): value is McpPromptPart =>
  isJsonObject(value) &&
  value.type === 'mcp_prompt' &&
  isString(value.server) &&
  isString(value.name) &&
  isStringRecord(value.arguments) &&
  isString(value.text) &&
  isAbsentOr(value.fileIds, (ids) => isArrayOf(ids, isString));

const isAttachmentPart = (value: unknown): value is AttachmentPart =>
  isJsonObject(value) &&
  (value.type === 'image' || value.type === 'file') &&
  isString(value.fileId) &&
  isString(value.filename) &&
  isAbsentOr(value.detail, isString);

/** The parts of a submitted message (`messages.parts`). */
export const isMessageParts = (value: unknown): value is MessagePart[] =>
  isArrayOf(
    value,
    (part: unknown): part is MessagePart => isTextPart(part) || isMcpPromptPart(part) || isAttachmentPart(part),
  );

export interface Message {
  id: string;
  object: 'message';
  sessionId: string;
  status: MessageStatus;
  /** The text parts joined with newlines, the prompt parts, then the attachments (message-view.ts). */
  parts: MessagePart[];
  response: { parts: TextPart[] } | null;
  error: MessageError | null;
  requiredActions: RequiredAction[];
  usage: { inputTokens: number; outputTokens: number; totalTokens: number };
  runId: string;
  /** What its acceptance noted and what its turn gave up without failing (in that order). */
  warnings: Warning[];
  createdAt: string;
  startedAt: string | null;
  completedAt: string | null;
}

/** A tool call the turn did not run (again) because restarts of the service interrupted it. */
export const TOOL_CALL_ABANDONED = 'tool_call_abandoned';

const isWarning = (value: unknown): value is Warning =>
  isJsonObject(value) &&
  isString(value.code) &&
  isString(value.message) &&
  isAbsentOr(value.callId, isString) &&
  isAbsentOr(value.tool, isString);

const isWarnings = (value: unknown): value is Warning[] => isArrayOf(value, isWarning);

/** The stored warnings of a message or run (`messages.warnings`, `runs.warnings`; null: none). */
export function warningsOf(text: string | null, column: 'messages.warnings' | 'runs.warnings'): Warning[] {
  return text === null ? [] : parseJsonColumn(text, isWarnings, column);
}

/** Warnings as their column stores them. */
export const storedWarnings = (warnings: readonly Warning[]): string | null =>
  warnings.length === 0 ? null : JSON.stringify(warnings);

/** A message as its submission answers it: its warnings are those of this acceptance. */
export type AcceptedMessage = Message;
