import { type Static, Type } from 'typebox';
import { MAX_MESSAGE_ATTACHMENTS } from '../../domain/turns/message-parts.ts';
import { MESSAGE_STATUSES } from '../../domain/turns/message-types.ts';
import { MAX_WAIT_SECONDS } from '../../domain/turns/message-wait.ts';
import { ELICITATION_MODES } from '../../events/session-values.ts';
import { OffsetPagination, StringEnum, Uuid } from './common.ts';
import { outputFormatSchema } from './output-format.ts';
import { raw } from './raw-schema.ts';

const TextPart = Type.Object({ type: Type.Literal('text'), text: Type.String() }, { additionalProperties: false });

const FileId = Type.String({ format: 'uuid', description: 'A file of the organization (POST /v1/files)' });

const TextInputPart = Type.Object(
  { type: Type.Literal('text'), text: Type.String({ minLength: 1, maxLength: 100_000 }) },
  { additionalProperties: false, title: 'Text part', description: 'Text parts are joined with newlines' },
);
const ImageInputPart = Type.Object(
  {
    type: Type.Literal('image'),
    fileId: FileId,
    detail: Type.Optional(
      StringEnum(['auto', 'low', 'high', 'original'] as const, 'How closely the model looks (where it supports it)'),
    ),
  },
  { additionalProperties: false, title: 'Image part', description: 'An image file (PNG, JPEG, GIF, WebP)' },
);
const FileInputPart = Type.Object(
  { type: Type.Literal('file'), fileId: FileId },
  {
    additionalProperties: false,
    title: 'File part',
    description: 'A text file (its content given to the model as text) or an image (given as an image)',
  },
);

/** A part filled in by an MCP server's prompt (`prompts/get`) when the message is accepted (docs/mcp-auth.md). */
const McpPromptPartIn = Type.Object(
  {
    type: Type.Literal('mcp_prompt'),
    server: Type.String({ minLength: 1, maxLength: 200, description: "The MCP server's label on the agent" }),
    name: Type.String({
      minLength: 1,
      maxLength: 1000,
      description: 'The prompt, as GET /v1/mcp_servers/{id}/prompts lists it',
    }),
    arguments: Type.Optional(
      Type.Record(Type.String({ maxLength: 200 }), Type.String({ maxLength: 100_000 }), {
        maxProperties: 64,
        description: "The prompt's arguments (strings, as MCP defines them)",
      }),
    ),
  },
  { additionalProperties: false, title: 'MCP prompt part' },
);

const McpPromptPart = Type.Object(
  {
    type: Type.Literal('mcp_prompt'),
    server: Type.String(),
    name: Type.String(),
    arguments: Type.Record(Type.String(), Type.String()),
    text: Type.String({ description: 'What the prompt expanded to: the text the model read' }),
    fileIds: Type.Optional(Type.Array(Type.String(), { description: "Files the prompt's images were stored as" })),
  },
  { additionalProperties: false, description: 'A part filled in by an MCP prompt, as sent and as expanded' },
);

/** The kinds of part a message takes; `type` selects one, so a failure names the field of that kind. */
const INPUT_PARTS = [TextInputPart, ImageInputPart, FileInputPart, McpPromptPartIn];

const MessageInputPart = raw<Static<(typeof INPUT_PARTS)[number]>>({
  type: 'object',
  required: ['type'],
  discriminator: { propertyName: 'type' },
  oneOf: INPUT_PARTS,
});

export const MessageCreateBody = Type.Object(
  {
    parts: Type.Array(MessageInputPart, {
      minItems: 1,
      maxItems: 32,
      description: `The text parts joined with newlines into one prompt; image and file parts (extension, at most ${MAX_MESSAGE_ATTACHMENTS}) attach files the model reads with it; mcp_prompt parts (extension) are filled in by an MCP server's prompt`,
    }),
    outputFormat: Type.Optional(
      outputFormatSchema(
        false,
        'Extension field: the structure of the reply; the final reply is checked against it (a mismatch fails the message with invalid_output). Absent: the agent\'s outputFormat; {"type":"text"}: free text',
      ),
    ),
  },
  { additionalProperties: false },
);

const AttachmentPart = Type.Object(
  {
    type: StringEnum(['image', 'file'] as const, 'How the model reads the file: as an image, or as text'),
    fileId: Uuid,
    filename: Type.String({ description: 'Its name when it was attached' }),
    detail: Type.Optional(Type.String()),
  },
  { title: 'Attachment part', description: 'A file attached to the message (extension)' },
);

const RequiredAction = Type.Union([
  Type.Object({
    type: Type.Literal('ask_user_question'),
    actionId: Type.Integer(),
    question: Type.String(),
    options: Type.Union([Type.Array(Type.Unknown()), Type.Null()]),
  }),
  Type.Object({
    type: Type.Literal('function_call'),
    callId: Type.String(),
    name: Type.String(),
    arguments: Type.String(),
  }),
  Type.Object(
    {
      type: Type.Literal('tool_approval'),
      actionId: Type.Integer({ description: 'Send it to the answer route with {approved, reason?}' }),
      callId: Type.String(),
      tool: Type.String({ description: 'The tool as the agent called it (its exposed name)' }),
      server: Type.String({ description: 'The server label: the MCP server, or agentry for built-in tools' }),
      serverTool: Type.String({ description: "The tool's own name at its server" }),
      arguments: Type.String({ description: 'The arguments (JSON text) exactly as they run once approved' }),
      approvalId: Type.String({ description: 'mcpr_…: the approval_request_id of the Responses surface' }),
      expiresAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
        description: 'When the call is denied unless decided before; null: it waits',
      }),
    },
    { description: 'A server tool call waiting for approval (extension; docs/tools.md "Approvals")' },
  ),
  Type.Object(
    {
      type: Type.Literal('mcp_elicitation'),
      actionId: Type.Integer({
        description:
          'Send it to the answer route with {action: "accept", content} (form), {action: "accept"} (url), or {action: "decline"|"cancel"}',
      }),
      callId: Type.String({ description: 'The tool call during which the server asked' }),
      tool: Type.String({ description: 'The tool as the agent called it (its exposed name)' }),
      server: Type.String({ description: 'The MCP server label' }),
      elicitationId: Type.String({ description: 'elic_…: the id of the request on the Responses surface' }),
      mode: StringEnum(
        ELICITATION_MODES,
        'form: answer with data fitting requestedSchema; url: open url, then accept or decline',
      ),
      message: Type.String({ description: "The server's message to the person" }),
      requestedSchema: Type.Union([Type.Record(Type.String(), Type.Unknown()), Type.Null()], {
        description: 'form mode: the JSON Schema (flat object of primitive fields) the content must fit',
      }),
      url: Type.Union([Type.String(), Type.Null()], { description: 'url mode: the page to open' }),
    },
    { description: 'An MCP server asked for input during a tool call (docs/mcp-auth.md "Elicitation")' },
  ),
]);

const messageFields = {
  id: Uuid,
  object: Type.Literal('message'),
  sessionId: Uuid,
  status: StringEnum(MESSAGE_STATUSES),
  parts: Type.Array(Type.Union([TextPart, McpPromptPart, AttachmentPart]), {
    description:
      'The text parts joined with newlines and the prompt parts, in the order sent, then the attached files in the order sent',
  }),
  response: Type.Union([Type.Object({ parts: Type.Array(TextPart) }), Type.Null()]),
  error: Type.Union([Type.Object({ code: Type.String(), message: Type.String() }), Type.Null()]),
  requiredActions: Type.Array(RequiredAction, {
    description: 'Unresolved questions, client tool calls and tool calls waiting for approval',
  }),
  usage: Type.Object({ inputTokens: Type.Integer(), outputTokens: Type.Integer(), totalTokens: Type.Integer() }),
  runId: Uuid,
  warnings: Type.Array(
    Type.Object({
      code: Type.String(),
      message: Type.String(),
      callId: Type.Optional(Type.String({ description: 'The tool call the warning is about' })),
      tool: Type.Optional(Type.String({ description: "That call's tool, as the agent called it" })),
    }),
    {
      description:
        'Non-fatal notes: what the acceptance noted (a configured tool this deployment cannot run: tool_unavailable, …), then the tool calls the turn gave up without failing (tool_call_abandoned: restarts of the service interrupted the call twice)',
    },
  ),
  createdAt: Type.String({ format: 'date-time' }),
  startedAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  completedAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
};

export const Message = Type.Object(messageFields);
export const MessageEnvelope = Type.Object({ message: Message });
/** The submission's answer: the Message, whose warnings are then those of this acceptance. */
export const AcceptedMessage = Message;
export const MessageList = Type.Object({
  data: Type.Array(Message),
  total: Type.Integer(),
  limit: Type.Integer(),
  offset: Type.Integer(),
});
export const MessageListQuery = Type.Object(OffsetPagination, { additionalProperties: false });
export const SessionMessageParams = Type.Object({ id: Uuid, messageId: Uuid });
export const MessageGetQuery = Type.Object(
  {
    wait: Type.Optional(
      Type.Number({
        minimum: 0,
        maximum: MAX_WAIT_SECONDS,
        default: 0,
        description: `Long-poll (an extension): wait up to this many seconds (0-${MAX_WAIT_SECONDS}, fractions allowed) for the message to be terminal or require action, then answer as without it. 0 answers at once.`,
      }),
    ),
  },
  { additionalProperties: false },
);

export const AnswerBody = Type.Object(
  {
    actionId: Type.Integer({ minimum: 0 }),
    answer: Type.Unknown({
      description:
        'For a question: any JSON value, including null, passed to the agent unchanged. For a tool_approval: {approved: boolean, reason?: string (at most 2000 characters)}',
    }),
  },
  { additionalProperties: false, required: ['actionId', 'answer'] },
);
export const AnswerResult = Type.Object({
  messageId: Uuid,
  actionId: Type.Integer(),
  status: StringEnum(['accepted', 'resuming'] as const),
});
export const InterruptResult = Type.Object({ status: StringEnum(['interrupting', 'no_turn'] as const) });

export const RequiredIdempotencyHeaders = Type.Object({
  'idempotency-key': Type.String({
    minLength: 1,
    maxLength: 255,
    pattern: '^[\\x21-\\x7E]+$',
    description: 'Required: makes the submission safe to retry (scoped to the organization and session).',
  }),
});
