/**
 * The Conversations API over Sessions: create (optionally without an agent), read, update metadata, delete, and
 * the item log (list, get, add, delete). Strict mode keeps the spec's rules for adding items; compatibility mode
 * (the default, see client-mode.ts) accepts what OpenAI's Conversations API accepts.
 */
import type { Deps } from '../../deps.ts';
import { sessionIdOfConversation } from '../../domain/responses/conversations.ts';
import { orgOf } from '../auth.ts';
import { ignoreEmptyJsonBody } from '../bodiless.ts';
import { compatModeOf } from '../client-mode.ts';
import { noClientRetry } from '../no-retry.ts';
import { errorResponses } from '../schemas/common.ts';
import {
  AddItemsBody,
  Conversation,
  ConversationCreateBody,
  ConversationDeleted,
  ConversationItem,
  ConversationItemList,
  ConversationItemParams,
  ConversationParams,
  ConversationUpdateBody,
  CreatedItemList,
  ItemListQuery,
} from '../schemas/conversations.ts';
import type { App } from '../types.ts';

const tags = ['Conversations'];

export function conversationRoutes(app: App, deps: Deps): void {
  const { conversations } = deps;

  app.route({
    method: 'POST',
    url: '/v1/conversations',
    config: { scopes: ['sessions:write'] },
    schema: {
      summary: 'Create a conversation',
      description:
        'Creates a Conversation (a Session). Without the `agent` extension field it has no agent until its first Response, whose `model` fixes it. `items` (user and assistant messages, function calls and their outputs) start its log without running anything.',
      tags,
      body: ConversationCreateBody,
      response: { 200: Conversation, ...errorResponses(400, 401, 403, 404, 413) },
    },
    handler: async (request) => {
      const { items, metadata, agent } = request.body;
      return conversations.create(orgOf(request), {
        ...(items === undefined ? {} : { items }),
        ...(metadata === undefined ? {} : { metadata }),
        ...(agent === undefined ? {} : { agentId: agent }),
      });
    },
  });

  app.route({
    method: 'GET',
    url: '/v1/conversations/:conversation_id',
    config: { scopes: ['sessions:read'] },
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
    method: 'POST',
    url: '/v1/conversations/:conversation_id',
    config: { scopes: ['sessions:write'] },
    schema: {
      summary: 'Update a conversation',
      description: "Replaces the Conversation's metadata.",
      tags,
      params: ConversationParams,
      body: ConversationUpdateBody,
      response: { 200: Conversation, ...errorResponses(400, 401, 403, 404) },
    },
    handler: async (request) =>
      conversations.update(
        orgOf(request),
        sessionIdOfConversation(request.params.conversation_id),
        request.body.metadata,
      ),
  });

  app.route({
    method: 'DELETE',
    url: '/v1/conversations/:conversation_id',
    config: { scopes: ['sessions:write'] },
    schema: {
      summary: 'Delete a conversation',
      description: 'Deletes the Conversation and its Session, cancelling its unfinished turns first.',
      tags,
      params: ConversationParams,
      response: { 200: ConversationDeleted, ...errorResponses(400, 401, 403, 404) },
    },
    onRequest: ignoreEmptyJsonBody,
    handler: async (request) =>
      conversations.delete(orgOf(request), sessionIdOfConversation(request.params.conversation_id)),
  });

  app.route({
    method: 'GET',
    url: '/v1/conversations/:conversation_id/items',
    config: { scopes: ['sessions:read'] },
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
    config: { scopes: ['sessions:read'] },
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
    method: 'DELETE',
    url: '/v1/conversations/:conversation_id/items/:item_id',
    config: { scopes: ['sessions:write'] },
    schema: {
      summary: 'Delete a conversation item',
      description:
        'Removes an item from the conversation log, so later Responses no longer see it, and returns the Conversation. A call goes together with its output (and the decision on its approval): deleting either removes both. An mcp_approval_request is removed with its mcp_call. 409 conversation_busy while a Response of the conversation is unfinished (queued, running or waiting for tool outputs).',
      tags,
      params: ConversationItemParams,
      response: { 200: Conversation, ...errorResponses(400, 401, 403, 404, 409) },
    },
    onRequest: ignoreEmptyJsonBody,
    handler: async (request) =>
      conversations.deleteItem(
        orgOf(request),
        sessionIdOfConversation(request.params.conversation_id),
        request.params.item_id,
      ),
  });

  app.route({
    method: 'POST',
    url: '/v1/conversations/:conversation_id/items',
    config: { scopes: ['sessions:write'] },
    schema: {
      summary: 'Add conversation items',
      description:
        'Persists items without creating a Response, starting a run or invoking the model. Strict mode takes outputs of client function calls only: each call_id must name a client function_call of this conversation (400 on items[i].call_id otherwise); an identical retry returns the same stored item; a different output for a recorded call_id is 409 function_call_output_conflict; when every pending call of a turn has its output, the turn ends completed with the text it produced so far. OpenAI compatibility mode also stores user and assistant messages, function calls with their outputs, and mcp_call items, as history of the next turn. Returns the stored items in request order.',
      tags,
      params: ConversationParams,
      body: AddItemsBody,
      response: { 200: CreatedItemList, ...errorResponses(400, 401, 403, 404, 409, 413) },
    },
    onSend: noClientRetry,
    handler: async (request) =>
      conversations.addItems(
        orgOf(request),
        sessionIdOfConversation(request.params.conversation_id),
        request.body.items,
        compatModeOf(request, deps.config.responsesCompat) === 'openai',
      ),
  });
}
