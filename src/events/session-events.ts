/**
 * The events of a session's channel, one type shared by everything that writes them (transitions, the engine,
 * answers, approvals) and everything that reads them (the session stream, the Responses stream, the legacy streams,
 * the webhook dispatcher). `kind` says what happened; `data` is typed by it, and a `message.event`'s by its `type`.
 * Persisted events carry `seq` (their position in the channel); text deltas are live only and carry none.
 */
import type { SessionStatus } from '../storage/column-values.ts';
import type {
  CallKind,
  ElicitationAction,
  ElicitationMode,
  MessageError,
  RequiredAction,
  Warning,
} from './session-values.ts';

/** Who acted, as the stream names it: a tool kind (`tool_server`, `tool_client`, …) or the approval flow. */
export type SourceType = `tool_${CallKind}` | 'tool_ask_user_question' | 'tool_approval' | 'mcp_elicitation';

/** The server that runs a server call, when it is not a built-in of this deployment. */
interface CallServerFields {
  serverId?: string | null;
  serverLabel?: string;
  tool?: string;
}

export type MessageEventData =
  | {
      type: 'tool_list';
      sourceType: 'tool_server';
      itemId: string;
      step: number;
      serverId: string | null;
      serverLabel: string;
      tools: string[];
    }
  | ({
      type: 'tool_call';
      sourceType: SourceType;
      kind: CallKind;
      actionId?: number;
      callId: string | null;
      itemId: string;
      step: number;
      name: string;
      arguments: string;
      approvalId?: string;
    } & CallServerFields)
  | {
      type: 'question';
      sourceType: 'tool_ask_user_question';
      actionId: number;
      callId: string | null;
      itemId: string;
      step: number;
      name: string;
      arguments: string;
    }
  | {
      type: 'tool_approval';
      sourceType: 'tool_approval';
      kind: CallKind;
      actionId: number;
      callId: string | null;
      itemId: string;
      step: number;
      name: string;
      tool: string;
      server: string;
      serverId: string | null;
      serverTool: string;
      arguments: string;
      approvalId: string;
      expiresAt: number | null;
    }
  | {
      type: 'approved' | 'denied';
      sourceType: 'tool_approval';
      actionId: number;
      callId: string;
      approvalId: string;
      approved: boolean;
      reason: string | null;
      decidedBy: string;
    }
  | { type: 'answered'; sourceType: 'tool_ask_user_question'; actionId: number }
  /** An MCP server asked for input during the call `callId`: the turn waits for the answer (action `actionId`). */
  | {
      type: 'elicitation';
      sourceType: 'mcp_elicitation';
      actionId: number;
      callId: string;
      name: string;
      server: string;
      elicitationId: string;
      mode: ElicitationMode;
      message: string;
      url: string | null;
    }
  | {
      type: 'elicitation_answered';
      sourceType: 'mcp_elicitation';
      actionId: number;
      callId: string;
      elicitationId: string;
      action: ElicitationAction;
    }
  | { type: 'tool_result'; sourceType: 'tool_server'; callId: string; name: string; isError: boolean }
  | {
      type: 'tool_progress';
      sourceType: 'tool_server';
      callId: string;
      name: string;
      step: number;
      progress?: number;
      total?: number;
      message?: string;
    }
  | ({ type: 'warning'; sourceType: 'tool_server' } & Warning)
  /** The older conversation was summarised into the compaction item `itemId` (docs/context.md). */
  | {
      type: 'compaction';
      sourceType: 'context';
      itemId: string;
      reason: 'threshold' | 'overflow' | 'request';
      tokensBefore: number;
      tokensAfter: number;
    };

/** What a session event says, by kind. */
export type SessionEventBody =
  | { kind: 'session.status'; data: { status: SessionStatus; previous: SessionStatus } }
  | { kind: 'message.created'; data: { status: 'queued' } }
  | {
      kind: 'message.status';
      data:
        | { status: 'running' | 'completed' | 'failed' | 'cancelled' }
        | { status: 'requires_action'; requiredActions: RequiredAction[] };
    }
  | { kind: 'message.delta'; data: { text: string; step: number; itemId: string } }
  | { kind: 'message.event'; data: MessageEventData }
  | { kind: 'message.completed'; data: { response: { parts: { type: 'text'; text: string }[] } } }
  | { kind: 'message.failed' | 'message.cancelled'; data: { error: MessageError | null } };

export type SessionEventKind = SessionEventBody['kind'];

/** Every kind of session event, the channel's vocabulary. */
export const SESSION_EVENT_KINDS = [
  'session.status',
  'message.created',
  'message.status',
  'message.delta',
  'message.event',
  'message.completed',
  'message.failed',
  'message.cancelled',
] as const satisfies readonly SessionEventKind[];

const KINDS: ReadonlySet<string> = new Set(SESSION_EVENT_KINDS);

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * Whether a value from outside the process (Redis, a stored row) has the envelope of a session event: a known kind
 * and an object of data. The data's own shape is the writer's: events are only written from typed values.
 */
export function hasEventShape(value: unknown): value is LiveSessionEvent {
  return isObject(value) && typeof value.kind === 'string' && KINDS.has(value.kind) && isObject(value.data);
}

/** An event as a producer hands it to the outbox. */
export type SessionEventInput = Exclude<SessionEventBody, { kind: 'message.delta' }> & {
  messageId?: string | null;
  runId?: string | null;
};

interface Envelope {
  id: string;
  session_id: string;
  /** Position in the session's channel; the SSE frame id. */
  seq: number;
  message_id?: string;
  run_id?: string;
  /** Unix seconds. */
  created_at: number;
}

/** A persisted session event. */
export type SessionEvent = Exclude<SessionEventBody, { kind: 'message.delta' }> & Envelope;

interface LiveEnvelope {
  session_id: string;
  message_id: string;
  run_id: string;
}

/** A text delta: sent to live listeners only, never persisted. */
export type DeltaEvent = Extract<SessionEventBody, { kind: 'message.delta' }> & LiveEnvelope;

/** A server call's progress report: sent to live listeners only, never persisted. */
export type ProgressEvent = {
  kind: 'message.event';
  data: Extract<MessageEventData, { type: 'tool_progress' }>;
} & LiveEnvelope;

/** What live listeners of a session receive: persisted events once committed, and the live-only ones. */
export type LiveSessionEvent = SessionEvent | DeltaEvent | ProgressEvent;
