/**
 * The conversation log in OpenAI's item shapes (Responses output items and Conversation items). Assistant text is
 * a `message` with `output_text`, user input a `message` with `input_text`, calls the service ran itself are
 * `mcp_call` items, and calls the caller (or a person) must answer are `function_call` items: an
 * `ask_user_question` call is answered like any function call, with a `function_call_output`.
 */
import type { Item } from '../turns/items.ts';

/** An output item of a Response: a conversation item, or an MCP server's request for input. */
export type OpenAIItem = ConversationOpenAIItem | ElicitationRequestItem;

/**
 * An MCP server asked for input during a call (docs/mcp-auth.md "Elicitation"): answered with an
 * `mcp_elicitation_response` input item naming `id`. Output of Responses only, not a conversation item.
 */
export interface ElicitationRequestItem {
  id: string;
  type: 'mcp_elicitation_request';
  server_label: string;
  message: string;
  mode: 'form' | 'url';
  requested_schema: Record<string, unknown> | null;
  url: string | null;
}

export type ConversationOpenAIItem =
  | { id: string; type: 'message'; role: 'user'; status: 'completed'; content: { type: 'input_text'; text: string }[] }
  | {
      id: string;
      type: 'message';
      role: 'assistant';
      status: 'completed' | 'in_progress' | 'incomplete';
      content: { type: 'output_text'; text: string; annotations: []; logprobs: [] }[];
    }
  | { id: string; type: 'function_call'; call_id: string; name: string; arguments: string; status: 'completed' }
  | { id: string; type: 'function_call_output'; call_id: string; output: string; status: 'completed' }
  | {
      id: string;
      type: 'mcp_call';
      server_label: string;
      name: string;
      arguments: string;
      output: string | null;
      error: string | null;
      status: 'in_progress' | 'completed' | 'failed';
      approval_request_id: string | null;
    }
  | { id: string; type: 'mcp_approval_request'; server_label: string; name: string; arguments: string }
  | {
      id: string;
      type: 'mcp_approval_response';
      approval_request_id: string;
      approve: boolean;
      reason: string | null;
    }
  | {
      id: string;
      type: 'mcp_list_tools';
      server_label: string;
      /** `description` is left out when the tool has none (the AI SDK's schema takes a string or nothing). */
      tools: { name: string; description?: string; input_schema: Record<string, unknown> }[];
      /** Left out when the tools were listed (the AI SDK's schema refuses `null` here). */
      error?: string;
    }
  /**
   * The older conversation summarised (docs/context.md). Self-hosted, so not encrypted: `encrypted_content` holds
   * the summary as plain text (a client can send the item back as it is), and `summary` repeats it.
   */
  | { id: string; type: 'compaction'; encrypted_content: string; summary: string; created_by: 'agentry' };

/** Label of server calls that name no server (logs written before tool servers existed, unknown tools). */
export const SERVER_LABEL = 'agentry';

/**
 * Maps log items to OpenAI items, in log order. Outputs of server calls fold into their `mcp_call` item instead of
 * appearing on their own.
 */
export function toOpenAIItems(items: Item[], options?: { messageId?: string }): ConversationOpenAIItem[];
/** With `elicitations`: a Response's output, with the MCP servers' requests for input. */
export function toOpenAIItems(items: Item[], options: { messageId?: string; elicitations: true }): OpenAIItem[];
export function toOpenAIItems(
  items: Item[],
  options: { messageId?: string; elicitations?: boolean } = {},
): OpenAIItem[] {
  const serverOutputs = new Map<string, { output: string; isError: boolean }>();
  const serverCalls = new Set<string>();
  const approved = new Set(
    items.flatMap((item) =>
      item.content.type === 'approval_decision' && item.content.approved ? [item.content.approvalId] : [],
    ),
  );
  for (const item of items) {
    if (item.content.type === 'function_call' && item.content.kind === 'server' && item.callId !== null)
      serverCalls.add(item.callId);
  }
  for (const item of items) {
    const content = item.content;
    if (content.type === 'function_call_output' && item.callId !== null && serverCalls.has(item.callId)) {
      serverOutputs.set(item.callId, { output: content.output, isError: content.isError });
    }
  }
  const out: OpenAIItem[] = [];
  for (const item of items) {
    const content = item.content;
    switch (content.type) {
      case 'user_message':
        out.push({
          id: item.id,
          type: 'message',
          role: 'user',
          status: 'completed',
          content: [{ type: 'input_text', text: content.text }],
        });
        break;
      case 'assistant_message':
        out.push({
          id: item.id,
          type: 'message',
          role: 'assistant',
          // A reply the model was cut short in (its output token limit) is incomplete, as OpenAI marks it.
          status: content.incomplete === undefined ? 'completed' : 'incomplete',
          content: [{ type: 'output_text', text: content.text, annotations: [], logprobs: [] }],
        });
        break;
      case 'function_call': {
        const callId = item.callId ?? '';
        if (content.kind === 'server') {
          const result = serverOutputs.get(callId);
          const approvalId = content.approval?.id ?? null;
          // A call of an earlier Response that this one's input approved: only its execution belongs here.
          const carried = options.messageId !== undefined && item.messageId !== options.messageId;
          const label = content.server?.label ?? SERVER_LABEL;
          const name = content.server?.tool ?? content.name;
          if (approvalId !== null && !carried) {
            out.push({
              id: approvalId,
              type: 'mcp_approval_request',
              server_label: label,
              name,
              arguments: content.arguments,
            });
          }
          if (approvalId === null || carried || approved.has(approvalId)) {
            out.push({
              id: item.id,
              type: 'mcp_call',
              server_label: label,
              name,
              arguments: content.arguments,
              output: result === undefined || result.isError ? null : result.output,
              error: result?.isError === true ? result.output : null,
              status: result === undefined ? 'in_progress' : result.isError ? 'failed' : 'completed',
              approval_request_id: approvalId,
            });
          }
        } else {
          out.push({
            id: item.id,
            type: 'function_call',
            call_id: callId,
            name: content.name,
            arguments: content.arguments,
            status: 'completed',
          });
        }
        break;
      }
      case 'tool_list':
        out.push({
          id: item.id,
          type: 'mcp_list_tools',
          server_label: content.server.label,
          tools: content.tools.map((tool) => ({
            name: tool.name,
            ...(tool.description === null ? {} : { description: tool.description }),
            input_schema: tool.inputSchema,
          })),
        });
        break;
      case 'compaction':
        out.push({
          id: item.id,
          type: 'compaction',
          encrypted_content: content.summary,
          summary: content.summary,
          created_by: 'agentry',
        });
        break;
      case 'elicitation':
        if (options.elicitations !== true) break;
        out.push({
          id: content.elicitationId,
          type: 'mcp_elicitation_request',
          server_label: content.server,
          message: content.message,
          mode: content.mode,
          requested_schema: content.requestedSchema,
          url: content.url,
        });
        break;
      case 'approval_decision':
        out.push({
          id: item.id,
          type: 'mcp_approval_response',
          approval_request_id: content.approvalId,
          approve: content.approved,
          reason: content.reason,
        });
        break;
      case 'function_call_output':
        if (item.callId !== null && serverCalls.has(item.callId)) break;
        out.push({
          id: item.id,
          type: 'function_call_output',
          call_id: item.callId ?? '',
          output: content.output,
          status: 'completed',
        });
        break;
    }
  }
  return out;
}
