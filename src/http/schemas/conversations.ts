import { Type } from 'typebox';
import { StringEnum } from './common.ts';

const UUID_PATTERN = '[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}';

const ConversationId = Type.String({
  pattern: `^conv_${UUID_PATTERN}$`,
  description: 'conv_ + the session id',
});
const ItemId = Type.String({ minLength: 1, maxLength: 200, description: 'An item id from the item list' });

export const ConversationParams = Type.Object({ conversation_id: ConversationId });
export const ConversationItemParams = Type.Object({ conversation_id: ConversationId, item_id: ItemId });

export const Conversation = Type.Object(
  {
    id: Type.String({ description: 'conv_ + the session id' }),
    object: Type.Literal('conversation'),
    created_at: Type.Integer({ description: 'Unix time in seconds (when the session was created)' }),
    metadata: Type.Record(Type.String(), Type.String(), {
      description: 'Set on create or with POST /v1/conversations/{id}',
    }),
  },
  { additionalProperties: false },
);

export const Metadata = Type.Record(Type.String({ maxLength: 64 }), Type.String({ maxLength: 512 }), {
  maxProperties: 16,
  description: 'Up to 16 string values (keys ≤ 64, values ≤ 512 characters)',
});

/** Checked by the domain parser (conversation-items.ts), which words its errors per mode. */
const ItemInput = Type.Unsafe<unknown>({
  type: 'object',
  description:
    'Strict mode: {type: "function_call_output", call_id, output}. OpenAI compatibility mode also: {type?: "message", role: "user" | "assistant", content: string | [input_text | output_text]}, {type: "function_call", call_id, name, arguments}, {type: "mcp_call", name, arguments, output, error}; reasoning, mcp_list_tools and item_reference items are accepted and skipped.',
});

export const ConversationCreateBody = Type.Object(
  {
    items: Type.Optional(Type.Array(ItemInput, { maxItems: 64, description: 'Items that start the log' })),
    metadata: Type.Optional(Metadata),
    agent: Type.Optional(
      Type.String({
        format: 'uuid',
        description: 'Extension: the agent of the conversation; without it the first Response on it fixes the agent',
      }),
    ),
  },
  { additionalProperties: false },
);

export const ConversationUpdateBody = Type.Object({ metadata: Metadata }, { additionalProperties: false });

export const ConversationDeleted = Type.Object(
  {
    id: Type.String(),
    object: Type.Literal('conversation.deleted'),
    deleted: Type.Literal(true),
  },
  { additionalProperties: false },
);

const UserMessage = Type.Object(
  {
    id: Type.String(),
    type: Type.Literal('message'),
    role: Type.Literal('user'),
    status: Type.Literal('completed'),
    content: Type.Array(Type.Object({ type: Type.Literal('input_text'), text: Type.String() })),
  },
  { description: 'User input' },
);

const AssistantMessage = Type.Object(
  {
    id: Type.String(),
    type: Type.Literal('message'),
    role: Type.Literal('assistant'),
    status: StringEnum(['completed', 'in_progress', 'incomplete'] as const),
    content: Type.Array(
      Type.Object({
        type: Type.Literal('output_text'),
        text: Type.String(),
        annotations: Type.Array(Type.Unknown(), { maxItems: 0 }),
        logprobs: Type.Array(Type.Unknown(), { maxItems: 0 }),
      }),
    ),
  },
  { description: 'Text the agent produced in one step' },
);

const FunctionCall = Type.Object(
  {
    id: Type.String(),
    type: Type.Literal('function_call'),
    call_id: Type.String(),
    name: Type.String(),
    arguments: Type.String({ description: 'JSON text' }),
    status: Type.Literal('completed'),
  },
  { description: 'A call the caller (a client tool) or a person (ask_user_question) answers' },
);

const FunctionCallOutput = Type.Object(
  {
    id: Type.String(),
    type: Type.Literal('function_call_output'),
    call_id: Type.String(),
    output: Type.String(),
    status: Type.Literal('completed'),
  },
  { description: 'The output of a function_call' },
);

const McpCall = Type.Object(
  {
    id: Type.String(),
    type: Type.Literal('mcp_call'),
    server_label: Type.String({ description: 'The MCP server: its agent-local or connector name, or agentry' }),
    name: Type.String(),
    arguments: Type.String({ description: 'JSON text' }),
    output: Type.Union([Type.String(), Type.Null()]),
    error: Type.Union([Type.String(), Type.Null()], { description: 'The error text when the call failed' }),
    status: StringEnum(['in_progress', 'completed', 'failed'] as const),
    approval_request_id: Type.Union([Type.String(), Type.Null()], {
      description: 'The mcp_approval_request that allowed the call, when it needed approval',
    }),
  },
  { description: 'A call the service ran itself, with its output' },
);

const McpApprovalRequest = Type.Object(
  {
    id: Type.String({ description: 'mcpr_…: answer it with an mcp_approval_response naming this id' }),
    type: Type.Literal('mcp_approval_request'),
    server_label: Type.String(),
    name: Type.String(),
    arguments: Type.String({ description: 'JSON text: exactly what runs once approved' }),
  },
  { description: "A server tool call waiting for approval (the agent's toolApprovals policy)" },
);

const McpApprovalResponse = Type.Object(
  {
    id: Type.String(),
    type: Type.Literal('mcp_approval_response'),
    approval_request_id: Type.String(),
    approve: Type.Boolean(),
    reason: Type.Union([Type.String(), Type.Null()]),
  },
  { description: 'The decision on an mcp_approval_request' },
);

const McpListTools = Type.Object(
  {
    id: Type.String(),
    type: Type.Literal('mcp_list_tools'),
    server_label: Type.String(),
    tools: Type.Array(
      Type.Object({
        name: Type.String(),
        description: Type.Optional(Type.String({ description: 'Left out when the tool has none' })),
        input_schema: Type.Record(Type.String(), Type.Unknown()),
      }),
    ),
    error: Type.Optional(Type.String({ description: 'Left out when the tools were listed' })),
  },
  { description: "An MCP server's tools, recorded when the conversation first used them" },
);

export const CompactionItem = Type.Object(
  {
    id: Type.String(),
    type: Type.Literal('compaction'),
    encrypted_content: Type.String({
      description: 'The summary as plain text: not encrypted on a self-hosted deployment (docs/context.md)',
    }),
    summary: Type.String({ description: 'Extension field: the summary of the older conversation' }),
    created_by: Type.Literal('agentry'),
  },
  {
    description:
      'The older part of the conversation summarised by the compaction policy: the model reads the summary in place of the items before it',
  },
);

export const ConversationItem = Type.Union(
  [
    CompactionItem,
    UserMessage,
    AssistantMessage,
    FunctionCall,
    FunctionCallOutput,
    McpCall,
    McpListTools,
    McpApprovalRequest,
    McpApprovalResponse,
  ],
  {
    description: 'A conversation item in OpenAI shape',
  },
);

const listOf = <T extends Parameters<typeof Type.Array>[0]>(item: T, description: string) =>
  Type.Object(
    {
      object: Type.Literal('list'),
      data: Type.Array(item),
      first_id: Type.Union([Type.String(), Type.Null()], {
        description: 'Id of the first item of data (null if empty)',
      }),
      last_id: Type.Union([Type.String(), Type.Null()], {
        description: 'Id of the last item of data (null if empty); pass it as after for the next page',
      }),
      has_more: Type.Boolean(),
    },
    { description },
  );

export const ConversationItemList = listOf(ConversationItem, 'A page of conversation items');
export const CreatedItemList = listOf(ConversationItem, 'The stored items, in request order');

export const ItemListQuery = Type.Object(
  {
    limit: Type.Integer({ minimum: 1, maximum: 100, default: 20 }),
    order: Type.Unsafe<'asc' | 'desc'>({
      type: 'string',
      enum: ['asc', 'desc'],
      default: 'desc',
      description: 'asc: log order (oldest first); desc: newest first',
    }),
    after: Type.Optional(
      Type.String({ minLength: 1, maxLength: 200, description: 'An item id: list the items after it in this order' }),
    ),
    include: Type.Optional(
      Type.Array(Type.String({ maxLength: 200 }), { maxItems: 32, description: 'Accepted and ignored' }),
    ),
  },
  { additionalProperties: false },
);

export const AddItemsBody = Type.Object(
  { items: Type.Array(ItemInput, { minItems: 1, maxItems: 64 }) },
  { additionalProperties: false },
);
