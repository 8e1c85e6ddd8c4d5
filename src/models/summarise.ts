/**
 * Summarising a conversation that no longer fits a model's window (docs/context.md): the conversation is read as a
 * transcript, in chunks that each fit the room together with the summary so far, so that a summary never
 * overflows whatever the conversation's length. Used by the compaction policy of a turn (engine/compaction.ts)
 * and by POST /v1/responses/compact (domain/responses/response-compact.ts).
 */
import { storableText } from '../lib/storable-text.ts';
import { CHARS_PER_TOKEN, fixedTokens } from './context-fit.ts';
import type { ContextMessage, ModelAdapter, Usage } from './types.ts';

/** What the summariser is told (docs/context.md quotes it). */
export const COMPACTION_INSTRUCTIONS = [
  'You write the working memory of an AI agent whose conversation no longer fits its context window.',
  'Summarise the conversation you are given (and the summary so far, when there is one) so that the agent can go on',
  'from your summary alone: what the user asked for and still wants, decisions and facts established, what each tool',
  'call found (names, identifiers, numbers, paths, errors), what is done and what remains. Keep exact values; leave',
  'out pleasantries and repetition. Write plain text, in the language of the conversation, and nothing else.',
].join('\n');

/** The longest summary, in tokens (at most an eighth of the room). */
const SUMMARY_MAX_TOKENS = 2_000;
/** How long one summarising call may take. */
const SUMMARY_TIMEOUT_MS = 120_000;

/** The model that writes the summary, and what bounds its calls. */
export interface Summariser {
  adapter: ModelAdapter;
  model: string;
  signal: AbortSignal;
  now(): number;
}

export interface Summary {
  text: string;
  usage: Usage;
  /** The model calls it took (one per chunk). */
  calls: number;
  /** When its first call started. */
  startedAt: number;
}

/** One entry of the conversation as the summariser reads it, cut to `max` characters with a note. */
function transcript(message: ContextMessage, max: number): string {
  let text: string;
  if (message.role === 'user') {
    const parts = message.content.map((part) =>
      part.type === 'text' ? part.text : part.type === 'image' ? '[image]' : `[file ${part.filename}]`,
    );
    text = `User: ${parts.join('\n')}`;
  } else if (message.role === 'assistant') {
    const calls = message.toolCalls.map((call) => `Assistant called ${call.name}(${call.arguments}) [${call.callId}]`);
    text = [message.text === '' ? [] : [`Assistant: ${message.text}`], calls].flat().join('\n');
  } else {
    text = message.results.map((result) => `Output of ${result.name} [${result.callId}]: ${result.output}`).join('\n');
  }
  if (text.length <= max) return text;
  return `${text.slice(0, max)}\n[cut for the summary: ${max} of ${text.length} characters kept]`;
}

/** The conversation as text, in chunks of at most `chars` characters each. */
function chunksOf(messages: ContextMessage[], chars: number): string[] {
  const chunks: string[] = [];
  let current = '';
  for (const message of messages) {
    const text = transcript(message, chars - 100);
    if (current !== '' && current.length + text.length + 2 > chars) {
      chunks.push(current);
      current = '';
    }
    current = current === '' ? text : `${current}\n\n${text}`;
  }
  if (current !== '') chunks.push(current);
  return chunks;
}

/** One summarising call: the running summary and the next chunk in, the new summary out. */
async function summaryCall(by: Summariser, running: string, chunk: string, maxTokens: number): Promise<Summary> {
  const startedAt = by.now();
  const text =
    running === ''
      ? `Conversation:\n${chunk}`
      : `Summary so far:\n${running}\n\nThe conversation that follows it:\n${chunk}`;
  let out = '';
  let usage: Usage = { inputTokens: 0, outputTokens: 0 };
  for await (const event of by.adapter.stream({
    model: by.model,
    instructions: COMPACTION_INSTRUCTIONS,
    context: [{ role: 'user', content: [{ type: 'text', text }] }],
    tools: [],
    settings: { maxOutputTokens: maxTokens },
    signal: AbortSignal.any([by.signal, AbortSignal.timeout(SUMMARY_TIMEOUT_MS)]),
  })) {
    if (event.type === 'text-delta') out += event.text;
    else if (event.type === 'finish') usage = event.usage;
  }
  const summary = storableText(out.trim()).slice(0, maxTokens * CHARS_PER_TOKEN);
  if (summary === '') throw new Error('the model wrote an empty summary');
  return { text: summary, usage, calls: 1, startedAt };
}

/**
 * The summary of `messages`, chunk by chunk, each call within `room` conversation tokens. Throws what the model
 * call throws, or an Error when the model writes an empty summary.
 */
export async function summariseConversation(
  by: Summariser,
  messages: ContextMessage[],
  room: number,
): Promise<Summary> {
  const maxTokens = Math.max(64, Math.min(SUMMARY_MAX_TOKENS, Math.floor(room / 8)));
  const prompt = fixedTokens(COMPACTION_INSTRUCTIONS, []) + 64;
  const chars = Math.max(400, (room - 2 * maxTokens - prompt) * CHARS_PER_TOKEN);
  const total: Summary = { text: '', usage: { inputTokens: 0, outputTokens: 0 }, calls: 0, startedAt: 0 };
  for (const chunk of chunksOf(messages, chars)) {
    const next = await summaryCall(by, total.text, chunk, maxTokens);
    if (total.calls === 0) total.startedAt = next.startedAt;
    total.text = next.text;
    total.calls += 1;
    total.usage = {
      inputTokens: total.usage.inputTokens + next.usage.inputTokens,
      cachedInputTokens: (total.usage.cachedInputTokens ?? 0) + (next.usage.cachedInputTokens ?? 0),
      outputTokens: total.usage.outputTokens + next.usage.outputTokens,
    };
  }
  return total;
}
