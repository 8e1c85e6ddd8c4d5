/**
 * The body of POST /v1/chat/completions, as OpenAI's Chat Completions API takes it: what validates a request and
 * what the OpenAPI document shows. A message is told apart by its `role` and a content part by its `type` (if/then
 * chains, so a failure names the field inside it, not "matches no branch"). Fields Agentry cannot honour are
 * declared too, accepted only at their "off" value; domain/chat-completions/chat-request.ts refuses the others by
 * name. Fields OpenAI adds later are accepted and ignored only when unknown here.
 */
import { Type } from 'typebox';
import { nullable, object, raw, type Schema } from './raw-schema.ts';

const MAX_TEXT = 1_000_000;

/** `if <field> is <first> then <schema> else …`, ending with a schema that names the values accepted. */
function byField(field: string, cases: [string[], Schema][]): Schema {
  const values = cases.flatMap(([names]) => names);
  return cases.reduceRight<Schema>(
    (rest, [names, then]) => ({
      if: { type: 'object', required: [field], properties: { [field]: { enum: names } } },
      then,
      else: rest,
    }),
    { type: 'object', required: [field], properties: { [field]: { enum: values } } },
  );
}

const textPart = object(
  { type: { const: 'text' }, text: { type: 'string', maxLength: MAX_TEXT } },
  ['type', 'text'],
  false,
);
const imagePart = object(
  {
    type: { const: 'image_url' },
    image_url: object(
      {
        url: {
          type: 'string',
          minLength: 1,
          description: 'A data: URL (base64) or an https URL of a PNG, JPEG, GIF or WebP image',
        },
        detail: { enum: ['auto', 'low', 'high', null] },
      },
      ['url'],
      false,
    ),
  },
  ['type', 'image_url'],
  false,
);
const filePart = object(
  {
    type: { const: 'file' },
    file: object(
      { file_id: { type: 'string', format: 'uuid', description: 'A file id (POST /v1/files)' } },
      ['file_id'],
      false,
      'A file uploaded with POST /v1/files (file_data is not accepted: upload the file first)',
    ),
  },
  ['type', 'file'],
  false,
);
const refusalPart = object({ type: { const: 'refusal' }, refusal: { type: 'string' } }, ['type', 'refusal'], false);

/** A string, or parts of the kinds given. */
const content = (parts: [string[], Schema][], description: string) => ({
  if: { type: 'string' },
  // biome-ignore lint/suspicious/noThenProperty: a JSON Schema keyword
  then: { maxLength: MAX_TEXT },
  else: { type: 'array', maxItems: 64, items: byField('type', parts) },
  description,
});

const textContent = content([[['text'], textPart]], 'A string, or text parts');
const name = { type: 'string', maxLength: 256 };

const toolCall = object(
  {
    id: { type: 'string', minLength: 1, maxLength: 512 },
    type: { const: 'function' },
    function: object(
      { name: { type: 'string', minLength: 1, maxLength: 256 }, arguments: { type: 'string', maxLength: MAX_TEXT } },
      ['name', 'arguments'],
      true,
    ),
  },
  ['id', 'type', 'function'],
  true,
);

const message = byField('role', [
  [['system', 'developer'], object({ role: {}, content: textContent, name }, ['role', 'content'], false)],
  [
    ['user'],
    object(
      {
        role: {},
        content: content(
          [
            [['text'], textPart],
            [['image_url'], imagePart],
            [['file'], filePart],
          ],
          'A string, or text, image_url and file parts',
        ),
        name,
      },
      ['role', 'content'],
      false,
    ),
  ],
  [
    ['assistant'],
    object(
      {
        role: {},
        content: {
          if: { type: 'null' },
          // biome-ignore lint/suspicious/noThenProperty: a JSON Schema keyword
          then: {},
          else: content(
            [
              [['text'], textPart],
              [['refusal'], refusalPart],
            ],
            'A string, null, or text and refusal parts',
          ),
        },
        tool_calls: { type: ['array', 'null'], maxItems: 128, items: toolCall },
        name,
        refusal: { type: ['string', 'null'] },
        audio: { type: 'null' },
        function_call: { type: 'null' },
      },
      ['role'],
      false,
    ),
  ],
  [
    ['tool'],
    object(
      { role: {}, tool_call_id: { type: 'string', minLength: 1, maxLength: 512 }, content: textContent },
      ['role', 'tool_call_id', 'content'],
      false,
    ),
  ],
]);

const functionTool = object(
  {
    type: { const: 'function' },
    function: object(
      {
        name: { type: 'string', minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_-]+$' },
        description: { type: ['string', 'null'] },
        parameters: { type: ['object', 'null'] },
        strict: { type: ['boolean', 'null'] },
      },
      ['name'],
      false,
    ),
  },
  ['type', 'function'],
  false,
  'A function the caller runs: a call ends the completion with finish_reason "tool_calls"',
);

const responseFormat = byField('type', [
  [['text'], object({ type: {} }, ['type'], false)],
  [['json_object'], object({ type: {} }, ['type'], false)],
  [
    ['json_schema'],
    object(
      {
        type: {},
        json_schema: object(
          {
            name: { type: 'string', minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_-]+$' },
            description: { type: 'string' },
            schema: { type: 'object' },
            strict: { type: ['boolean', 'null'] },
          },
          ['name'],
          false,
        ),
      },
      ['type', 'json_schema'],
      false,
    ),
  ],
]);

const number = (min: number, max: number) => Type.Optional(nullable('number', { minimum: min, maximum: max }));
const tokens = (description: string) =>
  Type.Optional(nullable('integer', { minimum: 1, maximum: 1_000_000, description }));
/** A field Agentry accepts only at its "off" value (null, or the value named); any other is a 400 naming it. */
const offOnly = (description: string) => Type.Optional(raw({ description: `Not supported: ${description}` }));

export const ChatCompletionCreateBody = Type.Object(
  {
    model: Type.String({
      minLength: 1,
      maxLength: 512,
      description:
        'The agent that answers: its id, its name, or agent:<name> (GET /v1/models or GET /v1/agents lists them)',
    }),
    messages: raw({
      type: 'array',
      minItems: 1,
      maxItems: 2000,
      items: message,
      description: 'The whole conversation: system, developer, user, assistant and tool messages',
    }),
    stream: Type.Optional(nullable('boolean')),
    stream_options: Type.Optional(
      nullable('object', {
        properties: { include_usage: { type: ['boolean', 'null'] }, include_obfuscation: {} },
        additionalProperties: false,
        description: 'include_usage: a last chunk with the usage and no choices',
      }),
    ),
    tools: Type.Optional(nullable('array', { maxItems: 128, items: functionTool })),
    tool_choice: Type.Optional(
      raw({
        if: { type: 'object' },
        // biome-ignore lint/suspicious/noThenProperty: a JSON Schema keyword
        then: object(
          { type: { const: 'function' }, function: object({ name: { type: 'string' } }, ['name'], false) },
          ['type', 'function'],
          false,
        ),
        else: { enum: ['auto', 'none', 'required', null] },
      }),
    ),
    parallel_tool_calls: Type.Optional(
      nullable('boolean', {
        description: 'false: at most one tool call per model step (the first; others are not run)',
      }),
    ),
    response_format: Type.Optional(
      raw({
        if: { type: 'null' },
        // biome-ignore lint/suspicious/noThenProperty: a JSON Schema keyword
        then: {},
        else: responseFormat,
        description: 'text, json_object, or json_schema (the final reply must match the schema)',
      }),
    ),
    temperature: number(0, 2),
    top_p: number(0, 1),
    max_completion_tokens: tokens('The most tokens the model may produce in each of its steps'),
    max_tokens: tokens('The older name of max_completion_tokens'),
    n: Type.Optional(nullable('integer', { description: 'Only 1: one choice is generated' })),
    user: Type.Optional(nullable('string', { maxLength: 512 })),
    safety_identifier: Type.Optional(nullable('string', { maxLength: 512 })),
    prompt_cache_key: Type.Optional(nullable('string', { maxLength: 512 })),
    metadata: Type.Optional(
      nullable('object', {
        maxProperties: 16,
        propertyNames: { maxLength: 64 },
        additionalProperties: { type: 'string', maxLength: 512 },
      }),
    ),
    store: Type.Optional(nullable('boolean', { description: 'Every call is recorded as a Run' })),
    agent_version: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: 2147483647,
        description: 'Extension field: run this version of the agent (a 400 when it has none); absent: the latest',
      }),
    ),
    service_tier: Type.Optional(nullable('string', { maxLength: 64, description: 'Accepted; answered as default' })),
    stop: offOnly('null or [] only (stop sequences)'),
    seed: offOnly('null only'),
    logprobs: offOnly('false or null only'),
    top_logprobs: offOnly('0 or null only'),
    logit_bias: offOnly('null or {} only'),
    presence_penalty: number(-2, 2),
    frequency_penalty: number(-2, 2),
    reasoning_effort: offOnly('null only (the agent sets its model)'),
    verbosity: offOnly('null only'),
    modalities: offOnly('["text"] or null only'),
    audio: offOnly('null only'),
    prediction: offOnly('null only'),
    web_search_options: offOnly('null only (give the agent a web search tool instead)'),
    functions: offOnly('null only (use tools)'),
    function_call: offOnly('null only (use tool_choice)'),
  },
  {
    additionalProperties: false,
    description:
      'OpenAI Chat Completions request; a field not declared here is refused ("Unknown parameter: \'x\'.", docs/chat-completions.md)',
  },
);
