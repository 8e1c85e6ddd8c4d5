/**
 * One model step of a turn: the model call (its text deltas go to live listeners only), then the step persisted in
 * one fenced transaction before anything acts on it: the items it produced (tool listings, assistant text, tool
 * calls, each classified and, when the policy says so, waiting for approval), its spans, usage and cost (debited
 * from credits), the events announcing it, and, for a step without tool calls, the turn's completion.
 */
import { insertApprovals, type NewApproval, newApprovalId } from '../domain/approvals/approvals.ts';
import { debitCredits } from '../domain/billing/credits.ts';
import { writeEvents } from '../domain/outbox.ts';
import { appendItems } from '../domain/turns/item-store.ts';
import {
  assistantItemId,
  type CallServer,
  callItemId,
  type Item,
  type NewItem,
  ownItems,
} from '../domain/turns/items.ts';
import { turnText } from '../domain/turns/message-service.ts';
import type { MessageError } from '../domain/turns/message-types.ts';
import { actionsTaken } from '../domain/turns/pending-calls.ts';
import { completeTurn, failTurn } from '../domain/turns/transitions.ts';
import { addStepUsage, stepUsageOf } from '../domain/turns/turn-store.ts';
import { outputViolation } from '../lib/output-schema.ts';
import { storableText } from '../lib/storable-text.ts';
import { chatSpanId, outgoingTraceparent } from '../lib/trace-context.ts';
import { costMicros } from '../models/pricing.ts';
import {
  type ContextMessage,
  type IncompleteReason,
  ModelError,
  type ModelSettings,
  type ResponseFormat,
  type ToolCall,
  type ToolSpec,
  type Usage,
} from '../models/types.ts';
import type { MessageRow } from '../storage/schema.ts';
import { needsApproval } from '../tools/approval-policy.ts';
import type { TurnTools } from '../tools/registry.ts';
import { attachedFiles } from './attached-files.ts';
import { recordBudgetSpend } from './budget-gate.ts';
import { compactIfDue, compactLog } from './compaction.ts';
import { contextRoom, learnInputCount, type StepFrame, smallerRoom } from './context-window.ts';
import { type StepTrace, writeStep } from './spans.ts';
import { stepItemEvents, textDeltaEvent } from './step-events.ts';
import { instructionsWithTools, toolSpecs } from './tools.ts';
import { change, type Turn, turnChange } from './turn-context.ts';
import type { StartWrite } from './turn-start.ts';

export interface StepOutput {
  text: string;
  /** The lengths of the text's live deltas, in order: a replayed stream sends the same deltas (response-stream.ts). */
  chunks: number[];
  calls: ToolCall[];
  usage: Usage;
  /** Why the model's reply was cut short (its output token limit, a content filter); absent when it was not. */
  incomplete?: IncompleteReason;
}

/** A step's tool call as stored: classified by the turn's tools, with the server that runs it. */
type ClassifiedCall = ToolCall & { kind: ReturnType<TurnTools['kindOf']>; server: CallServer | undefined };

/**
 * The calls of a step the turn makes, of those the model asked for: none past the turn's `maxToolCalls` (counting
 * the `made` ones), and only the first when `parallelToolCalls` is false. The others are dropped: never stored,
 * never run, as OpenAI ignores calls past max_tool_calls.
 */
export function allowedCalls(calls: ToolCall[], settings: ModelSettings | undefined, made: number): ToolCall[] {
  const perStep = settings?.parallelToolCalls === false ? 1 : calls.length;
  return calls.slice(0, Math.min(callsLeft(settings, made), perStep));
}

/** How many more tool calls a turn that made `made` may make: no limit without `maxToolCalls`. */
const callsLeft = (settings: ModelSettings | undefined, made: number): number =>
  settings?.maxToolCalls === undefined ? Number.POSITIVE_INFINITY : Math.max(0, settings.maxToolCalls - made);

/**
 * Calls the model for the step `trace` describes, on the log `items`, streaming its text to live listeners, and
 * counts the call. `made` is the count of tool calls the turn made so far: once it reaches the turn's
 * `maxToolCalls`, the model is offered no tools, so it answers. Under the compaction policy the log is compacted
 * first when it passes the threshold (compaction.ts). The context is fitted to the model's window
 * (context-window.ts); when the provider still refuses it as too long, it is compacted (compaction policy) and
 * fitted to a smaller room, and the call is made once more. No tool has run in the step yet (its calls run once it
 * is stored), so the retry repeats nothing.
 */
export async function callModel(turn: Turn, trace: StepTrace, items: Item[], made: number): Promise<StepOutput> {
  const frame = {
    instructions: instructionsWithTools(turn.agent.instructions, turn.tools),
    tools: stepTools(turn, made),
  };
  let log = (await compactIfDue(turn, frame, items)) ?? items;
  let context = turn.log.contextOf(log);
  let files = await attachedFiles(turn, context.attachmentIds());
  const room = contextRoom(turn, frame);
  const fitted = context.fit(room, files);
  let sent = fitted;
  let output: StepOutput;
  try {
    output = await streamStep(turn, trace, { ...frame, context: fitted.context }, made);
  } catch (error) {
    if (!(error instanceof ModelError) || error.code !== 'model_context_exceeded' || room === null) throw error;
    turn.deps.logger.warn(
      { room, sent: fitted.tokens },
      'the provider refused the context as too long: fitting it smaller',
    );
    const compacted = turn.contextPolicy === 'compaction' ? await compactLog(turn, frame, log, 'overflow') : null;
    if (compacted !== null) {
      log = compacted;
      context = turn.log.contextOf(log);
      files = await attachedFiles(turn, context.attachmentIds());
    }
    sent = context.fit(smallerRoom(turn, frame, error, fitted.tokens), files);
    output = await streamStep(turn, trace, { ...frame, context: sent.context }, made);
  }
  if (room !== null) learnInputCount(turn, frame, sent.tokens, output.usage.inputTokens);
  return output;
}

/** The tools a step offers: none once the turn's `maxToolCalls` are used up, so the model answers. */
const stepTools = (turn: Turn, made: number): ToolSpec[] =>
  callsLeft(turn.settings, made) === 0 ? [] : toolSpecs(turn.tools);

/** One model call of a step with `parts`: its text streamed to live listeners, its calls and usage collected. */
async function streamStep(
  turn: Turn,
  trace: StepTrace,
  parts: StepFrame & { context: ContextMessage[] },
  made: number,
): Promise<StepOutput> {
  const { deps, agent, message } = turn;
  const { step } = trace;
  const adapter = deps.models.adapter(agent.model);
  const traceparent = outgoingTraceparent(turn.trace, chatSpanId(message.run_id, step), deps.runExporter !== undefined);
  let text = '';
  const chunks: number[] = [];
  const calls: ToolCall[] = [];
  let usage: Usage = { inputTokens: 0, outputTokens: 0 };
  let incomplete: IncompleteReason | undefined;
  for await (const event of adapter.stream({
    model: agent.model,
    ...parts,
    ...(turn.settings === undefined ? {} : { settings: turn.settings }),
    ...(turn.responseFormat === undefined ? {} : { responseFormat: turn.responseFormat }),
    signal: turn.signal,
    ...(traceparent === null ? {} : { headers: { traceparent } }),
  })) {
    if (event.type === 'text-delta') {
      // Repaired for storage once whole (below): a surrogate pair split across deltas is not broken.
      text += event.text;
      chunks.push(event.text.length);
      deps.bus.publish('live', { sessionId: message.session_id, event: textDeltaEvent(message, step, event.text) });
    } else if (event.type === 'tool-call') {
      calls.push({ ...event.call, name: storableText(event.call.name), arguments: storableText(event.call.arguments) });
    } else {
      usage = event.usage;
      incomplete = event.incomplete;
    }
  }
  deps.metrics.modelCall({ model: agent.model, outcome: 'completed' }, deps.clock.now() - trace.startedAt, {
    ...usage,
    costMicros: costMicros(agent.model, usage),
  });
  return {
    text: storableText(text),
    chunks,
    calls: allowedCalls(calls, turn.settings, made),
    usage,
    ...(incomplete === undefined ? {} : { incomplete }),
  };
}

/** Where a call of this turn runs, as its log item records it (server calls only). */
function callServer(tools: TurnTools, name: string): CallServer | undefined {
  const tool = tools.get(name);
  if (tool === undefined || tool.kind !== 'server') return undefined;
  return { id: tool.origin.serverId, label: tool.origin.serverLabel, tool: tool.origin.tool };
}

/**
 * `tool_list` items for the servers whose tools this step offers and the conversation has not seen yet (or has
 * seen with other tools): the Responses `mcp_list_tools` items.
 */
function listingItems(tools: TurnTools, items: Item[], messageId: string, step: number): NewItem[] {
  if (tools.listings.length === 0) return [];
  const seen = new Map<string, string>();
  for (const item of items) {
    if (item.content.type === 'tool_list') {
      const key = item.content.server.id ?? item.content.server.label;
      seen.set(key, item.content.tools.map((tool) => tool.name).join('\n'));
    }
  }
  const out: NewItem[] = [];
  for (const listing of tools.listings) {
    const names = listing.tools.map((tool) => tool.origin.tool).join('\n');
    if (seen.get(listing.serverId ?? listing.serverLabel) === names) continue;
    out.push({
      messageId,
      step,
      content: {
        type: 'tool_list',
        server: { id: listing.serverId, label: listing.serverLabel },
        tools: listing.tools.map((tool) => ({
          name: tool.origin.tool,
          description: tool.description === '' ? null : tool.description,
          inputSchema: tool.parameters,
        })),
      },
    });
  }
  return out;
}

/** What a step stores besides its spans and usage: its items, and the approvals its calls wait for. */
interface StepRecords {
  calls: ClassifiedCall[];
  items: NewItem[];
  approvals: Omit<NewApproval, 'orgId' | 'sessionId'>[];
}

/**
 * The items of a step (tool listings, its text, one call item per tool call with its `actionId`) and the approvals
 * its server calls wait for. Decided now, once: a call item records whether it waits for approval, whatever the
 * policy becomes later.
 */
function stepRecords(turn: Turn, step: number, output: StepOutput, items: Item[]): StepRecords {
  const { agent, tools } = turn;
  const messageId = turn.message.id;
  let actionId = actionsTaken(ownItems(items, messageId));
  const calls = output.calls.map((call) => ({
    ...call,
    kind: tools.kindOf(call.name),
    server: callServer(tools, call.name),
  }));
  const records: StepRecords = { calls, items: listingItems(tools, items, messageId, step), approvals: [] };
  if (output.text !== '')
    records.items.push({
      id: assistantItemId(messageId, step),
      messageId,
      step,
      content: {
        type: 'assistant_message',
        text: output.text,
        chunks: output.chunks,
        ...(output.incomplete === undefined ? {} : { incomplete: output.incomplete }),
      },
    });
  const timeoutSeconds = agent.toolApprovals.timeoutSeconds;
  const expiresAt = timeoutSeconds === undefined ? null : turn.deps.clock.now() + timeoutSeconds * 1000;
  const builtins = new Set(tools.tools.flatMap((tool) => (tool.builtinEntry === undefined ? [] : [tool.origin.tool])));
  for (const call of calls) {
    const approval =
      call.kind === 'server' && needsApproval(agent.toolApprovals, tools.get(call.name), call.arguments, builtins)
        ? { id: newApprovalId(), expiresAt }
        : undefined;
    if (approval !== undefined) records.approvals.push(approvalOf(call, { messageId, actionId, ...approval }));
    records.items.push({
      id: callItemId(messageId, actionId),
      messageId,
      step,
      callId: call.callId,
      content: {
        type: 'function_call',
        name: call.name,
        arguments: call.arguments,
        kind: call.kind,
        actionId,
        ...(call.server === undefined ? {} : { server: call.server }),
        ...(approval === undefined ? {} : { approval }),
      },
    });
    actionId += 1;
  }
  return records;
}

function approvalOf(
  call: ClassifiedCall,
  at: { id: string; messageId: string; actionId: number; expiresAt: number | null },
): Omit<NewApproval, 'orgId' | 'sessionId'> {
  return {
    id: at.id,
    messageId: at.messageId,
    callId: call.callId,
    actionId: at.actionId,
    tool: call.name,
    serverLabel: call.server?.label ?? 'agentry',
    serverTool: call.server?.tool ?? call.name,
    arguments: call.arguments,
    expiresAt: at.expiresAt,
  };
}

/**
 * The error a final reply ends the turn with when it does not have the structure the turn asked for (null when it
 * has, or when free text was asked for): never a silent pass, whatever the provider promised.
 */
export function invalidOutput(format: ResponseFormat | undefined, text: string): MessageError | null {
  if (format === undefined) return null;
  const violation = outputViolation(text, format.type === 'json_schema' ? format.schema : null);
  if (violation === null) return null;
  const expected = format.type === 'json_schema' ? `output format ${format.name}` : 'output format json_object';
  return { code: 'invalid_output', message: storableText(`${violation} (${expected})`.slice(0, 2000)) };
}

/**
 * Persists one model step in one transaction: its items, approvals, spans, usage and cost (debited from credits),
 * and its events; a step without tool calls also completes the turn. `start` writes the turn's start first (the
 * first step of a quick turn: one transaction instead of two). Returns the message after it (null: not written).
 */
export function persistStep(
  turn: Turn,
  step: { trace: StepTrace; output: StepOutput; items: Item[] },
  start: StartWrite | null,
): Promise<MessageRow | null> {
  const { trace, output, items } = step;
  const cost = costMicros(turn.agent.model, output.usage);
  const records = stepRecords(turn, trace.step, output, items);
  const invalid = output.calls.length === 0 ? invalidOutput(turn.responseFormat, output.text) : null;
  return change(turn, start === null ? ['running'] : ['queued', 'running'], async (trx, found, now) => {
    const started = start !== null && found.status === 'queued' ? await start(trx, found) : null;
    const current = started?.message ?? found;
    const target = { orgId: current.org_id, sessionId: current.session_id, now };
    const created = await appendItems(trx, target, records.items);
    await insertApprovals(
      trx,
      records.approvals.map((approval) => ({ ...approval, orgId: current.org_id, sessionId: current.session_id })),
      now,
    );
    await writeStep(trx, current, trace, { ...output, calls: records.calls, costMicros: cost }, now);
    const usage = stepUsageOf({ ...output.usage, costMicros: cost });
    const ends = output.calls.length === 0;
    // A step that ends the turn adds its usage with the turn's ending (one update of the message and run).
    if (!ends) await addStepUsage(trx, current, usage, now);
    await debitCredits(trx, current.org_id, cost);
    await recordBudgetSpend(turn, trx, { costMicros: cost, now, release: true });
    const events = await writeEvents(trx, target, stepItemEvents(current, created));
    if (ends) {
      const text = turnText([...ownItems(items, current.id), ...created]);
      const change = { ...turnChange(turn, trx, current, now), stepUsage: usage };
      // A reply without the structure asked for fails the turn, keeping the text (docs/responses.md).
      events.push(
        ...(invalid === null
          ? await completeTurn(change, text)
          : await failTurn(change, invalid, text === '' ? null : text)),
      );
    }
    return started === null ? events : [...started.events, ...events];
  });
}
