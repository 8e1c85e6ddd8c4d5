/**
 * The Responses event stream (reference/responses-wire.md section 3): the standard lifecycle for text,
 * function_call and mcp_call items, built from the session's live events, plus the vendor events
 * `response.agentry_tool_call.*` unless the client asked for standard events only. The terminal event carries the
 * full Response read back from the database, so it always equals what `GET /v1/responses/{id}` returns.
 */

import type { ServerResponse } from 'node:http';
import type { StreamHub } from '../bus/live-hub.ts';
import type { OpenAIItem } from '../domain/responses/openai-items.ts';
import { SERVER_LABEL, toOpenAIItems } from '../domain/responses/openai-items.ts';
import {
  loadResponseItems,
  outputItems,
  projectResponse,
  type ResponseObject,
} from '../domain/responses/response-view.ts';
import { itemFromRow } from '../domain/turns/items.ts';
import { RESPONSE_END_STATUSES } from '../domain/turns/message-types.ts';
import type { Executor } from '../storage/db.ts';
import type { MessageRow } from '../storage/schema.ts';

/** Live events of one session, buffered from the moment of subscription until a listener attaches. */
export interface LiveSubscription {
  attach(listener: (event: Record<string, unknown>) => void): void;
  close(): void;
}

export function bufferLive(live: StreamHub, sessionId: string): LiveSubscription {
  const queue: Record<string, unknown>[] = [];
  let target: ((event: Record<string, unknown>) => void) | null = null;
  const off = live.subscribe(sessionId, (event) => {
    if (target === null) queue.push(event);
    else target(event);
  });
  return {
    attach(listener) {
      target = listener;
      for (const event of queue.splice(0)) listener(event);
    },
    close: off,
  };
}

export interface ResponseStreamOptions {
  raw: ServerResponse;
  db: Executor;
  /** Subscribed before the turn was accepted, so no event of it is missed. */
  subscription: LiveSubscription;
  message: MessageRow;
  vendorEvents: boolean;
  heartbeatMs: number;
  /** Publishes the accepted turn (called once this stream listens). */
  release: () => void;
}

type Json = Record<string, unknown>;
const TERMINAL: ReadonlySet<string> = new Set(RESPONSE_END_STATUSES);

export async function streamResponse(options: ResponseStreamOptions): Promise<void> {
  const { raw, db, message } = options;
  let sequence = 0;
  let closed = false;
  const send = (type: string, payload: Json) => {
    if (closed) return;
    raw.write(`event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: sequence++, ...payload })}\n\n`);
  };
  const vendor = (
    type: 'started' | 'progress' | 'action_required' | 'failed',
    step: unknown,
    sourceType: string,
    data: Json,
  ) => {
    if (!options.vendorEvents) return;
    send(`response.agentry_tool_call.${type}`, {
      response_id: `resp_${message.id}`,
      run_id: message.run_id,
      step,
      source_type: sourceType,
      data,
    });
  };

  const outputs: OpenAIItem[] = [];
  let text: { id: string; index: number; text: string } | null = null;
  const servers = new Map<
    string,
    {
      id: string;
      index: number;
      label: string;
      name: string;
      arguments: string;
      step: unknown;
      approvalId: string | null;
    }
  >();

  const openText = (id: string) => {
    text = { id, index: outputs.length, text: '' };
    const item: OpenAIItem = { id, type: 'message', role: 'assistant', status: 'in_progress', content: [] };
    outputs.push(item);
    send('response.output_item.added', { output_index: text.index, item });
    send('response.content_part.added', {
      item_id: id,
      output_index: text.index,
      content_index: 0,
      part: { type: 'output_text', text: '', annotations: [], logprobs: [] },
    });
  };
  const closeText = () => {
    if (text === null) return;
    const { id, index } = text;
    const part = { type: 'output_text' as const, text: text.text, annotations: [] as [], logprobs: [] as [] };
    send('response.output_text.done', {
      item_id: id,
      output_index: index,
      content_index: 0,
      text: text.text,
      logprobs: [],
    });
    send('response.content_part.done', { item_id: id, output_index: index, content_index: 0, part });
    const item: OpenAIItem = { id, type: 'message', role: 'assistant', status: 'completed', content: [part] };
    outputs[index] = item;
    send('response.output_item.done', { output_index: index, item });
    text = null;
  };
  const functionCall = (id: string, callId: string, name: string, args: string) => {
    const index = outputs.length;
    const item: OpenAIItem = { id, type: 'function_call', call_id: callId, name, arguments: args, status: 'completed' };
    outputs.push(item);
    send('response.output_item.added', {
      output_index: index,
      item: { ...item, arguments: '', status: 'in_progress' },
    });
    send('response.function_call_arguments.delta', { item_id: id, output_index: index, delta: args });
    send('response.function_call_arguments.done', { item_id: id, output_index: index, name, arguments: args });
    send('response.output_item.done', { output_index: index, item });
  };
  const listTools = (item: Extract<OpenAIItem, { type: 'mcp_list_tools' }>) => {
    const index = outputs.length;
    outputs.push(item);
    send('response.output_item.added', { output_index: index, item: { ...item, tools: [] } });
    send('response.mcp_list_tools.in_progress', { output_index: index, item_id: item.id });
    send('response.mcp_list_tools.completed', { output_index: index, item_id: item.id });
    send('response.output_item.done', { output_index: index, item });
  };
  const approvalRequest = (item: Extract<OpenAIItem, { type: 'mcp_approval_request' }>) => {
    const index = outputs.length;
    outputs.push(item);
    send('response.output_item.added', { output_index: index, item });
    send('response.output_item.done', { output_index: index, item });
  };
  const startServerCall = (
    id: string,
    callId: string,
    label: string,
    name: string,
    args: string,
    step: unknown,
    approvalId: string | null = null,
  ) => {
    const index = outputs.length;
    const item: OpenAIItem = {
      id,
      type: 'mcp_call',
      server_label: label,
      name,
      arguments: '',
      output: null,
      error: null,
      status: 'in_progress',
      approval_request_id: approvalId,
    };
    outputs.push(item);
    servers.set(callId, { id, index, label, name, arguments: args, step, approvalId });
    send('response.output_item.added', { output_index: index, item });
    send('response.mcp_call.in_progress', { output_index: index, item_id: id });
    send('response.mcp_call_arguments.delta', { output_index: index, item_id: id, delta: args });
    send('response.mcp_call_arguments.done', { output_index: index, item_id: id, arguments: args });
    vendor('started', step, 'tool_server', { call_id: callId, server_label: label, name, arguments: args });
  };
  const finishServerCall = (callId: string, output: string | null, isError: boolean) => {
    const call = servers.get(callId);
    if (call === undefined) return;
    servers.delete(callId);
    const item: OpenAIItem = {
      id: call.id,
      type: 'mcp_call',
      server_label: call.label,
      name: call.name,
      arguments: call.arguments,
      output: isError ? null : output,
      error: isError ? output : null,
      status: isError ? 'failed' : 'completed',
      approval_request_id: call.approvalId,
    };
    outputs[call.index] = item;
    send(isError ? 'response.mcp_call.failed' : 'response.mcp_call.completed', {
      output_index: call.index,
      item_id: call.id,
    });
    if (isError) vendor('failed', call.step, 'tool_server', { call_id: callId, name: call.name, error: output });
    else vendor('progress', call.step, 'tool_server', { call_id: callId, name: call.name, status: 'completed' });
    send('response.output_item.done', { output_index: call.index, item });
  };

  /** Items a turn already produced before this stream listened (a replay, or a very fast turn). */
  const replay = (items: OpenAIItem[]) => {
    for (const item of items.slice(outputs.length)) {
      if (item.type === 'message' && item.role === 'assistant') {
        openText(item.id);
        const body = item.content.map((part) => part.text).join('');
        if (text !== null) text.text = body;
        if (body !== '')
          send('response.output_text.delta', {
            item_id: item.id,
            output_index: outputs.length - 1,
            content_index: 0,
            delta: body,
            logprobs: [],
          });
        closeText();
      } else if (item.type === 'function_call') {
        functionCall(item.id, item.call_id, item.name, item.arguments);
      } else if (item.type === 'mcp_list_tools') {
        listTools(item);
      } else if (item.type === 'mcp_approval_request') {
        approvalRequest(item);
      } else if (item.type === 'mcp_call') {
        startServerCall(item.id, item.id, item.server_label, item.name, item.arguments, null, item.approval_request_id);
        if (item.status !== 'in_progress')
          finishServerCall(item.id, item.output ?? item.error, item.status === 'failed');
      }
    }
  };

  const finish = async () => {
    closeText();
    const row =
      (await db.selectFrom('messages').selectAll().where('id', '=', message.id).executeTakeFirst()) ?? message;
    const items = await loadResponseItems(db, row);
    replay(outputItems(items, message.id));
    const response: ResponseObject = projectResponse(row, items);
    send(response.status === 'completed' ? 'response.completed' : 'response.failed', { response });
    if (!closed) raw.write('data: [DONE]\n\n');
    closed = true;
    raw.end();
  };

  raw.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
  });
  raw.socket?.setNoDelay(true);

  let queue: Promise<void> = Promise.resolve();
  let done!: () => void;
  const ended = new Promise<void>((resolve) => {
    done = resolve;
  });
  const handle = async (event: Json) => {
    if (closed || event.message_id !== message.id) return;
    const data = (event.data ?? {}) as Json;
    if (event.kind === 'message.delta') {
      const id = String(data.itemId ?? '');
      if (text?.id !== id) {
        closeText();
        openText(id);
      }
      const delta = String(data.text ?? '');
      if (text !== null) text.text += delta;
      send('response.output_text.delta', {
        item_id: id,
        output_index: outputs.length - 1,
        content_index: 0,
        delta,
        logprobs: [],
      });
    } else if (event.kind === 'message.event' && data.type === 'tool_approval') {
      closeText();
      const approvalId = String(data.approvalId ?? '');
      approvalRequest({
        id: approvalId,
        type: 'mcp_approval_request',
        server_label: typeof data.server === 'string' ? data.server : SERVER_LABEL,
        name: String(data.serverTool ?? data.name ?? ''),
        arguments: String(data.arguments ?? ''),
      });
      vendor('action_required', data.step, 'tool_approval', {
        call_id: data.callId,
        action_id: data.actionId,
        approval_request_id: approvalId,
        server_label: data.server,
        name: data.serverTool ?? data.name,
        arguments: data.arguments,
      });
    } else if (event.kind === 'message.event' && (data.type === 'tool_call' || data.type === 'question')) {
      closeText();
      const id = String(data.itemId ?? '');
      const callId = String(data.callId ?? '');
      const name = String(data.name ?? (data.type === 'question' ? 'ask_user_question' : ''));
      const args = String(data.arguments ?? '');
      if (data.kind === 'server') {
        if (servers.has(callId)) return;
        const label = typeof data.serverLabel === 'string' ? data.serverLabel : SERVER_LABEL;
        const approvalId = typeof data.approvalId === 'string' ? data.approvalId : null;
        startServerCall(
          id,
          callId,
          label,
          typeof data.tool === 'string' ? data.tool : name,
          args,
          data.step,
          approvalId,
        );
      } else {
        functionCall(id, callId, name, args);
        vendor('action_required', data.step, data.type === 'question' ? 'tool_ask_user_question' : 'tool_client', {
          call_id: callId,
          name,
          ...(data.type === 'question' ? { action_id: data.actionId } : {}),
        });
      }
    } else if (event.kind === 'message.event' && data.type === 'tool_list') {
      closeText();
      const row = await db
        .selectFrom('items')
        .selectAll()
        .where('id', '=', String(data.itemId ?? ''))
        .executeTakeFirst();
      const listed = row === undefined ? undefined : toOpenAIItems([itemFromRow(row)])[0];
      if (listed?.type === 'mcp_list_tools') listTools(listed);
    } else if (event.kind === 'message.event' && data.type === 'tool_progress') {
      const call = servers.get(String(data.callId ?? ''));
      vendor('progress', data.step, 'tool_server', {
        call_id: data.callId,
        ...(call === undefined ? {} : { server_label: call.label, name: call.name }),
        ...(typeof data.progress === 'number' ? { progress: data.progress } : {}),
        ...(typeof data.total === 'number' ? { total: data.total } : {}),
        ...(typeof data.message === 'string' ? { message: data.message } : {}),
      });
    } else if (event.kind === 'message.event' && data.type === 'tool_result') {
      const callId = String(data.callId ?? '');
      const row = await db
        .selectFrom('items')
        .selectAll()
        .where('session_id', '=', message.session_id)
        .where('call_id', '=', callId)
        .where('type', '=', 'function_call_output')
        .executeTakeFirst();
      const content = row === undefined ? null : itemFromRow(row).content;
      finishServerCall(callId, content?.type === 'function_call_output' ? content.output : null, data.isError === true);
    } else if (event.kind === 'message.status' && TERMINAL.has(String(data.status))) {
      await finish();
      done();
    }
  };
  options.subscription.attach((event) => {
    queue = queue
      .then(() => handle(event))
      .catch(() => {
        closed = true;
        raw.destroy();
        done();
      });
  });
  const heartbeat = setInterval(() => {
    if (!closed) raw.write(': ping\n\n');
  }, options.heartbeatMs);
  raw.on('close', () => {
    closed = true;
    done();
  });
  options.release();

  const snapshot = projectResponse(message, [], { status: 'in_progress', output: [] });
  send('response.created', {
    response: { ...snapshot, status: 'queued' === message.status ? 'in_progress' : snapshot.status },
  });
  send('response.in_progress', { response: { ...snapshot, status: 'in_progress' } });
  // A replayed request, or a turn that ended before this stream listened, is finished from the database.
  queue = queue.then(async () => {
    const current = await db.selectFrom('messages').select('status').where('id', '=', message.id).executeTakeFirst();
    if (current !== undefined && TERMINAL.has(current.status) && !closed) {
      await finish();
      done();
    }
  });
  try {
    await ended;
  } finally {
    options.subscription.close();
    clearInterval(heartbeat);
  }
}
