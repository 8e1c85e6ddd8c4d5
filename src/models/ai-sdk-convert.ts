/**
 * Agentry's normalized model shapes → the AI SDK's (messages, tools, call settings), and the SDK's errors →
 * ModelError (through the mapping shared with the chat-completions client, `provider-errors.ts`). Kept apart from
 * the streaming loop so that the wire mapping can be read (and changed) alone.
 */
import {
  APICallError,
  type AssistantModelMessage,
  InvalidArgumentError,
  InvalidPromptError,
  type JSONSchema7,
  jsonSchema,
  LoadAPIKeyError,
  type ModelMessage,
  Output,
  RetryError,
  StreamProviderError,
  type ToolChoice,
  type ToolSet,
  TypeValidationError,
  tool,
  UnsupportedFunctionalityError,
  type UserModelMessage,
} from 'ai';
import { connectionFailed, fromStatus, retryAfterOf } from './provider-errors.ts';
import { parseArguments } from './tool-arguments.ts';
import { type ContextMessage, ModelError, type ModelSettings, type ResponseFormat, type ToolSpec } from './types.ts';

export function toSdkMessages(context: ContextMessage[]): ModelMessage[] {
  const messages: ModelMessage[] = [];
  for (const message of context) {
    if (message.role === 'user') {
      const content: Exclude<UserModelMessage['content'], string> = message.content.map((part) => {
        if (part.type === 'text') return { type: 'text', text: part.text };
        // AI SDK 7 folds images into file parts with an image media type. OpenAI takes an image's detail as a
        // provider option of the part; Anthropic's Messages API has no such field and ignores it.
        if (part.type === 'image') {
          const image = { type: 'file' as const, mediaType: part.mediaType, data: part.data };
          return part.detail === undefined
            ? image
            : { ...image, providerOptions: { openai: { imageDetail: part.detail } } };
        }
        return { type: 'file', mediaType: part.mediaType, filename: part.filename, data: part.data };
      });
      messages.push({ role: 'user', content });
    } else if (message.role === 'assistant') {
      const content: Exclude<AssistantModelMessage['content'], string> = [];
      // Providers reject empty text blocks; an assistant step with neither text nor calls is left out entirely.
      if (message.text !== '') content.push({ type: 'text', text: message.text });
      for (const call of message.toolCalls) {
        content.push({
          type: 'tool-call',
          toolCallId: call.callId,
          toolName: call.name,
          input: parseArguments(call.arguments),
        });
      }
      if (content.length > 0) messages.push({ role: 'assistant', content });
    } else if (message.results.length > 0) {
      messages.push({
        role: 'tool',
        content: message.results.map((result) => ({
          type: 'tool-result',
          toolCallId: result.callId,
          toolName: result.name,
          output: result.isError
            ? { type: 'error-text', value: result.output }
            : { type: 'text', value: result.output },
        })),
      });
    }
  }
  return messages;
}

function isObjectSchema(schema: Record<string, unknown>): schema is Record<string, unknown> & JSONSchema7 {
  return schema.type === 'object';
}

/** Tools WITHOUT execute functions: the SDK then hands the calls back to us instead of running them. */
export function toSdkTools(specs: ToolSpec[]): ToolSet | undefined {
  if (specs.length === 0) return undefined;
  const tools: ToolSet = {};
  for (const spec of specs) {
    if (!isObjectSchema(spec.parameters)) {
      throw new ModelError('model_bad_request', `tool ${spec.name}: parameters must be a JSON Schema of type object`);
    }
    // No `validate`: argument validation is the engine's job, so that an invalid call becomes a failed tool call
    // the model can see and correct rather than an SDK error.
    tools[spec.name] = tool({
      description: spec.description,
      inputSchema: jsonSchema(spec.parameters),
      strict: spec.strict,
    });
  }
  return tools;
}

/**
 * The SDK's structured output for a response format: its providers send it as their wire's JSON schema mode
 * (OpenAI `text.format`, Anthropic's output format or a forced tool). No validation here: the engine checks the
 * final reply itself, so that a mismatch fails the turn with `invalid_output` whatever the provider.
 */
export function toSdkOutput(format: ResponseFormat | undefined) {
  if (format === undefined) return undefined;
  if (format.type === 'json_object') return Output.json();
  if (!isObjectSchema(format.schema)) {
    throw new ModelError('model_bad_request', `response format ${format.name}: the schema must be a JSON object`);
  }
  return Output.object({
    schema: jsonSchema(format.schema),
    name: format.name,
    ...(format.description === undefined ? {} : { description: format.description }),
  });
}

export interface SdkCallSettings {
  temperature?: number;
  topP?: number;
  maxOutputTokens?: number;
  presencePenalty?: number;
  frequencyPenalty?: number;
  toolChoice?: ToolChoice<ToolSet>;
}

/** Only the settings that are set, so that provider defaults apply to the rest. */
export function toSdkSettings(settings: ModelSettings | undefined, hasTools: boolean): SdkCallSettings {
  const result: SdkCallSettings = {};
  if (settings === undefined) return result;
  if (settings.temperature !== undefined) result.temperature = settings.temperature;
  if (settings.topP !== undefined) result.topP = settings.topP;
  if (settings.maxOutputTokens !== undefined) result.maxOutputTokens = settings.maxOutputTokens;
  if (settings.presencePenalty !== undefined) result.presencePenalty = settings.presencePenalty;
  if (settings.frequencyPenalty !== undefined) result.frequencyPenalty = settings.frequencyPenalty;
  const choice = settings.toolChoice;
  if (choice !== undefined && hasTools) {
    result.toolChoice = typeof choice === 'string' ? choice : { type: 'tool', toolName: choice.name };
  }
  return result;
}

/**
 * Maps whatever the SDK or the network threw to a ModelError. `label` names the provider in messages, e.g.
 * `openai`. The caller handles aborts before calling this (an abort surfaces as the signal's reason).
 */
export function toModelError(error: unknown, label: string): ModelError {
  if (error instanceof ModelError) return error;
  if (RetryError.isInstance(error)) return toModelError(error.lastError, label);
  if (APICallError.isInstance(error)) {
    if (error.statusCode === undefined || error.statusCode < 400) {
      // No HTTP status: the request never got an answer (refused, reset, timed out); a success status: the
      // connection broke while the answer streamed.
      return connectionFailed(label, error);
    }
    return fromStatus(label, error.statusCode, error.message, error, retryAfterOf(error.responseHeaders));
  }
  if (StreamProviderError.isInstance(error)) {
    if (error.statusCode !== undefined) return fromStatus(label, error.statusCode, error.message, error);
    return new ModelError(error.isRetryable ? 'model_unavailable' : 'model_error', `${label}: ${error.message}`, {
      retriable: error.isRetryable,
      cause: error,
    });
  }
  if (LoadAPIKeyError.isInstance(error)) {
    return new ModelError('model_not_configured', `${label}: ${error.message}`, { cause: error });
  }
  if (
    UnsupportedFunctionalityError.isInstance(error) ||
    InvalidPromptError.isInstance(error) ||
    InvalidArgumentError.isInstance(error) ||
    TypeValidationError.isInstance(error)
  ) {
    return new ModelError('model_bad_request', `${label}: ${error.message}`, { cause: error });
  }
  if (error instanceof TypeError && /fetch failed/i.test(error.message)) {
    return new ModelError('model_unavailable', `${label} is unreachable: ${error.message}`, {
      retriable: true,
      cause: error,
    });
  }
  const message = error instanceof Error ? error.message : String(error);
  return new ModelError('model_error', `${label}: ${message}`, { cause: error });
}
