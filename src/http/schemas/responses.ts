/**
 * The body of POST /v1/responses, declared once for both modes: what validates a request and what the OpenAPI
 * document shows are these schemas (responses-body.ts picks one by the request's mode). Strict mode is spec 4.1
 * exactly; OpenAI compatibility mode adds what OpenAI clients send and tolerates fields OpenAI adds over time. An
 * `input` item or content part is told apart by its `type` (if/then chains, so a failure names the field inside the
 * item, not "matches no branch"). The rules no schema says (counts by item kind, fields that need each other) are
 * in domain/responses/response-request.ts.
 */
import { Type } from 'typebox';
import { MAX_REASON_CHARS } from '../../domain/approvals/approvals.ts';
import { INCLUDABLE } from '../../domain/responses/response-settings.ts';
import { outputFormatSchema } from './output-format.ts';
import { nullable, object, raw, type Schema } from './raw-schema.ts';

const UUID = '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$';
const CONVERSATION_ID = `^conv_${UUID.slice(1)}`;
const RESPONSE_ID = `^resp_${UUID.slice(1)}`;
const MAX_TEXT = 100_000;

/** A raw JSON Schema (if/then chains, type arrays), typed as what it accepts. */
const text = (max = MAX_TEXT, description?: string) =>
  Type.String({ minLength: 1, maxLength: max, ...(description === undefined ? {} : { description }) });
const typed = (type: string) => ({ type: 'object', required: ['type'], properties: { type: { const: type } } });

/** `if type is <first> then <schema> else …`, ending with `otherwise`. */
function byType(cases: [string | string[], Schema][], otherwise: Schema): Schema {
  return cases.reduceRight<Schema>(
    (rest, [type, then]) => ({
      if: Array.isArray(type)
        ? { type: 'object', required: ['type'], properties: { type: { enum: type } } }
        : typed(type),
      then,
      else: rest,
    }),
    otherwise,
  );
}

const DETAIL = { type: ['string', 'null'], enum: ['auto', 'low', 'high', 'original', null] };
const FILE_ID = { type: 'string', format: 'uuid', description: 'A file id (POST /v1/files)' };

function contentParts(compat: boolean): Schema {
  // Compatibility mode takes the annotations and logprobs clients echo from listed items.
  const echoedText = compat ? { annotations: {}, logprobs: {} } : {};
  const inputText = object({ type: { const: 'input_text' }, text: text(), ...echoedText }, ['type', 'text'], false);
  const outputText = object(
    { type: { const: 'output_text' }, text: text(), annotations: {}, logprobs: {} },
    ['type', 'text'],
    false,
  );
  const file = object({ type: { const: 'input_file' }, file_id: FILE_ID }, ['type', 'file_id'], false);
  const image = object(
    { type: { const: 'input_image' }, file_id: FILE_ID, detail: DETAIL },
    ['type', 'file_id'],
    false,
  );
  const imageUrl = object(
    {
      type: { const: 'input_image' },
      image_url: {
        type: 'string',
        minLength: 1,
        description: 'A data: URL (base64) or an https URL of a PNG, JPEG, GIF or WebP image',
      },
      detail: DETAIL,
      file_id: {},
    },
    ['type', 'image_url'],
    false,
  );
  const hasUrl = { type: 'object', required: ['type', 'image_url'], properties: { type: { const: 'input_image' } } };
  const part = byType(
    compat
      ? [
          ['input_text', inputText],
          ['output_text', outputText],
          ['input_file', file],
        ]
      : [
          ['input_text', inputText],
          ['input_file', file],
        ],
    {
      // An image by URL (compatibility mode; in strict mode its image_url is refused), else by file id.
      if: hasUrl,
      // biome-ignore lint/suspicious/noThenProperty: a JSON Schema keyword
      then: compat ? imageUrl : { properties: { image_url: false } },
      else: {
        if: typed('input_image'),
        // biome-ignore lint/suspicious/noThenProperty: a JSON Schema keyword
        then: compat ? { if: { required: ['file_id'] }, then: image, else: imageUrl } : image,
        else: {
          type: 'object',
          required: ['type'],
          properties: { type: { enum: ['input_text', 'input_file', 'input_image'] } },
        },
      },
    },
  );
  return {
    if: { type: 'string' },
    // biome-ignore lint/suspicious/noThenProperty: a JSON Schema keyword
    then: { minLength: 1, maxLength: MAX_TEXT },
    else: { type: 'array', minItems: 1, maxItems: 32, items: part },
    description: `A string (1-${MAX_TEXT} characters) or 1-32 content parts`,
  };
}

/** An item with an unknown type is refused naming its type; one without a type is a message. */
const otherType = (types: string[], message: Schema): Schema => ({
  if: { type: 'object', required: ['type'] },
  // biome-ignore lint/suspicious/noThenProperty: a JSON Schema keyword
  then: { properties: { type: { enum: types } } },
  else: message,
});

function inputItems(compat: boolean): Schema {
  const roles = compat ? ['user', 'assistant', 'system', 'developer'] : ['user'];
  const echoed = compat ? { id: { type: 'string' }, status: {}, phase: {} } : {};
  const message = object(
    { type: { const: 'message' }, role: { enum: roles }, content: contentParts(compat), ...echoed },
    ['role', 'content'],
    false,
  );
  const output = object(
    {
      type: { const: 'function_call_output' },
      call_id: text(512),
      output: compat
        ? { type: ['string', 'array'], maxLength: 1_000_000, description: 'A string, or text parts (flattened)' }
        : { type: 'string', maxLength: 1_000_000 },
      ...(compat ? { id: { type: 'string' }, status: {} } : {}),
    },
    ['type', 'call_id', 'output'],
    false,
  );
  const elicitationAnswer = object(
    {
      type: { const: 'mcp_elicitation_response' },
      elicitation_request_id: text(512),
      action: { enum: ['accept', 'decline', 'cancel'] },
      content: {
        type: ['object', 'null'],
        description: 'With accept of a form-mode request: the values, checked against its requested_schema',
      },
      ...(compat ? { id: { type: 'string' } } : {}),
    },
    ['type', 'elicitation_request_id', 'action'],
    false,
  );
  const strictTypes = ['message', 'function_call_output', 'mcp_elicitation_response'];
  if (!compat) {
    return byType(
      [
        ['function_call_output', output],
        ['mcp_elicitation_response', elicitationAnswer],
        ['message', message],
      ],
      otherType(strictTypes, message),
    );
  }
  const functionCall = object(
    { type: { const: 'function_call' }, call_id: text(512), name: text(256), arguments: {} },
    ['type', 'call_id', 'name'],
    true,
  );
  const approval = object(
    {
      type: { const: 'mcp_approval_response' },
      approval_request_id: text(512),
      approve: { type: 'boolean' },
      reason: nullable('string', { maxLength: MAX_REASON_CHARS }),
    },
    ['type', 'approval_request_id', 'approve'],
    true,
  );
  const compaction = object(
    {
      type: { const: 'compaction' },
      encrypted_content: {
        type: 'string',
        minLength: 1,
        maxLength: 1_000_000,
        description: 'The summary, as POST /v1/responses/compact returns it',
      },
    },
    ['type', 'encrypted_content'],
    true,
  );
  const replayed = [
    'mcp_call',
    'mcp_list_tools',
    'mcp_approval_request',
    'mcp_elicitation_request',
    'reasoning',
    'item_reference',
  ];
  return byType(
    [
      ['function_call_output', output],
      ['function_call', functionCall],
      ['mcp_approval_response', approval],
      ['mcp_elicitation_response', elicitationAnswer],
      // The window POST /v1/responses/compact returned: the model reads its summary instead of what precedes it.
      ['compaction', compaction],
      // Items the service produced itself carry nothing the turn needs: accepted and skipped.
      [replayed, { type: 'object' }],
      ['message', message],
    ],
    otherType([...strictTypes, 'function_call', 'mcp_approval_response', 'compaction', ...replayed], message),
  );
}

function input(compat: boolean) {
  return raw(inputSchema(compat));
}

function inputSchema(compat: boolean) {
  return {
    if: { type: 'string' },
    // biome-ignore lint/suspicious/noThenProperty: a JSON Schema keyword
    then: { minLength: 1, maxLength: MAX_TEXT },
    else: { type: 'array', minItems: 1, maxItems: compat ? 1000 : 64, items: inputItems(compat) },
    description: compat
      ? `A string (1-${MAX_TEXT} characters), or items: messages of any role, function calls and their outputs, approval decisions, answers to MCP elicitations, replayed history (at most 64 function_call_output items)`
      : `A string (1-${MAX_TEXT} characters); or 1-32 user messages; or 1-64 function_call_output and mcp_elicitation_response items (then conversation is required)`,
  };
}

const conversation = raw({
  if: { type: 'object' },
  // biome-ignore lint/suspicious/noThenProperty: a JSON Schema keyword
  then: object({ id: { type: 'string', pattern: CONVERSATION_ID } }, ['id'], false),
  else: { type: ['string', 'null'], pattern: CONVERSATION_ID },
  description: 'conv_… id, or {id: "conv_…"}',
});

const STORE =
  'false: the Response is answered but not kept (GET answers 404; its conversation is deleted when the turn ends); not with conversation, previous_response_id or background. Default true';
const BACKGROUND =
  'true: answered at once with status queued while the turn runs on; follow it with GET /v1/responses/{id} (stream=true to stream it), stop it with POST /v1/responses/{id}/cancel. Default false';

const strictFields = (compat: boolean) => ({
  model: Type.String({
    minLength: 1,
    maxLength: 300,
    description:
      'The agent to run: its id, its name (of exactly one of your agents) or agent:<name>. GET /v1/models lists them',
  }),
  input: input(compat),
  stream: Type.Optional(compat ? nullable('boolean') : Type.Boolean()),
  conversation: Type.Optional(conversation),
  store: Type.Optional(compat ? nullable('boolean', { description: STORE }) : Type.Boolean({ description: STORE })),
  background: Type.Optional(
    compat ? nullable('boolean', { description: BACKGROUND }) : Type.Boolean({ description: BACKGROUND }),
  ),
  agent_version: Type.Optional(
    Type.Integer({
      minimum: 1,
      maximum: 2147483647,
      description:
        "Extension field: run this version of the agent (a 400 when it has none); absent: the conversation's pin, else the latest",
    }),
  ),
});

const number = (min: number, max: number) => Type.Optional(nullable('number', { minimum: min, maximum: max }));
const shortText = (max = 512) => Type.Optional(nullable('string', { maxLength: max }));

const functionTool = object(
  {
    type: { const: 'function' },
    name: { type: 'string', minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_-]+$' },
    description: {},
    parameters: {},
    strict: {},
  },
  ['type', 'name'],
  true,
);
const mcpTool = object(
  {
    type: { const: 'mcp' },
    server_label: { type: 'string', minLength: 1, maxLength: 200 },
  },
  ['type', 'server_label'],
  true,
  "A server of the agent (accepted and ignored: the agent's servers run under its own policy)",
);

/** Strict mode: spec 4.1's body and nothing else. */
export const ResponseCreateStrict = Type.Object(strictFields(false), {
  additionalProperties: false,
  title: 'Strict mode',
  description: 'The spec body (Agentry-Compat: strict, or a key or deployment set to strict)',
});

/**
 * OpenAI compatibility mode: what OpenAI clients send. A top-level field not declared here is refused as OpenAI
 * refuses it ("Unknown parameter: 'x'.", param x), never silently ignored.
 */
export const ResponseCreateCompat = Type.Object(
  {
    ...strictFields(true),
    instructions: shortText(Number.MAX_SAFE_INTEGER),
    previous_response_id: Type.Optional(nullable('string', { pattern: RESPONSE_ID })),
    tools: Type.Optional(
      raw({
        type: ['array', 'null'],
        maxItems: 128,
        items: byType(
          [
            ['function', functionTool],
            ['mcp', mcpTool],
          ],
          { type: 'object', required: ['type'], properties: { type: { enum: ['function', 'mcp'] } } },
        ),
      }),
    ),
    tool_choice: Type.Optional(
      raw({
        if: { type: 'object' },
        // biome-ignore lint/suspicious/noThenProperty: a JSON Schema keyword
        then: object({ type: { const: 'function' }, name: { type: 'string' } }, ['name'], true),
        else: { enum: ['auto', 'none', 'required', null] },
      }),
    ),
    temperature: number(0, 2),
    top_p: number(0, 1),
    max_output_tokens: number(1, 1_000_000),
    max_tool_calls: Type.Optional(
      nullable('integer', {
        minimum: 0,
        maximum: 1_000_000,
        description:
          'Tool calls the Response may make in all; the calls a model asks for past it are not run, and the next model call is offered no tools',
      }),
    ),
    top_logprobs: Type.Optional(
      nullable('number', { minimum: 0, maximum: 20, description: '0 or null: responses carry no logprobs' }),
    ),
    presence_penalty: number(-2, 2),
    frequency_penalty: number(-2, 2),
    metadata: Type.Optional(
      raw({
        type: ['object', 'null'],
        maxProperties: 16,
        propertyNames: { maxLength: 64 },
        additionalProperties: { type: 'string', maxLength: 512 },
      }),
    ),
    safety_identifier: shortText(),
    user: shortText(),
    prompt_cache_key: shortText(),
    reasoning: Type.Optional(
      raw({
        if: { type: 'object' },
        // biome-ignore lint/suspicious/noThenProperty: a JSON Schema keyword
        then: {
          properties: {
            effort: { type: ['string', 'null'], maxLength: 32 },
            summary: { type: ['string', 'null'], maxLength: 32 },
          },
        },
        description: "Refused unless its fields are null: reasoning is the agent model's own",
      }),
    ),
    parallel_tool_calls: Type.Optional(
      nullable('boolean', {
        description: 'false: at most one tool call per model step (the first; others are not run)',
      }),
    ),
    include: Type.Optional(
      nullable('array', {
        items: { type: 'string' },
        description: `Accepted: ${INCLUDABLE.join(', ')} (Agentry produces none of those items); other values are refused`,
      }),
    ),
    truncation: Type.Optional(
      raw({
        enum: ['disabled', 'auto', null],
        description:
          "auto fits the conversation to the model's context window, dropping the oldest items; disabled sends it whole (too long fails the response with context_length_exceeded). Absent: the agent's contextPolicy (truncation by default: auto)",
      }),
    ),
    text: Type.Optional(
      raw({
        type: ['object', 'null'],
        properties: {
          format: {
            anyOf: [
              outputFormatSchema(
                true,
                "Structured output: the model is asked for it and the final reply is checked against it (a mismatch fails the Response with invalid_output). Absent: the agent's outputFormat, else free text",
              ),
              { type: 'null' },
            ],
          },
        },
        description: 'format is used; verbosity and other fields are accepted and ignored',
      }),
    ),
    service_tier: Type.Optional(
      nullable('string', { description: 'auto or default (one tier serves every request); other tiers are refused' }),
    ),
    stream_options: Type.Optional(
      Type.Unknown({ description: 'Accepted; streams carry no obfuscation padding whatever it says' }),
    ),
    context_management: Type.Optional(
      raw({
        type: ['array', 'null'],
        items: {
          type: 'object',
          properties: {
            type: { type: 'string', enum: ['compaction'] },
            compact_threshold: { type: ['integer', 'null'], minimum: 1000 },
          },
          required: ['type'],
        },
        description:
          '[{type: "compaction", compact_threshold?: N}]: the older conversation is summarised into a compaction item once the context passes N tokens (default: 80 % of the model\'s window less the output reserved); see docs/context.md',
      }),
    ),
    prompt: Type.Optional(Type.Unknown({ description: 'Refused unless null: prompt templates are not stored here' })),
    prompt_cache_retention: Type.Optional(
      Type.Unknown({ description: 'Accepted: a caching hint, with no effect on the answer' }),
    ),
  },
  {
    additionalProperties: false,
    title: 'OpenAI compatibility mode',
    description: 'What OpenAI clients send (the default; Agentry-Compat: openai)',
  },
);

/**
 * POST /v1/responses/compact takes the body of POST /v1/responses with `input` optional: previous_response_id or
 * conversation may name the conversation alone.
 */
const compactInput = (compat: boolean) =>
  Type.Optional(
    raw({
      if: { type: 'null' },
      // biome-ignore lint/suspicious/noThenProperty: a JSON Schema keyword
      then: {},
      else: inputSchema(compat),
      description:
        'As in POST /v1/responses, or null or absent when previous_response_id or conversation names the conversation',
    }),
  );
export const ResponseCompactStrict = Type.Object(
  { ...ResponseCreateStrict.properties, input: compactInput(false) },
  { additionalProperties: false, title: 'Strict mode', description: 'The spec body, input optional' },
);
export const ResponseCompactCompat = Type.Object(
  { ...ResponseCreateCompat.properties, input: compactInput(true) },
  {
    additionalProperties: false,
    title: 'OpenAI compatibility mode',
    description: 'What OpenAI clients send, input optional',
  },
);
export const ResponseCompactBody = Type.Unsafe<unknown>({
  anyOf: [ResponseCompactStrict, ResponseCompactCompat],
  description:
    'The body of POST /v1/responses with input optional, in strict mode or OpenAI compatibility mode (docs/responses.md)',
});

/** The body as the route declares it: one of the two, by the request's mode (see docs/responses.md). */
export const ResponseCreateBody = Type.Unsafe<unknown>({
  anyOf: [ResponseCreateStrict, ResponseCreateCompat],
  description:
    'Strict mode or OpenAI compatibility mode, by the Agentry-Compat header, the API key and the deployment (docs/responses.md)',
});
