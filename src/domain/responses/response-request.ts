/**
 * The body of POST /v1/responses, normalised into a ResponseRequest. The body arrives validated by the schema of its
 * mode (http/schemas/responses.ts: field types, lengths, item and part shapes); what is checked here is what a schema
 * does not say: counts by item kind, fields that need each other (crossFieldRules). Strict mode is spec 4.1 exactly;
 * OpenAI compatibility mode also takes instructions (and `system`/`developer` messages, which join them), function
 * tools, sampling settings, previous_response_id, images by URL, and history items replayed in `input`
 * (deduplicated against the conversation later, by item id and call_id).
 */
import { validationError } from '../../errors/app-error.ts';
import { isUuid } from '../../lib/ids.ts';
import type { ContextPolicy } from '../../models/context-fit.ts';
import type { ModelSettings, ResponseFormat, ToolSpec } from '../../models/types.ts';
import { parseResponseFormat } from '../output-format.ts';
import type { HistoryItem } from '../turns/history-items.ts';
import type { Attachment } from '../turns/items.ts';
import type { ResponseEcho } from '../turns/message-options.ts';
import { type AgentRef, agentRefOf } from './agent-ref.ts';
import {
  compactionOf,
  contextPolicyOf,
  metadataOf,
  optionalNumber,
  optionalString,
  penaltySettings,
  reasoning,
  refuseUnsupported,
  toolChoice,
  tools,
} from './response-settings.ts';

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
  | { kind: 'approval'; approvalId: string; approve: boolean; reason: string | null; id: string | null; param: string }
  /** An answer to an MCP server's request for input (`{action, content?}`, checked against the request). */
  | { kind: 'elicitation'; elicitationId: string; answer: Record<string, unknown>; id: string | null; param: string };

export interface ResponseRequest {
  agent: AgentRef;
  /** `agent_version` (an extension field, in both modes): the version this Response runs. */
  agentVersion?: number;
  /** Session id (from `conv_<uuid>`), or null. */
  conversation: string | null;
  /** Message id (from `resp_<uuid>`), or null. */
  previousResponse: string | null;
  stream: boolean;
  /** Accepted and answered at once (`queued`); the turn runs on and GET /v1/responses/{id} follows it. */
  background: boolean;
  /** false: the Response is not kept once it is answered (its conversation is deleted when the turn ends). */
  store: boolean;
  items: InputItem[];
  compat: boolean;
  instructions: string | null;
  tools: ToolSpec[];
  settings: ModelSettings;
  /** `text.format` (compatibility mode): null asks for free text; absent leaves the agent's output format. */
  responseFormat?: ResponseFormat | null;
  /** `truncation` or `context_management` (compatibility mode): absent leaves the agent's context policy. */
  contextPolicy?: ContextPolicy;
  /** `context_management`'s `compact_threshold` (null: the default threshold). */
  compactThreshold?: number | null;
  metadata: Record<string, string>;
  /** Echoed in the Response object (with the metadata and the tools, added when the agent is known). */
  echo: Omit<ResponseEcho, 'metadata' | 'tools'>;
}

export { AGENTS_LISTED, type AgentRef, quoted } from './agent-ref.ts';

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);
const stringOr = <T>(value: unknown, otherwise: T): string | T => (typeof value === 'string' ? value : otherwise);

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

type Parts = { text: string; attachments: Attachment[]; attachmentParams: string[]; images: ImageUrl[] };

/** A validated `content`: a string, or input_text / output_text / input_file / input_image parts. */
function contentParts(value: unknown, param: string): Parts {
  const parts: Parts = { text: '', attachments: [], attachmentParams: [], images: [] };
  if (!Array.isArray(value)) return { ...parts, text: stringOr(value, '') };
  const texts: string[] = [];
  value.forEach((part: unknown, index) => {
    if (!isRecord(part)) return;
    const p = `${param}[${index}]`;
    const detail = stringOr(part.detail, undefined);
    if (part.type === 'input_text' || part.type === 'output_text') texts.push(stringOr(part.text, ''));
    else if (part.type === 'input_image' && typeof part.image_url === 'string') {
      const image: ImageUrl = { url: part.image_url, param: `${p}.image_url` };
      if (detail !== undefined) image.detail = detail;
      parts.images.push(image);
    } else if (typeof part.file_id === 'string') {
      const attachment: Attachment = {
        kind: part.type === 'input_image' ? 'image' : 'file',
        fileId: part.file_id.toLowerCase(),
      };
      if (detail !== undefined) attachment.detail = detail;
      parts.attachments.push(attachment);
      parts.attachmentParams.push(`${p}.file_id`);
    }
  });
  return { ...parts, text: texts.join('\n') };
}

/** An input item, or the text of a system/developer message (compatibility mode), or null for one to skip. */
type ParsedItem = InputItem | { kind: 'instructions'; text: string };

function inputItem(raw: unknown, param: string): ParsedItem | null {
  if (!isRecord(raw)) return null;
  const id = stringOr(raw.id, null);
  switch (raw.type ?? 'message') {
    case 'function_call_output': {
      // Structured outputs (text parts, compatibility mode) are flattened to their text.
      const output = Array.isArray(raw.output)
        ? raw.output
            .map((part: unknown) =>
              isRecord(part) && typeof part.text === 'string' ? part.text : JSON.stringify(part),
            )
            .join('\n')
        : stringOr(raw.output, '');
      return { kind: 'output', callId: stringOr(raw.call_id, ''), output, id };
    }
    case 'function_call': {
      const call = {
        type: 'function_call' as const,
        callId: stringOr(raw.call_id, ''),
        name: stringOr(raw.name, ''),
        arguments: stringOr(raw.arguments, '{}'),
      };
      return { kind: 'history', item: call, id };
    }
    case 'compaction':
      return { kind: 'history', item: { type: 'compaction', summary: stringOr(raw.encrypted_content, '') }, id };
    case 'mcp_approval_response':
      return {
        kind: 'approval',
        approvalId: stringOr(raw.approval_request_id, ''),
        approve: raw.approve === true,
        reason: stringOr(raw.reason, null),
        id,
        param,
      };
    case 'mcp_elicitation_response':
      return {
        kind: 'elicitation',
        elicitationId: stringOr(raw.elicitation_request_id, ''),
        answer: {
          action: raw.action,
          ...(raw.content === undefined ? {} : { content: raw.content }),
        },
        id,
        param,
      };
    case 'message': {
      const content = contentParts(raw.content, `${param}.content`);
      if (raw.role === 'assistant')
        return { kind: 'history', item: { type: 'assistant_message', text: content.text }, id };
      if (raw.role === 'system' || raw.role === 'developer') {
        if (content.attachments.length > 0 || content.images.length > 0) {
          throw validationError(`${param}.content`, `${param}.content of a ${raw.role} message must be text`);
        }
        return { kind: 'instructions', text: content.text };
      }
      return { kind: 'user', ...content, id };
    }
    default:
      // Replayed items the service produced itself (server tool calls, approval requests, reasoning) carry nothing
      // the turn needs: the service holds them.
      return null;
  }
}

/**
 * The rules of a validated body that its schema cannot say: how many items of each kind `input` may hold, and the
 * fields an item kind needs (`conversation` for outputs and approval decisions; previous_response_id without it).
 */
function crossFieldRules(
  body: Record<string, unknown>,
  items: InputItem[],
  compat: boolean,
  ids: { conversation: string | null; previousResponse: string | null },
): void {
  const outputs = items.filter((item) => item.kind === 'output').length;
  const answers = items.filter((item) => item.kind === 'elicitation').length;
  if (!compat && Array.isArray(body.input)) {
    if (outputs > 0 && outputs + answers !== items.length) {
      throw validationError('input', 'input must be either messages or function_call_output items, not both');
    }
    if (outputs === 0 && body.input.length > 32) throw validationError('input', 'input must have at most 32 messages');
  }
  if (outputs > 64) throw validationError('input', 'input must have at most 64 function_call_output items');
  if (ids.previousResponse !== null && ids.conversation !== null) {
    throw validationError('previous_response_id', 'previous_response_id cannot be used together with conversation');
  }
  if (items.some((item) => item.kind === 'approval') && ids.conversation === null && ids.previousResponse === null) {
    throw validationError(
      'conversation',
      'conversation (or previous_response_id) is required when input holds mcp_approval_response items',
    );
  }
  if (answers > 0 && ids.conversation === null && ids.previousResponse === null) {
    throw validationError(
      'conversation',
      'conversation (or previous_response_id) is required when input holds mcp_elicitation_response items',
    );
  }
  if (!compat && ids.conversation === null && outputs > 0) {
    throw validationError('conversation', 'conversation is required when input holds function_call_output items');
  }
}

function input(value: unknown): { items: InputItem[]; instructions: string[] } {
  // Absent only where the body may leave it out (POST /v1/responses/compact).
  if (value === undefined || value === null) return { items: [], instructions: [] };
  if (!Array.isArray(value)) {
    const text = stringOr(value, '');
    return {
      items: [{ kind: 'user', text, attachments: [], attachmentParams: [], images: [], id: null }],
      instructions: [],
    };
  }
  const parsed = value.map((raw: unknown, index) => inputItem(raw, `input[${index}]`));
  const instructions = parsed.flatMap((item) => (item?.kind === 'instructions' ? [item.text] : []));
  const items = parsed.filter((item): item is InputItem => item !== null && item.kind !== 'instructions');
  return { items, instructions };
}

/**
 * `background` and `store`: a Response that is not stored cannot run in the background (nobody could retrieve it)
 * nor in a conversation that outlives it (its items would stay there).
 */
function lifecycle(
  body: Record<string, unknown>,
  ids: { conversation: string | null; previousResponse: string | null },
): { background: boolean; store: boolean } {
  const background = body.background === true;
  const store = body.store !== false;
  if (store) return { background, store };
  if (background) throw validationError('background', 'background responses must be stored: remove store: false');
  if (ids.conversation !== null || ids.previousResponse !== null) {
    throw validationError(
      'store',
      'a Response with store: false runs in a conversation of its own, deleted when it ends; it cannot continue conversation or previous_response_id',
    );
  }
  return { background, store };
}

/** A body the mode's schema accepted (http/responses-body.ts), as a ResponseRequest. */
export function parseResponseRequest(body: unknown, compat: boolean): ResponseRequest {
  if (!isRecord(body)) throw validationError('body', 'body must be a JSON object');
  const agent = agentRefOf(stringOr(body.model, ''));
  const given = isRecord(body.conversation) ? body.conversation.id : body.conversation;
  const param = isRecord(body.conversation) ? 'conversation.id' : 'conversation';
  const conversation = given === undefined || given === null ? null : conversationIdToSession(given, param);
  const previous = compat ? body.previous_response_id : undefined;
  const previousResponse =
    previous === undefined || previous === null ? null : responseIdToMessage(previous, 'previous_response_id');
  const { items, instructions: systemTexts } = input(body.input);
  crossFieldRules(body, items, compat, { conversation, previousResponse });
  const kept = lifecycle(body, { conversation, previousResponse });
  const pin = typeof body.agent_version === 'number' ? { agentVersion: body.agent_version } : {};
  if (!compat) {
    return {
      agent,
      ...pin,
      conversation,
      previousResponse: null,
      stream: body.stream === true,
      ...kept,
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
        ...kept,
      },
    };
  }
  refuseUnsupported(body);
  const settings: ModelSettings = penaltySettings(body);
  const temperature = optionalNumber(body.temperature);
  const topP = optionalNumber(body.top_p);
  const maxOutput = optionalNumber(body.max_output_tokens);
  const maxToolCalls = optionalNumber(body.max_tool_calls);
  const topLogprobs = optionalNumber(body.top_logprobs);
  if (temperature !== undefined) settings.temperature = temperature;
  if (topP !== undefined) settings.topP = topP;
  if (maxOutput !== undefined) settings.maxOutputTokens = Math.floor(maxOutput);
  if (maxToolCalls !== undefined) settings.maxToolCalls = Math.floor(maxToolCalls);
  const choice = toolChoice(body.tool_choice);
  if (choice.setting !== undefined) settings.toolChoice = choice.setting;
  const format = isRecord(body.text) ? body.text.format : undefined;
  const compaction = compactionOf(body.context_management);
  const policy = compaction === undefined ? contextPolicyOf(body.truncation) : 'compaction';
  const joined = [typeof body.instructions === 'string' ? body.instructions : '', ...systemTexts]
    .filter((part) => part !== '')
    .join('\n\n');
  return {
    agent,
    ...pin,
    conversation,
    previousResponse,
    stream: body.stream === true,
    ...kept,
    items,
    compat,
    instructions: joined === '' ? null : joined,
    tools: tools(body.tools),
    settings,
    ...(format === undefined || format === null ? {} : { responseFormat: parseResponseFormat(format, 'text.format') }),
    ...(policy === undefined ? {} : { contextPolicy: policy }),
    ...(compaction === undefined ? {} : { compactThreshold: compaction.compactThreshold }),
    metadata: metadataOf(body.metadata),
    echo: {
      toolChoice: choice.echo,
      // The numbers a model uses when none is given: OpenAI's defaults, which Open Responses requires as numbers.
      temperature: temperature ?? 1,
      topP: topP ?? 1,
      parallelToolCalls: typeof body.parallel_tool_calls === 'boolean' ? body.parallel_tool_calls : true,
      previousResponseId: previousResponse === null ? null : `resp_${previousResponse}`,
      presencePenalty: settings.presencePenalty ?? 0,
      frequencyPenalty: settings.frequencyPenalty ?? 0,
      topLogprobs: topLogprobs === undefined ? 0 : Math.floor(topLogprobs),
      maxOutputTokens: maxOutput === undefined ? null : Math.floor(maxOutput),
      maxToolCalls: maxToolCalls === undefined ? null : Math.floor(maxToolCalls),
      serviceTier: 'default',
      safetyIdentifier: optionalString(body.safety_identifier) ?? optionalString(body.user),
      promptCacheKey: optionalString(body.prompt_cache_key),
      reasoning: reasoning(body.reasoning),
      ...kept,
    },
  };
}
