/**
 * Accepting a message inside the caller's transaction: the checks of DESIGN section 6 (pending client outputs,
 * credits) and the rows a queued turn needs (message, run, its log items, events). The Sessions route and the
 * Responses surface both call it, each inside its own idempotency scope.
 */
import type { Insertable } from 'kysely';
import { AppError, notFound } from '../../errors/app-error.ts';
import { newId } from '../../lib/ids.ts';
import { currentApiKeyId } from '../../lib/request-key.ts';
import { currentTraceparent } from '../../lib/trace-context.ts';
import type { RunSource } from '../../storage/column-values.ts';
import type { Executor } from '../../storage/db.ts';
import { prepare, prepareInsert } from '../../storage/prepared.ts';
import type { MessageRow, RunsTable } from '../../storage/schema.ts';
import { requireAgentVersion } from '../agents/agent-repo.ts';
import type { Agent } from '../agents/agent-types.ts';
import { requireBudgets } from '../billing/budgets.ts';
import { requireCredits } from '../billing/credits.ts';
import { type SessionEvent, writeEvents } from '../outbox.ts';
import { inputPreview, type PreviewedOutput, previewedFiles } from '../runs/preview.ts';
import { createdInTransaction } from '../sessions/new-sessions.ts';
import { pendingClientCalls } from './client-outputs.ts';
import { type HistoryItem, historyItems } from './history-items.ts';
import { adoptUnattachedItems, appendItems, UNATTACHED } from './item-store.ts';
import type { Attachment, NewItem } from './items.ts';
import type { Lease } from './leases.ts';
import type { LeaseOffer, LocalClaimsSlot } from './local-claims.ts';
import { type MessageOptions, withAgentFormat } from './message-options.ts';
import { type MessagePart, storedWarnings, type Warning } from './message-types.ts';
import { bindSessionAgent, markWorkPending, markWorkPendingTakingLease, type PendingSession } from './session-rows.ts';

export interface AcceptInput {
  /** What the Message shows as its parts (its attachments, when any, also in `attachments` for the model). */
  parts: MessagePart[];
  /** The new user input; null for a turn that continues from tool outputs alone. */
  text: string | null;
  attachments?: Attachment[];
  source: Exclude<RunSource, 'console'>;
  options?: MessageOptions | null;
  /** Runs this version of the agent instead of the one current when the turn starts (the older API's version). */
  agentVersion?: number;
  history?: HistoryItem[];
  /**
   * Tool outputs sent with this input but stored on the turn that called the tools (a Response's
   * `function_call_output`): the run's preview names them when there is no text.
   */
  toolOutputs?: readonly PreviewedOutput[];
  /**
   * The agent of a Conversation created without one: the first turn fixes it. Without it such a session is a 409
   * `agent_required`.
   */
  bindAgent?: string;
  /** The Sessions API's own accept: a hidden session (a workspace of legacy Tasks and tool runs) is not found. */
  visibleOnly?: boolean;
  /** The schedule whose run this turn is: its budget is checked with the agent's and the session's. */
  scheduleId?: string;
  /**
   * The API key the turn is billed to (runs.api_key_id). Absent: the key of the request in progress, if any; null:
   * none (a scheduled turn, whoever's request fires it).
   */
  apiKeyId?: string | null;
}

/**
 * What the agent configures that this deployment cannot run, for the AcceptedMessage warnings (the tool
 * registry's answer; src/tools/registry.ts).
 */
export type ToolWarnings = (
  agent: Agent,
  scope: { orgId: string; agentId: string; db: Executor },
) => Promise<Warning[]>;

export interface Accepted {
  row: MessageRow;
  events: SessionEvent[];
  warnings: Warning[];
}

/**
 * The session's last message seq, one of its messages waiting for input and one of its unattached items, if any:
 * one statement, each part a sub-select on an index (the max of `seq` read at the end of the session's index,
 * not over its history).
 */
const sessionMessages = prepare((db, p: { sessionId: string }) =>
  db.selectNoFrom((eb) => [
    eb
      .selectFrom('messages')
      .select((inner) => inner.fn.max<number | null>('seq').as('seq'))
      .where('session_id', '=', p.sessionId)
      .as('seq'),
    eb
      .selectFrom('messages')
      .select('id')
      .where('session_id', '=', p.sessionId)
      .where('status', '=', 'requires_action')
      .limit(1)
      .as('waiting'),
    eb
      .selectFrom('items')
      .select('id')
      .where('session_id', '=', p.sessionId)
      .where('message_id', '=', UNATTACHED)
      .limit(1)
      .as('unattached'),
  ]),
);
const insertMessage = prepareInsert('messages');
const insertRun = prepareInsert('runs');

/**
 * Where a message is accepted. With `claims`, the engine of this process may take the session's lease in the same
 * transaction (local-claims.ts).
 */
type AcceptTarget = { orgId: string; sessionId: string; now: number; claims?: LocalClaimsSlot | undefined };
type AgentOf = (trx: Executor, agentId: string) => Promise<Agent>;

/**
 * Accepts a message in the caller's transaction: locks and checks the session, checks the agent's credits and
 * budgets, then writes the queued message, its run, its log items and its `message.created` event.
 */
export async function acceptMessage(
  trx: Executor,
  target: AcceptTarget,
  input: AcceptInput,
  agentOf: AgentOf,
  toolWarnings?: ToolWarnings,
): Promise<Accepted> {
  const offer = target.claims?.current?.offer(target.sessionId, target.now) ?? null;
  if (offer === null) return acceptChecked(trx, target, { input, agentOf, toolWarnings, offer: null });
  try {
    return await acceptChecked(trx, target, { input, agentOf, toolWarnings, offer });
  } catch (error) {
    offer.declined();
    throw error;
  }
}

/** acceptMessage once its lease offer, if any, is known; hands the offer the lease it took only when all went well. */
async function acceptChecked(
  trx: Executor,
  target: AcceptTarget,
  call: { input: AcceptInput; agentOf: AgentOf; toolWarnings: ToolWarnings | undefined; offer: LeaseOffer | null },
): Promise<Accepted> {
  const { orgId, sessionId, now } = target;
  const { input, agentOf, toolWarnings, offer } = call;
  const { session, agentId, last, lease } = await openSession(trx, target, input, offer);
  // A version the message names, else the session's pin: the turn runs it, so its model is the one charged.
  const agentVersion = input.agentVersion ?? session.agent_version ?? undefined;
  const agent = await agentToRun(trx, agentId, agentVersion, agentOf);
  await requireCredits(trx, orgId, agent.model);
  await requireBudgets(trx, {
    model: agent.model,
    agentId: agent.id,
    sessionId,
    scheduleId: input.scheduleId ?? null,
    now,
  });
  const warnings = toolWarnings === undefined ? [] : await toolWarnings(agent, { orgId, agentId: agent.id, db: trx });
  const options = withAgentFormat(input.options, agent);
  const turn: QueuedTurn = { agent, agentVersion, options, warnings };
  const row = queuedMessage(target, input, turn, Number(last?.seq ?? 0) + 1);
  // Sent with the next statement on Postgres (prepared.ts): nothing reads them back before it.
  await insertMessage.run(trx, [row], { deferred: true });
  await insertRun.run(trx, [queuedRun(target, row, input, agent, session.end_user)], { deferred: true });
  // Items added to the conversation since its last turn (POST /v1/conversations/{id}/items) come before this input.
  if (last?.unattached != null) await adoptUnattachedItems(trx, sessionId, row.id);
  await appendItems(trx, target, inputItems(row.id, input));
  const events = await writeEvents(trx, target, [
    { kind: 'message.created', messageId: row.id, runId: row.run_id, data: { status: 'queued' } },
  ]);
  if (offer !== null) {
    if (lease === null) offer.declined();
    else offer.taken(lease);
  }
  return { row, events, warnings };
}

/**
 * Locks the session row (submissions and the engine's fenced writes are ordered by it) and checks that it takes a
 * message: visible when the caller asks, with an agent (fixed here from `bindAgent` when it has none), no client
 * call waiting for its output. Returns its row, its agent and what it holds.
 */
async function openSession(trx: Executor, target: AcceptTarget, input: AcceptInput, offer: LeaseOffer | null) {
  const { orgId, sessionId, now } = target;
  let session: PendingSession | undefined;
  let lease: Lease | null = null;
  if (offer === null) session = await markWorkPending(trx, { sessionId, orgId, now });
  else {
    const taking = await markWorkPendingTakingLease(trx, { sessionId, orgId, now }, offer);
    session = taking;
    if (taking?.token != null) {
      lease = { sessionId, orgId, token: taking.token, owner: offer.owner, endUser: taking.end_user };
    }
  }
  if (session === undefined || (input.visibleOnly === true && session.hidden !== 0)) {
    throw notFound('session', sessionId);
  }
  let agentId = session.agent_id;
  if (agentId === null) {
    if (input.bindAgent === undefined) {
      throw new AppError(
        'agent_required',
        `session ${sessionId} has no agent yet: its first Response (POST /v1/responses with model) fixes it`,
      );
    }
    agentId = input.bindAgent;
    await bindSessionAgent(trx, sessionId, agentId);
  }
  // A session created in this transaction has nothing yet: no waiting call, no message, no unattached item.
  const created = createdInTransaction(trx, sessionId);
  const last = created ? undefined : await sessionMessages.first(trx, { sessionId });
  // Only a message waiting for input can wait for a client call's output.
  if (last?.waiting != null && (await pendingClientCalls(trx, sessionId)).length > 0) {
    throw new AppError(
      'client_tool_output_required',
      'a client tool call of this session is waiting for its output; submit it before sending new input',
    );
  }
  return { session, agentId, last, lease };
}

/** The agent as the turn runs it: the current one, or `agentVersion` of it when that is another version. */
async function agentToRun(
  trx: Executor,
  agentId: string,
  agentVersion: number | undefined,
  agentOf: AgentOf,
): Promise<Agent> {
  const current = await agentOf(trx, agentId);
  return agentVersion === undefined || agentVersion === current.version
    ? current
    : {
        ...current,
        ...(await requireAgentVersion(trx, agentId, agentVersion, 'agentVersion')),
        version: agentVersion,
      };
}

/** What an accepted message's turn runs with, settled before its rows are written. */
interface QueuedTurn {
  agent: Agent;
  /** The version the turn is fixed to (the message's or the session's pin); undefined: the current one at start. */
  agentVersion: number | undefined;
  options: MessageOptions | null;
  warnings: Warning[];
}

/** The row of the queued message, `seq` the session's next. */
function queuedMessage(target: AcceptTarget, input: AcceptInput, turn: QueuedTurn, seq: number): MessageRow {
  const { options } = turn;
  return {
    id: newId(),
    org_id: target.orgId,
    session_id: target.sessionId,
    seq,
    status: 'queued',
    parts: JSON.stringify(input.parts),
    response_text: null,
    error: null,
    input_tokens: 0,
    cached_input_tokens: 0,
    output_tokens: 0,
    cost_micros: 0,
    step_count: 0,
    cancel_requested: 0,
    agent_id: turn.agent.id,
    agent_version: turn.agentVersion ?? null,
    run_id: newId(),
    source: input.source,
    created_at: target.now,
    started_at: null,
    completed_at: null,
    updated_at: target.now,
    options: options === null ? null : JSON.stringify(options),
    deleted_at: null,
    // The submitting request's trace context: the turn's spans join that trace whenever and wherever it runs.
    traceparent: currentTraceparent(),
    warnings: storedWarnings(turn.warnings),
  };
}

/**
 * The tool outputs the input submits: those stored on the turns that asked for them, then the outputs that end the
 * replayed history (a chat completion or a Response that replays the conversation ends in the outputs it sends).
 */
function submittedOutputs(input: AcceptInput): PreviewedOutput[] {
  const history = input.history ?? [];
  let start = history.length;
  while (start > 0 && history[start - 1]?.type === 'function_call_output') start -= 1;
  const replayed = history.slice(start).flatMap((item) => (item.type === 'function_call_output' ? [item] : []));
  return [...(input.toolOutputs ?? []), ...replayed];
}

/** The row of the queued message's run. */
function queuedRun(
  target: AcceptTarget,
  row: MessageRow,
  input: AcceptInput,
  agent: Agent,
  endUser: string | null,
): Insertable<RunsTable> {
  return {
    id: row.run_id,
    org_id: target.orgId,
    agent_id: agent.id,
    session_id: target.sessionId,
    message_id: row.id,
    source: row.source,
    status: 'queued',
    model: agent.model,
    agent_version: null,
    input_preview: inputPreview(
      input.text ?? '',
      previewedFiles(input.attachments ?? [], input.parts),
      submittedOutputs(input),
    ),
    output_preview: null,
    input_tokens: 0,
    output_tokens: 0,
    cost_micros: 0,
    error: null,
    created_at: target.now,
    started_at: null,
    completed_at: null,
    warnings: row.warnings,
    api_key_id: input.apiKeyId === undefined ? currentApiKeyId() : input.apiKeyId,
    end_user: endUser,
  };
}

/** The message's log items: the history the client replays, then its new input (none when `text` is null). */
function inputItems(messageId: string, input: AcceptInput): NewItem[] {
  const items = historyItems(messageId, input.history ?? []);
  if (input.text !== null) {
    items.push({
      messageId,
      step: 0,
      content:
        input.attachments === undefined || input.attachments.length === 0
          ? { type: 'user_message', text: input.text }
          : { type: 'user_message', text: input.text, attachments: input.attachments },
    });
  }
  return items;
}
