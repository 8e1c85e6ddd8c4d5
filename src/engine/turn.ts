/**
 * One turn of the agent loop for one message, as a sequence of durable steps. Each model call's result (text,
 * tool calls, usage, cost) is persisted before anything acts on it, and each tool result before the next model
 * call, so after a crash the turn resumes from the last persisted step and never repeats a finished tool call.
 */
import type { Logger } from 'pino';
import type { Bus } from '../bus/bus.ts';
import type { AgentConfig } from '../domain/agents/agent-types.ts';
import { insertApprovals, markStarted, type NewApproval, newApprovalId } from '../domain/approvals/approvals.ts';
import { debitCredits } from '../domain/billing/credits.ts';
import { afterCommit, type SessionEvent, type SessionEventInput, writeEvents } from '../domain/outbox.ts';
import { endToolSpan, startToolSpan } from '../domain/runs/spans.ts';
import { isMessageOptions } from '../domain/turns/accept.ts';
import { type ContextCache, createContextCache } from '../domain/turns/context-cache.ts';
import {
  type AttachedFile,
  appendItems,
  assistantItemId,
  type CallServer,
  type ContextBuilder,
  callItemId,
  type Item,
  loadContextItems,
  loadMessageItems,
  type NewItem,
  ownItems,
  type PendingCall,
  pendingCalls,
} from '../domain/turns/items.ts';
import { fenced, type Lease, type LeaseDeps, LeaseLostError, releaseWhenIdle } from '../domain/turns/leases.ts';
import { turnText } from '../domain/turns/message-service.ts';
import {
  isTerminal,
  type MessageError,
  OPEN_STATUSES,
  RUNNABLE_STATUSES,
  TOOL_CALL_ABANDONED,
  type Warning,
} from '../domain/turns/message-types.ts';
import { requiredActionsOf } from '../domain/turns/message-view.ts';
import { cancelTurn, completeTurn, failTurn, requireAction, startTurn } from '../domain/turns/transitions.ts';
import type { TurnHooks } from '../domain/turns/turn-hooks.ts';
import {
  addStepUsage,
  addWarning,
  agentAtStart,
  agentForTurn,
  loadMessage,
  markWorkspaceProvisioned,
} from '../domain/turns/turn-store.ts';
import type { WebhookSubscriptions } from '../domain/webhooks/subscriptions.ts';
import type { Clock } from '../lib/clock.ts';
import { storableText } from '../lib/storable-text.ts';
import {
  chatSpanId,
  outgoingTraceparent,
  type RunTrace,
  runInTurn,
  runTrace,
  toolSpanId,
} from '../lib/trace-context.ts';
import { costMicros } from '../models/pricing.ts';
import type { ModelRegistry } from '../models/registry.ts';
import { ModelError, type ModelSettings, type ToolCall, type Usage } from '../models/types.ts';
import type { Metrics, TurnOutcome } from '../observability/metrics-types.ts';
import type { RunExporter } from '../observability/run-export.ts';
import type { Executor } from '../storage/db.ts';
import { isDatabaseUnavailable, isStorageFull } from '../storage/errors.ts';
import { parseJsonColumn } from '../storage/json-column.ts';
import type { MessageRow } from '../storage/schema.ts';
import { needsApproval } from '../tools/approval-policy.ts';
import type { ToolRegistry, TurnTools } from '../tools/registry.ts';
import type { ToolProgress } from '../tools/types.ts';
import { modelInputOf, type StepTrace, writeStep, writeUnfinishedStep } from './spans.ts';
import { executeServerCall, instructionsWithTools, toolSpecs } from './tools.ts';

export interface TurnDeps extends LeaseDeps {
  clock: Clock;
  bus: Bus;
  models: ModelRegistry;
  logger: Logger;
  /** Resolves the tools of each turn (src/tools/). */
  tools: ToolRegistry;
  /** How long one server tool call may take. */
  toolTimeoutMs: number;
  allowInsecureDestinations: boolean;
  /** Reads files attached to user input; without it attachments reach the model as a note. */
  files?: AttachmentReader;
  metrics: Metrics;
  /** Present when traces are exported: ended runs go to it, outgoing calls name their spans. */
  runExporter?: RunExporter | undefined;
  /** Which webhook events the turn's state changes record (the organization's subscribed types). */
  subscriptions: WebhookSubscriptions;
  /** What the features add to the turn's state changes (registered in src/deps.ts). */
  turnHooks: TurnHooks;
  /**
   * Fires when the engine drains (shutdown): the turn pauses at its next step boundary, starting no further model
   * or tool call, and returns with everything it has done stored, for the engine to hand the session over.
   */
  draining: AbortSignal;
}

/**
 * A started tool call whose process died is run again once; after a second interruption it is given up, so a
 * call that crashes the process cannot crash it forever.
 */
const MAX_CALL_ATTEMPTS = 2;

export interface AttachmentReader {
  read(orgId: string, fileId: string): Promise<AttachedFile | null>;
}

interface TurnConfig {
  agent: AgentConfig;
  settings: ModelSettings | undefined;
}

/** Why a turn's AbortSignal fired. */
export type AbortReason = 'interrupt' | 'shutdown' | 'lease_lost';

export class TurnAbort extends Error {
  readonly reason: AbortReason;
  constructor(reason: AbortReason) {
    super(`turn aborted: ${reason}`);
    this.name = new.target.name;
    this.reason = reason;
  }
}

function publish(deps: TurnDeps, sessionId: string, events: SessionEvent[]): void {
  afterCommit(deps.bus, sessionId, events, false);
}

function abortReason(signal: AbortSignal): AbortReason | null {
  const reason: unknown = signal.reason;
  return signal.aborted && reason instanceof TurnAbort ? reason.reason : null;
}

/** A state change fenced by the lease and conditional on the message still being in the expected state. */
async function change(
  deps: TurnDeps,
  lease: Lease,
  messageId: string,
  expected: readonly string[],
  write: (trx: Executor, message: MessageRow, now: number) => Promise<SessionEvent[]>,
): Promise<MessageRow | null> {
  const now = deps.clock.now();
  const result = await fenced(deps, lease, now, async (trx) => {
    const message = await loadMessage(trx, messageId);
    if (message === undefined || !expected.includes(message.status)) return null;
    const events = await write(trx, message, now);
    const after = (await loadMessage(trx, messageId)) ?? message;
    // A turn that no longer needs a worker gives its session up in the same transaction when nothing else in it
    // can run, instead of a transaction of its own after it.
    if (!RUNNABLE_STATUSES.includes(after.status) && (await releaseWhenIdle(trx, lease))) lease.released = true;
    return { events, message: after };
  });
  if (result === null) return null;
  publish(deps, lease.sessionId, result.events);
  return result.message;
}

/** The agent's config at turn start plus this message's own options (Responses compatibility mode). */
async function configFor(db: Executor, message: MessageRow): Promise<TurnConfig> {
  const agent = await agentForTurn(db, message);
  if (message.options === null) return { agent, settings: undefined };
  const options = parseJsonColumn(message.options, isMessageOptions, 'messages.options');
  const extra = options.tools ?? [];
  const names = new Set(extra.map((tool) => tool.name));
  return {
    agent: {
      ...agent,
      ...(options.model === undefined ? {} : { model: options.model }),
      instructions:
        options.instructions === undefined || options.instructions === ''
          ? agent.instructions
          : agent.instructions === ''
            ? options.instructions
            : `${agent.instructions}\n\n${options.instructions}`,
      clientTools: [
        ...agent.clientTools.filter((tool) => !names.has(tool.name)),
        ...extra.map((tool) => ({ type: 'function' as const, ...tool })),
      ],
    },
    settings: options.settings,
  };
}

/** Loads the files attached to user input in the context (missing ones are left out). */
async function attachedFiles(deps: TurnDeps, orgId: string, fileIds: string[]): Promise<Map<string, AttachedFile>> {
  const files = new Map<string, AttachedFile>();
  if (deps.files === undefined) return files;
  for (const fileId of fileIds) {
    const file = await deps.files.read(orgId, fileId);
    if (file !== null) files.set(fileId, file);
  }
  return files;
}

interface StepOutput {
  text: string;
  calls: ToolCall[];
  usage: Usage;
}

async function callModel(
  deps: TurnDeps,
  message: MessageRow,
  config: AgentConfig,
  settings: ModelSettings | undefined,
  tools: TurnTools,
  context: ContextBuilder,
  step: number,
  signal: AbortSignal,
  trace: RunTrace,
): Promise<StepOutput> {
  const adapter = deps.models.adapter(config.model);
  const traceparent = outgoingTraceparent(trace, chatSpanId(message.run_id, step), deps.runExporter !== undefined);
  let text = '';
  const calls: ToolCall[] = [];
  let usage: Usage = { inputTokens: 0, outputTokens: 0 };
  const files = await attachedFiles(deps, message.org_id, context.attachmentIds());
  for await (const event of adapter.stream({
    model: config.model,
    instructions: instructionsWithTools(config.instructions, tools),
    context: context.build(files),
    tools: toolSpecs(tools),
    ...(settings === undefined ? {} : { settings }),
    signal,
    ...(traceparent === null ? {} : { headers: { traceparent } }),
  })) {
    if (event.type === 'text-delta') {
      // Repaired for storage once whole (below): a surrogate pair split across deltas is not broken.
      const delta = event.text;
      text += delta;
      deps.bus.publish('live', {
        sessionId: message.session_id,
        event: {
          kind: 'message.delta',
          session_id: message.session_id,
          message_id: message.id,
          run_id: message.run_id,
          data: { text: delta, step, itemId: assistantItemId(message.id, step) },
        },
      });
    } else if (event.type === 'tool-call') {
      calls.push({ ...event.call, name: storableText(event.call.name), arguments: storableText(event.call.arguments) });
    } else {
      usage = event.usage;
    }
  }
  return { text: storableText(text), calls, usage };
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

/** Persists one model step: its text, its tool calls, usage and cost (debited from credits) in one transaction. */
async function persistStep(
  deps: TurnDeps,
  lease: Lease,
  message: MessageRow,
  config: AgentConfig,
  tools: TurnTools,
  trace: StepTrace,
  output: StepOutput,
  items: Item[],
  start: StartWrite | null,
) {
  const { step } = trace;
  const cost = costMicros(config.model, output.usage);
  let actionId = ownItems(items, message.id).filter((item) => item.content.type === 'function_call').length;
  const newItems: NewItem[] = listingItems(tools, items, message.id, step);
  if (output.text !== '')
    newItems.push({
      id: assistantItemId(message.id, step),
      messageId: message.id,
      step,
      content: { type: 'assistant_message', text: output.text },
    });
  const calls = output.calls.map((call) => ({
    ...call,
    kind: tools.kindOf(call.name),
    server: callServer(tools, call.name),
  }));
  // Decided now, once: the call item records whether it waits for approval, whatever the policy becomes later.
  const timeoutSeconds = config.toolApprovals.timeoutSeconds;
  const expiresAt = timeoutSeconds === undefined ? null : deps.clock.now() + timeoutSeconds * 1000;
  const approvals: Omit<NewApproval, 'orgId' | 'sessionId'>[] = [];
  const builtins = new Set(tools.tools.flatMap((tool) => (tool.builtinEntry === undefined ? [] : [tool.origin.tool])));
  for (const call of calls) {
    const approval =
      call.kind === 'server' && needsApproval(config.toolApprovals, tools.get(call.name), call.arguments, builtins)
        ? { id: newApprovalId(), expiresAt }
        : undefined;
    if (approval !== undefined) {
      approvals.push({
        id: approval.id,
        messageId: message.id,
        callId: call.callId,
        actionId,
        tool: call.name,
        serverLabel: call.server?.label ?? 'agentry',
        serverTool: call.server?.tool ?? call.name,
        arguments: call.arguments,
        expiresAt,
      });
    }
    newItems.push({
      id: callItemId(message.id, actionId),
      messageId: message.id,
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
  return change(
    deps,
    lease,
    message.id,
    start === null ? ['running'] : ['queued', 'running'],
    async (trx, found, now) => {
      // The first step of a quick turn also starts it: one transaction instead of two.
      const startHere = start !== null && found.status === 'queued';
      const started = startHere ? await start(trx, found) : null;
      const startEvents = started?.events ?? [];
      const current = started?.message ?? found;
      const target = { orgId: current.org_id, sessionId: current.session_id, now };
      const created = await appendItems(trx, target, newItems);
      await insertApprovals(
        trx,
        approvals.map((approval) => ({ ...approval, orgId: current.org_id, sessionId: current.session_id })),
        now,
      );
      await writeStep(trx, current, trace, { ...output, calls, costMicros: cost }, now);
      await addStepUsage(trx, current, { ...output.usage, costMicros: cost }, now);
      await debitCredits(trx, current.org_id, cost);
      const events = await writeEvents(
        trx,
        target,
        created.flatMap((item): SessionEventInput[] => {
          const content = item.content;
          if (content.type === 'tool_list') {
            return [
              {
                kind: 'message.event' as const,
                messageId: current.id,
                runId: current.run_id,
                data: {
                  type: 'tool_list',
                  sourceType: 'tool_server',
                  itemId: item.id,
                  step: item.step,
                  serverId: content.server.id,
                  serverLabel: content.server.label,
                  tools: content.tools.map((tool) => tool.name),
                },
              },
            ];
          }
          if (content.type !== 'function_call') return [];
          return [
            {
              kind: 'message.event' as const,
              messageId: current.id,
              runId: current.run_id,
              data:
                content.approval !== undefined
                  ? {
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
                      approvalId: content.approval.id,
                      expiresAt: content.approval.expiresAt,
                    }
                  : content.kind === 'question'
                    ? {
                        type: 'question',
                        sourceType: 'tool_ask_user_question',
                        actionId: content.actionId,
                        callId: item.callId,
                        itemId: item.id,
                        step: item.step,
                        name: content.name,
                        arguments: content.arguments,
                      }
                    : {
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
                          : {
                              serverId: content.server.id,
                              serverLabel: content.server.label,
                              tool: content.server.tool,
                            }),
                      },
            },
          ];
        }),
      );
      if (output.calls.length === 0) {
        const all = [...ownItems(items, current.id), ...created];
        events.push(
          ...(await completeTurn(
            { trx, message: current, now, subscriptions: deps.subscriptions, hooks: deps.turnHooks },
            turnText(all),
          )),
        );
      }
      return [...startEvents, ...events];
    },
  );
}

interface ServerCall {
  callId: string;
  name: string;
  arguments: string;
  step: number;
  /** The message whose step made the call (an earlier one for a call approved on the Responses surface). */
  messageId: string;
  itemId: string;
  server: CallServer | undefined;
  /** Set for a call that was approved: it runs at most once, whatever happens to the process. */
  approvalId: string | undefined;
}

function serverCallOf(call: PendingCall): ServerCall {
  const content = call.item.content;
  return {
    callId: call.callId,
    name: call.name,
    arguments: call.arguments,
    step: call.item.step,
    messageId: call.item.messageId,
    itemId: call.item.id,
    server: content.type === 'function_call' ? content.server : undefined,
    approvalId: call.approval?.id,
  };
}

/** Server calls that can run now: those needing no approval, and approved ones. */
function runnable(call: PendingCall): boolean {
  return call.kind === 'server' && call.approval?.state !== 'pending';
}

/** Live-only progress of a server call: listeners see it, nothing is stored. */
function publishProgress(deps: TurnDeps, message: MessageRow, call: ServerCall, update: ToolProgress): void {
  deps.bus.publish('live', {
    sessionId: message.session_id,
    event: {
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
    },
  });
}

/**
 * Runs one server call and persists its output. Before running, the call's attempt is counted in the same
 * fenced write that stamps its span's start, so a call found started after a crash is run again at most once.
 */
async function runServerCall(
  deps: TurnDeps,
  lease: Lease,
  message: MessageRow,
  config: AgentConfig,
  tools: TurnTools,
  call: ServerCall,
  signal: AbortSignal,
  trace: RunTrace,
) {
  // A draining worker starts no call: it stays pending (no attempt counted) for the worker the session goes to.
  if (deps.draining.aborted) return;
  const started = await fenced(deps, lease, deps.clock.now(), async (trx) => {
    const now = deps.clock.now();
    const span = await startToolSpan(trx, { messageId: call.messageId, callId: call.callId, now });
    if (call.approvalId === undefined) return { ...span, events: [], fresh: true };
    // An approved call runs at most once: a restart after it was marked started does not run it again.
    const fresh = await markStarted(trx, call.approvalId, now);
    const events = !fresh
      ? []
      : await writeEvents(trx, { orgId: message.org_id, sessionId: message.session_id, now }, [
          {
            kind: 'message.event',
            messageId: message.id,
            runId: message.run_id,
            data: {
              type: 'tool_call',
              sourceType: 'tool_server',
              kind: 'server',
              callId: call.callId,
              itemId: call.itemId,
              step: call.step,
              name: call.name,
              arguments: call.arguments,
              approvalId: call.approvalId,
              ...(call.server === undefined
                ? {}
                : { serverId: call.server.id, serverLabel: call.server.label, tool: call.server.tool }),
            },
          },
        ]);
    return { ...span, events, fresh };
  });
  publish(deps, lease.sessionId, started.events);
  let result: { output: string; isError: boolean };
  // A call given up because restarts interrupted it: the model gets an error output, the message a warning.
  let abandoned: Warning | null = null;
  if (!started.fresh) {
    result = {
      output:
        'Error: the service restarted while this approved call was running; it was not run again, since an approval allows one execution (it may or may not have taken effect)',
      isError: true,
    };
    abandoned = abandonedCall(
      call,
      'a restart of the service interrupted it after its approval, which allows one execution',
    );
  } else if (started.attempt > MAX_CALL_ATTEMPTS) {
    result = {
      output: 'Error: the call was interrupted twice by a restart of the service and was not run again',
      isError: true,
    };
    abandoned = abandonedCall(call, `restarts of the service interrupted it ${MAX_CALL_ATTEMPTS} times`);
  } else {
    const startedAt = performance.now();
    const traceparent = outgoingTraceparent(
      trace,
      toolSpanId(message.run_id, call.callId),
      deps.runExporter !== undefined,
    );
    result = await executeServerCall(
      tools,
      call,
      {
        orgId: message.org_id,
        agentId: message.agent_id,
        sessionId: message.session_id,
        messageId: message.id,
        runId: message.run_id,
        callId: call.callId,
        egress: { policy: config.networkPolicy, allowInsecureDestinations: deps.allowInsecureDestinations },
        progress: (update) => publishProgress(deps, message, call, update),
        meta: {
          'agentry/call_id': call.callId,
          'agentry/run_id': message.run_id,
          // The MCP specification's key for W3C trace context in `_meta`.
          ...(traceparent === null ? {} : { traceparent }),
        },
      },
      signal,
      deps.toolTimeoutMs,
      deps.clock.now(),
    );
    deps.metrics.toolCall(
      { tool: call.name, kind: tools.kindOf(call.name), outcome: result.isError ? 'failed' : 'completed' },
      performance.now() - startedAt,
    );
  }
  const { output, isError } = result;
  if (abandoned !== null) {
    deps.logger.warn(
      { messageId: message.id, callId: call.callId, tool: call.name, attempts: started.attempt },
      `gave up the tool call ${call.callId} (${call.name}): ${abandoned.message}`,
    );
  }
  await change(deps, lease, message.id, ['running'], async (trx, current, now) => {
    const target = { orgId: current.org_id, sessionId: current.session_id, now };
    if (abandoned !== null) await addWarning(trx, current, abandoned, now);
    await appendItems(trx, target, [
      {
        messageId: call.messageId,
        step: call.step,
        callId: call.callId,
        content: { type: 'function_call_output', name: call.name, output, isError, source: 'server' },
      },
    ]);
    const status = isError ? 'failed' : 'completed';
    await endToolSpan(trx, { messageId: call.messageId, callId: call.callId, status, output, now });
    const warning: SessionEventInput[] =
      abandoned === null
        ? []
        : [
            {
              kind: 'message.event',
              messageId: current.id,
              runId: current.run_id,
              data: { type: 'warning', sourceType: 'tool_server', ...abandoned },
            },
          ];
    return writeEvents(trx, target, [
      ...warning,
      {
        kind: 'message.event',
        messageId: current.id,
        runId: current.run_id,
        data: { type: 'tool_result', sourceType: 'tool_server', callId: call.callId, name: call.name, isError },
      },
    ]);
  });
}

/** The warning of a call given up: which call, and why it was not run (again). */
function abandonedCall(call: ServerCall, why: string): Warning {
  return {
    code: TOOL_CALL_ABANDONED,
    message: `the call ${call.callId} of ${call.name} was not run again: ${why}; it may or may not have taken effect`,
    callId: call.callId,
    tool: call.name,
  };
}

/** Runs the server calls of a step concurrently; each output is stored as soon as it is known. */
async function runServerCalls(
  deps: TurnDeps,
  lease: Lease,
  message: MessageRow,
  config: AgentConfig,
  tools: TurnTools,
  calls: ServerCall[],
  signal: AbortSignal,
  trace: RunTrace,
): Promise<void> {
  const results = await Promise.allSettled(
    calls.map((call) => runServerCall(deps, lease, message, config, tools, call, signal, trace)),
  );
  const failed = results.find((result) => result.status === 'rejected');
  if (failed !== undefined) throw failed.reason;
}

/** Tool sources that could not be loaded for this turn: told to live listeners and the session's event log. */
async function reportToolFailures(deps: TurnDeps, lease: Lease, message: MessageRow, failures: Warning[]) {
  if (failures.length === 0) return;
  deps.logger.warn({ messageId: message.id, failures }, 'tool sources unavailable for this turn');
  await change(deps, lease, message.id, ['running'], (trx, current, now) =>
    writeEvents(
      trx,
      { orgId: current.org_id, sessionId: current.session_id, now },
      failures.map((failure) => ({
        kind: 'message.event' as const,
        messageId: current.id,
        runId: current.run_id,
        data: { type: 'warning', sourceType: 'tool_server', ...failure },
      })),
    ),
  );
}

function errorOf(error: unknown): MessageError {
  if (error instanceof ModelError) return { code: error.code, message: storableText(error.message) };
  return { code: 'internal_error', message: 'The turn failed because of an internal error' };
}

/**
 * Runs (or resumes) the turn of the message `initial` (as read when the worker picked it) until it completes, fails,
 * is cancelled, or waits for input.
 * Returns when the turn no longer needs this worker.
 */
export async function runTurn(
  engineDeps: TurnDeps,
  lease: Lease,
  initial: MessageRow,
  signal: AbortSignal,
  context: ContextCache = createContextCache(lease.sessionId),
): Promise<void> {
  const trace = runTrace(initial.run_id, initial.traceparent);
  // Every log line written while the turn runs (engine, tools, MCP clients) names its run and trace.
  return runInTurn({ runId: initial.run_id, traceId: trace.traceId }, () =>
    runTracedTurn(engineDeps, lease, initial, signal, context, trace),
  );
}

async function runTracedTurn(
  deps: TurnDeps,
  lease: Lease,
  initial: MessageRow,
  signal: AbortSignal,
  context: ContextCache,
  trace: RunTrace,
): Promise<void> {
  // A turn found running was started by a worker that stopped or died: this one takes it over.
  if (initial.status === 'running') deps.metrics.leaseTakeover();
  try {
    await runTurnSteps(deps, lease, initial, signal, context, trace);
  } finally {
    if (deps.metrics.enabled || deps.runExporter !== undefined) await afterTurn(deps, initial);
  }
}

/** Counts a turn that ended in this call and hands its run to the trace exporter. */
async function afterTurn(deps: TurnDeps, initial: MessageRow): Promise<void> {
  if (isTerminal(initial.status)) return;
  const after = await loadMessage(deps.db, initial.id).catch(() => undefined);
  if (after === undefined || !isTerminal(after.status)) return;
  deps.metrics.turnEnded(
    { agent: after.agent_id, source: after.source, outcome: after.status as TurnOutcome },
    after.started_at === null || after.completed_at === null ? null : after.completed_at - after.started_at,
  );
  if (deps.runExporter !== undefined) await deps.runExporter.exportRun(after.run_id);
}

/** Writes a turn's start inside another transaction of the same turn; returns the start's events and the message after it. */
type StartWrite = (trx: Executor, message: MessageRow) => Promise<{ events: SessionEvent[]; message: MessageRow }>;

/**
 * How long a started turn may stay `queued` in storage before its start is written on its own. A turn whose first
 * model call answers sooner writes its start with that step (one transaction fewer); a slower one is seen
 * `running` after this delay, with its real start time.
 */
const START_WRITE_DELAY_MS = 100;

interface LazyStart {
  /** When the turn started (its `started_at`). */
  at: number;
  /** The start for the first step's transaction, unless it was written already (then null). */
  take(): StartWrite | null;
  /** Writes the start now unless a step took it; resolves with the message after it (null: no longer queued). */
  flush(): Promise<MessageRow | null>;
}

function lazyStart(
  deps: TurnDeps,
  lease: Lease,
  message: MessageRow,
  options: { version: number; provision: boolean },
): LazyStart {
  const at = deps.clock.now();
  const write: StartWrite = async (trx, current) => {
    if (options.provision) await markWorkspaceProvisioned(trx, current.agent_id, at);
    return startTurn(
      { trx, message: current, now: at, subscriptions: deps.subscriptions, hooks: deps.turnHooks },
      options.version,
    );
  };
  let written: Promise<MessageRow | null> | null = null;
  const writeAlone = () => {
    written ??= change(deps, lease, message.id, ['queued'], async (trx, current) => (await write(trx, current)).events);
    return written;
  };
  const timer = setTimeout(() => {
    // Errors are seen by whoever waits for the start next (flush, or the step that finds it written).
    writeAlone().catch(() => undefined);
  }, START_WRITE_DELAY_MS);
  timer.unref();
  return {
    at,
    take() {
      clearTimeout(timer);
      return written === null ? write : null;
    },
    async flush() {
      clearTimeout(timer);
      const row = await writeAlone();
      // A step that took the start over may have run first; the message as it is now says where the turn is.
      return row ?? (await loadMessage(deps.db, message.id)) ?? null;
    },
  };
}

async function runTurnSteps(
  deps: TurnDeps,
  lease: Lease,
  initial: MessageRow,
  signal: AbortSignal,
  context: ContextCache,
  trace: RunTrace,
): Promise<void> {
  const messageId = initial.id;
  let message: MessageRow = initial;
  // The model call in flight, if any: written as a failed or cancelled step when the turn ends during it.
  let inFlight: StepTrace | null = null;
  /** Whether `message` was read by this turn's last write (no reload needed before the next step). */
  let fresh = true;
  /** The start of a turn not written yet (see lazyStart). */
  let starter: LazyStart | null = null;
  try {
    if (message.cancel_requested === 1) throw new TurnAbort('interrupt');
    if (message.status === 'queued') {
      const agent = await agentAtStart(deps.db, message.agent_id);
      // A version pinned at accept (the older API's tool-run `version`) wins over the current one.
      const version = message.agent_version ?? agent.version;
      starter = lazyStart(deps, lease, message, { version, provision: !agent.workspaceProvisioned });
      message = { ...message, agent_version: version };
      deps.metrics.turnStarted({ agent: message.agent_id, source: message.source }, starter.at - message.created_at);
    } else if (message.status !== 'running') return;
    /** Writes the start now if a step has not written it yet; false when the turn is no longer there to run. */
    const started = async (): Promise<boolean> => {
      if (starter === null) return true;
      const row = await starter.flush();
      starter = null;
      if (row === null || row.status !== 'running') return false;
      message = row;
      return true;
    };
    const { agent: config, settings } = await configFor(deps.db, message);
    const tools = await deps.tools.resolve(
      config,
      { orgId: message.org_id, agentId: message.agent_id, db: deps.db },
      signal,
    );
    if (tools.failures.length > 0) {
      if (!(await started())) return;
      await reportToolFailures(deps, lease, message, tools.failures);
    }
    for (;;) {
      if (signal.aborted) throw signal.reason;
      // A step boundary: everything so far is stored, so a draining worker stops here and the next one continues.
      if (deps.draining.aborted) return;
      const items = await context.load(deps.db, message.seq);
      const pending = pendingCalls(ownItems(items, messageId));
      // Calls of an earlier Response approved by this one's input (mcp_approval_response) run in this turn.
      const approvedEarlier = context.hasApprovalDecisions()
        ? pendingCalls(items).filter(
            (call) =>
              call.item.messageId !== messageId && call.kind === 'server' && call.approval?.state === 'approved',
          )
        : [];
      const serverCalls = [...approvedEarlier, ...pending.filter(runnable)];
      if (serverCalls.length > 0) {
        if (!(await started())) return;
        await runServerCalls(deps, lease, message, config, tools, serverCalls.map(serverCallOf), signal, trace);
        continue;
      }
      if (requiredActionsOf(pending).length > 0) {
        if (!(await started())) return;
        // Read again under the lease's write: an approval decided while this step's other calls ran is not waited for.
        const after = await change(deps, lease, messageId, ['running'], async (trx, current, now) => {
          const waiting = requiredActionsOf(pendingCalls(await loadMessageItems(trx, messageId)));
          return waiting.length === 0
            ? []
            : requireAction(
                { trx, message: current, now, subscriptions: deps.subscriptions, hooks: deps.turnHooks },
                waiting,
              );
        });
        if (after === null || after.status !== 'running') return;
        continue;
      }
      if (!fresh) {
        message = (await loadMessage(deps.db, messageId)) ?? message;
        if (message.status !== (starter === null ? 'running' : 'queued')) return;
      }
      fresh = false;
      const step = message.step_count + 1;
      inFlight = { step, model: config.model, startedAt: deps.clock.now(), input: modelInputOf(items, messageId) };
      const model = context.contextOf(items);
      const output = await callModel(deps, message, config, settings, tools, model, step, signal, trace);
      deps.metrics.modelCall({ model: config.model, outcome: 'completed' }, deps.clock.now() - inFlight.startedAt, {
        ...output.usage,
        costMicros: costMicros(config.model, output.usage),
      });
      // The start goes into this step's transaction, unless it is being written (or was) on its own already.
      const start = starter?.take() ?? null;
      if (start !== null) starter = null;
      else if (!(await started())) return;
      const after = await persistStep(deps, lease, message, config, tools, inFlight, output, items, start);
      inFlight = null;
      if (after === null || after.status !== 'running') return;
      message = after;
      fresh = true;
      if (output.calls.length > 0 && step >= config.maxSteps) {
        const text = turnText(await context.load(deps.db, message.seq).then((all) => ownItems(all, messageId)));
        await change(deps, lease, messageId, ['running'], (trx, current, now) =>
          failTurn(
            { trx, message: current, now, subscriptions: deps.subscriptions, hooks: deps.turnHooks },
            {
              code: 'max_steps_exceeded',
              message: `the agent still called tools after its last step (maxSteps ${config.maxSteps})`,
            },
            text === '' ? null : text,
          ),
        );
        return;
      }
    }
  } catch (error) {
    const reason = error instanceof TurnAbort ? error.reason : abortReason(signal);
    if (inFlight !== null) {
      const outcome = reason === null ? 'failed' : 'cancelled';
      const none = { inputTokens: 0, outputTokens: 0, costMicros: 0 };
      deps.metrics.modelCall({ model: inFlight.model, outcome }, deps.clock.now() - inFlight.startedAt, none);
    }
    if (error instanceof LeaseLostError || reason === 'lease_lost' || reason === 'shutdown') return;
    // The disk is full: the turn is not at fault and must not end failed. The engine waits for space and resumes it.
    if (isStorageFull(error)) throw error;
    // The database could not be reached: nothing is wrong with the turn. The engine tries it again, from its last
    // persisted step, once the database answers (failing it here could succeed on a new connection, and lose it).
    if (reason === null && !(error instanceof ModelError) && isDatabaseUnavailable(error)) throw error;
    // A turn that ends before its first step was written still records that it started, in its last write.
    let startFirst: StartWrite | null = null;
    if (starter !== null) {
      startFirst = starter.take();
      if (startFirst === null) await starter.flush().catch(() => null);
      starter = null;
    }
    const withStart = async (trx: Executor, current: MessageRow) => {
      if (startFirst === null || current.status !== 'queued') return { events: [], current };
      const { events, message: started } = await startFirst(trx, current);
      return { events, current: started };
    };
    const partial = async (trx: Executor) => {
      const text = turnText(ownItems(await loadContextItems(trx, lease.sessionId, message.seq), messageId));
      return text === '' ? null : text;
    };
    if (reason === 'interrupt') {
      await change(deps, lease, messageId, OPEN_STATUSES, async (trx, found, now) => {
        const { events, current } = await withStart(trx, found);
        await writeUnfinishedStep(trx, current, inFlight, { status: 'cancelled' }, now);
        const ended = await cancelTurn(
          { trx, message: current, now, subscriptions: deps.subscriptions, hooks: deps.turnHooks },
          await partial(trx),
        );
        return [...events, ...ended];
      });
      return;
    }
    if (!(error instanceof ModelError)) deps.logger.error({ err: error, messageId }, 'turn failed unexpectedly');
    await change(deps, lease, messageId, ['queued', 'running'], async (trx, found, now) => {
      const { events, current } = await withStart(trx, found);
      await writeUnfinishedStep(trx, current, inFlight, { status: 'failed', error: errorOf(error) }, now);
      const ended = await failTurn(
        { trx, message: current, now, subscriptions: deps.subscriptions, hooks: deps.turnHooks },
        errorOf(error),
        await partial(trx),
      );
      return [...events, ...ended];
    });
  } finally {
    // Whatever ended the turn, a start not written by now is not written later by its timer.
    starter?.take();
  }
}
