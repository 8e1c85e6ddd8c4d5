/**
 * One turn of the agent loop for one message, as a sequence of durable steps. Each model call's result (text,
 * tool calls, usage, cost) is persisted before anything acts on it, and each tool result before the next model
 * call, so after a crash the turn resumes from the last persisted step and never repeats a finished tool call.
 * This file is the loop; what a turn carries is in turn-context.ts, a model step in step.ts (its events in
 * step-events.ts), server calls in tool-calls.ts, the start in turn-start.ts and the endings in turn-ending.ts.
 */
import { type ContextCache, createContextCache } from '../domain/turns/context-cache.ts';
import { loadMessageItems } from '../domain/turns/item-store.ts';
import { type Item, ownItems } from '../domain/turns/items.ts';
import type { Lease } from '../domain/turns/leases.ts';
import { isMessageOptions } from '../domain/turns/message-options.ts';
import { turnText } from '../domain/turns/message-service.ts';
import { isTerminal } from '../domain/turns/message-types.ts';
import { requiredActionsOf } from '../domain/turns/message-view.ts';
import { pendingCalls } from '../domain/turns/pending-calls.ts';
import { failTurn, requireAction } from '../domain/turns/transitions.ts';
import { agentForTurn, loadMessage } from '../domain/turns/turn-store.ts';
import { runInTurn, runTrace } from '../lib/trace-context.ts';
import type { TurnOutcome } from '../observability/metrics-types.ts';
import type { Executor } from '../storage/db.ts';
import { parseJsonColumn } from '../storage/json-column.ts';
import type { MessageRow } from '../storage/schema.ts';
import { admitUnderBudgets, releaseBudgetHolds } from './budget-gate.ts';
import { modelInputOf, type StepTrace } from './spans.ts';
import { callModel, persistStep } from './step.ts';
import { reportToolFailures, runServerCalls, serverCallsToRun } from './tool-calls.ts';
import { change, openTurn, type Turn, TurnAbort, type TurnContext, type TurnDeps, turnChange } from './turn-context.ts';
import { endTurn } from './turn-ending.ts';
import { ensureStarted, lazyStart, takeStart } from './turn-start.ts';

/**
 * Runs (or resumes) the turn of the message `initial` (as read when the worker picked it) until it completes, fails,
 * is cancelled, or waits for input.
 * Returns when the turn no longer needs this worker.
 */
export async function runTurn(
  deps: TurnDeps,
  lease: Lease,
  initial: MessageRow,
  signal: AbortSignal,
  log: ContextCache = createContextCache(lease.sessionId),
): Promise<void> {
  const trace = runTrace(initial.run_id, initial.traceparent);
  const turn = openTurn(deps, lease, initial, { signal, trace, log });
  // Every log line written while the turn runs (engine, tools, MCP clients) names its run and trace.
  return runInTurn({ runId: initial.run_id, traceId: trace.traceId }, () => runTracedTurn(turn));
}

async function runTracedTurn(turn: TurnContext): Promise<void> {
  const { deps, initial } = turn;
  // A turn found running was started by a worker that stopped or died: this one takes it over.
  if (initial.status === 'running') deps.metrics.leaseTakeover();
  try {
    await runTurnSteps(turn);
  } finally {
    if (deps.metrics.enabled || deps.runExporter !== undefined) await afterTurn(turn);
  }
}

/** Counts a turn that ended in this call and hands its run to the trace exporter. */
async function afterTurn({ deps, initial }: TurnContext): Promise<void> {
  if (isTerminal(initial.status)) return;
  const after = await loadMessage(deps.db, initial.id).catch(() => undefined);
  if (after === undefined || !isTerminal(after.status)) return;
  deps.metrics.turnEnded(
    { agent: after.agent_id, source: after.source, outcome: after.status as TurnOutcome },
    after.started_at === null || after.completed_at === null ? null : after.completed_at - after.started_at,
  );
  if (deps.runExporter !== undefined) await deps.runExporter.exportRun(after.run_id);
}

async function runTurnSteps(context: TurnContext): Promise<void> {
  try {
    const turn = await beginTurn(context);
    if (turn !== null) await runSteps(turn);
  } catch (error) {
    await endTurn(context, error);
  } finally {
    // Whatever ended the turn, a start not written by now is not written later by its timer.
    context.starter?.take();
    await releaseBudgetHolds(context).catch((error: unknown) => {
      context.deps.logger.warn({ err: error }, 'could not release the budget holds of a turn: they expire');
    });
  }
}

/**
 * Starts a queued turn (lazily: turn-start.ts) or takes over a running one, and resolves its agent and tools.
 * Null when there is nothing to run.
 */
async function beginTurn(context: TurnContext): Promise<Turn | null> {
  const { deps } = context;
  let message = context.message;
  if (message.cancel_requested === 1) throw new TurnAbort('interrupt');
  if (message.status === 'queued') {
    const agent = await deps.agentAtStart(message.org_id, message.agent_id);
    // A version pinned at accept (the older API's tool-run `version`) wins over the current one.
    const version = message.agent_version ?? agent.version;
    context.starter = lazyStart(context, { version, provision: !agent.workspaceProvisioned });
    message = { ...message, agent_version: version };
    context.message = message;
    deps.metrics.turnStarted(
      { agent: message.agent_id, source: message.source },
      context.starter.at - message.created_at,
    );
  } else if (message.status !== 'running') return null;
  const resolved = await configFor(deps.db, message);
  const tools = await deps.tools.resolve(
    resolved.agent,
    {
      orgId: message.org_id,
      agentId: message.agent_id,
      db: deps.db,
      endUser: context.lease.endUser ?? endUserOf(message),
    },
    context.signal,
  );
  const turn: Turn = Object.assign(context, resolved, { tools });
  if (tools.failures.length > 0) {
    if (!(await ensureStarted(turn))) return null;
    await reportToolFailures(turn, tools.failures);
  }
  return turn;
}

/**
 * The end user a turn's own request names (a Response's or chat completion's `safety_identifier`, or `user`): the
 * turn acts for it when its session names none.
 */
function endUserOf(message: MessageRow): string | null {
  if (message.options === null) return null;
  return parseJsonColumn(message.options, isMessageOptions, 'messages.options').echo?.safetyIdentifier ?? null;
}

/** The agent's config at turn start plus this message's own options (Responses compatibility mode). */
async function configFor(
  db: Executor,
  message: MessageRow,
): Promise<Pick<Turn, 'agent' | 'settings' | 'responseFormat' | 'contextPolicy'>> {
  const agent = await agentForTurn(db, message);
  const contextPolicy = agent.contextPolicy;
  if (message.options === null) return { agent, settings: undefined, responseFormat: undefined, contextPolicy };
  const options = parseJsonColumn(message.options, isMessageOptions, 'messages.options');
  const extra = options.tools ?? [];
  const names = new Set(extra.map((tool) => tool.name));
  return {
    agent: {
      ...agent,
      ...(options.model === undefined ? {} : { model: options.model }),
      ...(options.compactThreshold === undefined ? {} : { compactThreshold: options.compactThreshold }),
      instructions: withOwnInstructions(agent.instructions, options.instructions),
      clientTools: [
        ...agent.clientTools.filter((tool) => !names.has(tool.name)),
        ...extra.map((tool) => ({ type: 'function' as const, ...tool })),
      ],
    },
    settings: options.settings,
    // Fixed at accept (the message's own or the agent's then): a later agent version does not change it.
    responseFormat: options.responseFormat ?? undefined,
    contextPolicy: options.contextPolicy ?? contextPolicy,
  };
}

/** The agent's instructions followed by the message's own, each alone when the other is empty. */
function withOwnInstructions(agentInstructions: string, own: string | undefined): string {
  if (own === undefined || own === '') return agentInstructions;
  return agentInstructions === '' ? own : `${agentInstructions}\n\n${own}`;
}

/**
 * The loop: each pass reads the log and takes one step (the server calls that can run, a wait for input, or a model
 * call), until the turn completes, fails, waits for input or is stopped. Every pass starts at a step boundary,
 * where everything before it is stored.
 */
async function runSteps(turn: Turn): Promise<void> {
  const { deps } = turn;
  const messageId = turn.initial.id;
  for (;;) {
    if (turn.signal.aborted) throw turn.signal.reason;
    // A step boundary: everything so far is stored, so a draining worker stops here and the next one continues.
    if (deps.draining.aborted) return;
    const items = await turn.log.load(deps.db, turn.message.seq);
    const pending = pendingCalls(ownItems(items, messageId));
    const serverCalls = serverCallsToRun(turn, items, pending);
    if (serverCalls.length > 0) {
      if (!(await ensureStarted(turn))) return;
      await runServerCalls(turn, serverCalls);
      continue;
    }
    if (requiredActionsOf(pending).length > 0) {
      if (!(await ensureStarted(turn))) return;
      const after = await requireActions(turn);
      if (after === null || after.status !== 'running') return;
      continue;
    }
    if (!turn.fresh) {
      turn.message = (await loadMessage(deps.db, messageId)) ?? turn.message;
      if (turn.message.status !== (turn.starter === null ? 'running' : 'queued')) return;
    }
    turn.fresh = false;
    if (!(await admitUnderBudgets(turn))) return;
    const trace = beginModelCall(turn, items);
    const made = ownItems(items, messageId).filter((item) => item.content.type === 'function_call').length;
    const output = await callModel(turn, trace, items, made);
    // The start goes into this step's transaction, unless it is being written (or was) on its own already.
    const start = takeStart(turn);
    if (start === null && !(await ensureStarted(turn))) return;
    const after = await persistStep(turn, { trace, output, items }, start);
    turn.inFlight = null;
    if (after === null || after.status !== 'running') return;
    turn.message = after;
    turn.fresh = true;
    if (output.calls.length > 0 && trace.step >= turn.agent.maxSteps) {
      await failMaxSteps(turn);
      return;
    }
  }
}

/**
 * Moves the turn to `requires_action` for its client calls, questions and approvals. Read again under the lease's
 * write: an approval decided while this step's other calls ran is not waited for.
 */
function requireActions(turn: Turn): Promise<MessageRow | null> {
  const messageId = turn.initial.id;
  return change(turn, ['running'], async (trx, current, now) => {
    const waiting = requiredActionsOf(pendingCalls(await loadMessageItems(trx, messageId)));
    return waiting.length === 0 ? [] : requireAction(turnChange(turn, trx, current, now), waiting);
  });
}

/** The model call about to start, kept as in flight until its step is stored. */
function beginModelCall(turn: Turn, items: Item[]): StepTrace {
  const trace: StepTrace = {
    step: turn.message.step_count + 1,
    model: turn.agent.model,
    startedAt: turn.deps.clock.now(),
    input: modelInputOf(items, turn.initial),
  };
  turn.inFlight = trace;
  return trace;
}

/** A step that still called tools when `maxSteps` is used up fails the turn, keeping the text produced. */
async function failMaxSteps(turn: Turn): Promise<void> {
  const { deps, agent } = turn;
  const text = turnText(await turn.log.load(deps.db, turn.message.seq).then((all) => ownItems(all, turn.initial.id)));
  await change(turn, ['running'], (trx, current, now) =>
    failTurn(
      turnChange(turn, trx, current, now),
      {
        code: 'max_steps_exceeded',
        message: `the agent still called tools after its last step (maxSteps ${agent.maxSteps})`,
      },
      text === '' ? null : text,
    ),
  );
}
