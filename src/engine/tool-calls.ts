/**
 * The server calls of a turn: which pending calls run now, and each call run and stored on its own. Before running,
 * a call's attempt is counted in the same fenced write that stamps its span's start (and, for an approved call,
 * marks its approval started), so a call found started after a crash is run again at most once, and an approved
 * one never twice; a call given up gets an error output and a `tool_call_abandoned` warning.
 */
import { markStarted } from '../domain/approvals/approvals.ts';
import { type SessionEvent, writeEvents } from '../domain/outbox.ts';
import { endToolSpan, startToolSpan } from '../domain/runs/spans.ts';
import { appendItems, loadMessageItems } from '../domain/turns/item-store.ts';
import type { CallServer, Item } from '../domain/turns/items.ts';
import { fenced } from '../domain/turns/leases.ts';
import { TOOL_CALL_ABANDONED, type Warning } from '../domain/turns/message-types.ts';
import {
  actionsTaken,
  type CallElicitation,
  type PendingCall,
  pendingCalls,
  waitingElicitation,
} from '../domain/turns/pending-calls.ts';
import { addWarning } from '../domain/turns/turn-store.ts';
import { newId } from '../lib/ids.ts';
import { outgoingTraceparent, toolSpanId } from '../lib/trace-context.ts';
import type { MessageRow } from '../storage/schema.ts';
import type { ElicitationAnswer, ElicitationRequest, ToolOutput } from '../tools/types.ts';
import { samplerOf } from './sampling.ts';
import { approvedCallStartEvent, toolProgressEvent, toolResultEvent, toolWarningEvent } from './step-events.ts';
import { executeServerCall } from './tools.ts';
import { change, publish, type Turn, type TurnContext } from './turn-context.ts';

/**
 * A started tool call whose process died is run again once; after a second interruption it is given up, so a
 * call that crashes the process cannot crash it forever.
 */
const MAX_CALL_ATTEMPTS = 2;

export interface ServerCall {
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
  /** What its server asked a person in earlier runs, with the answers (each run asks again, in the same order). */
  elicitations: CallElicitation[];
}

/** A call suspended because its server asked a person for input that has no answer yet. */
class ElicitationSuspended extends Error {
  readonly index: number;
  readonly request: ElicitationRequest;
  constructor(index: number, request: ElicitationRequest) {
    super('the MCP server asked for input: the call waits for the answer');
    this.name = new.target.name;
    this.index = index;
    this.request = request;
  }
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
    elicitations: call.elicitations ?? [],
  };
}

/** Server calls that can run now: those needing no approval, and approved ones, unless they wait for an answer. */
function runnable(call: PendingCall): boolean {
  return call.kind === 'server' && call.approval?.state !== 'pending' && waitingElicitation(call) === undefined;
}

/**
 * The server calls to run now: this message's runnable ones, after the calls of an earlier Response that this one's
 * input approved (`mcp_approval_response`), which run in this turn.
 */
export function serverCallsToRun(turn: TurnContext, items: Item[], pending: PendingCall[]): PendingCall[] {
  const messageId = turn.initial.id;
  const approvedEarlier = turn.log.hasApprovalDecisions()
    ? pendingCalls(items).filter(
        (call) => call.item.messageId !== messageId && call.kind === 'server' && call.approval?.state === 'approved',
      )
    : [];
  return [...approvedEarlier, ...pending.filter(runnable)];
}

/** Runs the server calls of a step concurrently; each output is stored as soon as it is known. */
export async function runServerCalls(turn: Turn, calls: PendingCall[]): Promise<void> {
  const results = await Promise.allSettled(calls.map((call) => runServerCall(turn, serverCallOf(call))));
  const failed = results.find((result) => result.status === 'rejected');
  if (failed !== undefined) throw failed.reason;
}

/** Runs one server call (or gives it up, after too many interruptions) and stores its output. */
async function runServerCall(turn: Turn, call: ServerCall): Promise<void> {
  // A draining worker starts no call: it stays pending (no attempt counted) for the worker the session goes to.
  if (turn.deps.draining.aborted) return;
  const started = await startCall(turn, call);
  publish(turn, started.events);
  let result: ToolOutput;
  // A call given up because restarts interrupted it: the model gets an error output, the message a warning.
  let abandoned: Warning | null = null;
  // Each answered elicitation ran the call once more on purpose: those runs are not interruptions.
  const answered = call.elicitations.length;
  if (!started.fresh && answered === 0) {
    result = {
      output:
        'Error: the service restarted while this approved call was running; it was not run again, since an approval allows one execution (it may or may not have taken effect)',
      isError: true,
    };
    abandoned = abandonedCall(
      call,
      'a restart of the service interrupted it after its approval, which allows one execution',
    );
  } else if (started.attempt > MAX_CALL_ATTEMPTS + answered) {
    result = {
      output: 'Error: the call was interrupted twice by a restart of the service and was not run again',
      isError: true,
    };
    abandoned = abandonedCall(call, `restarts of the service interrupted it ${MAX_CALL_ATTEMPTS} times`);
  } else {
    const startedAt = performance.now();
    const ran = await executeCall(turn, call);
    if (ran instanceof ElicitationSuspended) {
      await storeElicitation(turn, call, ran);
      return;
    }
    result = ran;
    turn.deps.metrics.toolCall(
      { tool: call.name, kind: turn.tools.kindOf(call.name), outcome: result.isError ? 'failed' : 'completed' },
      performance.now() - startedAt,
    );
  }
  if (abandoned !== null) {
    turn.deps.logger.warn(
      { messageId: turn.message.id, callId: call.callId, tool: call.name, attempts: started.attempt },
      `gave up the tool call ${call.callId} (${call.name}): ${abandoned.message}`,
    );
  }
  await storeResult(turn, call, result, abandoned);
}

/**
 * Counts the call's attempt on its span (and marks an approved call started) in one fenced write. `fresh` is false
 * for an approved call that was started before: it is not run again. The events are published once committed.
 */
function startCall(turn: Turn, call: ServerCall): Promise<{ attempt: number; fresh: boolean; events: SessionEvent[] }> {
  const { deps, message } = turn;
  return fenced(deps, turn.lease, deps.clock.now(), async (trx) => {
    const now = deps.clock.now();
    const span = await startToolSpan(trx, { messageId: call.messageId, callId: call.callId, now });
    if (call.approvalId === undefined) return { ...span, events: [], fresh: true };
    // An approved call runs at most once: a restart after it was marked started does not run it again.
    const fresh = await markStarted(trx, call.approvalId, now);
    const events = !fresh
      ? []
      : await writeEvents(trx, { orgId: message.org_id, sessionId: message.session_id, now }, [
          approvedCallStartEvent(message, call, call.approvalId),
        ]);
    return { ...span, events, fresh };
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

/**
 * The call's `elicit`: the `index`-th request of this run gets the answer given to the `index`-th request of the
 * earlier runs; a request past those suspends the call (its signal aborts, and it rejects).
 */
function elicitor(
  call: ServerCall,
  suspend: AbortController,
): (request: ElicitationRequest) => Promise<ElicitationAnswer> {
  let next = 0;
  return async (request) => {
    const index = next;
    next += 1;
    const known = call.elicitations.find((asked) => asked.index === index)?.answer;
    if (known !== undefined && known !== null) {
      return known.content === null ? { action: known.action } : { action: known.action, content: known.content };
    }
    const suspended = new ElicitationSuspended(index, request);
    if (!suspend.signal.aborted) suspend.abort(suspended);
    throw suspended;
  };
}

/**
 * Runs the call with the turn's signal and the call timeout, its progress going to live listeners. Resolves with
 * the ElicitationSuspended that stopped it when its server asked for input that has no answer yet.
 */
async function executeCall(turn: Turn, call: ServerCall): Promise<ToolOutput | ElicitationSuspended> {
  const suspend = new AbortController();
  try {
    const output = await runCall(turn, call, suspend);
    // A call that answered anyway after asking (it read the refusal sent to the server) still waits for the person.
    return suspend.signal.aborted ? (suspend.signal.reason as ElicitationSuspended) : output;
  } catch (error) {
    if (suspend.signal.aborted && !turn.signal.aborted) return suspend.signal.reason as ElicitationSuspended;
    throw error;
  }
}

function runCall(turn: Turn, call: ServerCall, suspend: AbortController): Promise<ToolOutput> {
  const { deps, message } = turn;
  const traceparent = outgoingTraceparent(
    turn.trace,
    toolSpanId(message.run_id, call.callId),
    deps.runExporter !== undefined,
  );
  return executeServerCall(
    turn.tools,
    call,
    {
      orgId: message.org_id,
      agentId: message.agent_id,
      sessionId: message.session_id,
      endUser: turn.lease.endUser,
      messageId: message.id,
      runId: message.run_id,
      callId: call.callId,
      egress: { policy: turn.agent.networkPolicy, allowInsecureDestinations: deps.allowInsecureDestinations },
      progress: (update) =>
        deps.bus.publish('live', {
          sessionId: message.session_id,
          event: toolProgressEvent(message, call, update),
        }),
      meta: {
        'agentry/call_id': call.callId,
        'agentry/run_id': message.run_id,
        // The MCP specification's key for W3C trace context in `_meta`.
        ...(traceparent === null ? {} : { traceparent }),
      },
      elicit: elicitor(call, suspend),
      ...samplerOf(turn, call),
    },
    {
      turnSignal: AbortSignal.any([turn.signal, suspend.signal]),
      timeoutMs: deps.toolTimeoutMs,
      now: deps.clock.now(),
    },
  );
}

/**
 * Stores what the server asked as an `elicitation` item of the call (the call keeps no output, so it waits) with
 * its `message.event`; the turn then suspends on it like on a question.
 */
function storeElicitation(turn: Turn, call: ServerCall, asked: ElicitationSuspended): Promise<MessageRow | null> {
  return change(turn, ['running'], async (trx, current, now) => {
    const target = { orgId: current.org_id, sessionId: current.session_id, now };
    const actionId = actionsTaken(await loadMessageItems(trx, call.messageId));
    const elicitationId = `elic_${newId().replaceAll('-', '')}`;
    const { request } = asked;
    const server = call.server?.label ?? 'agentry';
    await appendItems(trx, target, [
      {
        messageId: call.messageId,
        step: call.step,
        callId: call.callId,
        content: {
          type: 'elicitation',
          elicitationId,
          actionId,
          index: asked.index,
          server,
          mode: request.mode,
          message: request.message,
          requestedSchema: request.requestedSchema,
          url: request.url,
        },
      },
    ]);
    return writeEvents(trx, target, [
      {
        kind: 'message.event',
        messageId: current.id,
        runId: current.run_id,
        data: {
          type: 'elicitation',
          sourceType: 'mcp_elicitation',
          actionId,
          callId: call.callId,
          name: call.name,
          server,
          elicitationId,
          mode: request.mode,
          message: request.message,
          url: request.url,
        },
      },
    ]);
  });
}

/** Stores a call's output (and the warning of a call given up) and ends its span, before the next model call. */
function storeResult(
  turn: Turn,
  call: ServerCall,
  result: ToolOutput,
  abandoned: Warning | null,
): Promise<MessageRow | null> {
  const { output, isError } = result;
  return change(turn, ['running'], async (trx, current, now) => {
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
    const resultEvent = toolResultEvent(current, call, isError);
    return writeEvents(
      trx,
      target,
      abandoned === null ? [resultEvent] : [toolWarningEvent(current, abandoned), resultEvent],
    );
  });
}

/** Tool sources that could not be loaded for this turn: told to live listeners and the session's event log. */
export async function reportToolFailures(turn: Turn, failures: Warning[]): Promise<void> {
  if (failures.length === 0) return;
  turn.deps.logger.warn({ messageId: turn.message.id, failures }, 'tool sources unavailable for this turn');
  await change(turn, ['running'], (trx, current, now) =>
    writeEvents(
      trx,
      { orgId: current.org_id, sessionId: current.session_id, now },
      failures.map((failure) => toolWarningEvent(current, failure)),
    ),
  );
}
