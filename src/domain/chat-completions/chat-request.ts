/**
 * The body of POST /v1/chat/completions, normalised into a ChatRequest. The body arrives validated by its schema
 * (http/schemas/chat-completions.ts: shapes, roles, part types); what is checked here is what a schema does not say:
 * fields Agentry cannot honour set to something other than "off" (refused by name, never dropped), tool messages
 * that answer no call, calls left unanswered. Stateless: `messages` is the whole conversation, so everything before
 * the trailing user messages is replayed history and those are the new input.
 */
import { validationError } from '../../errors/app-error.ts';
import type { ModelSettings, ResponseFormat, ToolSpec } from '../../models/types.ts';
import { checkOutputSchema } from '../output-format.ts';
import { type AgentRef, agentRefOf } from '../responses/agent-ref.ts';
import { penaltySettings } from '../responses/response-settings.ts';

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);
const stringOr = <T>(value: unknown, otherwise: T): string | T => (typeof value === 'string' ? value : otherwise);

/** An image of a user message given by URL (data: or https), imported as a file before the turn is accepted. */
export interface ChatImage {
  url: string;
  detail?: string;
  param: string;
}

export type ChatEntry =
  | { kind: 'user'; text: string; images: ChatImage[]; files: { fileId: string; param: string }[] }
  | { kind: 'assistant'; text: string; calls: { callId: string; name: string; arguments: string }[] }
  | { kind: 'tool'; callId: string; output: string };

export interface ChatRequest {
  agent: AgentRef;
  /** `agent_version` (an extension field): the version this call runs. */
  agentVersion?: number;
  /** `model` as sent, echoed in the completion. */
  model: string;
  stream: boolean;
  includeUsage: boolean;
  /** The system and developer messages, joined. */
  instructions: string | null;
  entries: ChatEntry[];
  tools: ToolSpec[];
  settings: ModelSettings;
  /** Absent: the agent's output format; null: free text (`type: "text"`). */
  responseFormat: ResponseFormat | null | undefined;
  metadata: Record<string, string>;
  /** `safety_identifier`, or the older `user`: who the end user is, recorded with the turn. */
  endUser: string | null;
}

/** Fields with no effect Agentry can give: each accepted only at its "off" value. */
const OFF_ONLY: Record<string, { off: (value: unknown) => boolean; why: string }> = {
  stop: {
    off: (value) => value === null || (Array.isArray(value) && value.length === 0),
    why: 'stop sequences are not supported; remove stop',
  },
  seed: { off: (value) => value === null, why: 'seed is not supported; remove it' },
  logprobs: { off: (value) => value === null || value === false, why: 'logprobs are not returned; remove logprobs' },
  top_logprobs: {
    off: (value) => value === null || value === 0,
    why: 'logprobs are not returned; remove top_logprobs',
  },
  logit_bias: {
    off: (value) => value === null || (isRecord(value) && Object.keys(value).length === 0),
    why: 'logit_bias is not supported; remove it',
  },
  reasoning_effort: {
    off: (value) => value === null,
    why: "reasoning_effort is not supported: the agent's configuration sets its model",
  },
  verbosity: { off: (value) => value === null, why: 'verbosity is not supported' },
  modalities: {
    off: (value) => value === null || (Array.isArray(value) && value.every((entry) => entry === 'text')),
    why: 'modalities may only be ["text"]',
  },
  audio: { off: (value) => value === null, why: 'audio output is not supported' },
  prediction: { off: (value) => value === null, why: 'predicted outputs are not supported' },
  web_search_options: {
    off: (value) => value === null,
    why: 'web_search_options is not supported: give the agent a web search tool',
  },
  functions: { off: (value) => value === null, why: 'functions is not supported: use tools' },
  function_call: { off: (value) => value === null, why: 'function_call is not supported: use tool_choice' },
};

function refuseUnsupported(body: Record<string, unknown>): void {
  for (const [field, rule] of Object.entries(OFF_ONLY)) {
    if (body[field] !== undefined && !rule.off(body[field])) throw validationError(field, rule.why);
  }
  if (body.n !== undefined && body.n !== null && body.n !== 1) {
    throw validationError('n', 'n must be 1: one choice is generated per call');
  }
}

/** The text of a string or of text (and refusal) parts. */
function textOf(value: unknown): string {
  if (!Array.isArray(value)) return stringOr(value, '');
  return value
    .flatMap((part: unknown) => (isRecord(part) ? [stringOr(part.text, stringOr(part.refusal, ''))] : []))
    .join('\n');
}

function userEntry(content: unknown, param: string): ChatEntry {
  if (!Array.isArray(content)) return { kind: 'user', text: stringOr(content, ''), images: [], files: [] };
  const texts: string[] = [];
  const images: ChatImage[] = [];
  const files: { fileId: string; param: string }[] = [];
  content.forEach((part: unknown, index) => {
    if (!isRecord(part)) return;
    const at = `${param}.content[${index}]`;
    if (part.type === 'text') texts.push(stringOr(part.text, ''));
    else if (part.type === 'image_url' && isRecord(part.image_url)) {
      const image: ChatImage = { url: stringOr(part.image_url.url, ''), param: `${at}.image_url.url` };
      const detail = stringOr(part.image_url.detail, undefined);
      if (detail !== undefined) image.detail = detail;
      images.push(image);
    } else if (part.type === 'file' && isRecord(part.file)) {
      files.push({ fileId: stringOr(part.file.file_id, '').toLowerCase(), param: `${at}.file.file_id` });
    }
  });
  return { kind: 'user', text: texts.join('\n'), images, files };
}

function assistantEntry(raw: Record<string, unknown>): ChatEntry {
  const calls = (Array.isArray(raw.tool_calls) ? raw.tool_calls : []).flatMap((call: unknown) =>
    isRecord(call) && isRecord(call.function)
      ? [
          {
            callId: stringOr(call.id, ''),
            name: stringOr(call.function.name, ''),
            arguments: stringOr(call.function.arguments, '{}'),
          },
        ]
      : [],
  );
  return { kind: 'assistant', text: textOf(raw.content), calls };
}

/** Every tool message answers a call of an earlier assistant message, and every call is answered. */
function checkCalls(entries: ChatEntry[], params: string[]): void {
  const open = new Map<string, string>();
  const seen = new Set<string>();
  entries.forEach((entry, index) => {
    const param = params[index] ?? 'messages';
    if (entry.kind === 'assistant') {
      for (const call of entry.calls) {
        if (seen.has(call.callId)) {
          throw validationError(`${param}.tool_calls`, `tool call id ${call.callId} appears twice`);
        }
        seen.add(call.callId);
        open.set(call.callId, param);
      }
      return;
    }
    if (entry.kind === 'tool') {
      if (!open.delete(entry.callId)) {
        throw validationError(
          `${param}.tool_call_id`,
          `${param}.tool_call_id ${JSON.stringify(entry.callId)} answers no tool call of an earlier assistant message (or one already answered)`,
        );
      }
      return;
    }
    const [unanswered] = open.values();
    if (unanswered !== undefined) {
      throw validationError(
        `${unanswered}.tool_calls`,
        `the tool calls of ${unanswered} must each be answered by a tool message before ${param}`,
      );
    }
  });
}

function messagesOf(value: unknown): { entries: ChatEntry[]; instructions: string[] } {
  const entries: ChatEntry[] = [];
  const params: string[] = [];
  const instructions: string[] = [];
  (Array.isArray(value) ? value : []).forEach((raw: unknown, index) => {
    if (!isRecord(raw)) return;
    const param = `messages[${index}]`;
    if (raw.role === 'system' || raw.role === 'developer') {
      const text = textOf(raw.content);
      if (text !== '') instructions.push(text);
      return;
    }
    params.push(param);
    if (raw.role === 'user') entries.push(userEntry(raw.content, param));
    else if (raw.role === 'assistant') entries.push(assistantEntry(raw));
    else entries.push({ kind: 'tool', callId: stringOr(raw.tool_call_id, ''), output: textOf(raw.content) });
  });
  if (entries.length === 0) {
    throw validationError('messages', 'messages must hold at least one user, assistant or tool message');
  }
  checkCalls(entries, params);
  return { entries, instructions };
}

function toolsOf(value: unknown): ToolSpec[] {
  if (!Array.isArray(value)) return [];
  return value.flatMap((tool: unknown) => {
    if (!isRecord(tool) || !isRecord(tool.function)) return [];
    const fn = tool.function;
    return [
      {
        name: stringOr(fn.name, ''),
        description: stringOr(fn.description, ''),
        parameters: isRecord(fn.parameters)
          ? fn.parameters
          : { type: 'object', properties: {}, additionalProperties: false },
        strict: fn.strict === true,
      },
    ];
  });
}

function responseFormatOf(value: unknown): ResponseFormat | null | undefined {
  if (!isRecord(value)) return undefined;
  if (value.type === 'text') return null;
  if (value.type === 'json_object') return { type: 'json_object' };
  if (value.type !== 'json_schema' || !isRecord(value.json_schema)) return null;
  const spec = value.json_schema;
  const schema = isRecord(spec.schema) ? spec.schema : {};
  checkOutputSchema(schema, 'response_format.json_schema.schema');
  const format: ResponseFormat = {
    type: 'json_schema',
    name: stringOr(spec.name, 'response'),
    schema,
    strict: spec.strict === true,
  };
  const description = stringOr(spec.description, undefined);
  return description === undefined ? format : { ...format, description };
}

function settingsOf(body: Record<string, unknown>, tools: ToolSpec[]): ModelSettings {
  const settings: ModelSettings = penaltySettings(body);
  if (typeof body.temperature === 'number') settings.temperature = body.temperature;
  if (typeof body.top_p === 'number') settings.topP = body.top_p;
  const max = body.max_completion_tokens ?? body.max_tokens;
  if (typeof max === 'number') settings.maxOutputTokens = max;
  const choice = body.tool_choice;
  if (choice === 'auto' || choice === 'none' || choice === 'required') settings.toolChoice = choice;
  else if (isRecord(choice) && isRecord(choice.function)) {
    const name = stringOr(choice.function.name, '');
    if (!tools.some((tool) => tool.name === name)) {
      throw validationError('tool_choice.function.name', `tool_choice names ${JSON.stringify(name)}, not one of tools`);
    }
    settings.toolChoice = { name };
  }
  return settings;
}

const metadataOf = (value: unknown): Record<string, string> =>
  isRecord(value)
    ? Object.fromEntries(
        Object.entries(value).flatMap(([key, entry]) => (typeof entry === 'string' ? [[key, entry]] : [])),
      )
    : {};

/** A body its schema accepted, as a ChatRequest; a 400 naming the field for what the schema cannot say. */
export function parseChatRequest(body: unknown): ChatRequest {
  if (!isRecord(body)) throw validationError('body', 'body must be a JSON object');
  refuseUnsupported(body);
  const model = stringOr(body.model, '');
  const prefixed = model.startsWith('agent:') ? model.slice('agent:'.length) : model;
  const { entries, instructions } = messagesOf(body.messages);
  const tools = toolsOf(body.tools);
  const joined = instructions.join('\n\n');
  return {
    agent: agentRefOf(prefixed),
    ...(typeof body.agent_version === 'number' ? { agentVersion: body.agent_version } : {}),
    model,
    stream: body.stream === true,
    includeUsage: isRecord(body.stream_options) && body.stream_options.include_usage === true,
    instructions: joined === '' ? null : joined,
    entries,
    tools,
    settings: settingsOf(body, tools),
    responseFormat: responseFormatOf(body.response_format),
    metadata: metadataOf(body.metadata),
    endUser: stringOr(body.safety_identifier, stringOr(body.user, null)),
  };
}
