export const MESSAGE_STATUSES = ['queued', 'running', 'requires_action', 'completed', 'failed', 'cancelled'] as const;
export type MessageStatus = (typeof MESSAGE_STATUSES)[number];

export const TERMINAL_STATUSES: readonly MessageStatus[] = ['completed', 'failed', 'cancelled'];

export function isTerminal(status: string): boolean {
  return (TERMINAL_STATUSES as readonly string[]).includes(status);
}

export function messageStatusOf(value: string): MessageStatus {
  return MESSAGE_STATUSES.find((status) => status === value) ?? 'failed';
}

export type RequiredAction =
  | { type: 'ask_user_question'; actionId: number; question: string; options: unknown[] | null }
  | { type: 'function_call'; callId: string; name: string; arguments: string };

export interface MessageError {
  code: string;
  message: string;
}

export interface Message {
  id: string;
  object: 'message';
  sessionId: string;
  status: MessageStatus;
  parts: { type: 'text'; text: string }[];
  response: { parts: { type: 'text'; text: string }[] } | null;
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
