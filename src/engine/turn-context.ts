/**
 * What one turn carries from the claim to its last write, made once when a worker picks the message and handed to
 * every step: the engine's deps, the lease that fences its writes, the message, the abort signal, the trace ids,
 * the session's cached log, and (once resolved) the agent, model settings and tools. Also the turn's one way to
 * change its message: a write fenced by the lease and conditional on the message's status.
 */

import type { Logger } from 'pino';
import type { Bus } from '../bus/bus.ts';
import type { AgentStart } from '../domain/agents/agent-cache.ts';
import type { AgentConfig } from '../domain/agents/agent-types.ts';
import type { ScopedBudget } from '../domain/billing/budgets.ts';
import { afterCommit, type SessionEvent } from '../domain/outbox.ts';
import type { AttachedFile } from '../domain/turns/context-builder.ts';
import type { ContextCache } from '../domain/turns/context-cache.ts';
import { fencedWithMessage, type Lease, type LeaseDeps, releaseWhenIdle } from '../domain/turns/leases.ts';
import { RUNNABLE_STATUSES } from '../domain/turns/message-types.ts';
import { statusWritten } from '../domain/turns/transition-rows.ts';
import type { TurnChange, TurnHooks } from '../domain/turns/turn-hooks.ts';
import { loadMessage } from '../domain/turns/turn-store.ts';
import type { WebhookSubscriptions } from '../domain/webhooks/subscriptions.ts';
import type { Clock } from '../lib/clock.ts';
import type { RunTrace } from '../lib/trace-context.ts';
import type { ContextPolicy } from '../models/context-fit.ts';
import type { ModelRegistry } from '../models/registry.ts';
import type { ModelSettings, ResponseFormat } from '../models/types.ts';
import type { Metrics } from '../observability/metrics-types.ts';
import type { RunExporter } from '../observability/run-export.ts';
import type { Executor } from '../storage/db.ts';
import type { MessageRow } from '../storage/schema.ts';
import type { ToolRegistry, TurnTools } from '../tools/registry.ts';
import type { StepTrace } from './spans.ts';
import type { LazyStart } from './turn-start.ts';

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
   * What a turn's start needs of its agent (its current version, whether its workspace exists yet): the agent
   * service's read (domain/agents/agent-cache.ts atTurnStart), on `db`, kept while no agent changes.
   */
  agentAtStart: (orgId: string, agentId: string) => Promise<AgentStart>;
  /**
   * Fires when the engine drains (shutdown): the turn pauses at its next step boundary, starting no further model
   * or tool call, and returns with everything it has done stored, for the engine to hand the session over.
   */
  draining: AbortSignal;
}

export interface AttachmentReader {
  read(orgId: string, fileId: string): Promise<AttachedFile | null>;
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

/** Why the turn's signal fired, when it fired with a TurnAbort. */
export function abortReason(signal: AbortSignal): AbortReason | null {
  const reason: unknown = signal.reason;
  return signal.aborted && reason instanceof TurnAbort ? reason.reason : null;
}

/**
 * One turn from the claim on. The message's ids never change; the fields below them are the turn's progress, kept
 * here so the loop, its steps and its ending see the same values.
 */
export interface TurnContext {
  readonly deps: TurnDeps;
  /** The session's lease: every write of the turn is fenced by it (a lost lease stops the turn). */
  readonly lease: Lease;
  /** Fires on interrupt, shutdown (after the drain's grace) or a lost lease, with a TurnAbort. */
  readonly signal: AbortSignal;
  /** The run's trace ids, the same on any worker (lib/trace-context.ts). */
  readonly trace: RunTrace;
  /** The session's log, kept between turns (domain/turns/context-cache.ts). */
  readonly log: ContextCache;
  /** The message as the worker picked it. */
  readonly initial: MessageRow;
  /** The message as this turn last read or wrote it. */
  message: MessageRow;
  /** Whether `message` was read by this turn's last write (no reload needed before the next model call). */
  fresh: boolean;
  /** The start of a turn not written yet (turn-start.ts); null once written or taken by a step. */
  starter: LazyStart | null;
  /** The model call in flight, if any: written as a failed or cancelled step when the turn ends during it. */
  inFlight: StepTrace | null;
  /** The budgets the last model call was admitted under (budget-gate.ts): its step's cost is added to them. */
  budgets: ScopedBudget[];
}

/** A turn whose agent, model settings and tools are resolved: what each step runs with. */
export interface Turn extends TurnContext {
  /** The agent at the turn's version, with this message's own options (Responses compatibility mode). */
  readonly agent: AgentConfig;
  readonly settings: ModelSettings | undefined;
  /** The structure every model call is asked for and the final reply must match; undefined for free text. */
  readonly responseFormat: ResponseFormat | undefined;
  /** The tools resolved once at the turn's start (src/tools/). */
  readonly tools: TurnTools;
  /** How each step keeps its context within the model's window (the message's own, else the agent's). */
  readonly contextPolicy: ContextPolicy;
}

export function openTurn(
  deps: TurnDeps,
  lease: Lease,
  initial: MessageRow,
  run: { signal: AbortSignal; trace: RunTrace; log: ContextCache },
): TurnContext {
  return { deps, lease, ...run, initial, message: initial, fresh: true, starter: null, inFlight: null, budgets: [] };
}

/**
 * A state change of the turn's message, fenced by the lease and conditional on the message still being in one of
 * the `expected` statuses (else nothing is written and the result is null). The events `write` returns are
 * published after the commit; the result is the message after the change (of a turn that ended in it, only its
 * status is new).
 */
export async function change(
  turn: TurnContext,
  expected: readonly string[],
  write: (trx: Executor, message: MessageRow, now: number) => Promise<SessionEvent[]>,
): Promise<MessageRow | null> {
  const { deps, lease } = turn;
  const messageId = turn.initial.id;
  const now = deps.clock.now();
  const result = await fencedWithMessage(deps, lease, { now, messageId }, async (trx, message) => {
    if (message === undefined || !expected.includes(message.status)) return null;
    const events = await write(trx, message, now);
    // A turn that ended here is not read again: its callers look at nothing but the status it ended in.
    const ended = statusWritten(trx, messageId);
    const after =
      ended !== undefined && !RUNNABLE_STATUSES.includes(ended)
        ? { ...message, status: ended }
        : ((await loadMessage(trx, messageId)) ?? message);
    // A turn that no longer needs a worker gives its session up in the same transaction when nothing else in it
    // can run, instead of a transaction of its own after it.
    if (!RUNNABLE_STATUSES.includes(after.status) && (await releaseWhenIdle(trx, lease))) lease.released = true;
    return { events, message: after };
  });
  if (result === null) return null;
  publish(turn, result.events);
  return result.message;
}

/** A state change of the turn for domain/turns/transitions.ts: in `trx`, from `message` as read there, at `now`. */
export function turnChange(turn: TurnContext, trx: Executor, message: MessageRow, now: number): TurnChange {
  return { trx, message, now, subscriptions: turn.deps.subscriptions, hooks: turn.deps.turnHooks };
}

/** Publishes the events of a committed write to the session's live listeners. */
export function publish(turn: TurnContext, events: SessionEvent[]): void {
  afterCommit(turn.deps.bus, turn.lease.sessionId, events, false);
}
