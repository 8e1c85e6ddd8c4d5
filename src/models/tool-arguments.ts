/**
 * Tool-call arguments between the engine (JSON text, as the model produced it) and the providers: what we send
 * back in a conversation, and how a streamed call's text is normalized before the engine sees it. Shared by the
 * AI SDK adapters and the chat-completions client so that both send and report the same text.
 */
import { isJsonObject } from '../lib/guards.ts';

/** Arguments as an object (Anthropic rejects anything else), `{}` when the text is not a JSON object. */
export function parseArguments(text: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(text);
    if (isJsonObject(value)) return { ...value };
  } catch {
    // The engine records such calls as failed; the model still needs to see that it made them.
  }
  return {};
}

/** The arguments text sent back to a provider for a call the model made earlier: always a JSON object. */
export function argumentsForProvider(text: string): string {
  return JSON.stringify(parseArguments(text));
}

/**
 * The arguments text the engine receives for a streamed call, as the AI SDK reports it: valid JSON re-serialized
 * compactly, empty text as `{}` (for a tool the request offered), anything else verbatim so that the engine can
 * report the invalid call as it is.
 */
export function argumentsFromModel(text: string, knownTool: boolean): string {
  if (text.trim() === '') return knownTool ? '{}' : text;
  try {
    return JSON.stringify(JSON.parse(text));
  } catch {
    return text;
  }
}
