/**
 * The request body of `POST /chat/completions` built from a ModelRequest: exactly what the AI SDK's
 * openai-compatible chat model sent for the same input (same fields, same key order, same part encodings, same
 * normalization of earlier tool-call arguments, `tool_choice: "auto"` whenever tools are offered), so that a
 * provider sees no difference between the two clients. The wire shapes are declared here, apart from our
 * normalized types.
 */
import { argumentsForProvider } from './tool-arguments.ts';
import {
  type ContextMessage,
  ModelError,
  type ModelRequest,
  type ModelSettings,
  type ResponseFormat,
  type ToolSpec,
  type UserPart,
} from './types.ts';

export type ChatContentPart =
  | { type: 'text'; text: string }
  | { type: 'image_url'; image_url: { url: string; detail?: string } }
  | { type: 'video_url'; video_url: { url: string } }
  | { type: 'input_audio'; input_audio: { data: string; format: 'wav' | 'mp3' } }
  | { type: 'file'; file: { filename: string; file_data: string } };

export interface ChatToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

export type ChatMessage =
  | { role: 'system'; content: string }
  | { role: 'user'; content: string | ChatContentPart[] }
  | { role: 'assistant'; content: string | null; tool_calls?: ChatToolCall[] }
  | { role: 'tool'; tool_call_id: string; content: string };

export interface ChatTool {
  type: 'function';
  function: { name: string; description: string; parameters: Record<string, unknown>; strict: boolean };
}

export type ChatToolChoice = 'auto' | 'none' | 'required' | { type: 'function'; function: { name: string } };

export type ChatResponseFormat =
  | { type: 'json_object' }
  | {
      type: 'json_schema';
      json_schema: { schema: Record<string, unknown>; strict: boolean; name: string; description?: string };
    };

/** `response_format` as the AI SDK's openai-compatible chat model writes it. */
function toChatResponseFormat(format: ResponseFormat): ChatResponseFormat {
  if (format.type === 'json_object') return { type: 'json_object' };
  const { schema, strict, name, description } = format;
  return {
    type: 'json_schema',
    json_schema: { schema, strict, name, ...(description === undefined ? {} : { description }) },
  };
}

/** Field order matters only to byte-for-byte comparisons with the AI SDK's body; it is kept anyway. */
export interface ChatRequestBody {
  model: string;
  max_tokens?: number;
  temperature?: number;
  top_p?: number;
  frequency_penalty?: number;
  presence_penalty?: number;
  response_format?: ChatResponseFormat;
  messages: ChatMessage[];
  tools?: ChatTool[];
  tool_choice?: ChatToolChoice;
  parallel_tool_calls?: false;
  stream: true;
  stream_options: { include_usage: true };
}

/** Magic numbers of the image formats the AI SDK recognises; null bytes are wildcards. */
const IMAGE_SIGNATURES: ReadonlyArray<{ mediaType: string; prefix: ReadonlyArray<number | null> }> = [
  { mediaType: 'image/gif', prefix: [0x47, 0x49, 0x46, 0x38, 0x37, 0x61] },
  { mediaType: 'image/gif', prefix: [0x47, 0x49, 0x46, 0x38, 0x39, 0x61] },
  { mediaType: 'image/png', prefix: [0x89, 0x50, 0x4e, 0x47] },
  { mediaType: 'image/jpeg', prefix: [0xff, 0xd8] },
  { mediaType: 'image/webp', prefix: [0x52, 0x49, 0x46, 0x46, null, null, null, null, 0x57, 0x45, 0x42, 0x50] },
  { mediaType: 'image/bmp', prefix: [0x42, 0x4d, null, null, null, null, 0, 0, 0, 0] },
  { mediaType: 'image/tiff', prefix: [0x49, 0x49, 0x2a, 0] },
  { mediaType: 'image/tiff', prefix: [0x4d, 0x4d, 0, 0x2a] },
  { mediaType: 'image/avif', prefix: [0, 0, 0, null, 0x66, 0x74, 0x79, 0x70, 0x61, 0x76, 0x69, 0x66] },
  { mediaType: 'image/heic', prefix: [0, 0, 0, null, 0x66, 0x74, 0x79, 0x70, 0x68, 0x65, 0x69, 0x63] },
];

/** The image type the bytes show, if any: it wins over the declared type (as in the AI SDK). */
function sniffImage(data: Uint8Array): string | undefined {
  for (const { mediaType, prefix } of IMAGE_SIGNATURES) {
    if (data.length >= prefix.length && prefix.every((byte, index) => byte === null || data[index] === byte)) {
      return mediaType;
    }
  }
  return undefined;
}

const base64 = (data: Uint8Array): string =>
  Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('base64');

function unsupported(label: string, what: string): ModelError {
  return new ModelError('model_bad_request', `${label}: ${what} is not supported by chat completions`);
}

function contentPart(label: string, part: Exclude<UserPart, { type: 'text' }>): ChatContentPart {
  const mediaType = sniffImage(part.data) ?? part.mediaType;
  const slash = mediaType.indexOf('/');
  const topLevel = slash === -1 ? mediaType : mediaType.slice(0, slash);
  const subtype = slash === -1 ? '' : mediaType.slice(slash + 1);
  if (subtype === '' || subtype === '*') throw unsupported(label, `a file of media type "${mediaType}" (no subtype)`);
  const dataUrl = () => `data:${mediaType};base64,${base64(part.data)}`;
  switch (topLevel) {
    case 'image': {
      const detail = part.type === 'image' ? part.detail : undefined;
      return { type: 'image_url', image_url: { url: dataUrl(), ...(detail === undefined ? {} : { detail }) } };
    }
    case 'video':
      return { type: 'video_url', video_url: { url: dataUrl() } };
    case 'audio': {
      const format =
        mediaType === 'audio/wav' ? 'wav' : mediaType === 'audio/mp3' || mediaType === 'audio/mpeg' ? 'mp3' : null;
      if (format === null) throw unsupported(label, `audio of media type ${mediaType}`);
      return { type: 'input_audio', input_audio: { data: base64(part.data), format } };
    }
    case 'application': {
      if (mediaType !== 'application/pdf') throw unsupported(label, `a file of media type ${mediaType}`);
      const filename = part.type === 'file' ? part.filename : 'document.pdf';
      return { type: 'file', file: { filename, file_data: dataUrl() } };
    }
    case 'text':
      return { type: 'text', text: new TextDecoder().decode(part.data) };
    default:
      throw unsupported(label, `a file of media type ${mediaType}`);
  }
}

function userMessage(label: string, parts: UserPart[]): ChatMessage {
  // Empty text parts are dropped; a lone text part is sent as a plain string.
  const kept = parts.filter((part) => part.type !== 'text' || part.text !== '');
  const [only] = kept;
  if (kept.length === 1 && only?.type === 'text') return { role: 'user', content: only.text };
  return {
    role: 'user',
    content: kept.map((part) => (part.type === 'text' ? { type: 'text', text: part.text } : contentPart(label, part))),
  };
}

/** Fails like the AI SDK did when a tool call of the context has no result before the next user turn. */
function checkToolResults(label: string, context: ContextMessage[]): void {
  const open = new Set<string>();
  const fail = () => {
    const ids = [...open];
    const many = ids.length > 1;
    return new ModelError(
      'model_error',
      `${label}: Tool result${many ? 's are' : ' is'} missing for tool call${many ? 's' : ''} ${ids.join(', ')}.`,
    );
  };
  for (const message of context) {
    if (message.role === 'assistant') for (const call of message.toolCalls) open.add(call.callId);
    else if (message.role === 'tool') for (const result of message.results) open.delete(result.callId);
    else if (open.size > 0) throw fail();
  }
  if (open.size > 0) throw fail();
}

export function toChatMessages(label: string, instructions: string, context: ContextMessage[]): ChatMessage[] {
  checkToolResults(label, context);
  const messages: ChatMessage[] = instructions === '' ? [] : [{ role: 'system', content: instructions }];
  for (const message of context) {
    if (message.role === 'user') {
      messages.push(userMessage(label, message.content));
    } else if (message.role === 'assistant') {
      // An assistant step with neither text nor calls is left out entirely.
      if (message.toolCalls.length === 0) {
        if (message.text !== '') messages.push({ role: 'assistant', content: message.text });
        continue;
      }
      messages.push({
        role: 'assistant',
        content: message.text === '' ? null : message.text,
        tool_calls: message.toolCalls.map((call) => ({
          id: call.callId,
          type: 'function',
          function: { name: call.name, arguments: argumentsForProvider(call.arguments) },
        })),
      });
    } else {
      for (const result of message.results) {
        messages.push({ role: 'tool', tool_call_id: result.callId, content: result.output });
      }
    }
  }
  return messages;
}

export function toChatTools(specs: ToolSpec[]): ChatTool[] {
  return specs.map((spec) => {
    if (spec.parameters.type !== 'object') {
      throw new ModelError('model_bad_request', `tool ${spec.name}: parameters must be a JSON Schema of type object`);
    }
    return {
      type: 'function',
      function: { name: spec.name, description: spec.description, parameters: spec.parameters, strict: spec.strict },
    };
  });
}

function toolChoice(choice: ModelSettings['toolChoice']): ChatToolChoice {
  if (choice === undefined) return 'auto';
  return typeof choice === 'string' ? choice : { type: 'function', function: { name: choice.name } };
}

/** The streamed chat-completions request for `model`. Throws ModelError for what the endpoint cannot express. */
export function toChatRequestBody(label: string, model: string, request: ModelRequest): ChatRequestBody {
  const settings = request.settings ?? {};
  const maxTokens = settings.maxOutputTokens;
  if (maxTokens !== undefined && (!Number.isInteger(maxTokens) || maxTokens < 1)) {
    throw new ModelError('model_bad_request', `${label}: maxOutputTokens must be an integer >= 1, not ${maxTokens}`);
  }
  const tools = request.tools.length === 0 ? undefined : toChatTools(request.tools);
  return {
    model,
    ...(maxTokens === undefined ? {} : { max_tokens: maxTokens }),
    ...(settings.temperature === undefined ? {} : { temperature: settings.temperature }),
    ...(settings.topP === undefined ? {} : { top_p: settings.topP }),
    // In the order of the AI SDK's OpenAI-compatible provider.
    ...(settings.frequencyPenalty === undefined ? {} : { frequency_penalty: settings.frequencyPenalty }),
    ...(settings.presencePenalty === undefined ? {} : { presence_penalty: settings.presencePenalty }),
    ...(request.responseFormat === undefined ? {} : { response_format: toChatResponseFormat(request.responseFormat) }),
    messages: toChatMessages(label, request.instructions, request.context),
    ...(tools === undefined ? {} : { tools, tool_choice: toolChoice(settings.toolChoice) }),
    ...(tools !== undefined && settings.parallelToolCalls === false ? { parallel_tool_calls: false as const } : {}),
    stream: true,
    stream_options: { include_usage: true },
  };
}
