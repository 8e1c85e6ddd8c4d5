/**
 * The spans of one engine step (see domain/runs/spans.ts for storage and ordering). A model call's start time
 * and input are kept in memory while it streams and written with the step, in the step's own transaction; a
 * call that never finishes (model error, interrupt) is written by the turn's ending instead.
 */

import { inputPreview, previewedFiles } from '../domain/runs/preview.ts';
import { insertSpans, type NewSpan, spanSeq, toolCallAttributes } from '../domain/runs/spans.ts';
import { type CallKind, type CallServer, type Item, ownItems } from '../domain/turns/items.ts';
import { isMessageParts, type MessageError } from '../domain/turns/message-types.ts';
import { newId } from '../lib/ids.ts';
import type { ToolCall, Usage } from '../models/types.ts';
import type { Executor } from '../storage/db.ts';
import { parseJsonColumn } from '../storage/json-column.ts';
import type { MessageRow } from '../storage/schema.ts';

/** A model call in flight: what it was given and when it started. */
export interface StepTrace {
  step: number;
  model: string;
  startedAt: number;
  input: string;
}

/**
 * What the model call of a step responds to: the tool results that end this message's log (the step after a
 * tool batch), or else the newest user text; a user message of files alone is named by its files, as the run's
 * preview names them (the message's parts give their names). A message of tool outputs alone (a Response
 * continued with `function_call_output` items, which are stored with the turn that called the tools) responds to
 * the results that end the log before it.
 */
export function modelInputOf(items: Item[], message: Pick<MessageRow, 'id' | 'parts'>): string {
  const own = ownItems(items, message.id);
  const results = trailingResults(own, items);
  if (results !== '') return results;
  const user = own.findLast((item) => item.content.type === 'user_message')?.content;
  if (user?.type !== 'user_message') return trailingResults(items.slice(0, items.length - own.length));
  const attachments = user.attachments ?? [];
  // Parsed only for a message of files alone: the parts are what names its files.
  if (user.text !== '' || attachments.length === 0) return user.text;
  const parts = parseJsonColumn(message.parts, isMessageParts, 'messages.parts');
  return inputPreview('', previewedFiles(attachments, parts));
}

/**
 * The tool results that end `log`, `<tool>: <output>` a line ('' when it does not end in any). An output given
 * without its call (replayed history) is named by the call in `all`, else `[tool output <call id>] <output>` as
 * a run's preview names it.
 */
function trailingResults(log: Item[], all: Item[] = log): string {
  const results: string[] = [];
  for (let index = log.length - 1; index >= 0; index--) {
    const item = log[index];
    const content = item?.content;
    if (content?.type !== 'function_call_output') break;
    const name = content.name === '' ? callName(all, item?.callId ?? null) : content.name;
    results.unshift(
      name === '' ? `[tool output ${item?.callId ?? ''}] ${content.output}` : `${name}: ${content.output}`,
    );
  }
  return results.join('\n');
}

/** The name of the call `callId` in `log` ('' when it is not there). */
function callName(log: Item[], callId: string | null): string {
  if (callId === null) return '';
  const call = log.find((item) => item.callId === callId && item.content.type === 'function_call')?.content;
  return call?.type === 'function_call' ? call.name : '';
}

/** The model's answer as a preview: its text, then the names of the tools it called. */
function modelOutputOf(text: string, calls: ToolCall[]): string {
  if (calls.length === 0) return text;
  const names = `tool calls: ${calls.map((call) => call.name).join(', ')}`;
  return text === '' ? names : `${text}\n${names}`;
}

function stepSpan(trace: StepTrace, status: NewSpan['status'], endedAt: number | null, output: string | null) {
  return {
    id: newId(),
    kind: 'agent_step',
    name: `step ${trace.step}`,
    status,
    seq: spanSeq(trace.step, 0),
    parentId: null,
    startedAt: trace.startedAt,
    endedAt,
    input: trace.input,
    output,
    attributes: { step: trace.step },
  } satisfies NewSpan;
}

/**
 * Spans of a persisted step: its agent_step (ended now when it called no tool, else running until its last tool
 * call ends), its model_call (ended now, with the call's usage and cost), and one running tool_call per call.
 */
export function stepSpans(
  trace: StepTrace,
  output: {
    text: string;
    calls: (ToolCall & { kind: CallKind; server?: CallServer | undefined })[];
    usage: Usage;
    costMicros: number;
  },
  now: number,
): NewSpan[] {
  const produced = modelOutputOf(output.text, output.calls);
  const done = output.calls.length === 0;
  const step = stepSpan(trace, done ? 'completed' : 'running', done ? now : null, produced);
  const modelCall: NewSpan = {
    id: newId(),
    kind: 'model_call',
    name: trace.model,
    status: 'completed',
    seq: spanSeq(trace.step, 1),
    parentId: step.id,
    startedAt: trace.startedAt,
    endedAt: now,
    input: trace.input,
    output: produced,
    usage: { ...output.usage, costMicros: output.costMicros },
    attributes: { tool_calls: output.calls.length, finish: done ? 'stop' : 'tool_calls' },
  };
  const toolCalls = output.calls.map(
    (call, index): NewSpan => ({
      id: newId(),
      kind: 'tool_call',
      name: call.name,
      status: 'running',
      seq: spanSeq(trace.step, 2 + index),
      parentId: step.id,
      startedAt: now,
      endedAt: null,
      input: call.arguments,
      output: null,
      attributes: toolCallAttributes(call.callId, call.kind, call.server),
    }),
  );
  return [step, modelCall, ...toolCalls];
}

/** Spans of a step whose model call never finished: failed (with the error) or cancelled. */
export function unfinishedStepSpans(
  trace: StepTrace,
  ending: { status: 'failed'; error: MessageError } | { status: 'cancelled' },
  now: number,
): NewSpan[] {
  const step = stepSpan(trace, ending.status, now, null);
  const modelCall: NewSpan = {
    id: newId(),
    kind: 'model_call',
    name: trace.model,
    status: ending.status,
    seq: spanSeq(trace.step, 1),
    parentId: step.id,
    startedAt: trace.startedAt,
    endedAt: now,
    input: trace.input,
    output: null,
    attributes: ending.status === 'failed' ? { tool_calls: 0, error: ending.error } : { tool_calls: 0 },
  };
  return [step, modelCall];
}

/** The message whose run the spans belong to. */
type RunOf = Pick<MessageRow, 'org_id' | 'run_id'>;

/** Writes the spans of a persisted step, in the step's transaction. */
export async function writeStep(
  trx: Executor,
  message: RunOf,
  trace: StepTrace,
  output: Parameters<typeof stepSpans>[1],
  now: number,
): Promise<void> {
  await insertSpans(trx, { orgId: message.org_id, runId: message.run_id }, stepSpans(trace, output, now));
}

/** Writes the step of the model call in flight (if any) when the turn ends during it, in the ending's transaction. */
export async function writeUnfinishedStep(
  trx: Executor,
  message: RunOf,
  trace: StepTrace | null,
  ending: Parameters<typeof unfinishedStepSpans>[1],
  now: number,
): Promise<void> {
  if (trace === null) return;
  await insertSpans(trx, { orgId: message.org_id, runId: message.run_id }, unfinishedStepSpans(trace, ending, now));
}
