/**
 * Tool-call arguments between the engine (JSON text, as the model produced it) and the providers: what we send
 * back in a conversation.
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
