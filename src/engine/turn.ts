/**
 * One turn of the agent loop for one message, as a sequence of durable steps. Each model call's result (text,
 * tool calls, usage, cost) is persisted before anything acts on it, and each tool result before the next model
 * call, so after a crash the turn resumes from the last persisted step and never repeats a finished tool call.
 */
import type { Logger } from 'pino';
import type { Bus } from '../bus/bus.ts';
import { agentFromRow, findAgentVersion } from '../domain/agents/agent-repo.ts';
import type { AgentConfig } from '../domain/agents/agent-types.ts';
import type { MessageOptions } from '../domain/messages/accept.ts';
import {
  type AttachedFile,
  appendItems,
  assistantItemId,
  attachmentIds,
  buildContext,
  callItemId,
  type Item,
  loadContextItems,
  type NewItem,
  pendingCalls,
} from '../domain/messages/items.ts';
import { turnText } from '../domain/messages/message-service.ts';
import type { MessageError } from '../domain/messages/message-types.ts';
import { requiredActionsOf } from '../domain/messages/message-view.ts';
import { cancelTurn, completeTurn, failTurn, requireAction, startTurn } from '../domain/messages/transitions.ts';
import { type SessionEvent, writeEvents } from '../domain/outbox.ts';
import { endToolSpan } from '../domain/runs/spans.ts';
import type { Clock } from '../lib/clock.ts';
import { costMicros } from '../models/pricing.ts';
import type { ModelRegistry } from '../models/registry.ts';
import { ModelError, type ModelSettings, type ToolCall, type Usage } from '../models/types.ts';
import type { Executor } from '../storage/db.ts';
import type { MessageRow } from '../storage/schema.ts';
import { type ContextCache, createContextCache } from './context-cache.ts';
import { fenced, type Lease, type LeaseDeps, LeaseLostError } from './lease.ts';
import { modelInputOf, type StepTrace, writeStep, writeUnfinishedStep } from './spans.ts';
import { type ServerTool, type TurnTools, toolsFor } from './tools.ts';

export interface TurnDeps extends LeaseDeps {
  clock: Clock;
  bus: Bus;
  models: ModelRegistry;
  logger: Logger;
  serverTools: ReadonlyMap<string, ServerTool>;
  /** Reads files attached to user input; without it attachments reach the model as a note. */
  files?: AttachmentReader;
}

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
  for (const event of events) deps.bus.publish('live', { sessionId, event: { ...event } });
}

async function reload(db: Executor, messageId: string): Promise<MessageRow | undefined> {
  return db.selectFrom('messages').selectAll().where('id', '=', messageId).executeTakeFirst();
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
    const message = await reload(trx, messageId);
    if (message === undefined || !expected.includes(message.status)) return null;
    const events = await write(trx, message, now);
    return { events, message: (await reload(trx, messageId)) ?? message };
  });
  if (result === null) return null;
  publish(deps, lease.sessionId, result.events);
  return result.message;
}

async function agentConfigFor(db: Executor, message: MessageRow): Promise<AgentConfig> {
  if (message.agent_version !== null) {
    const config = await findAgentVersion(db, message.agent_id, message.agent_version);
    if (config !== undefined) return config;
  }
  const row = await db.selectFrom('agents').selectAll().where('id', '=', message.agent_id).executeTakeFirstOrThrow();
  return agentFromRow(row);
}

/** The agent's config at turn start plus this message's own options (Responses compatibility mode). */
async function configFor(db: Executor, message: MessageRow): Promise<TurnConfig> {
  const agent = await agentConfigFor(db, message);
  if (message.options === null) return { agent, settings: undefined };
  const options = JSON.parse(message.options) as MessageOptions;
  const extra = options.tools ?? [];
  const names = new Set(extra.map((tool) => tool.name));
  return {
    agent: {
      ...agent,
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
async function attachedFiles(deps: TurnDeps, orgId: string, items: Item[]): Promise<Map<string, AttachedFile>> {
  const files = new Map<string, AttachedFile>();
  if (deps.files === undefined) return files;
  for (const fileId of attachmentIds(items)) {
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
  items: Item[],
  step: number,
  signal: AbortSignal,
): Promise<StepOutput> {
  const adapter = deps.models.adapter(config.model);
  let text = '';
  const calls: ToolCall[] = [];
  let usage: Usage = { inputTokens: 0, outputTokens: 0 };
  const files = await attachedFiles(deps, message.org_id, items);
  for await (const event of adapter.stream({
    model: config.model,
    instructions: config.instructions,
    context: buildContext(items, files),
    tools: tools.specs,
    ...(settings === undefined ? {} : { settings }),
    signal,
  })) {
    if (event.type === 'text-delta') {
      text += event.text;
      deps.bus.publish('live', {
        sessionId: message.session_id,
        event: {
          kind: 'message.delta',
          session_id: message.session_id,
          message_id: message.id,
          run_id: message.run_id,
          data: { text: event.text, step, itemId: assistantItemId(message.id, step) },
        },
      });
    } else if (event.type === 'tool-call') {
      calls.push(event.call);
    } else {
      usage = event.usage;
    }
  }
  return { text, calls, usage };
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
) {
  const { step } = trace;
  const cost = costMicros(config.model, output.usage);
  let actionId = items.filter((item) => item.messageId === message.id && item.content.type === 'function_call').length;
  const newItems: NewItem[] = [];
  if (output.text !== '')
    newItems.push({
      id: assistantItemId(message.id, step),
      messageId: message.id,
      step,
      content: { type: 'assistant_message', text: output.text },
    });
  for (const call of output.calls) {
    newItems.push({
      id: callItemId(message.id, actionId),
      messageId: message.id,
      step,
      callId: call.callId,
      content: {
        type: 'function_call',
        name: call.name,
        arguments: call.arguments,
        kind: tools.kindOf(call.name),
        actionId,
      },
    });
    actionId += 1;
  }
  return change(deps, lease, message.id, ['running'], async (trx, current, now) => {
    const target = { orgId: current.org_id, sessionId: current.session_id, now };
    const created = await appendItems(trx, target, newItems);
    const calls = output.calls.map((call) => ({ ...call, kind: tools.kindOf(call.name) }));
    await writeStep(trx, current, trace, { ...output, calls, costMicros: cost }, now);
    await trx
      .updateTable('messages')
      .set((eb) => ({
        step_count: eb('step_count', '+', 1),
        input_tokens: eb('input_tokens', '+', output.usage.inputTokens),
        output_tokens: eb('output_tokens', '+', output.usage.outputTokens),
        cost_micros: eb('cost_micros', '+', cost),
        updated_at: now,
      }))
      .where('id', '=', current.id)
      .execute();
    await trx
      .updateTable('runs')
      .set((eb) => ({
        input_tokens: eb('input_tokens', '+', output.usage.inputTokens),
        output_tokens: eb('output_tokens', '+', output.usage.outputTokens),
        cost_micros: eb('cost_micros', '+', cost),
      }))
      .where('id', '=', current.run_id)
      .execute();
    if (cost > 0) {
      await trx
        .updateTable('orgs')
        .set((eb) => ({ credit_balance_micros: eb('credit_balance_micros', '-', cost) }))
        .where('id', '=', current.org_id)
        .where('credit_balance_micros', 'is not', null)
        .execute();
    }
    const events = await writeEvents(
      trx,
      target,
      created
        .filter((item) => item.content.type === 'function_call')
        .map((item) => {
          const content = item.content.type === 'function_call' ? item.content : null;
          return {
            kind: 'message.event' as const,
            messageId: current.id,
            runId: current.run_id,
            data:
              content?.kind === 'question'
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
                    sourceType: `tool_${content?.kind ?? 'server'}`,
                    kind: content?.kind,
                    actionId: content?.actionId,
                    callId: item.callId,
                    itemId: item.id,
                    step: item.step,
                    name: content?.name,
                    arguments: content?.arguments,
                  },
          };
        }),
    );
    if (output.calls.length === 0) {
      const all = [...items.filter((item) => item.messageId === current.id), ...created];
      events.push(...(await completeTurn({ trx, message: current, now }, turnText(all))));
    }
    return events;
  });
}

async function runServerCall(
  deps: TurnDeps,
  lease: Lease,
  message: MessageRow,
  tools: TurnTools,
  call: { callId: string; name: string; arguments: string; step: number },
  signal: AbortSignal,
) {
  const tool = tools.server(call.name);
  let output: string;
  let isError = false;
  if (tool === undefined) {
    output = `Error: no tool named "${call.name}" is available`;
    isError = true;
  } else {
    try {
      const args: unknown = call.arguments === '' ? {} : JSON.parse(call.arguments);
      output = await tool.execute(args, signal);
    } catch (error) {
      if (signal.aborted) throw signal.reason;
      output = `Error: ${error instanceof Error ? error.message : String(error)}`;
      isError = true;
    }
  }
  await change(deps, lease, message.id, ['running'], async (trx, current, now) => {
    const target = { orgId: current.org_id, sessionId: current.session_id, now };
    await appendItems(trx, target, [
      {
        messageId: current.id,
        step: call.step,
        callId: call.callId,
        content: { type: 'function_call_output', name: call.name, output, isError, source: 'server' },
      },
    ]);
    const status = isError ? 'failed' : 'completed';
    await endToolSpan(trx, { messageId: current.id, callId: call.callId, status, output, now });
    return writeEvents(trx, target, [
      {
        kind: 'message.event',
        messageId: current.id,
        runId: current.run_id,
        data: { type: 'tool_result', sourceType: 'tool_server', callId: call.callId, name: call.name, isError },
      },
    ]);
  });
}

function errorOf(error: unknown): MessageError {
  if (error instanceof ModelError) return { code: error.code, message: error.message };
  return { code: 'internal_error', message: 'The turn failed because of an internal error' };
}

/**
 * Runs (or resumes) the turn of `messageId` until it completes, fails, is cancelled, or waits for input.
 * Returns when the turn no longer needs this worker.
 */
export async function runTurn(
  deps: TurnDeps,
  lease: Lease,
  messageId: string,
  signal: AbortSignal,
  context: ContextCache = createContextCache(lease.sessionId),
): Promise<void> {
  const initial = await reload(deps.db, messageId);
  if (initial === undefined) return;
  let message: MessageRow = initial;
  // The model call in flight, if any: written as a failed or cancelled step when the turn ends during it.
  let inFlight: StepTrace | null = null;
  try {
    if (message.cancel_requested === 1) throw new TurnAbort('interrupt');
    if (message.status === 'queued') {
      const agent = await deps.db
        .selectFrom('agents')
        .select(['version', 'workspace_provisioned_at'])
        .where('id', '=', message.agent_id)
        .executeTakeFirstOrThrow();
      const started = await change(deps, lease, messageId, ['queued'], async (trx, current, now) => {
        if (agent.workspace_provisioned_at === null) {
          // The agent's workspace exists from its first turn on; skills and network policy are fixed from then.
          await trx
            .updateTable('agents')
            .set({ workspace_provisioned_at: now })
            .where('id', '=', current.agent_id)
            .where('workspace_provisioned_at', 'is', null)
            .execute();
        }
        return startTurn({ trx, message: current, now }, agent.version);
      });
      if (started === null) return;
      message = started;
    }
    if (message.status !== 'running') return;
    const { agent: config, settings } = await configFor(deps.db, message);
    const tools = toolsFor(config, deps.serverTools);
    for (;;) {
      if (signal.aborted) throw signal.reason;
      const items = await context.load(deps.db, message.seq);
      const pending = pendingCalls(items.filter((item) => item.messageId === messageId));
      const serverCalls = pending.filter((call) => call.kind === 'server');
      for (const call of serverCalls) {
        await runServerCall(
          deps,
          lease,
          message,
          tools,
          { callId: call.callId, name: call.name, arguments: call.arguments, step: call.item.step },
          signal,
        );
      }
      if (serverCalls.length > 0) continue;
      const waiting = requiredActionsOf(pending);
      if (waiting.length > 0) {
        await change(deps, lease, messageId, ['running'], (trx, current, now) =>
          requireAction({ trx, message: current, now }, waiting),
        );
        return;
      }
      message = (await reload(deps.db, messageId)) ?? message;
      if (message.status !== 'running') return;
      const step = message.step_count + 1;
      inFlight = { step, model: config.model, startedAt: deps.clock.now(), input: modelInputOf(items, messageId) };
      const output = await callModel(deps, message, config, settings, tools, items, step, signal);
      const after = await persistStep(deps, lease, message, config, tools, inFlight, output, items);
      inFlight = null;
      if (after === null || after.status !== 'running') return;
      message = after;
      if (output.calls.length > 0 && step >= config.maxSteps) {
        const text = turnText(
          await context.load(deps.db, message.seq).then((all) => all.filter((item) => item.messageId === messageId)),
        );
        await change(deps, lease, messageId, ['running'], (trx, current, now) =>
          failTurn(
            { trx, message: current, now },
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
    if (error instanceof LeaseLostError || reason === 'lease_lost' || reason === 'shutdown') return;
    const partial = async (trx: Executor) => {
      const text = turnText(
        (await loadContextItems(trx, lease.sessionId, message.seq)).filter((item) => item.messageId === messageId),
      );
      return text === '' ? null : text;
    };
    if (reason === 'interrupt') {
      await change(deps, lease, messageId, ['queued', 'running', 'requires_action'], async (trx, current, now) => {
        await writeUnfinishedStep(trx, current, inFlight, { status: 'cancelled' }, now);
        return cancelTurn({ trx, message: current, now }, await partial(trx));
      });
      return;
    }
    if (!(error instanceof ModelError)) deps.logger.error({ err: error, messageId }, 'turn failed unexpectedly');
    await change(deps, lease, messageId, ['queued', 'running'], async (trx, current, now) => {
      await writeUnfinishedStep(trx, current, inFlight, { status: 'failed', error: errorOf(error) }, now);
      return failTurn({ trx, message: current, now }, errorOf(error), await partial(trx));
    });
  }
}
