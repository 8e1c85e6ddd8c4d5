/**
 * POST /v1/responses and GET /v1/responses/{id}: a Response is a Message of the Session behind the Conversation.
 * One transaction (inside the Idempotency-Key scope) resolves or creates the conversation, deduplicates replayed
 * items, records client tool outputs (ending the turn that waited for them), and accepts the new turn.
 */

import type { Bus } from '../../bus/bus.ts';
import type { StreamHub } from '../../bus/live-hub.ts';
import { AppError, notFound, validationError } from '../../errors/app-error.ts';
import type { Clock } from '../../lib/clock.ts';
import { jsonEqual } from '../../lib/hash.ts';
import { newId } from '../../lib/ids.ts';
import { costMicros } from '../../models/pricing.ts';
import type { ModelRegistry } from '../../models/registry.ts';
import { type Summary, summariseConversation } from '../../models/summarise.ts';
import type { Executor } from '../../storage/db.ts';
import { parseJsonColumn } from '../../storage/json-column.ts';
import { prepare } from '../../storage/prepared.ts';
import type { MessageRow } from '../../storage/schema.ts';
import { requireAgentVersion } from '../agents/agent-repo.ts';
import type { AgentService } from '../agents/agent-service.ts';
import { decide, findApproval } from '../approvals/approvals.ts';
import type { AuditContext } from '../audit/audit-log.ts';
import { debitCredits, requireCredits } from '../billing/credits.ts';
import { answerElicitation, findElicitation, parseElicitationAnswer } from '../elicitations/elicitations.ts';
import { type ImageImporter, keepingImages } from '../files/image-import.ts';
import type { Idempotency } from '../idempotency.ts';
import type { SessionEvent } from '../outbox.ts';
import { afterCommit } from '../outbox.ts';
import type { PreviewedOutput } from '../runs/preview.ts';
import type { SessionService } from '../sessions/session-service.ts';
import { acceptMessage } from '../turns/accept.ts';
import { completeAnsweredTurns, recordOutputs, waitingMessages } from '../turns/client-outputs.ts';
import type { HistoryItem } from '../turns/history-items.ts';
import { loadContextItems, loadLogItems, loadMessageItems } from '../turns/item-store.ts';
import { type Attachment, type Item, itemFromRow } from '../turns/items.ts';
import type { LocalClaimsSlot } from '../turns/local-claims.ts';
import { isMessageOptions } from '../turns/message-options.ts';
import type { MessageService } from '../turns/message-service.ts';
import { type MessageStatus, RESPONSE_END_STATUSES } from '../turns/message-types.ts';
import { type PendingCall, pendingCalls } from '../turns/pending-calls.ts';
import type { TurnHooks, TurnListeners } from '../turns/turn-hooks.ts';
import type { WebhookSubscriptions } from '../webhooks/subscriptions.ts';
import { resolveAgentId } from './agent-ref.ts';
import { type ConversationItemList, type ItemPage, pageOf } from './conversations.ts';
import { estimateInputTokens, type InputTokens } from './input-tokens.ts';
import { toOpenAIItems } from './openai-items.ts';
import { type CompactedResponse, compactedResponse, compactionWindow, summaryRoom } from './response-compact.ts';
import type { ResponseStreamWireEvent } from './response-events.ts';
import type { ResponseRequest } from './response-request.ts';
import { finalResponse, responseEvents, storedResponseEvents } from './response-stream.ts';
import { responseTools } from './response-tools.ts';
import { loadResponse, type ResponseObject } from './response-view.ts';

export interface ResponseServiceDeps {
  db: Executor;
  clock: Clock;
  bus: Bus;
  /** This process's engine's offers of leases to accepts (local-claims.ts); absent: every turn is claimed. */
  localClaims?: LocalClaimsSlot;
  live: StreamHub;
  idempotency: Idempotency;
  agents: AgentService;
  sessions: SessionService;
  /** Checks that a file id names a file of the org a model can read (404 / 400 otherwise); says how it reaches the model. */
  checkAttachment(trx: Executor, orgId: string, attachment: Attachment, param: string): Promise<'image' | 'file'>;
  /** Stores images given by URL as files of the org (compatibility mode). */
  images: ImageImporter;
  messages: Pick<MessageService, 'cancelMessage' | 'deleteResponse' | 'forgetResponse'>;
  subscriptions: WebhookSubscriptions;
  /** What the features add to the state changes of turns (src/deps.ts). */
  turnHooks: TurnHooks;
  /** The models that write the summaries of POST /v1/responses/compact. */
  models: Pick<ModelRegistry, 'adapter' | 'window'>;
}

/** How long POST /v1/responses/{id}/cancel waits for a running turn to stop before answering. */
const CANCEL_WAIT_MS = 5000;

export interface StartedResponse {
  message: MessageRow;
  replayed: boolean;
  /** From `response.created` to the final event; see response-stream.ts. */
  events: AsyncIterable<ResponseStreamWireEvent>;
}

export interface CreatedResponse {
  message: MessageRow;
  replayed: boolean;
  /** Publishes the accepted turn's events and wakes the engine; call it once listening for the turn. */
  release(): void;
  /** The seq of the first session event the accept wrote; null for a replay. */
  firstSeq: number | null;
}

const WAITING: readonly MessageStatus[] = RESPONSE_END_STATUSES;

const liveMessage = prepare((db, p: { orgId: string; id: string }) =>
  db
    .selectFrom('messages')
    .selectAll()
    .where('id', '=', p.id)
    .where('org_id', '=', p.orgId)
    .where('deleted_at', 'is', null),
);

/** Whether the message is a Response created with `store: false` (never retrievable). */
function unstored(row: MessageRow): boolean {
  if (row.options === null) return false;
  return parseJsonColumn(row.options, isMessageOptions, 'messages.options').echo?.store === false;
}

export function createResponseService(deps: ResponseServiceDeps) {
  const { db, clock } = deps;
  const listeners: TurnListeners = { subscriptions: deps.subscriptions, hooks: deps.turnHooks };

  async function findMessage(executor: Executor, orgId: string, messageId: string): Promise<MessageRow> {
    const row = await liveMessage.first(executor, { orgId, id: messageId });
    if (row === undefined || unstored(row)) throw notFound('response', `resp_${messageId}`);
    return row;
  }

  /** The session a request continues, or null for a new conversation. */
  async function sessionOf(
    trx: Executor,
    orgId: string,
    request: ResponseRequest,
    agentId: string,
  ): Promise<string | null> {
    if (request.previousResponse !== null) return (await findMessage(trx, orgId, request.previousResponse)).session_id;
    if (request.conversation === null) return null;
    const session = await trx
      .selectFrom('sessions')
      .select(['id', 'agent_id'])
      .where('id', '=', request.conversation)
      .where('org_id', '=', orgId)
      .executeTakeFirst();
    if (session === undefined) throw notFound('conversation', `conv_${request.conversation}`);
    // A conversation created without an agent takes the agent of its first Response.
    if (session.agent_id !== null && session.agent_id !== agentId) {
      throw validationError(
        'model',
        `conversation conv_${session.id} belongs to agent ${session.agent_id}, not ${agentId}`,
      );
    }
    return session.id;
  }

  async function accept(
    trx: Executor,
    orgId: string,
    request: ResponseRequest,
    newSessionId: string,
    audit: AuditContext | undefined,
  ): Promise<{ message: MessageRow; events: SessionEvent[] }> {
    const now = clock.now();
    // Read, not written, by the accept: the cached agent while nothing changed, as for a message (getIn).
    const current = await deps.agents.getIn(orgId, await resolveAgentId(deps.agents, trx, orgId, request.agent), trx);
    // A pinned version: checked before anything is written; the echo describes the version that runs.
    const agent =
      request.agentVersion === undefined
        ? current
        : {
            ...current,
            ...(await requireAgentVersion(trx, current.id, request.agentVersion, 'agent_version')),
            version: request.agentVersion,
          };
    let sessionId = await sessionOf(trx, orgId, request, agent.id);
    const fresh = sessionId === null;
    if (sessionId === null)
      sessionId = (
        await deps.sessions.create(
          orgId,
          { agentId: agent.id, id: newSessionId, endUser: request.echo.safetyIdentifier ?? null },
          trx,
        )
      ).id;
    const target = { orgId, sessionId, now };
    if (request.items.some((item) => item.kind === 'elicitation')) return answerElicitations(trx, target, request);

    // What the conversation already holds: replayed items are skipped by id and by call_id.
    const known = fresh
      ? []
      : (await trx.selectFrom('items').selectAll().where('session_id', '=', sessionId).execute()).map(itemFromRow);
    const knownIds = new Set(known.map((item) => item.id));
    const calls = new Map(
      known.flatMap((item) =>
        item.content.type === 'function_call' && item.callId !== null ? [[item.callId, item] as const] : [],
      ),
    );
    const answered = new Map(
      known.flatMap((item) =>
        item.content.type === 'function_call_output' && item.callId !== null
          ? [[item.callId, item.content.output] as const]
          : [],
      ),
    );
    const replayedCalls = new Set(
      request.items.flatMap((item) =>
        item.kind === 'history' && item.item.type === 'function_call' ? [item.item.callId] : [],
      ),
    );

    const decisions = fresh ? [] : await approvalDecisions(trx, orgId, sessionId, request);
    const fresh_items = request.items.flatMap((item, index) => {
      if (item.kind === 'approval') return [];
      if (item.id !== null && knownIds.has(item.id)) return [];
      if (item.kind === 'history' && item.item.type === 'function_call' && calls.has(item.item.callId)) return [];
      if (item.kind === 'output' && answered.has(item.callId)) {
        if (!jsonEqual(answered.get(item.callId), item.output)) {
          throw new AppError(
            'function_call_output_conflict',
            `a different output is already recorded for call_id ${item.callId}`,
            {
              param: `input[${index}].output`,
            },
          );
        }
        return [];
      }
      return [{ item, index }];
    });

    const outputs: { callId: string; output: string }[] = [];
    const rest: typeof fresh_items = [];
    for (const entry of fresh_items) {
      const { item, index } = entry;
      if (item.kind !== 'output') {
        rest.push(entry);
        continue;
      }
      const call = calls.get(item.callId);
      if (call !== undefined && call.content.type === 'function_call' && call.content.kind !== 'server') {
        outputs.push({ callId: item.callId, output: item.output });
      } else if (request.compat && replayedCalls.has(item.callId)) {
        rest.push(entry);
      } else {
        throw validationError(
          `input[${index}].call_id`,
          `No tool call found for function call output with call_id ${item.callId}`,
        );
      }
    }
    // The new input is the run of user messages at the end; what comes before it is replayed history.
    let split = rest.length;
    while (split > 0 && rest[split - 1]?.item.kind === 'user') split -= 1;
    const history: HistoryItem[] = [];
    for (const { item } of rest.slice(0, split)) {
      if (item.kind === 'history') history.push(item.item);
      else if (item.kind === 'user') history.push({ type: 'user_message', text: item.text });
      else if (item.kind === 'output')
        history.push({ type: 'function_call_output', callId: item.callId, output: item.output });
    }
    const users = rest.slice(split).flatMap(({ item }) => (item.kind === 'user' ? [item] : []));
    const attachments = users.flatMap((user) => user.attachments);
    const attachmentParams = users.flatMap((user) => user.attachmentParams);
    for (const [index, attachment] of attachments.entries()) {
      attachment.kind = await deps.checkAttachment(trx, orgId, attachment, attachmentParams[index] ?? 'input');
    }

    const events: SessionEvent[] = [];
    if (outputs.length > 0) {
      const recorded = await recordOutputs(trx, listeners, target, outputs, {
        mode: 'persist',
        kinds: ['client', 'question'],
      });
      events.push(...recorded.events);
    }
    // Every call the conversation waits for must be answered before the agent can go on.
    const waiting = fresh ? [] : await waitingMessages.all(trx, { sessionId });
    for (const message of waiting) {
      const items = await loadMessageItems(trx, message.id);
      const missing = pendingCalls(items).find(
        (call) =>
          (call.kind !== 'server' || call.approval?.state === 'pending') &&
          !decisions.some((decision) => decision.call.callId === call.callId),
      );
      if (missing === undefined) continue;
      if (missing.approval !== undefined) {
        if (users.length === 0 && (outputs.length > 0 || decisions.length > 0)) {
          throw validationError(
            'input',
            `No mcp_approval_response found for approval request ${missing.approval.id}; submit all decisions together`,
          );
        }
        throw new AppError(
          'client_tool_output_required',
          `the approval request ${missing.approval.id} is waiting for an mcp_approval_response; send it before new input`,
        );
      }
      if ((outputs.length > 0 || decisions.length > 0) && users.length === 0) {
        throw validationError(
          'input',
          `No tool output found for function call ${missing.callId}; submit all outputs together`,
        );
      }
      throw new AppError(
        'client_tool_output_required',
        `the function call ${missing.callId} is waiting for its output; submit it before new input`,
      );
    }
    if (users.length === 0 && history.length === 0 && outputs.length === 0 && decisions.length === 0) {
      if (request.items.some((item) => item.kind === 'approval')) {
        // A replayed decision already taken: the Response it continued is the answer, not a new turn.
        throw validationError('input', 'the mcp_approval_response items were already applied; nothing new to run');
      }
      throw validationError('input', 'input holds nothing new for this conversation');
    }
    const text = users.length === 0 ? null : users.map((user) => user.text).join('\n');
    const accepted = await acceptMessage(
      trx,
      { ...target, claims: deps.localClaims },
      {
        parts: text === null ? [] : [{ type: 'text', text }],
        text,
        attachments,
        source: 'responses',
        history,
        toolOutputs: [...outputs, ...decisions.map(decisionPreview)],
        options: {
          ...(request.instructions === null ? {} : { instructions: request.instructions }),
          ...(request.tools.length === 0 ? {} : { tools: request.tools }),
          ...(Object.keys(request.settings).length === 0 ? {} : { settings: request.settings }),
          ...(request.responseFormat === undefined ? {} : { responseFormat: request.responseFormat }),
          ...(request.contextPolicy === undefined ? {} : { contextPolicy: request.contextPolicy }),
          ...(request.compactThreshold === undefined ? {} : { compactThreshold: request.compactThreshold }),
          echo: {
            metadata: request.metadata,
            ...request.echo,
            tools: responseTools(agent, request.tools),
            truncation: (request.contextPolicy ?? agent.contextPolicy) === 'none' ? 'disabled' : 'auto',
          },
        },
        bindAgent: agent.id,
        ...(request.agentVersion === undefined ? {} : { agentVersion: request.agentVersion }),
      },
      // Read above in this transaction already (the session is bound to the request's agent).
      (inner, agentId) => (agentId === current.id ? Promise.resolve(current) : deps.agents.get(orgId, agentId, inner)),
    );
    events.push(...accepted.events);
    if (decisions.length > 0) {
      events.push(...(await applyDecisions(trx, target, decisions, accepted.row.id, audit)));
    }
    return { message: accepted.row, events };
  }

  /**
   * Answers the `mcp_elicitation_response` items of a request (nothing else may come with them): each names an
   * elicitation of this conversation (else 400) that still waits (else 409 action_not_waiting), its content checked
   * against the requested schema. The turn that asked resumes, as on the answer route, and is the Response
   * answered: the call runs again with the answer, so the Response keeps its id.
   */
  async function answerElicitations(
    trx: Executor,
    target: { orgId: string; sessionId: string; now: number },
    request: ResponseRequest,
  ): Promise<{ message: MessageRow; events: SessionEvent[] }> {
    const events: SessionEvent[] = [];
    let answered: MessageRow | undefined;
    for (const item of request.items) {
      if (item.kind !== 'elicitation') {
        throw validationError('input', 'mcp_elicitation_response items cannot be sent with other input items');
      }
      const asked = await findElicitation(trx, target.sessionId, item.elicitationId);
      if (asked === undefined) {
        throw validationError(
          `${item.param}.elicitation_request_id`,
          `No elicitation request found for elicitation_request_id ${item.elicitationId}`,
        );
      }
      const answer = parseElicitationAnswer(asked.content, item.answer, item.param);
      const message = await findMessage(trx, target.orgId, asked.messageId);
      const items = await loadMessageItems(trx, message.id);
      const result = await answerElicitation(
        trx,
        { ...target, listeners },
        { message, items, asked },
        answer,
        'responses',
      );
      events.push(...result.events);
      answered = message;
    }
    if (answered === undefined) throw validationError('input', 'input holds nothing new for this conversation');
    return { message: await findMessage(trx, target.orgId, answered.id), events };
  }

  /**
   * The `mcp_approval_response` items of a request, checked against the server-held approvals of this
   * conversation: an unknown id is a 400, a decision already taken the same way is a replay (skipped), the other
   * way a 409. Nothing is written here.
   */
  /** The Response's turn accepted under its idempotency key (the images of its input already stored). */
  async function acceptResponse(
    orgId: string,
    request: ResponseRequest,
    call: {
      hashed: unknown;
      idempotencyKey: string | undefined;
      newSessionId: string;
      audit: AuditContext | undefined;
    },
  ): Promise<CreatedResponse> {
    let events: SessionEvent[] = [];
    const written: { row: MessageRow | null } = { row: null };
    const result = await deps.idempotency.run(
      { orgId, scope: 'POST /v1/responses', key: call.idempotencyKey, request: call.hashed },
      async (trx) => {
        const accepted = await accept(trx, orgId, request, call.newSessionId, call.audit);
        events = accepted.events;
        written.row = accepted.message;
        return { status: 200, body: { messageId: accepted.message.id } };
      },
    );
    // A replay answers with the message as it is now; a new one with the row just written.
    const message =
      result.replayed || written.row === null ? await findMessage(db, orgId, result.body.messageId) : written.row;
    return {
      message,
      replayed: result.replayed,
      release: () => {
        afterCommit(deps.bus, message.session_id, events, true);
      },
      firstSeq: result.replayed || events.length === 0 ? null : Math.min(...events.map((event) => event.seq)),
    };
  }

  async function approvalDecisions(trx: Executor, orgId: string, sessionId: string, request: ResponseRequest) {
    const out: { call: PendingCall; approve: boolean; reason: string | null }[] = [];
    const seen = new Set<string>();
    for (const item of request.items) {
      if (item.kind !== 'approval') continue;
      const param = `${item.param}.approval_request_id`;
      const row = await findApproval(trx, orgId, sessionId, item.approvalId);
      if (row === undefined) {
        throw validationError(param, `No approval request found for approval_request_id ${item.approvalId}`);
      }
      if (seen.has(row.id)) throw validationError(param, `approval_request_id ${row.id} appears twice`);
      seen.add(row.id);
      if (row.status !== 'pending') {
        if ((row.status === 'approved') === item.approve) continue;
        throw new AppError('action_not_waiting', `approval request ${row.id} was already ${row.status}`, { param });
      }
      const call = pendingCalls(await loadMessageItems(trx, row.message_id)).find(
        (pending) => pending.approval?.id === row.id && pending.approval.state === 'pending',
      );
      if (call === undefined) {
        throw new AppError('action_not_waiting', `approval request ${row.id} is no longer waiting`, { param });
      }
      out.push({ call, approve: item.approve, reason: item.reason });
    }
    return out;
  }

  /**
   * Takes the decisions (their items go to the new Response, which runs the approved calls) and ends the turns
   * that no longer wait: like a turn whose client outputs were persisted, the new Response continues it.
   */
  async function applyDecisions(
    trx: Executor,
    target: { orgId: string; sessionId: string; now: number },
    decisions: { call: PendingCall; approve: boolean; reason: string | null }[],
    responseMessageId: string,
    audit: AuditContext | undefined,
  ): Promise<SessionEvent[]> {
    const events: SessionEvent[] = [];
    const decided = new Set<string>();
    for (const { call, approve, reason } of decisions) {
      const decision = {
        approved: approve,
        reason,
        by: 'responses' as const,
        ...(audit === undefined ? {} : { audit }),
      };
      const result = await decide(trx, target, call, decision, responseMessageId);
      events.push(...result.events);
      decided.add(call.callId);
    }
    const messageIds = new Set(decisions.map((decision) => decision.call.item.messageId));
    events.push(...(await completeAnsweredTurns(trx, listeners, target.now, messageIds, decided)));
    return events;
  }

  const service = {
    /**
     * The session a request will run in, known before it is accepted, so a stream can listen from the start:
     * the conversation's, the previous response's, or `newSessionId` for a new conversation.
     */
    async sessionFor(orgId: string, request: ResponseRequest, newSessionId: string): Promise<string> {
      if (request.conversation !== null) return request.conversation;
      if (request.previousResponse === null) return newSessionId;
      const row = await db
        .selectFrom('messages')
        .select('session_id')
        .where('id', '=', request.previousResponse)
        .where('org_id', '=', orgId)
        .executeTakeFirst();
      return row?.session_id ?? newSessionId;
    },

    async create(
      orgId: string,
      request: ResponseRequest,
      idempotencyKey: string | undefined,
      newSessionId: string = newId(),
      audit?: AuditContext,
    ): Promise<CreatedResponse> {
      // The request as sent identifies a retry (images by URL become new file ids below); without a key nothing
      // is compared, and nothing copied.
      const { stream: _stream, ...sent } = request;
      const hashed = idempotencyKey === undefined ? null : structuredClone(sent);
      // Images given by URL are fetched before the transaction (never hold it over the network), and deleted
      // again when the request writes no message (it fails, or an earlier one with its key answers it).
      const imported: string[] = [];
      return keepingImages(
        deps.images,
        orgId,
        imported,
        async () => {
          for (const item of request.items) {
            if (item.kind !== 'user') continue;
            for (const image of item.images.splice(0)) {
              const fileId = await deps.images.import(orgId, image.url, image.param);
              imported.push(fileId);
              item.attachments.push(
                image.detail === undefined
                  ? { kind: 'image', fileId }
                  : { kind: 'image', fileId, detail: image.detail },
              );
              item.attachmentParams.push(image.param);
            }
          }
          return acceptResponse(orgId, request, { hashed, idempotencyKey, newSessionId, audit });
        },
        (created) => !created.replayed,
      );
    },

    /** The Response projected from its durable message. */
    async get(orgId: string, messageId: string): Promise<ResponseObject> {
      return loadResponse(db, await findMessage(db, orgId, messageId));
    },

    /**
     * Accepts a Response's turn and returns its events, listening from before the accept so that an engine that
     * picks the turn up at once loses nothing. Iterate the events to stream them, or pass them to `finish`.
     */
    async start(
      orgId: string,
      request: ResponseRequest,
      idempotencyKey: string | undefined,
      options: { vendorEvents: boolean; audit?: AuditContext },
    ): Promise<StartedResponse> {
      const newSessionId = newId();
      const listenTo = await service.sessionFor(orgId, request, newSessionId);
      // Following the session before the turn exists: every event of it reaches the feed, live or read back from
      // the database (when Redis lost it, or published it before this process's subscription took effect).
      const feed = deps.live.follow(listenTo);
      let created: CreatedResponse;
      try {
        created = await service.create(orgId, request, idempotencyKey, newSessionId, options.audit);
      } catch (error) {
        feed.close();
        throw error;
      }
      const { message, replayed } = created;
      if (created.firstSeq === null || message.session_id !== listenTo) {
        // An idempotent replay: its turn's events as its own stream numbered them, what is stored, then live.
        feed.close();
        created.release();
        return {
          message,
          replayed,
          events: await storedResponseEvents(deps, message, { ...options, startingAfter: null }),
        };
      }
      // Listening since before this accept: the feed starts right before the turn's first event.
      const events = responseEvents({
        db,
        feed,
        afterSeq: created.firstSeq - 1,
        message,
        vendorEvents: options.vendorEvents,
        release: created.release,
      });
      return { message, replayed, events };
    },

    /**
     * Drains a started Response's events and resolves with its final Response (completed, failed, cancelled or
     * waiting for input); rejects with 504 `response_timeout` after `timeoutMs` (the turn goes on).
     */
    async finish(started: StartedResponse, timeoutMs: number): Promise<ResponseObject> {
      const late = `the response did not finish within ${timeoutMs} ms; retrieve resp_${started.message.id} later`;
      return finalResponse(started.events, timeoutMs, late);
    },

    /**
     * The events of a Response created through POST /v1/responses, numbered as its own stream numbered them,
     * after `startingAfter` (GET /v1/responses/{id}?stream=true): what is stored, then live until the final event.
     */
    async retrieve(
      orgId: string,
      messageId: string,
      options: { vendorEvents: boolean; startingAfter: number | null },
    ): Promise<AsyncIterable<ResponseStreamWireEvent>> {
      const message = await findMessage(db, orgId, messageId);
      if (message.source !== 'responses') throw notFound('response', `resp_${messageId}`);
      return storedResponseEvents(deps, message, options);
    },

    /**
     * Accepts a background Response's turn and answers its Response at once (`queued`): nobody listens, the turn
     * runs durably and GET /v1/responses/{id} follows it.
     */
    async startInBackground(
      orgId: string,
      request: ResponseRequest,
      idempotencyKey: string | undefined,
      audit?: AuditContext,
    ): Promise<{ response: ResponseObject; replayed: boolean }> {
      const created = await service.create(orgId, request, idempotencyKey, undefined, audit);
      created.release();
      return { response: await loadResponse(db, created.message), replayed: created.replayed };
    },

    /**
     * Forgets a Response created with `store: false` once its request is over (answered, timed out or its client
     * gone): its conversation is deleted, an unfinished turn cancelled first; its run stays without content.
     */
    async forget(orgId: string, message: MessageRow): Promise<void> {
      if (!unstored(message)) return;
      try {
        await deps.messages.forgetResponse(orgId, message);
      } catch (error) {
        // Already gone: its conversation was deleted meanwhile, or this was an idempotent replay.
        if (!(error instanceof AppError && error.code === 'not_found')) throw error;
      }
    },

    /** An estimate of the input tokens the request's Response would start with (input-tokens.ts); runs nothing. */
    async inputTokens(orgId: string, request: ResponseRequest): Promise<InputTokens> {
      const agent = await deps.agents.get(orgId, await resolveAgentId(deps.agents, db, orgId, request.agent));
      const sessionId = await sessionOf(db, orgId, request, agent.id);
      return estimateInputTokens({
        instructions: [agent.instructions, request.instructions ?? ''],
        tools: [...agent.clientTools, ...request.tools],
        log: sessionId === null ? [] : await loadLogItems(db, sessionId),
        input: request.items,
      });
    },

    /**
     * The conversation the request names, summarised by its agent's model (response-compact.ts); stores nothing.
     * The summary's cost is taken off the organization's credits.
     */
    async compact(orgId: string, request: ResponseRequest, signal: AbortSignal): Promise<CompactedResponse> {
      const agent = await deps.agents.get(orgId, await resolveAgentId(deps.agents, db, orgId, request.agent));
      let log: Item[] = [];
      if (request.previousResponse !== null) {
        const previous = await findMessage(db, orgId, request.previousResponse);
        log = await loadContextItems(db, previous.session_id, previous.seq);
      } else {
        const sessionId = await sessionOf(db, orgId, request, agent.id);
        if (sessionId !== null) log = await loadLogItems(db, sessionId);
      }
      const window = compactionWindow(log, request.items);
      if (window.context.length === 0) {
        throw validationError('input', 'there is nothing to compact: give input, previous_response_id or conversation');
      }
      await requireCredits(db, orgId, agent.model);
      let summary: Summary;
      try {
        const by = { adapter: deps.models.adapter(agent.model), model: agent.model, signal, now: () => clock.now() };
        summary = await summariseConversation(by, window.context, summaryRoom(deps.models.window(agent.model)));
      } catch (error) {
        if (signal.aborted) throw error;
        const reason = error instanceof Error ? error.message : String(error);
        throw new AppError('compaction_failed', `the model ${agent.model} could not write the summary: ${reason}`);
      }
      await debitCredits(db, orgId, costMicros(agent.model, summary.usage));
      return compactedResponse(newId, window, summary, clock.now());
    },

    /** The items the Response's turn took as input: its user input and the history replayed with it. */
    async inputItems(orgId: string, messageId: string, page: ItemPage): Promise<ConversationItemList> {
      const message = await findMessage(db, orgId, messageId);
      const items = (await loadMessageItems(db, message.id)).filter((item) => item.step <= 0);
      return pageOf(toOpenAIItems(items), page);
    },

    /** Cancels the Response's turn and returns the Response once the turn stopped (or after a few seconds). */
    async cancel(orgId: string, messageId: string): Promise<ResponseObject> {
      await findMessage(db, orgId, messageId);
      await deps.messages.cancelMessage(orgId, messageId);
      const deadline = Date.now() + CANCEL_WAIT_MS;
      let row = await findMessage(db, orgId, messageId);
      while (!WAITING.includes(row.status) && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 25));
        row = await findMessage(db, orgId, messageId);
      }
      return loadResponse(db, row);
    },

    /** Deletes the Response (GET answers 404 afterwards); an unfinished turn is cancelled first. */
    async remove(orgId: string, messageId: string): Promise<{ id: string; object: 'response'; deleted: true }> {
      await findMessage(db, orgId, messageId);
      await deps.messages.deleteResponse(orgId, messageId);
      return { id: `resp_${messageId}`, object: 'response', deleted: true };
    },
  };
  return service;
}

export type ResponseService = ReturnType<typeof createResponseService>;

/** A decision on an approval request as a run's preview names it: `[approval mcpr_…] denied: <reason>`. */
function decisionPreview(decision: { call: PendingCall; approve: boolean; reason: string | null }): PreviewedOutput {
  const verdict = decision.approve ? 'approved' : 'denied';
  return {
    kind: 'approval',
    callId: decision.call.approval?.id ?? decision.call.callId,
    output: decision.reason === null ? verdict : `${verdict}: ${decision.reason}`,
  };
}
