/**
 * Conversations (OpenAI's Conversations API over our Sessions): a Conversation is a Session (`conv_` + the session
 * id) and its items are the session's conversation log in OpenAI item shapes. Items can be added only as
 * function_call_output items for client calls: they are persisted without running the agent.
 */
import { AppError, notFound } from '../../errors/app-error.ts';
import { unixSeconds } from '../../lib/clock.ts';
import type { Executor } from '../../storage/db.ts';
import { loadContextItems } from '../messages/items.ts';
import type { MessageService } from '../messages/message-service.ts';
import { conversationIdOf } from '../sessions/session-service.ts';
import { type OpenAIItem, toOpenAIItems } from './openai-items.ts';

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

export type FunctionCallOutputItem = Extract<OpenAIItem, { type: 'function_call_output' }>;

export interface ConversationItemList<T extends OpenAIItem = OpenAIItem> {
  object: 'list';
  data: T[];
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
  messages: Pick<MessageService, 'recordClientOutputs'>;
}

/** Every message seq fits Postgres `integer`; MAX_SAFE_INTEGER would not. */
const ALL_MESSAGES = 2_147_483_647;

function listOf<T extends OpenAIItem>(data: T[], hasMore: boolean): ConversationItemList<T> {
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
  const { db } = deps;

  async function findSession(orgId: string, sessionId: string) {
    const row = await db
      .selectFrom('sessions')
      .select(['id', 'created_at'])
      .where('id', '=', sessionId)
      .where('org_id', '=', orgId)
      .executeTakeFirst();
    if (row === undefined) throw notFound('conversation', conversationIdOf(sessionId));
    return row;
  }

  /** The whole log in OpenAI shapes, in log order (server-call outputs fold into their mcp_call items). */
  async function allItems(orgId: string, sessionId: string): Promise<OpenAIItem[]> {
    await findSession(orgId, sessionId);
    return toOpenAIItems(await loadContextItems(db, sessionId, ALL_MESSAGES));
  }

  return {
    async get(orgId: string, sessionId: string): Promise<Conversation> {
      const row = await findSession(orgId, sessionId);
      return {
        id: conversationIdOf(row.id),
        object: 'conversation',
        created_at: unixSeconds(row.created_at),
        metadata: {},
      };
    },

    /** One page of items in `order`; `after` must name an item of this conversation's list. */
    async listItems(orgId: string, sessionId: string, page: ItemPage): Promise<ConversationItemList> {
      const items = await allItems(orgId, sessionId);
      if (page.order === 'desc') items.reverse();
      let start = 0;
      if (page.after !== undefined) {
        const index = items.findIndex((item) => item.id === page.after);
        if (index === -1) {
          throw new AppError(
            'validation_error',
            `after must name an item of this conversation; ${page.after} is not one`,
            {
              param: 'after',
            },
          );
        }
        start = index + 1;
      }
      const data = items.slice(start, start + page.limit);
      return listOf(data, start + page.limit < items.length);
    },

    async getItem(orgId: string, sessionId: string, itemId: string): Promise<OpenAIItem> {
      const item = (await allItems(orgId, sessionId)).find((candidate) => candidate.id === itemId);
      if (item === undefined) throw notFound('item', itemId);
      return item;
    },

    /**
     * Persists client function_call_output items without running the agent: an identical retry returns the stored
     * item, a different output is 409 function_call_output_conflict, an unknown call_id is 400 on
     * `items[i].call_id`. A turn whose calls all have outputs ends completed.
     */
    async addOutputs(
      orgId: string,
      sessionId: string,
      outputs: FunctionCallOutputInput[],
    ): Promise<ConversationItemList<FunctionCallOutputItem>> {
      let stored: Awaited<ReturnType<MessageService['recordClientOutputs']>>;
      try {
        stored = await deps.messages.recordClientOutputs(orgId, sessionId, outputs, 'persist');
      } catch (error) {
        throw forItemsRoute(error, sessionId);
      }
      const data: FunctionCallOutputItem[] = stored.map((item) => ({
        id: item.id,
        type: 'function_call_output',
        call_id: item.callId ?? '',
        output: item.content.type === 'function_call_output' ? item.content.output : '',
        status: 'completed',
      }));
      return listOf(data, false);
    },
  };
}

export type ConversationService = ReturnType<typeof createConversationService>;
