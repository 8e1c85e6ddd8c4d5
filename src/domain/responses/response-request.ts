/**
 * The body of POST /v1/responses, checked and normalised. Strict mode is spec 4.1 exactly (no extra properties,
 * the three `input` forms and their limits). OpenAI compatibility mode (`Agentry-Compat: openai`) also accepts
 * what OpenAI clients send: instructions, function tools, sampling settings, previous_response_id, and history
 * items replayed in `input` (deduplicated against the conversation later, by item id and call_id).
 */
import { validationError } from '../../errors/app-error.ts';
import { isUuid } from '../../lib/ids.ts';
import type { ModelSettings, ToolSpec } from '../../models/types.ts';
import type { HistoryItem } from '../messages/accept.ts';
import type { Attachment } from '../messages/items.ts';

export type InputItem =
  | { kind: 'user'; text: string; attachments: Attachment[]; attachmentParams: string[]; id: string | null }
  | { kind: 'history'; item: HistoryItem; id: string | null }
  | { kind: 'output'; callId: string; output: string; id: string | null };

export interface ResponseRequest {
  agentId: string;
  /** Session id (from `conv_<uuid>`), or null. */
  conversation: string | null;
  /** Message id (from `resp_<uuid>`), or null. */
  previousResponse: string | null;
  stream: boolean;
  items: InputItem[];
  compat: boolean;
  instructions: string | null;
  tools: ToolSpec[];
  settings: ModelSettings;
  metadata: Record<string, string>;
  /** Echoed in the Response object. */
  echo: {
    toolChoice: unknown;
    temperature: number | null;
    topP: number | null;
    parallelToolCalls: boolean;
    previousResponseId: string | null;
  };
}

const STRICT_FIELDS = new Set(['model', 'input', 'stream', 'conversation', 'store', 'background']);
const COMPAT_FIELDS = new Set([
  ...STRICT_FIELDS,
  'instructions',
  'tools',
  'include',
  'previous_response_id',
  'metadata',
  'tool_choice',
  'temperature',
  'top_p',
  'max_output_tokens',
  'parallel_tool_calls',
  'truncation',
  'text',
  'user',
  'reasoning',
  'prompt_cache_key',
  'safety_identifier',
  'service_tier',
  'top_logprobs',
  'max_tool_calls',
  'stream_options',
  'context_management',
  'prompt',
]);
const DETAILS = ['auto', 'low', 'high', 'original'];
const MAX_TEXT = 100_000;
const MAX_OUTPUT = 1_000_000;

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

function text(value: unknown, param: string, max = MAX_TEXT): string {
  if (typeof value !== 'string') throw validationError(param, `${param} must be a string`);
  if (value.length < 1 || value.length > max) throw validationError(param, `${param} must be 1-${max} characters`);
  return value;
}

function only(item: Record<string, unknown>, param: string, allowed: string[]): void {
  for (const key of Object.keys(item)) {
    if (!allowed.includes(key)) throw validationError(`${param}.${key}`, `${param}.${key} is not a recognised field`);
  }
}

/** `conv_<uuid>` → the session id. */
export function conversationIdToSession(value: unknown, param: string): string {
  if (typeof value !== 'string' || !value.startsWith('conv_') || !isUuid(value.slice(5))) {
    throw validationError(param, `${param} must be a conversation id (conv_ followed by a UUID)`);
  }
  return value.slice(5).toLowerCase();
}

/** `resp_<uuid>` → the message id. */
export function responseIdToMessage(value: unknown, param: string): string {
  if (typeof value !== 'string' || !value.startsWith('resp_') || !isUuid(value.slice(5))) {
    throw validationError(param, `${param} must be a response id (resp_ followed by a UUID)`);
  }
  return value.slice(5).toLowerCase();
}

function contentParts(
  value: unknown,
  param: string,
  compat: boolean,
): { text: string; attachments: Attachment[]; attachmentParams: string[] } {
  if (typeof value === 'string') return { text: text(value, param), attachments: [], attachmentParams: [] };
  if (!Array.isArray(value) || value.length < 1 || value.length > 32) {
    throw validationError(param, `${param} must be a string or an array of 1-32 parts`);
  }
  const texts: string[] = [];
  const attachments: Attachment[] = [];
  const attachmentParams: string[] = [];
  value.forEach((part, index) => {
    const p = `${param}[${index}]`;
    if (!isRecord(part)) throw validationError(p, `${p} must be an object`);
    if (part.type === 'input_text' || (compat && part.type === 'output_text')) {
      only(part, p, compat ? ['type', 'text', 'annotations', 'logprobs'] : ['type', 'text']);
      texts.push(text(part.text, `${p}.text`));
    } else if (part.type === 'input_file' || part.type === 'input_image') {
      only(part, p, part.type === 'input_image' ? ['type', 'file_id', 'detail'] : ['type', 'file_id']);
      if (typeof part.file_id !== 'string' || !isUuid(part.file_id))
        throw validationError(`${p}.file_id`, `${p}.file_id must be a file id (UUID)`);
      if (part.detail !== undefined && (typeof part.detail !== 'string' || !DETAILS.includes(part.detail))) {
        throw validationError(`${p}.detail`, `${p}.detail must be one of ${DETAILS.join(', ')}`);
      }
      const attachment: Attachment = {
        kind: part.type === 'input_image' ? 'image' : 'file',
        fileId: part.file_id.toLowerCase(),
      };
      if (typeof part.detail === 'string') attachment.detail = part.detail;
      attachments.push(attachment);
      attachmentParams.push(`${p}.file_id`);
    } else {
      throw validationError(`${p}.type`, `${p}.type must be input_text, input_file or input_image`);
    }
  });
  return { text: texts.join('\n'), attachments, attachmentParams };
}

function outputItem(item: Record<string, unknown>, param: string, compat: boolean): InputItem {
  only(item, param, compat ? ['type', 'call_id', 'output', 'id', 'status'] : ['type', 'call_id', 'output']);
  const callId = text(item.call_id, `${param}.call_id`, 512);
  let output: string;
  if (typeof item.output === 'string') {
    if (item.output.length > MAX_OUTPUT)
      throw validationError(`${param}.output`, `${param}.output must be at most ${MAX_OUTPUT} characters`);
    output = item.output;
  } else if (compat && Array.isArray(item.output)) {
    // Structured outputs (text parts) are flattened to their text.
    output = item.output
      .map((part) => (isRecord(part) && typeof part.text === 'string' ? part.text : JSON.stringify(part)))
      .join('\n');
  } else {
    throw validationError(`${param}.output`, `${param}.output must be a string`);
  }
  return { kind: 'output', callId, output, id: typeof item.id === 'string' ? item.id : null };
}

function inputItem(raw: unknown, param: string, compat: boolean): InputItem | null {
  if (!isRecord(raw)) throw validationError(param, `${param} must be an object`);
  const type = raw.type ?? 'message';
  const id = typeof raw.id === 'string' ? raw.id : null;
  if (type === 'function_call_output') return outputItem(raw, param, compat);
  if (type === 'message') {
    only(raw, param, compat ? ['type', 'role', 'content', 'id', 'status', 'phase'] : ['type', 'role', 'content']);
    const role = raw.role;
    if (role === 'user' || (compat && (role === 'system' || role === 'developer'))) {
      const { text: body, attachments, attachmentParams } = contentParts(raw.content, `${param}.content`, compat);
      return { kind: 'user', text: body, attachments, attachmentParams, id };
    }
    if (compat && role === 'assistant') {
      const { text: body } = contentParts(raw.content, `${param}.content`, compat);
      return { kind: 'history', item: { type: 'assistant_message', text: body }, id };
    }
    throw validationError(`${param}.role`, `${param}.role must be user`);
  }
  if (compat && type === 'function_call') {
    const callId = text(raw.call_id, `${param}.call_id`, 512);
    const name = text(raw.name, `${param}.name`, 256);
    const args = typeof raw.arguments === 'string' ? raw.arguments : '{}';
    return { kind: 'history', item: { type: 'function_call', callId, name, arguments: args }, id };
  }
  // Replayed items the service produced itself (server tool calls, reasoning) carry nothing the turn needs.
  if (compat && (type === 'mcp_call' || type === 'mcp_list_tools' || type === 'reasoning' || type === 'item_reference'))
    return null;
  throw validationError(`${param}.type`, `${param}.type must be message or function_call_output`);
}

function input(value: unknown, compat: boolean): InputItem[] {
  if (typeof value === 'string') {
    return [{ kind: 'user', text: text(value, 'input'), attachments: [], attachmentParams: [], id: null }];
  }
  if (!Array.isArray(value) || value.length === 0)
    throw validationError('input', 'input must be a string or a non-empty array');
  const items = value.map((raw, index) => inputItem(raw, `input[${index}]`, compat)).filter((item) => item !== null);
  const outputs = items.filter((item) => item.kind === 'output').length;
  if (!compat) {
    if (outputs > 0 && outputs !== items.length) {
      throw validationError('input', 'input must be either messages or function_call_output items, not both');
    }
    if (outputs === 0 && value.length > 32) throw validationError('input', 'input must have at most 32 messages');
  }
  if (outputs > 64) throw validationError('input', 'input must have at most 64 function_call_output items');
  if (value.length > (compat ? 1000 : 64)) throw validationError('input', 'input has too many items');
  return items;
}

function tools(value: unknown): ToolSpec[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value) || value.length > 128)
    throw validationError('tools', 'tools must be an array of at most 128 tools');
  return value.map((tool, index) => {
    const param = `tools[${index}]`;
    if (!isRecord(tool) || tool.type !== 'function') {
      throw validationError(
        `${param}.type`,
        `${param}.type must be function (hosted tools run on the agent, not per response)`,
      );
    }
    const name = text(tool.name, `${param}.name`, 64);
    if (!/^[A-Za-z0-9_-]+$/.test(name))
      throw validationError(`${param}.name`, `${param}.name must be letters, digits, _ or -`);
    const parameters = isRecord(tool.parameters)
      ? tool.parameters
      : { type: 'object', properties: {}, additionalProperties: false };
    return {
      name,
      description: typeof tool.description === 'string' ? tool.description : '',
      parameters,
      strict: tool.strict === true,
    };
  });
}

function optionalNumber(value: unknown, param: string, min: number, max: number): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < min || value > max) {
    throw validationError(param, `${param} must be a number between ${min} and ${max}`);
  }
  return value;
}

export function parseResponseRequest(body: unknown, compat: boolean): ResponseRequest {
  if (!isRecord(body)) throw validationError('body', 'body must be a JSON object');
  const allowed = compat ? COMPAT_FIELDS : STRICT_FIELDS;
  for (const key of Object.keys(body)) {
    // Compatibility mode tolerates fields OpenAI adds over time; strict mode names any unknown one.
    if (!allowed.has(key) && !compat) throw validationError(key, `${key} is not a recognised field`);
  }
  if (typeof body.model !== 'string' || !isUuid(body.model))
    throw validationError('model', 'model must be an agent id (UUID)');
  if (body.input === undefined) throw validationError('input', 'input is required');
  if (body.stream !== undefined && typeof body.stream !== 'boolean')
    throw validationError('stream', 'stream must be a boolean');
  if (body.store !== undefined && body.store !== true && !(compat && body.store === null)) {
    throw validationError('store', 'store must be true (responses are always stored)');
  }
  if (body.background !== undefined && body.background !== false && !(compat && body.background === null)) {
    throw validationError('background', 'background must be false');
  }
  let conversation: string | null = null;
  if (body.conversation !== undefined && body.conversation !== null) {
    const value = isRecord(body.conversation) ? body.conversation.id : body.conversation;
    conversation = conversationIdToSession(value, isRecord(body.conversation) ? 'conversation.id' : 'conversation');
    if (isRecord(body.conversation)) only(body.conversation, 'conversation', ['id']);
  }
  let previousResponse: string | null = null;
  if (compat && body.previous_response_id !== undefined && body.previous_response_id !== null) {
    previousResponse = responseIdToMessage(body.previous_response_id, 'previous_response_id');
    if (conversation !== null)
      throw validationError('previous_response_id', 'previous_response_id cannot be used together with conversation');
  }
  const items = input(body.input, compat);
  if (!compat && conversation === null && items.some((item) => item.kind === 'output')) {
    throw validationError('conversation', 'conversation is required when input holds function_call_output items');
  }
  let metadata: Record<string, string> = {};
  if (compat && isRecord(body.metadata)) {
    const entries = Object.entries(body.metadata);
    if (
      entries.length > 16 ||
      entries.some(([key, value]) => key.length > 64 || typeof value !== 'string' || value.length > 512)
    ) {
      throw validationError(
        'metadata',
        'metadata must have at most 16 string values (keys ≤ 64, values ≤ 512 characters)',
      );
    }
    metadata = Object.fromEntries(entries) as Record<string, string>;
  }
  const settings: ModelSettings = {};
  const temperature = compat ? optionalNumber(body.temperature, 'temperature', 0, 2) : undefined;
  const topP = compat ? optionalNumber(body.top_p, 'top_p', 0, 1) : undefined;
  const maxOutput = compat ? optionalNumber(body.max_output_tokens, 'max_output_tokens', 1, 1_000_000) : undefined;
  if (temperature !== undefined) settings.temperature = temperature;
  if (topP !== undefined) settings.topP = topP;
  if (maxOutput !== undefined) settings.maxOutputTokens = Math.floor(maxOutput);
  const choice = compat ? body.tool_choice : undefined;
  if (choice === 'auto' || choice === 'none' || choice === 'required') settings.toolChoice = choice;
  else if (isRecord(choice) && typeof choice.name === 'string') settings.toolChoice = { name: choice.name };
  if (
    compat &&
    body.instructions !== undefined &&
    body.instructions !== null &&
    typeof body.instructions !== 'string'
  ) {
    throw validationError('instructions', 'instructions must be a string');
  }
  return {
    agentId: body.model.toLowerCase(),
    conversation,
    previousResponse,
    stream: body.stream === true,
    items,
    compat,
    instructions: compat && typeof body.instructions === 'string' ? body.instructions : null,
    tools: compat ? tools(body.tools) : [],
    settings,
    metadata,
    echo: {
      toolChoice: choice ?? 'auto',
      temperature: temperature ?? null,
      topP: topP ?? null,
      parallelToolCalls: compat && typeof body.parallel_tool_calls === 'boolean' ? body.parallel_tool_calls : true,
      previousResponseId: previousResponse === null ? null : `resp_${previousResponse}`,
    },
  };
}
