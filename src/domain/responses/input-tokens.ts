/**
 * POST /v1/responses/input_tokens (`responses.inputTokens.count` of the openai package): an estimate of the input
 * tokens a Response would start with, without running anything. It counts the characters of what the first model
 * call of the turn would read: the agent's instructions and the request's, the function tools (name, description,
 * parameters as JSON), the conversation's log (messages, calls and outputs) and the new input; then one token per 4
 * characters (rounded up), plus 85 per image or file. Tools of MCP servers are not counted (their schemas are known
 * only once a turn connects to the servers); nor is what a provider adds around messages.
 */
import type { ToolSpec } from '../../models/types.ts';
import type { Item } from '../turns/items.ts';
import type { InputItem } from './response-request.ts';

export interface InputTokens {
  object: 'response.input_tokens';
  input_tokens: number;
}

const CHARS_PER_TOKEN = 4;
/** What a low-detail image costs at OpenAI; also counted for an attached file. */
const TOKENS_PER_ATTACHMENT = 85;

function itemChars(item: Item): number {
  const content = item.content;
  switch (content.type) {
    case 'user_message':
    case 'assistant_message':
      return content.text.length;
    case 'function_call':
      return content.name.length + content.arguments.length;
    case 'function_call_output':
      return content.output.length;
    case 'compaction':
      return content.summary.length;
    default:
      return 0;
  }
}

function inputChars(item: InputItem): number {
  switch (item.kind) {
    case 'user':
      return item.text.length;
    case 'output':
      return item.output.length;
    case 'history': {
      const history = item.item;
      if (history.type === 'function_call') return history.name.length + history.arguments.length;
      if (history.type === 'compaction') return history.summary.length;
      return history.type === 'function_call_output' ? history.output.length : history.text.length;
    }
    default:
      return 0;
  }
}

function attachments(log: Item[], input: InputItem[]): number {
  const logged = log.reduce(
    (sum, item) => sum + (item.content.type === 'user_message' ? (item.content.attachments?.length ?? 0) : 0),
    0,
  );
  const given = input.reduce(
    (sum, item) => sum + (item.kind === 'user' ? item.attachments.length + item.images.length : 0),
    0,
  );
  return logged + given;
}

/** The estimate for a turn with these instructions, tools, conversation log and input. */
export function estimateInputTokens(parts: {
  instructions: string[];
  tools: ToolSpec[];
  log: Item[];
  input: InputItem[];
}): InputTokens {
  let chars = parts.instructions.reduce((sum, text) => sum + text.length, 0);
  for (const tool of parts.tools)
    chars += tool.name.length + tool.description.length + JSON.stringify(tool.parameters).length;
  for (const item of parts.log) chars += itemChars(item);
  for (const item of parts.input) chars += inputChars(item);
  const tokens = Math.ceil(chars / CHARS_PER_TOKEN) + TOKENS_PER_ATTACHMENT * attachments(parts.log, parts.input);
  return { object: 'response.input_tokens', input_tokens: tokens };
}
