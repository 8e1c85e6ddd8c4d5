/**
 * Messages: submit work to a Session, read the transcript, answer questions (message-answer.ts), record client tool
 * outputs, interrupt and cancel (message-cancel.ts). Every write is one transaction that locks the session row first
 * (so it orders with the engine's fenced writes) and writes its events through the outbox; wake-ups and live events
 * go out after commit.
 */

import type { Bus } from '../../bus/bus.ts';
import { notFound, validationError } from '../../errors/app-error.ts';
import type { Clock } from '../../lib/clock.ts';
import { discardingUnlessWritten, noDiscard } from '../../lib/discarding.ts';
import type { Executor } from '../../storage/db.ts';
import type { MessageRow } from '../../storage/schema.ts';
import type { Agent } from '../agents/agent-types.ts';
import type { AuditContext } from '../audit/audit-log.ts';
import type { Idempotency, IdempotencyRequest } from '../idempotency.ts';
import { afterCommit, type SessionEvent } from '../outbox.ts';
import { parseResponseFormat } from '../output-format.ts';
import type { WebhookSubscriptions } from '../webhooks/subscriptions.ts';
import { acceptMessage, type ToolWarnings } from './accept.ts';
import { type ClientOutput, type ClientOutputMode, recordOutputs } from './client-outputs.ts';
import type { Attachment } from './items.ts';
import type { LocalClaimsSlot } from './local-claims.ts';
import { answerAction } from './message-answer.ts';
import { cancelMessage, deleteResponse, deleteSession, forgetResponse, interruptSession } from './message-cancel.ts';
import { findMessage, lockOwnSession, type MessageContext } from './message-context.ts';
import { type ResolveAttachment, resolveParts } from './message-parts.ts';
import type { AcceptedMessage, ExpandedPart, Message, RequestPart } from './message-types.ts';
import { messageFromRow, messagesWithActions } from './message-view.ts';
import type { TurnHooks } from './turn-hooks.ts';

export interface MessageServiceDeps {
  db: Executor;
  clock: Clock;
  bus: Bus;
  /** This process's engine's offers of leases to accepts (local-claims.ts); absent: every turn is claimed. */
  localClaims?: LocalClaimsSlot;
  idempotency: Idempotency;
  toolWarnings: ToolWarnings;
  subscriptions: WebhookSubscriptions;
  /** What the features add to the state changes of turns (src/deps.ts). */
  turnHooks: TurnHooks;
  /** Expands `mcp_prompt` parts (domain/mcp-servers/mcp-prompt-parts.ts); absent: such parts are refused. */
  promptParts?: PromptParts;
  /** Checks a file attached to a message (domain/files/attachments.ts `resolveAttachment`). */
  resolveAttachment: ResolveAttachment;
}

/**
 * A message's parts with its prompt parts expanded, in the order sent (its files checked later, in the accepting
 * transaction), and the files the prompts' images were stored as.
 */
export interface ExpandedParts {
  parts: ExpandedPart[];
  attachments: Attachment[];
  /** Deletes those files again: the message that was to hold them was not written. */
  discard?: () => Promise<void>;
}

/** Asks the servers of the session's agent for the prompts the parts name (network calls; no transaction open). */
export type PromptParts = (
  target: { orgId: string; sessionId: string },
  parts: RequestPart[],
  agentOf: AgentOf,
) => Promise<ExpandedParts>;

type AgentOf = (trx: Executor, agentId: string) => Promise<Agent>;

export interface SubmitInput {
  orgId: string;
  sessionId: string;
  parts: RequestPart[];
  idempotencyKey: string;
  source?: 'sessions' | 'responses' | 'tasks' | 'mcp' | 'a2a';
  /** The structure of the reply (domain/output-format.ts wire shape); absent: the agent's output format. */
  outputFormat?: Record<string, unknown>;
}

export type { ClientOutputMode } from './client-outputs.ts';
/** Kept here for the engine's import (the text now lives beside the items it reads). */
export { turnText } from './items.ts';
/** Kept here for the callers outside the turn wing (it lives in message-context.ts, beside what shares it). */
export { lockOwnSession } from './message-context.ts';

/**
 * The Sessions API's side of turns. Each operation is a function of its own (here, message-answer.ts,
 * message-cancel.ts) over one MessageContext; the service binds them to it.
 */
export function createMessageService(deps: MessageServiceDeps) {
  const { db, clock, bus } = deps;
  const ctx: MessageContext = {
    db,
    clock,
    bus,
    listeners: { subscriptions: deps.subscriptions, hooks: deps.turnHooks },
  };
  return {
    /** Accepts a message (idempotent by its key); the engine is woken after commit. */
    submit: (input: SubmitInput, agentOf: AgentOf) => submitMessage(deps, ctx, input, agentOf),
    /** A page of the session's messages, oldest first. */
    list: (orgId: string, sessionId: string, page: { limit: number; offset: number }) =>
      listMessages(db, orgId, sessionId, page),
    /** One message of the session, with its required actions. */
    get: (orgId: string, sessionId: string, messageId: string) => getMessage(db, orgId, sessionId, messageId),
    /**
     * Answers a question, or decides a tool approval (`{approved, reason?}`); the turn resumes once none of its
     * actions is left waiting.
     */
    answer: (
      orgId: string,
      target: { sessionId: string; messageId: string },
      actionId: number,
      answer: unknown,
      audit?: AuditContext,
    ) => answerAction(ctx, { orgId, ...target, actionId, answer, audit }),
    /** Records outputs of client tool calls; a turn left waiting for none continues or ends (`mode`). */
    recordClientOutputs: (orgId: string, sessionId: string, outputs: ClientOutput[], mode: ClientOutputMode) =>
      recordClientOutputs(ctx, { orgId, sessionId }, outputs, mode),
    /** Interrupts the session's active turn (message-cancel.ts). */
    interrupt: (orgId: string, sessionId: string) => interruptSession(ctx, orgId, sessionId),
    /** Cancels one message's turn; returns the message's status after the request. */
    cancelMessage: (orgId: string, messageId: string) => cancelMessage(ctx, orgId, messageId),
    /** Removes a Response from the Responses surface, its turn cancelled first. */
    deleteResponse: (orgId: string, messageId: string) => deleteResponse(ctx, orgId, messageId),
    /** Deletes the conversation of a `store: false` Response; its run stays, without content. */
    forgetResponse: (orgId: string, message: Pick<MessageRow, 'session_id' | 'run_id'>) =>
      forgetResponse(ctx, orgId, message),
    /** Deletes a session, its unfinished turns cancelled first. */
    deleteSession: (orgId: string, sessionId: string) => deleteSession(ctx, orgId, sessionId),
  };
}

export type MessageService = ReturnType<typeof createMessageService>;

/**
 * Accepts a message: one transaction checks idempotency, pending client outputs and credits, then writes the queued
 * message, its run, the user item and the events. The engine is woken after commit.
 */
async function submitMessage(
  deps: MessageServiceDeps,
  ctx: MessageContext,
  input: SubmitInput,
  agentOf: AgentOf,
): Promise<{ body: AcceptedMessage; replayed: boolean }> {
  const { orgId, sessionId } = input;
  let events: SessionEvent[] = [];
  const { outputFormat } = input;
  const responseFormat = outputFormat === undefined ? undefined : parseResponseFormat(outputFormat, 'outputFormat');
  // The parts alone when no format is given: keys used before formats existed keep matching their requests.
  const request = outputFormat === undefined ? input.parts : { parts: input.parts, outputFormat };
  const keyed = { orgId, scope: `POST /v1/sessions/${sessionId}/messages`, key: input.idempotencyKey, request };
  const expanded = await expandParts(deps, keyed, input, agentOf);
  if ('replayed' in expanded) return expanded;
  const accept = () =>
    deps.idempotency.run(keyed, async (trx) => {
      const { parts, text, attachments } = await resolveParts(trx, orgId, expanded.parts, deps.resolveAttachment);
      const all = [...expanded.attachments, ...attachments];
      const accepted = await acceptMessage(
        trx,
        { orgId, sessionId, now: ctx.clock.now(), claims: deps.localClaims },
        {
          parts,
          text,
          ...(all.length === 0 ? {} : { attachments: all }),
          source: input.source ?? 'sessions',
          // Workspaces of legacy Tasks and tool runs are sessions, but not the Sessions API's to write to.
          visibleOnly: true,
          ...(responseFormat === undefined ? {} : { options: { responseFormat } }),
        },
        agentOf,
        deps.toolWarnings,
      );
      events = accepted.events;
      const body: AcceptedMessage = messageFromRow(accepted.row, []);
      return { status: 202, body };
    });
  // The prompts' images belong to the message only if this request wrote it.
  const result = await discardingUnlessWritten(expanded.discard ?? noDiscard, accept, (accepted) => !accepted.replayed);
  afterCommit(ctx.bus, sessionId, events, true);
  return { body: result.body, replayed: result.replayed };
}

/**
 * The parts as the message keeps them. Prompt parts ask MCP servers, so a stored answer for the key is looked up
 * first: a retried submission replays it without asking again. (Two concurrent first tries both ask; the
 * transaction then accepts one and replays it to the other.)
 */
async function expandParts(
  deps: MessageServiceDeps,
  keyed: IdempotencyRequest,
  input: SubmitInput,
  agentOf: AgentOf,
): Promise<ExpandedParts | { body: AcceptedMessage; replayed: true }> {
  const { parts } = input;
  if (parts.every((part): part is ExpandedPart => part.type !== 'mcp_prompt')) return { parts, attachments: [] };
  const earlier = await deps.idempotency.lookup<AcceptedMessage>(keyed);
  if (earlier !== null) return { body: earlier.body, replayed: true };
  if (deps.promptParts === undefined) {
    const index = input.parts.findIndex((part) => part.type === 'mcp_prompt');
    throw validationError(`parts[${index}]`, 'mcp_prompt parts are not accepted here');
  }
  return deps.promptParts({ orgId: input.orgId, sessionId: input.sessionId }, input.parts, agentOf);
}

/** A page of the session's messages, oldest first, with the total; a 404 unless a visible session of the org. */
async function listMessages(db: Executor, orgId: string, sessionId: string, page: { limit: number; offset: number }) {
  const session = await db
    .selectFrom('sessions')
    .select('id')
    .where('id', '=', sessionId)
    .where('org_id', '=', orgId)
    .where('hidden', '=', 0)
    .executeTakeFirst();
  if (session === undefined) throw notFound('session', sessionId);
  const base = db.selectFrom('messages').where('session_id', '=', sessionId);
  const [rows, count] = await Promise.all([
    base.selectAll().orderBy('seq').limit(page.limit).offset(page.offset).execute(),
    base.select((eb) => eb.fn.countAll<number>().as('total')).executeTakeFirstOrThrow(),
  ]);
  return {
    data: await messagesWithActions(db, rows),
    total: Number(count.total),
    limit: page.limit,
    offset: page.offset,
  };
}

async function getMessage(db: Executor, orgId: string, sessionId: string, messageId: string): Promise<Message> {
  const row = await findMessage(db, orgId, sessionId, messageId);
  const [message] = await messagesWithActions(db, [row]);
  if (message === undefined) throw notFound('message', messageId);
  return message;
}

/**
 * Records outputs of client tool calls (see recordOutputs). When a turn has no call left waiting it continues
 * (`continue`) or ends as completed with what it produced so far (`persist`).
 */
async function recordClientOutputs(
  ctx: MessageContext,
  { orgId, sessionId }: { orgId: string; sessionId: string },
  outputs: ClientOutput[],
  mode: ClientOutputMode,
) {
  const result = await ctx.db.transaction().execute(async (trx) => {
    const now = ctx.clock.now();
    await lockOwnSession(trx, orgId, sessionId, now);
    // Questions surface as function calls on the OpenAI surfaces, so they can be answered the same way.
    return recordOutputs(trx, ctx.listeners, { orgId, sessionId, now }, outputs, {
      mode,
      kinds: ['client', 'question'],
    });
  });
  afterCommit(ctx.bus, sessionId, result.events, result.resumed);
  return result.items;
}
