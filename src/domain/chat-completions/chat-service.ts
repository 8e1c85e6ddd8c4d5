/**
 * POST /v1/chat/completions: each call is one turn of the agent `model` names, in a new hidden Session of its own
 * (stateless: the conversation is the `messages` sent, never mixed with another call's), recorded as a Run with
 * source `chat_completions`. The client's function tools are client tools of that turn; the agent's own tools run
 * inside it. When the turn stops for the client's tool calls it is completed at once: the caller sends their outputs
 * in a new call, with the whole conversation again.
 */

import type { Bus } from '../../bus/bus.ts';
import type { StreamHub } from '../../bus/live-hub.ts';
import { AppError, validationError } from '../../errors/app-error.ts';
import type { Clock } from '../../lib/clock.ts';
import { unixSeconds } from '../../lib/clock.ts';
import { newId } from '../../lib/ids.ts';
import type { Executor } from '../../storage/db.ts';
import type { MessageRow } from '../../storage/schema.ts';
import { requireAgentVersion } from '../agents/agent-repo.ts';
import type { AgentService } from '../agents/agent-service.ts';
import type { Agent } from '../agents/agent-types.ts';
import { type ImageImporter, keepingImages } from '../files/image-import.ts';
import { afterCommit, type SessionEvent } from '../outbox.ts';
import { AGENTS_LISTED, resolveAgentId } from '../responses/agent-ref.ts';
import {
  finalResponse,
  type ResponseStreamEvent,
  responseEvents,
  storedResponseEvents,
} from '../responses/response-stream.ts';
import type { ResponseObject } from '../responses/response-view.ts';
import { markCreated } from '../sessions/new-sessions.ts';
import { acceptMessage, type ToolWarnings } from '../turns/accept.ts';
import { completeHandedBackTurn } from '../turns/client-outputs.ts';
import type { HistoryItem } from '../turns/history-items.ts';
import type { Attachment } from '../turns/items.ts';
import type { LocalClaimsSlot } from '../turns/local-claims.ts';
import type { MessageOptions } from '../turns/message-options.ts';
import type { MessageService } from '../turns/message-service.ts';
import { createHiddenSession } from '../turns/session-rows.ts';
import type { TurnHooks } from '../turns/turn-hooks.ts';
import type { WebhookSubscriptions } from '../webhooks/subscriptions.ts';
import type { ChatEntry, ChatRequest } from './chat-request.ts';
import {
  approvalWaitedFor,
  type ChatChunk,
  type ChatCompletion,
  type ChatStreamError,
  type CompletionHeader,
  completionChunks,
  completionOf,
} from './chat-view.ts';

export interface ChatCompletionServiceDeps {
  db: Executor;
  clock: Clock;
  bus: Bus;
  /** This process's engine's offers of leases to accepts (local-claims.ts); absent: every turn is claimed. */
  localClaims?: LocalClaimsSlot;
  live: StreamHub;
  agents: AgentService;
  /** Checks that a file id names a file of the org a model can read; says how it reaches the model. */
  checkAttachment(trx: Executor, orgId: string, attachment: Attachment, param: string): Promise<'image' | 'file'>;
  /** Stores images given by URL as files of the org. */
  images: ImageImporter;
  toolWarnings: ToolWarnings;
  messages: Pick<MessageService, 'cancelMessage'>;
  subscriptions: WebhookSubscriptions;
  turnHooks: TurnHooks;
}

/** An accepted completion: iterate `chunks` to stream it, or pass it to `finish`. */
export interface StartedCompletion {
  message: MessageRow;
  header: CompletionHeader;
  events: AsyncIterable<ResponseStreamEvent>;
}

/** How long a turn whose request is over is followed to hand it back (a turn rarely runs that long). */
const FOLLOW_LIMIT_MS = 6 * 3600_000;

/**
 * A completion's turn that waits for input this long after its last change was left by its request (the process
 * serving it stopped before handing it back): a live request hands its turn back as soon as it waits.
 */
export const ABANDONED_AFTER_MS = 5 * 60_000;

/** How many abandoned turns one sweep settles at most (the next sweep takes the rest). */
const ABANDONED_BATCH = 100;

/** A user message's attachments with the param each came from (checked in the accepting transaction). */
type Attached = { attachment: Attachment; param: string }[];

/** The entries as replayed history and the new input (the trailing user messages, joined). */
function splitConversation(entries: ChatEntry[], attached: Attached[]) {
  let split = entries.length;
  while (split > 0 && entries[split - 1]?.kind === 'user') split -= 1;
  const history: HistoryItem[] = entries.slice(0, split).flatMap((entry, index): HistoryItem[] => {
    if (entry.kind === 'tool') return [{ type: 'function_call_output', callId: entry.callId, output: entry.output }];
    if (entry.kind === 'user') {
      const attachments = (attached[index] ?? []).map((each) => each.attachment);
      return [{ type: 'user_message', text: entry.text, attachments }];
    }
    const calls = entry.calls.map((call) => ({ type: 'function_call' as const, ...call }));
    return entry.text === '' ? calls : [{ type: 'assistant_message', text: entry.text }, ...calls];
  });
  const users = entries.slice(split).flatMap((entry) => (entry.kind === 'user' ? [entry] : []));
  const attachments = attached.slice(split).flatMap((each) => each.map((one) => one.attachment));
  const text = users.length === 0 ? null : users.map((user) => user.text).join('\n');
  return { history, text, attachments };
}

function optionsOf(request: ChatRequest): MessageOptions {
  return {
    ...(request.instructions === null ? {} : { instructions: request.instructions }),
    ...(request.tools.length === 0 ? {} : { tools: request.tools }),
    ...(Object.keys(request.settings).length === 0 ? {} : { settings: request.settings }),
    ...(request.responseFormat === undefined ? {} : { responseFormat: request.responseFormat }),
    echo: {
      metadata: request.metadata,
      toolChoice: request.settings.toolChoice ?? 'auto',
      temperature: request.settings.temperature ?? null,
      topP: request.settings.topP ?? null,
      parallelToolCalls: request.settings.parallelToolCalls ?? true,
      safetyIdentifier: request.endUser,
    },
  };
}

export function createChatCompletionService(deps: ChatCompletionServiceDeps) {
  const { db, clock } = deps;
  const listeners = { subscriptions: deps.subscriptions, hooks: deps.turnHooks };

  /**
   * Images given by URL become files of the org before the transaction (never hold it over the network); their ids
   * are added to `imported` as they are stored.
   */
  async function attachmentsOf(orgId: string, entries: ChatEntry[], imported: string[]): Promise<Attached[]> {
    const out: Attached[] = [];
    for (const entry of entries) {
      const attached: Attached = [];
      if (entry.kind === 'user') {
        for (const image of entry.images) {
          const fileId = await deps.images.import(orgId, image.url, image.param);
          imported.push(fileId);
          const attachment: Attachment = { kind: 'image', fileId };
          if (image.detail !== undefined) attachment.detail = image.detail;
          attached.push({ attachment, param: image.param });
        }
        for (const file of entry.files)
          attached.push({ attachment: { kind: 'file', fileId: file.fileId }, param: file.param });
      }
      out.push(attached);
    }
    return out;
  }

  /** The agent `model` names; an id of no agent is a 400 on `model` as well, as an unknown name is. */
  async function agentOfModel(trx: Executor, orgId: string, request: ChatRequest): Promise<Agent> {
    const id = await resolveAgentId(deps.agents, trx, orgId, request.agent);
    try {
      return await deps.agents.get(orgId, id, trx);
    } catch (error) {
      if (!(error instanceof AppError) || error.code !== 'not_found') throw error;
      throw validationError(
        'model',
        `model must be the id or the name of one of your agents (${AGENTS_LISTED}); no agent has the id ${id}`,
      );
    }
  }

  async function accept(orgId: string, request: ChatRequest, sessionId: string, attached: Attached[]) {
    return db.transaction().execute(async (trx) => {
      const now = clock.now();
      const agent = await agentOfModel(trx, orgId, request);
      for (const { attachment, param } of attached.flat()) {
        attachment.kind = await deps.checkAttachment(trx, orgId, attachment, param);
      }
      if (request.agentVersion !== undefined) {
        await requireAgentVersion(trx, agent.id, request.agentVersion, 'agent_version');
      }
      await createHiddenSession(trx, {
        id: sessionId,
        orgId,
        agentId: agent.id,
        title: null,
        now,
        endUser: request.endUser,
      });
      markCreated(trx, sessionId);
      const { history, text, attachments } = splitConversation(request.entries, attached);
      const agentOf = (inner: Executor, id: string): Promise<Agent> =>
        id === agent.id ? Promise.resolve(agent) : deps.agents.get(orgId, id, inner);
      return acceptMessage(
        trx,
        { orgId, sessionId, now, claims: deps.localClaims },
        {
          parts: text === null ? [] : [{ type: 'text', text }],
          text,
          attachments,
          source: 'chat_completions',
          history,
          ...(request.agentVersion === undefined ? {} : { agentVersion: request.agentVersion }),
          options: optionsOf(request),
        },
        agentOf,
        deps.toolWarnings,
      );
    });
  }

  /** The completions whose turn was handed back (or left as it ended): nothing more to do once their request is over. */
  const settled = new WeakSet<MessageRow>();

  /** A turn that stopped for the client's tool calls ends here: their outputs come with the next call. */
  async function handBack(message: MessageRow, response: ResponseObject): Promise<void> {
    if (settled.has(message)) return;
    settled.add(message);
    // An approval nobody can give here: the turn is cancelled rather than left waiting in a session nobody sees.
    if (approvalWaitedFor(response) !== undefined) {
      await deps.messages.cancelMessage(message.org_id, message.id);
      return;
    }
    if (!response.output.some((item) => item.type === 'function_call')) return;
    const events: SessionEvent[] = await db
      .transaction()
      .execute((trx) =>
        completeHandedBackTurn(trx, listeners, { sessionId: message.session_id, now: clock.now() }, message.id),
      );
    afterCommit(deps.bus, message.session_id, events, true);
  }

  return {
    /**
     * Accepts the completion's turn in a new hidden session and returns its events, listening from before the
     * accept so that an engine that picks the turn up at once loses nothing.
     */
    async start(orgId: string, request: ChatRequest): Promise<StartedCompletion> {
      const sessionId = newId();
      // The images are fetched first (a fetch may take seconds), then the feed is followed, before the accept; the
      // images are deleted again when the completion's turn is not accepted.
      const imported: string[] = [];
      const { row, events, feed } = await keepingImages(deps.images, orgId, imported, async () => {
        const attachments = await attachmentsOf(orgId, request.entries, imported);
        const followed = deps.live.follow(sessionId);
        try {
          return { ...(await accept(orgId, request, sessionId, attachments)), feed: followed };
        } catch (error) {
          followed.close();
          throw error;
        }
      });
      const events$ = responseEvents({
        db,
        feed,
        afterSeq: Math.min(...events.map((event) => event.seq)) - 1,
        message: row,
        vendorEvents: false,
        release: () => afterCommit(deps.bus, sessionId, events, true),
      });
      const header = { id: `chatcmpl-${row.id}`, created: unixSeconds(row.created_at), model: request.model };
      return { message: row, header, events: events$ };
    },

    /** Waits for the turn and answers the `chat.completion`; 504 `response_timeout` after `timeoutMs`. */
    async finish(started: StartedCompletion, timeoutMs: number): Promise<ChatCompletion> {
      const { message } = started;
      const late = `the completion did not finish within ${timeoutMs} ms; its Run is GET /v1/runs/${message.run_id}`;
      const response = await finalResponse(started.events, timeoutMs, late);
      await handBack(message, response);
      return completionOf(response, started.header, message.run_id);
    },

    /**
     * Once the request is over, however it ended (answered, client gone, timed out): a turn not handed back yet is
     * followed to its end from its stored events, then handed back, so none is left waiting for calls nobody will
     * answer. Resolves when that is done; its failures are the caller's to log.
     */
    async settle(started: StartedCompletion): Promise<void> {
      const { message } = started;
      if (settled.has(message)) return;
      const events = await storedResponseEvents(deps, message, { vendorEvents: false, startingAfter: null });
      const late = `the turn of chatcmpl-${message.id} did not end within ${FOLLOW_LIMIT_MS} ms of its request`;
      await handBack(message, await finalResponse(events, FOLLOW_LIMIT_MS, late));
    },

    /**
     * Settles the completions' turns that wait for input with no request left to hand them back (the process that
     * served the request stopped first): one waiting only for client tool calls is completed as a handed-back turn
     * would be, one waiting for anything else (an approval nobody can give) is cancelled. Returns how many it
     * settled; run periodically by every process that serves turns.
     */
    async settleAbandoned(olderThanMs: number = ABANDONED_AFTER_MS): Promise<number> {
      const waiting = await db
        .selectFrom('messages')
        .selectAll()
        .where('status', '=', 'requires_action')
        .where('updated_at', '<', clock.now() - olderThanMs)
        .where('source', '=', 'chat_completions')
        .orderBy('updated_at')
        .limit(ABANDONED_BATCH)
        .execute();
      for (const message of waiting) {
        const events = await db
          .transaction()
          .execute((trx) =>
            completeHandedBackTurn(trx, listeners, { sessionId: message.session_id, now: clock.now() }, message.id),
          );
        afterCommit(deps.bus, message.session_id, events, true);
        if (events.length === 0) await deps.messages.cancelMessage(message.org_id, message.id);
      }
      return waiting.length;
    },

    /** The completion as `chat.completion.chunk`s (see chat-view.ts). */
    chunks(started: StartedCompletion, includeUsage: boolean): AsyncIterable<ChatChunk | ChatStreamError> {
      const { message } = started;
      return completionChunks(started.events, started.header, {
        includeUsage,
        runId: message.run_id,
        afterFinal: (response) => handBack(message, response),
      });
    },
  };
}

export type ChatCompletionService = ReturnType<typeof createChatCompletionService>;
