/**
 * The body of POST /v1/responses, checked and normalised. Strict mode is spec 4.1 exactly (no extra properties,
 * the three `input` forms and their limits); a field or item it refuses that OpenAI accepts says so in its message.
 * OpenAI compatibility mode also accepts what OpenAI clients send: instructions (and `system`/`developer`
 * messages, which join them), function tools, sampling settings, previous_response_id, images by URL, and history
 * items replayed in `input` (deduplicated against the conversation later, by item id and call_id).
 */
import { validationError } from '../../errors/app-error.ts';
import { isUuid } from '../../lib/ids.ts';
import type { ModelSettings, ToolSpec } from '../../models/types.ts';
import { checkReason } from '../approvals/approvals.ts';
import type { HistoryItem, ResponseEcho } from '../turns/accept.ts';
import type { Attachment } from '../turns/items.ts';
import { metadataOf, optionalNumber, optionalString, reasoning, toolChoice, tools } from './response-settings.ts';

/** An `input_image` given by URL (a data: URL, or an https URL fetched under the egress guard). */
export interface ImageUrl {
  url: string;
  detail?: string;
  param: string;
}

export type InputItem =
  | {
      kind: 'user';
      text: string;
      attachments: Attachment[];
      attachmentParams: string[];
      images: ImageUrl[];
      id: string | null;
    }
  | { kind: 'history'; item: HistoryItem; id: string | null }
  | { kind: 'output'; callId: string; output: string; id: string | null }
  /** A decision on a tool call that waits for approval (compatibility mode). */
  | { kind: 'approval'; approvalId: string; approve: boolean; reason: string | null; id: string | null; param: string };

/** The agent `model` names: its id, or (compatibility mode) its name, resolved in the organization later. */
export type AgentRef = { id: string } | { name: string };

export interface ResponseRequest {
  agent: AgentRef;
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
  /** Echoed in the Response object (with the metadata and the tools, added when the agent is known). */
  echo: Omit<ResponseEcho, 'metadata' | 'tools'>;
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
  'presence_penalty',
  'frequency_penalty',
  'prompt_cache_retention',
]);
const DETAILS = ['auto', 'low', 'high', 'original'];
const COMPAT_HINT = 'send the header `Agentry-Compat: openai` (OpenAI compatibility mode) to have it accepted';

/** Where a user finds what `model` may be. */
export const AGENTS_LISTED = 'GET /v1/models or GET /v1/agents lists them';

/** `value` quoted for a message, cut short when long. */
export const quoted = (value: string) => JSON.stringify(value.length > 100 ? `${value.slice(0, 100)}…` : value);

/**
 * `model` is an agent id; in compatibility mode also an agent's name (what OpenAI clients are used to sending: a
 * name). A model name of another vendor ("gpt-4o") gets a 400 that says what `model` means here.
 */
function agentRef(model: unknown, compat: boolean): AgentRef {
  const what = compat ? 'the id or the name of one of your agents' : 'the id of one of your agents';
  if (typeof model !== 'string') {
    throw validationError('model', `model is required: ${what} (${AGENTS_LISTED})`);
  }
  if (isUuid(model)) return { id: model.toLowerCase() };
  if (compat) return { name: model };
  throw validationError(
    'model',
    `model must be ${what} (${AGENTS_LISTED}); ${quoted(model)} is not an agent id. An agent's name is accepted in OpenAI compatibility mode: send the header \`Agentry-Compat: openai\``,
  );
}

/** A strict-mode refusal of something OpenAI compatibility mode accepts. */
const compatOnly = (param: string, what: string) =>
  validationError(param, `${what} is not part of the strict Responses body; ${COMPAT_HINT}`);
const MAX_TEXT = 100_000;
const MAX_OUTPUT = 1_000_000;

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

function text(value: unknown, param: string, max = MAX_TEXT): string {
  if (typeof value !== 'string') throw validationError(param, `${param} must be a string`);
  if (value.length < 1 || value.length > max) throw validationError(param, `${param} must be 1-${max} characters`);
  return value;
}

/** Every key of `item` must be `allowed`; one that compatibility mode would take (`compatOnlyKeys`) says so. */
function only(item: Record<string, unknown>, param: string, allowed: string[], compatOnlyKeys: string[] = []): void {
  for (const key of Object.keys(item)) {
    if (allowed.includes(key)) continue;
    if (compatOnlyKeys.includes(key)) throw compatOnly(`${param}.${key}`, `${param}.${key}`);
    throw validationError(`${param}.${key}`, `${param}.${key} is not a recognised field`);
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

function checkDetail(detail: unknown, param: string): string | undefined {
  if (detail === undefined || detail === null) return undefined;
  if (typeof detail !== 'string' || !DETAILS.includes(detail)) {
    throw validationError(`${param}.detail`, `${param}.detail must be one of ${DETAILS.join(', ')}`);
  }
  return detail;
}

function contentParts(
  value: unknown,
  param: string,
  compat: boolean,
): { text: string; attachments: Attachment[]; attachmentParams: string[]; images: ImageUrl[] } {
  if (typeof value === 'string') return { text: text(value, param), attachments: [], attachmentParams: [], images: [] };
  if (!Array.isArray(value) || value.length < 1 || value.length > 32) {
    throw validationError(param, `${param} must be a string or an array of 1-32 parts`);
  }
  const texts: string[] = [];
  const attachments: Attachment[] = [];
  const attachmentParams: string[] = [];
  const images: ImageUrl[] = [];
  value.forEach((part, index) => {
    const p = `${param}[${index}]`;
    if (!isRecord(part)) throw validationError(p, `${p} must be an object`);
    if (part.type === 'input_text' || (compat && part.type === 'output_text')) {
      only(part, p, compat ? ['type', 'text', 'annotations', 'logprobs'] : ['type', 'text']);
      texts.push(text(part.text, `${p}.text`));
    } else if (part.type === 'input_image' && (part.image_url !== undefined || part.file_id === undefined)) {
      if (!compat) throw compatOnly(`${p}.image_url`, `${p}.image_url (an image by URL)`);
      only(part, p, ['type', 'image_url', 'detail', 'file_id']);
      if (typeof part.image_url !== 'string' || part.image_url === '') {
        throw validationError(`${p}.image_url`, `${p}.image_url must be a data: URL or an https URL of an image`);
      }
      const detail = checkDetail(part.detail, p);
      images.push(
        detail === undefined
          ? { url: part.image_url, param: `${p}.image_url` }
          : {
              url: part.image_url,
              detail,
              param: `${p}.image_url`,
            },
      );
    } else if (part.type === 'input_file' || part.type === 'input_image') {
      only(part, p, part.type === 'input_image' ? ['type', 'file_id', 'detail'] : ['type', 'file_id']);
      if (typeof part.file_id !== 'string' || !isUuid(part.file_id))
        throw validationError(`${p}.file_id`, `${p}.file_id must be a file id (UUID)`);
      checkDetail(part.detail, p);
      const attachment: Attachment = {
        kind: part.type === 'input_image' ? 'image' : 'file',
        fileId: part.file_id.toLowerCase(),
      };
      if (typeof part.detail === 'string') attachment.detail = part.detail;
      attachments.push(attachment);
      attachmentParams.push(`${p}.file_id`);
    } else if (!compat && part.type === 'output_text') {
      throw compatOnly(`${p}.type`, `${p}.type output_text (assistant history)`);
    } else {
      throw validationError(`${p}.type`, `${p}.type must be input_text, input_file or input_image`);
    }
  });
  return { text: texts.join('\n'), attachments, attachmentParams, images };
}

function outputItem(item: Record<string, unknown>, param: string, compat: boolean): InputItem {
  only(item, param, compat ? ['type', 'call_id', 'output', 'id', 'status'] : ['type', 'call_id', 'output'], [
    'id',
    'status',
  ]);
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

const REPLAYED_TYPES = [
  'function_call',
  'mcp_call',
  'mcp_list_tools',
  'mcp_approval_request',
  'reasoning',
  'item_reference',
];

/** `{type:"mcp_approval_response", approval_request_id, approve, reason?}`: a decision on a waiting tool call. */
function approvalItem(item: Record<string, unknown>, param: string): InputItem {
  const approvalId = text(item.approval_request_id, `${param}.approval_request_id`, 512);
  if (typeof item.approve !== 'boolean')
    throw validationError(`${param}.approve`, `${param}.approve must be a boolean`);
  const reason = checkReason(item.reason, `${param}.reason`);
  return {
    kind: 'approval',
    approvalId,
    approve: item.approve,
    reason,
    id: typeof item.id === 'string' ? item.id : null,
    param,
  };
}

/** An input item, or the text of a system/developer message (compatibility mode), or null for one to skip. */
type ParsedItem = InputItem | { kind: 'instructions'; text: string };

function inputItem(raw: unknown, param: string, compat: boolean): ParsedItem | null {
  if (!isRecord(raw)) throw validationError(param, `${param} must be an object`);
  const type = raw.type ?? 'message';
  const id = typeof raw.id === 'string' ? raw.id : null;
  if (type === 'function_call_output') return outputItem(raw, param, compat);
  if (type === 'message') {
    only(raw, param, compat ? ['type', 'role', 'content', 'id', 'status', 'phase'] : ['type', 'role', 'content'], [
      'id',
      'status',
      'phase',
    ]);
    const role = raw.role;
    if (role === 'user') {
      const {
        text: body,
        attachments,
        attachmentParams,
        images,
      } = contentParts(raw.content, `${param}.content`, compat);
      return { kind: 'user', text: body, attachments, attachmentParams, images, id };
    }
    if (compat && (role === 'system' || role === 'developer')) {
      const parts = contentParts(raw.content, `${param}.content`, compat);
      if (parts.attachments.length > 0 || parts.images.length > 0) {
        throw validationError(`${param}.content`, `${param}.content of a ${role} message must be text`);
      }
      return { kind: 'instructions', text: parts.text };
    }
    if (compat && role === 'assistant') {
      const { text: body } = contentParts(raw.content, `${param}.content`, compat);
      return { kind: 'history', item: { type: 'assistant_message', text: body }, id };
    }
    if (role === 'assistant' || role === 'system' || role === 'developer') {
      throw compatOnly(`${param}.role`, `${param}.role ${role}`);
    }
    throw validationError(`${param}.role`, `${param}.role must be user`);
  }
  if (compat && type === 'function_call') {
    const callId = text(raw.call_id, `${param}.call_id`, 512);
    const name = text(raw.name, `${param}.name`, 256);
    const args = typeof raw.arguments === 'string' ? raw.arguments : '{}';
    return { kind: 'history', item: { type: 'function_call', callId, name, arguments: args }, id };
  }
  if (compat && type === 'mcp_approval_response') return approvalItem(raw, param);
  if (!compat && type === 'mcp_approval_response') {
    throw compatOnly(
      `${param}.type`,
      `${param}.type mcp_approval_response (or decide on POST /v1/sessions/{id}/messages/{messageId}/answer)`,
    );
  }
  // Replayed items the service produced itself (server tool calls, approval requests, reasoning) carry nothing
  // the turn needs: the service holds them.
  if (
    compat &&
    (type === 'mcp_call' ||
      type === 'mcp_list_tools' ||
      type === 'mcp_approval_request' ||
      type === 'reasoning' ||
      type === 'item_reference')
  )
    return null;
  if (!compat && typeof type === 'string' && REPLAYED_TYPES.includes(type)) {
    throw compatOnly(`${param}.type`, `${param}.type ${type} (replayed history)`);
  }
  throw validationError(`${param}.type`, `${param}.type must be message or function_call_output`);
}

function input(value: unknown, compat: boolean): { items: InputItem[]; instructions: string[] } {
  if (typeof value === 'string') {
    const item: InputItem = {
      kind: 'user',
      text: text(value, 'input'),
      attachments: [],
      attachmentParams: [],
      images: [],
      id: null,
    };
    return { items: [item], instructions: [] };
  }
  if (!Array.isArray(value) || value.length === 0)
    throw validationError('input', 'input must be a string or a non-empty array');
  const parsed = value.map((raw, index) => inputItem(raw, `input[${index}]`, compat));
  const instructions = parsed.flatMap((item) => (item?.kind === 'instructions' ? [item.text] : []));
  const items = parsed.filter((item): item is InputItem => item !== null && item.kind !== 'instructions');
  const outputs = items.filter((item) => item.kind === 'output').length;
  if (!compat) {
    if (outputs > 0 && outputs !== items.length) {
      throw validationError('input', 'input must be either messages or function_call_output items, not both');
    }
    if (outputs === 0 && value.length > 32) throw validationError('input', 'input must have at most 32 messages');
  }
  if (outputs > 64) throw validationError('input', 'input must have at most 64 function_call_output items');
  if (value.length > (compat ? 1000 : 64)) throw validationError('input', 'input has too many items');
  return { items, instructions };
}

export function parseResponseRequest(body: unknown, compat: boolean): ResponseRequest {
  if (!isRecord(body)) throw validationError('body', 'body must be a JSON object');
  for (const key of Object.keys(body)) {
    // Compatibility mode tolerates fields OpenAI adds over time; strict mode names any unknown one.
    if (compat || STRICT_FIELDS.has(key)) continue;
    if (COMPAT_FIELDS.has(key)) throw compatOnly(key, key);
    throw validationError(key, `${key} is not a recognised field`);
  }
  const agent = agentRef(body.model, compat);
  if (body.input === undefined) throw validationError('input', 'input is required');
  if (body.stream !== undefined && typeof body.stream !== 'boolean' && !(compat && body.stream === null))
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
  const { items, instructions: systemTexts } = input(body.input, compat);
  const decision = items.find((item) => item.kind === 'approval');
  if (decision !== undefined && conversation === null && previousResponse === null) {
    throw validationError(
      'conversation',
      'conversation (or previous_response_id) is required when input holds mcp_approval_response items',
    );
  }
  if (!compat && conversation === null && items.some((item) => item.kind === 'output')) {
    throw validationError('conversation', 'conversation is required when input holds function_call_output items');
  }
  if (!compat) {
    return {
      agent,
      conversation,
      previousResponse: null,
      stream: body.stream === true,
      items,
      compat,
      instructions: null,
      tools: [],
      settings: {},
      metadata: {},
      echo: {
        toolChoice: 'auto',
        temperature: null,
        topP: null,
        parallelToolCalls: true,
        previousResponseId: null,
      },
    };
  }
  if (body.instructions !== undefined && body.instructions !== null && typeof body.instructions !== 'string') {
    throw validationError('instructions', 'instructions must be a string');
  }
  const settings: ModelSettings = {};
  const temperature = optionalNumber(body.temperature, 'temperature', 0, 2);
  const topP = optionalNumber(body.top_p, 'top_p', 0, 1);
  const maxOutput = optionalNumber(body.max_output_tokens, 'max_output_tokens', 1, 1_000_000);
  const maxToolCalls = optionalNumber(body.max_tool_calls, 'max_tool_calls', 0, 1_000_000);
  const topLogprobs = optionalNumber(body.top_logprobs, 'top_logprobs', 0, 20);
  const presencePenalty = optionalNumber(body.presence_penalty, 'presence_penalty', -2, 2);
  const frequencyPenalty = optionalNumber(body.frequency_penalty, 'frequency_penalty', -2, 2);
  if (temperature !== undefined) settings.temperature = temperature;
  if (topP !== undefined) settings.topP = topP;
  if (maxOutput !== undefined) settings.maxOutputTokens = Math.floor(maxOutput);
  const choice = toolChoice(body.tool_choice);
  if (choice.setting !== undefined) settings.toolChoice = choice.setting;
  const joined = [typeof body.instructions === 'string' ? body.instructions : '', ...systemTexts]
    .filter((part) => part !== '')
    .join('\n\n');
  return {
    agent,
    conversation,
    previousResponse,
    stream: body.stream === true,
    items,
    compat,
    instructions: joined === '' ? null : joined,
    tools: tools(body.tools),
    settings,
    metadata: metadataOf(body.metadata),
    echo: {
      toolChoice: choice.echo,
      // The numbers a model uses when none is given: OpenAI's defaults, which Open Responses requires as numbers.
      temperature: temperature ?? 1,
      topP: topP ?? 1,
      parallelToolCalls: typeof body.parallel_tool_calls === 'boolean' ? body.parallel_tool_calls : true,
      previousResponseId: previousResponse === null ? null : `resp_${previousResponse}`,
      presencePenalty: presencePenalty ?? 0,
      frequencyPenalty: frequencyPenalty ?? 0,
      topLogprobs: topLogprobs === undefined ? 0 : Math.floor(topLogprobs),
      maxOutputTokens: maxOutput === undefined ? null : Math.floor(maxOutput),
      maxToolCalls: maxToolCalls === undefined ? null : Math.floor(maxToolCalls),
      serviceTier: 'default',
      safetyIdentifier:
        optionalString(body.safety_identifier, 'safety_identifier') ?? optionalString(body.user, 'user'),
      promptCacheKey: optionalString(body.prompt_cache_key, 'prompt_cache_key'),
      reasoning: reasoning(body.reasoning),
    },
  };
}
