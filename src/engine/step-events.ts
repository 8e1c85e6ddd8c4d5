/**
 * The session events a turn's steps write, one small builder per kind (src/events/session-events.ts types them):
 * what a stored step item announces (a server's tool listing, a tool call, a question, a call waiting for approval),
 * a server call's start, result and warnings, and the live-only text deltas and progress reports. Builders only
 * shape values; the steps decide when to write or publish them.
 */
import { assistantItemId, type CallServer, type Item, type ItemContent } from '../domain/turns/items.ts';
import type { Warning } from '../domain/turns/message-types.ts';
import type { DeltaEvent, MessageEventData, ProgressEvent, SessionEventInput } from '../events/session-events.ts';
import type { MessageRow } from '../storage/schema.ts';
import type { ToolProgress } from '../tools/types.ts';

/** The message whose run an event belongs to. */
type EventOwner = Pick<MessageRow, 'id' | 'run_id'>;
/** The message a live-only event is about. */
type LiveOwner = Pick<MessageRow, 'id' | 'run_id' | 'session_id'>;

type FunctionCall = Extract<ItemContent, { type: 'function_call' }>;
type ToolList = Extract<ItemContent, { type: 'tool_list' }>;
/** The stored item an event announces (its content is passed narrowed beside it). */
type StepItem = Pick<Item, 'id' | 'step' | 'callId'>;

/** A server call as its start event names it (tool-calls.ts `ServerCall`). */
interface StartedCall {
  callId: string;
  itemId: string;
  step: number;
  name: string;
  arguments: string;
  server: CallServer | undefined;
}

function messageEvent(message: EventOwner, data: MessageEventData): SessionEventInput {
  return { kind: 'message.event', messageId: message.id, runId: message.run_id, data };
}

/** The tools a server offers the conversation, first or changed (a `tool_list` item). */
export function toolListEvent(message: EventOwner, item: StepItem, content: ToolList): SessionEventInput {
  return messageEvent(message, {
    type: 'tool_list',
    sourceType: 'tool_server',
    itemId: item.id,
    step: item.step,
    serverId: content.server.id,
    serverLabel: content.server.label,
    tools: content.tools.map((tool) => tool.name),
  });
}

/** A call that waits for a decision on its approval before it runs. */
export function toolApprovalEvent(
  message: EventOwner,
  item: StepItem,
  content: FunctionCall,
  approval: NonNullable<FunctionCall['approval']>,
): SessionEventInput {
  return messageEvent(message, {
    type: 'tool_approval',
    sourceType: 'tool_approval',
    kind: content.kind,
    actionId: content.actionId,
    callId: item.callId,
    itemId: item.id,
    step: item.step,
    name: content.name,
    tool: content.name,
    server: content.server?.label ?? 'agentry',
    serverId: content.server?.id ?? null,
    serverTool: content.server?.tool ?? content.name,
    arguments: content.arguments,
    approvalId: approval.id,
    expiresAt: approval.expiresAt,
  });
}

/** A question the agent asks the user (the ask_user_question tool). */
export function questionEvent(message: EventOwner, item: StepItem, content: FunctionCall): SessionEventInput {
  return messageEvent(message, {
    type: 'question',
    sourceType: 'tool_ask_user_question',
    actionId: content.actionId,
    callId: item.callId,
    itemId: item.id,
    step: item.step,
    name: content.name,
    arguments: content.arguments,
  });
}

/** A tool call of a step that runs without asking: a server call, or a client call the client runs. */
export function toolCallEvent(message: EventOwner, item: StepItem, content: FunctionCall): SessionEventInput {
  return messageEvent(message, {
    type: 'tool_call',
    sourceType: `tool_${content.kind}`,
    kind: content.kind,
    actionId: content.actionId,
    callId: item.callId,
    itemId: item.id,
    step: item.step,
    name: content.name,
    arguments: content.arguments,
    ...(content.server === undefined
      ? {}
      : { serverId: content.server.id, serverLabel: content.server.label, tool: content.server.tool }),
  });
}

/** The event that announces a stored call item: its approval request, its question, or the call itself. */
function functionCallEvent(message: EventOwner, item: StepItem, content: FunctionCall): SessionEventInput {
  if (content.approval !== undefined) return toolApprovalEvent(message, item, content, content.approval);
  if (content.kind === 'question') return questionEvent(message, item, content);
  return toolCallEvent(message, item, content);
}

/**
 * The events of the items a step stored, in their order: tool listings and tool calls are announced; the assistant
 * text is not (its deltas went live, and the message's ending carries it).
 */
export function stepItemEvents(message: EventOwner, created: readonly Item[]): SessionEventInput[] {
  const events: SessionEventInput[] = [];
  for (const item of created) {
    const { content } = item;
    if (content.type === 'tool_list') events.push(toolListEvent(message, item, content));
    else if (content.type === 'function_call') events.push(functionCallEvent(message, item, content));
  }
  return events;
}

/** An approved server call starting: the `tool_call` that an approval request announced as waiting. */
export function approvedCallStartEvent(message: EventOwner, call: StartedCall, approvalId: string): SessionEventInput {
  return messageEvent(message, {
    type: 'tool_call',
    sourceType: 'tool_server',
    kind: 'server',
    callId: call.callId,
    itemId: call.itemId,
    step: call.step,
    name: call.name,
    arguments: call.arguments,
    approvalId,
    ...(call.server === undefined
      ? {}
      : { serverId: call.server.id, serverLabel: call.server.label, tool: call.server.tool }),
  });
}

/** A server call's output was stored. */
export function toolResultEvent(
  message: EventOwner,
  call: { callId: string; name: string },
  isError: boolean,
): SessionEventInput {
  return messageEvent(message, {
    type: 'tool_result',
    sourceType: 'tool_server',
    callId: call.callId,
    name: call.name,
    isError,
  });
}

/** A warning of the turn's tools: a tool source that could not be loaded, a call given up. */
export function toolWarningEvent(message: EventOwner, warning: Warning): SessionEventInput {
  return messageEvent(message, { type: 'warning', sourceType: 'tool_server', ...warning });
}

/** The older conversation summarised into the compaction item `item`. */
export function compactionEvent(message: EventOwner, item: Item): SessionEventInput {
  const content = item.content;
  if (content.type !== 'compaction') throw new TypeError('not a compaction item');
  const { reason, tokensBefore, tokensAfter } = content;
  return messageEvent(message, {
    type: 'compaction',
    sourceType: 'context',
    itemId: item.id,
    reason,
    tokensBefore,
    tokensAfter,
  });
}

/** A piece of the step's assistant text, for live listeners only. */
export function textDeltaEvent(message: LiveOwner, step: number, text: string): DeltaEvent {
  return {
    kind: 'message.delta',
    session_id: message.session_id,
    message_id: message.id,
    run_id: message.run_id,
    data: { text, step, itemId: assistantItemId(message.id, step) },
  };
}

/** A server call's progress report, for live listeners only (nothing is stored). */
export function toolProgressEvent(
  message: LiveOwner,
  call: { callId: string; name: string; step: number },
  update: ToolProgress,
): ProgressEvent {
  return {
    kind: 'message.event',
    session_id: message.session_id,
    message_id: message.id,
    run_id: message.run_id,
    data: {
      type: 'tool_progress',
      sourceType: 'tool_server',
      callId: call.callId,
      name: call.name,
      step: call.step,
      ...update,
    },
  };
}
