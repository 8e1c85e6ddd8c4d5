import type { Deps } from '../../deps.ts';
import { createConversationService, sessionIdOfConversation } from '../../domain/responses/conversations.ts';
import { validationError } from '../../errors/app-error.ts';
import { orgOf } from '../auth.ts';
import { noClientRetry } from '../no-retry.ts';
import { errorResponses } from '../schemas/common.ts';
import {
  AddItemsBody,
  Conversation,
  ConversationItem,
  ConversationItemList,
  ConversationItemParams,
  ConversationParams,
  CreatedItemList,
  ItemListQuery,
} from '../schemas/conversations.ts';
import type { App } from '../types.ts';

const tags = ['Conversations'];

/**
 * Only function_call_output items can be added. Checking `type` before schema validation names it for an item of
 * another kind (a message has no call_id, which the schema would report first).
 */
function checkItemTypesFirst(request: { body: unknown }): void {
  const body = request.body;
  if (typeof body !== 'object' || body === null || !('items' in body) || !Array.isArray(body.items)) return;
  for (const [index, item] of body.items.entries()) {
    if (typeof item !== 'object' || item === null || !('type' in item)) continue;
    if (item.type !== 'function_call_output') {
      throw validationError(
        `items[${index}].type`,
        `items[${index}].type must be "function_call_output": only function call outputs can be added to a conversation`,
      );
    }
  }
}

export function conversationRoutes(app: App, deps: Deps): void {
  const conversations = createConversationService({ db: deps.storage.db, messages: deps.messages });

  app.route({
    method: 'GET',
    url: '/v1/conversations/:conversation_id',
    config: { scopes: ['tasks:read'] },
    schema: {
      summary: 'Get a conversation',
      description: 'The Conversation of a Session (conv_ + the session id).',
      tags,
      params: ConversationParams,
      response: { 200: Conversation, ...errorResponses(400, 401, 403, 404) },
    },
    handler: async (request) =>
      conversations.get(orgOf(request), sessionIdOfConversation(request.params.conversation_id)),
  });

  app.route({
    method: 'GET',
    url: '/v1/conversations/:conversation_id/items',
    config: { scopes: ['tasks:read'] },
    schema: {
      summary: 'List conversation items',
      description:
        'Every item of the conversation log: user messages, assistant messages, function calls and their outputs, and calls the service ran itself as mcp_call items (their outputs inside). Newest first by default (order=asc for log order); page with after = the last_id of the previous page while has_more is true.',
      tags,
      params: ConversationParams,
      querystring: ItemListQuery,
      response: { 200: ConversationItemList, ...errorResponses(400, 401, 403, 404) },
    },
    handler: async (request) => {
      const { limit, order, after } = request.query;
      return conversations.listItems(
        orgOf(request),
        sessionIdOfConversation(request.params.conversation_id),
        after === undefined ? { limit, order } : { limit, order, after },
      );
    },
  });

  app.route({
    method: 'GET',
    url: '/v1/conversations/:conversation_id/items/:item_id',
    config: { scopes: ['tasks:read'] },
    schema: {
      summary: 'Get a conversation item',
      description: 'One item of the item list, by its id.',
      tags,
      params: ConversationItemParams,
      response: { 200: ConversationItem, ...errorResponses(400, 401, 403, 404) },
    },
    handler: async (request) =>
      conversations.getItem(
        orgOf(request),
        sessionIdOfConversation(request.params.conversation_id),
        request.params.item_id,
      ),
  });

  app.route({
    method: 'POST',
    url: '/v1/conversations/:conversation_id/items',
    config: { scopes: ['tasks:write'] },
    schema: {
      summary: 'Add function call outputs',
      description:
        'Persists outputs of client function calls without creating a Response, starting a run or invoking the model. Each call_id must name a client function_call of this conversation (400 on items[i].call_id otherwise). An identical retry returns the same stored item; a different output for a recorded call_id is 409 function_call_output_conflict. When every pending call of a turn has its output, the turn ends completed with the text it produced so far, and the conversation accepts new input. Returns the stored items in request order.',
      tags,
      params: ConversationParams,
      body: AddItemsBody,
      response: { 200: CreatedItemList, ...errorResponses(400, 401, 403, 404, 409, 413) },
    },
    preValidation: async (request) => checkItemTypesFirst(request),
    onSend: noClientRetry,
    handler: async (request) =>
      conversations.addOutputs(
        orgOf(request),
        sessionIdOfConversation(request.params.conversation_id),
        request.body.items.map((item) => ({ callId: item.call_id, output: item.output })),
      ),
  });
}
