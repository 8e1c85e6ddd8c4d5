/**
 * Conversations (OpenAI's Conversations API over our Sessions): a Conversation is a Session (`conv_` + the session
 * id) and its items are the session's conversation log in OpenAI item shapes. A Conversation created here may have
 * no agent yet: its first Response fixes it. Items added here are persisted without running the agent: in strict
 * mode only function_call_output items for client calls, in compatibility mode also messages and calls
 * (conversation-items.ts).
 */
import type { Bus } from '../../bus/bus.ts';
import { AppError, notFound } from '../../errors/app-error.ts';
import { type Clock, unixSeconds } from '../../lib/clock.ts';
import type { Executor } from '../../storage/db.ts';
import type { AgentService } from '../agents/agent-service.ts';
import { afterCommit } from '../outbox.ts';
import type { SessionService } from '../sessions/session-service.ts';
import { conversationIdOf } from '../sessions/session-service.ts';
import { loadLogItems, removeLogItem } from '../turns/item-store.ts';
import { lockOwnSession, type MessageService } from '../turns/message-service.ts';
import { setSessionMetadata } from '../turns/session-rows.ts';
import type { TurnHooks, TurnListeners } from '../turns/turn-hooks.ts';
import type { WebhookSubscriptions } from '../webhooks/subscriptions.ts';
import { type ConversationItemInput, parseConversationItems, storeConversationItems } from './conversation-items.ts';
import { type ConversationOpenAIItem, toOpenAIItems } from './openai-items.ts';

export const CONVERSATION_PREFIX = 'conv_';

/** The session id of a `conv_<uuid>` id (route schemas have checked the form). */
export const sessionIdOfConversation = (conversationId: string): string =>
  conversationId.slice(CONVERSATION_PREFIX.length).toLowerCase();

export interface Conversation {
  id: string;
  object: 'conversation';
  created_at: number;
  metadata: Record<string, string>;
}

export interface ConversationItemList {
  object: 'list';
  data: ConversationOpenAIItem[];
  first_id: string | null;
  last_id: string | null;
  has_more: boolean;
}

export interface ItemPage {
  limit: number;
  order: 'asc' | 'desc';
  /** An item id: the page starts after it (in `order`). */
  after?: string;
}

export interface FunctionCallOutputInput {
  callId: string;
  output: string;
}

export interface ConversationServiceDeps {
  db: Executor;
  clock: Clock;
  bus: Bus;
  agents: AgentService;
  sessions: SessionService;
  messages: Pick<MessageService, 'recordClientOutputs' | 'deleteSession'>;
  subscriptions: WebhookSubscriptions;
  /** What the features add to the state changes of turns (src/deps.ts). */
  turnHooks: TurnHooks;
}

export interface ConversationDeleted {
  id: string;
  object: 'conversation.deleted';
  deleted: true;
}

/** Items a request may add at once (OpenAI allows 20 per request; 64 matches the spec's outputs limit). */
export const MAX_ITEMS = 64;

function metadataOf(value: string | null): Record<string, string> {
  if (value === null) return {};
  const parsed: unknown = JSON.parse(value);
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return {};
  return Object.fromEntries(
    Object.entries(parsed).flatMap(([key, entry]) => (typeof entry === 'string' ? [[key, entry]] : [])),
  );
}

function listOf(data: ConversationOpenAIItem[], hasMore: boolean): ConversationItemList {
  return {
    object: 'list',
    data,
    first_id: data[0]?.id ?? null,
    last_id: data[data.length - 1]?.id ?? null,
    has_more: hasMore,
  };
}

/**
 * Words the message service's errors for this route: `[2].call_id` (a position in the outputs) becomes
 * `items[2].call_id`, and an unknown session an unknown conversation.
 */
function forItemsRoute(error: unknown, sessionId: string): unknown {
  if (error instanceof AppError && error.code === 'not_found') {
    return notFound('conversation', conversationIdOf(sessionId));
  }
  if (error instanceof AppError && error.param?.startsWith('[') === true) {
    return new AppError(error.code, error.message, {
      param: `items${error.param}`,
      cause: error,
      retriable: error.retriable,
    });
  }
  return error;
}

export function createConversationService(deps: ConversationServiceDeps) {
  const { db, clock } = deps;
  const listeners: TurnListeners = { subscriptions: deps.subscriptions, hooks: deps.turnHooks };

  async function findSession(orgId: string, sessionId: string, executor: Executor = db) {
    const row = await executor
      .selectFrom('sessions')
      .select(['id', 'created_at', 'metadata'])
      .where('id', '=', sessionId)
      .where('org_id', '=', orgId)
      .executeTakeFirst();
    if (row === undefined) throw notFound('conversation', conversationIdOf(sessionId));
    return row;
  }

  const view = (row: { id: string; created_at: number; metadata: string | null }): Conversation => ({
    id: conversationIdOf(row.id),
    object: 'conversation',
    created_at: unixSeconds(row.created_at),
    metadata: metadataOf(row.metadata),
  });

  /** The whole log in OpenAI shapes, in log order (server-call outputs fold into their mcp_call items). */
  async function allItems(orgId: string, sessionId: string): Promise<ConversationOpenAIItem[]> {
    await findSession(orgId, sessionId);
    return toOpenAIItems(await loadLogItems(db, sessionId));
  }

  /** Stores parsed items in one transaction that locks the session; wakes the engine when a turn ended. */
  async function store(orgId: string, sessionId: string, parsed: (ConversationItemInput | null)[]) {
    const result = await db.transaction().execute(async (trx) => {
      const now = clock.now();
      await lockOwnSession(trx, orgId, sessionId, now);
      return storeConversationItems(trx, listeners, { orgId, sessionId, now }, parsed);
    });
    afterCommit(deps.bus, sessionId, result.events, result.resumed);
    return toOpenAIItems(result.items);
  }

  return {
    /**
     * Creates a Conversation: a Session of `agentId` (an extension field), or without an agent until its first
     * Response; `items` (user and assistant messages, calls and outputs) start its log.
     */
    async create(
      orgId: string,
      input: { items?: unknown; metadata?: Record<string, string>; agentId?: string },
    ): Promise<Conversation> {
      const parsed = input.items === undefined ? [] : parseConversationItems(input.items, true, MAX_ITEMS);
      const session = await db.transaction().execute(async (trx) => {
        const created = await deps.sessions.create(
          orgId,
          { agentId: input.agentId ?? null, ...(input.metadata === undefined ? {} : { metadata: input.metadata }) },
          trx,
        );
        if (parsed.length > 0) {
          await storeConversationItems(trx, listeners, { orgId, sessionId: created.id, now: clock.now() }, parsed);
        }
        return findSession(orgId, created.id, trx);
      });
      return view(session);
    },

    async get(orgId: string, sessionId: string): Promise<Conversation> {
      return view(await findSession(orgId, sessionId));
    },

    /** Replaces the Conversation's metadata. */
    async update(orgId: string, sessionId: string, metadata: Record<string, string>): Promise<Conversation> {
      await findSession(orgId, sessionId);
      await setSessionMetadata(db, { orgId, sessionId, now: clock.now() }, metadata);
      return view(await findSession(orgId, sessionId));
    },

    /** Deletes the Conversation and its Session (unfinished turns are cancelled first). */
    async delete(orgId: string, sessionId: string): Promise<ConversationDeleted> {
      await findSession(orgId, sessionId);
      await deps.messages.deleteSession(orgId, sessionId);
      return { id: conversationIdOf(sessionId), object: 'conversation.deleted', deleted: true };
    },

    /** One page of items in `order`; `after` must name an item of this conversation's list. */
    async listItems(orgId: string, sessionId: string, page: ItemPage): Promise<ConversationItemList> {
      return pageOf(await allItems(orgId, sessionId), page);
    },

    async getItem(orgId: string, sessionId: string, itemId: string): Promise<ConversationOpenAIItem> {
      const item = (await allItems(orgId, sessionId)).find((candidate) => candidate.id === itemId);
      if (item === undefined) throw notFound('item', itemId);
      return item;
    },

    /**
     * Deletes an item (with the call, output and approval decision it goes with) and returns the Conversation, as
     * OpenAI does. An item the list shows that is part of another one (an mcp_approval_request: its mcp_call) is a
     * 400 naming it; 409 conversation_busy while a Response of the conversation is unfinished.
     */
    async deleteItem(orgId: string, sessionId: string, itemId: string): Promise<Conversation> {
      await findSession(orgId, sessionId);
      const removed = await db.transaction().execute(async (trx) => {
        const now = clock.now();
        await lockOwnSession(trx, orgId, sessionId, now);
        return removeLogItem(trx, { orgId, sessionId, now }, itemId);
      });
      if (!removed) {
        const listed = (await allItems(orgId, sessionId)).find((item) => item.id === itemId);
        if (listed === undefined) throw notFound('item', itemId);
        throw new AppError(
          'validation_error',
          `item_id ${itemId} is an ${listed.type} item, which goes with its mcp_call: delete that one`,
          { param: 'item_id' },
        );
      }
      return view(await findSession(orgId, sessionId));
    },

    /**
     * Adds items without running the agent. Strict mode: client function_call_output items only; an identical
     * retry returns the stored item, a different output is 409 function_call_output_conflict, an unknown call_id
     * is 400 on `items[i].call_id`, and a turn whose calls all have outputs ends completed. Compatibility mode
     * also stores messages and calls as history of the next turn.
     */
    async addItems(orgId: string, sessionId: string, items: unknown, compat: boolean): Promise<ConversationItemList> {
      const parsed = parseConversationItems(items, compat, MAX_ITEMS);
      if (parsed.length === 0)
        throw new AppError('validation_error', 'items must hold at least one item', { param: 'items' });
      await findSession(orgId, sessionId);
      const outputsOnly = parsed.every((item) => item?.kind === 'output');
      if (!outputsOnly) return listOf(await store(orgId, sessionId, parsed), false);
      const outputs = parsed.flatMap((item) =>
        item?.kind === 'output' ? [{ callId: item.callId, output: item.output }] : [],
      );
      let stored: Awaited<ReturnType<MessageService['recordClientOutputs']>>;
      try {
        stored = await deps.messages.recordClientOutputs(orgId, sessionId, outputs, 'persist');
      } catch (error) {
        throw forItemsRoute(error, sessionId);
      }
      return listOf(toOpenAIItems(stored), false);
    },
  };
}

/** A page of `items` in `order`, after the item `after` (400 when it is not one of them). */
export function pageOf(items: ConversationOpenAIItem[], page: ItemPage): ConversationItemList {
  const ordered = page.order === 'desc' ? [...items].reverse() : items;
  let start = 0;
  if (page.after !== undefined) {
    const index = ordered.findIndex((item) => item.id === page.after);
    if (index === -1) {
      throw new AppError('validation_error', `after must name an item of this list; ${page.after} is not one`, {
        param: 'after',
      });
    }
    start = index + 1;
  }
  const data = ordered.slice(start, start + page.limit);
  return listOf(data, start + page.limit < ordered.length);
}

export type ConversationService = ReturnType<typeof createConversationService>;
