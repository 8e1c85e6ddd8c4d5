import { isArrayOf, isJsonObject } from '../../lib/guards.ts';

export const MESSAGE_STATUSES = ['queued', 'running', 'requires_action', 'completed', 'failed', 'cancelled'] as const;
export type MessageStatus = (typeof MESSAGE_STATUSES)[number];

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

export function messageStatusOf(value: string): MessageStatus {
  return MESSAGE_STATUSES.find((status) => status === value) ?? 'failed';
}

export type RequiredAction =
  | { type: 'ask_user_question'; actionId: number; question: string; options: unknown[] | null }
  | { type: 'function_call'; callId: string; name: string; arguments: string }
  | {
      type: 'tool_approval';
      actionId: number;
      callId: string;
      /** The exposed tool name (as the model called it). */
      tool: string;
      /** The server's label (`agentry` for built-in tools) and the tool's own name there. */
      server: string;
      serverTool: string;
      /** The arguments exactly as they will run once approved (a JSON text). */
      arguments: string;
      approvalId: string;
      /** When the call is denied unless decided before (ISO 8601), or null when it waits indefinitely. */
      expiresAt: string | null;
    };

export interface MessageError {
  code: string;
  message: string;
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

/** The parts of a submitted message (`messages.parts`). */
export const isTextParts = (value: unknown): value is TextPart[] => isArrayOf(value, isTextPart);

export interface Message {
  id: string;
  object: 'message';
  sessionId: string;
  status: MessageStatus;
  parts: TextPart[];
  response: { parts: TextPart[] } | null;
  error: MessageError | null;
  requiredActions: RequiredAction[];
  usage: { inputTokens: number; outputTokens: number; totalTokens: number };
  runId: string;
  createdAt: string;
  startedAt: string | null;
  completedAt: string | null;
}

export interface Warning {
  code: string;
  message: string;
}

export type AcceptedMessage = Message & { warnings: Warning[] };
