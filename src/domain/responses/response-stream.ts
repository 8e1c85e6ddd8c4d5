/**
 * A Response's turn as Responses stream events (reference/responses-wire.md section 3): the standard lifecycle for
 * text, function_call and mcp_call items, projected from the session's live events, plus the vendor events
 * `response.agentry_tool_call.*` unless the client asked for standard events only. The last event
 * (`response.completed`, `response.incomplete` or `response.failed`) carries the full Response read back from the database, so it always
 * equals what `GET /v1/responses/{id}` returns. The streaming route frames these events as Server-Sent Events; the
 * non-streaming route drains them and answers the last one's Response.
 *
 * The session's events come through a feed that never skips a persisted one (live-hub.ts). When live events were
 * missed (a Redis outage), the text deltas of the steps in between are lost too: the stream then ignores deltas
 * until a persisted event arrives live again, and takes each step's text from the database when the step's
 * persisted events arrive, so every output item is still sent once, whole, in order.
 */
import type { SessionFeed, StreamHub } from '../../bus/live-hub.ts';
import { AppError } from '../../errors/app-error.ts';
import type { LiveSessionEvent, MessageEventData } from '../../events/session-events.ts';
import type { Executor } from '../../storage/db.ts';
import type { MessageRow } from '../../storage/schema.ts';
import { lastEventSeq } from '../outbox.ts';
import { loadCallOutput, loadItem, loadMessageItems } from '../turns/item-store.ts';
import type { Item } from '../turns/items.ts';
import { RESPONSE_END_STATUSES } from '../turns/message-types.ts';
import { loadMessage } from '../turns/turn-store.ts';
import { type OpenAIItem, SERVER_LABEL, toOpenAIItems } from './openai-items.ts';
import type { ResponseStreamEvent, ResponseStreamWireEvent, VendorEventSource } from './response-events.ts';
import { loadResponseItems, outputItems, projectResponse, type ResponseObject } from './response-view.ts';

export type { ResponseStreamEvent } from './response-events.ts';

export interface ResponseEventsOptions {
  db: Executor;
  /**
   * The session's feed, opened before the turn was accepted (or, for a retrieval, started before the Response's
   * first stored event), so no event of it is missed.
   */
  feed: SessionFeed;
  /** The feed starts after this persisted event (the last one before the turn's first). */
  afterSeq: number;
  message: MessageRow;
  vendorEvents: boolean;
  /** Publishes the accepted turn and wakes the engine (called once the events are listened to). */
  release: () => void;
  /**
   * A retrieval (GET /v1/responses/{id}?stream=true): the feed starts before the Response's first event and replays
   * what is stored. Text deltas are not stored, and those of a step in flight may have gone before the feed was
   * opened: the text of the steps before `liveFromStep` is sent from their items once stored, with the deltas their
   * items record; later steps began after the feed was opened and stream live.
   */
  retrieval?: { liveFromStep: number };
  /** Only the events numbered after this are yielded (`starting_after`); null for all. */
  startingAfter?: number | null;
}

type Json = Record<string, unknown>;
type NumberedEvent = ResponseStreamWireEvent;

/**
 * The text of an assistant item as the deltas it was streamed in: the stored chunk lengths when they add up to the
 * text, otherwise one delta with the whole text.
 */
function textChunks(text: string, chunks: readonly number[] | undefined): string[] {
  const total = chunks?.reduce((sum, length) => sum + length, 0);
  if (chunks === undefined || total !== text.length || chunks.some((length) => length <= 0)) {
    return text === '' ? [] : [text];
  }
  let at = 0;
  return chunks.map((length) => {
    at += length;
    return text.slice(at - length, at);
  });
}

/** The pieces of `chunks` after the first `offset` characters (a piece cut at the offset keeps its rest). */
function chunksAfter(chunks: string[], offset: number): string[] {
  const out: string[] = [];
  let at = 0;
  for (const chunk of chunks) {
    const end = at + chunk.length;
    if (end > offset) out.push(at >= offset ? chunk : chunk.slice(offset - at));
    at = end;
  }
  return out;
}

const TERMINAL: ReadonlySet<string> = new Set(RESPONSE_END_STATUSES);

/** True for the last event of a Response's stream. */
export const isFinalEvent = <E extends ResponseStreamEvent>(
  event: E,
): event is Extract<E, { type: 'response.completed' | 'response.failed' | 'response.incomplete' }> =>
  event.type === 'response.completed' || event.type === 'response.failed' || event.type === 'response.incomplete';

/** The event a Response's stream ends with, by the Response's final status. */
const FINAL_EVENT = {
  completed: 'response.completed',
  incomplete: 'response.incomplete',
  failed: 'response.failed',
} as const;

/**
 * The events of the Response of `options.message`, from `response.created` to its final event, numbered. The
 * turn is released when the iteration starts. Ending the iteration early (`return`: a client that disconnected,
 * a timeout) unsubscribes at once, also while waiting for the next event; the turn goes on.
 *
 * The numbers are a function of what is stored: every event but one is projected from the session's persisted
 * events and the items of the turn (a step's text deltas from the lengths its item records), so a retrieval
 * numbers each event as the original stream did. The exception is a live-only progress report
 * (`response.agentry_tool_call.progress` of a running server call), which carries the number of the event before
 * it and is not replayed.
 */
export function responseEvents(options: ResponseEventsOptions): AsyncIterableIterator<NumberedEvent> {
  const { db, message } = options;
  const after = options.startingAfter ?? -1;
  const ready: NumberedEvent[] = [];
  let wake: (() => void) | null = null;
  let ended = false;
  let failure = null as { error: unknown } | null;
  let numbered = 0;
  const send = (event: ResponseStreamEvent, liveOnly = false) => {
    const sequence = liveOnly ? Math.max(numbered - 1, 0) : numbered++;
    if (sequence <= after) return;
    ready.push({ ...event, sequence_number: sequence } as NumberedEvent);
    wake?.();
  };
  const vendor = (
    type: 'started' | 'progress' | 'action_required' | 'failed',
    step: number | null,
    sourceType: VendorEventSource,
    data: Json,
    liveOnly = false,
  ) => {
    if (!options.vendorEvents) return;
    send(
      {
        type: `response.agentry_tool_call.${type}`,
        response_id: `resp_${message.id}`,
        run_id: message.run_id,
        step,
        source_type: sourceType,
        data,
      },
      liveOnly,
    );
  };

  const outputs: OpenAIItem[] = [];
  let text: { id: string; index: number; text: string } | null = null;
  /** The turn's replies the model was cut short in (set when the turn ends): their items are `incomplete`. */
  let cutReplies = new Set<string>();
  const servers = new Map<
    string,
    {
      id: string;
      index: number;
      label: string;
      name: string;
      arguments: string;
      step: number | null;
      approvalId: string | null;
    }
  >();

  const openText = (id: string) => {
    text = { id, index: outputs.length, text: '' };
    const item: OpenAIItem = { id, type: 'message', role: 'assistant', status: 'in_progress', content: [] };
    outputs.push(item);
    send({ type: 'response.output_item.added', output_index: text.index, item });
    send({
      type: 'response.content_part.added',
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
    send({
      type: 'response.output_text.done',
      item_id: id,
      output_index: index,
      content_index: 0,
      text: text.text,
      logprobs: [],
    });
    send({ type: 'response.content_part.done', item_id: id, output_index: index, content_index: 0, part });
    const status = cutReplies.has(id) ? 'incomplete' : 'completed';
    const item: OpenAIItem = { id, type: 'message', role: 'assistant', status, content: [part] };
    outputs[index] = item;
    send({ type: 'response.output_item.done', output_index: index, item });
    text = null;
  };
  const functionCall = (id: string, callId: string, name: string, args: string) => {
    const index = outputs.length;
    const item: OpenAIItem = { id, type: 'function_call', call_id: callId, name, arguments: args, status: 'completed' };
    outputs.push(item);
    send({
      type: 'response.output_item.added',
      output_index: index,
      item: { ...item, arguments: '', status: 'in_progress' },
    });
    send({ type: 'response.function_call_arguments.delta', item_id: id, output_index: index, delta: args });
    send({ type: 'response.function_call_arguments.done', item_id: id, output_index: index, name, arguments: args });
    send({ type: 'response.output_item.done', output_index: index, item });
  };
  const listTools = (item: Extract<OpenAIItem, { type: 'mcp_list_tools' }>) => {
    const index = outputs.length;
    outputs.push(item);
    send({ type: 'response.output_item.added', output_index: index, item: { ...item, tools: [] } });
    send({ type: 'response.mcp_list_tools.in_progress', output_index: index, item_id: item.id });
    send({ type: 'response.mcp_list_tools.completed', output_index: index, item_id: item.id });
    send({ type: 'response.output_item.done', output_index: index, item });
  };
  /** An item sent whole: an approval request, an MCP server's request for input. */
  const wholeItem = (item: Extract<OpenAIItem, { type: 'mcp_approval_request' | 'mcp_elicitation_request' }>) => {
    const index = outputs.length;
    outputs.push(item);
    send({ type: 'response.output_item.added', output_index: index, item });
    send({ type: 'response.output_item.done', output_index: index, item });
  };
  const startServerCall = (
    id: string,
    callId: string,
    label: string,
    name: string,
    args: string,
    step: number | null,
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
    send({ type: 'response.output_item.added', output_index: index, item });
    send({ type: 'response.mcp_call.in_progress', output_index: index, item_id: id });
    send({ type: 'response.mcp_call_arguments.delta', output_index: index, item_id: id, delta: args });
    send({ type: 'response.mcp_call_arguments.done', output_index: index, item_id: id, arguments: args });
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
    send({
      type: isError ? 'response.mcp_call.failed' : 'response.mcp_call.completed',
      output_index: call.index,
      item_id: call.id,
    });
    if (isError) vendor('failed', call.step, 'tool_server', { call_id: callId, name: call.name, error: output });
    else vendor('progress', call.step, 'tool_server', { call_id: callId, name: call.name, status: 'completed' });
    send({ type: 'response.output_item.done', output_index: call.index, item });
  };

  const textDelta = (delta: string) => {
    if (text === null) return;
    text.text += delta;
    send({
      type: 'response.output_text.delta',
      item_id: text.id,
      output_index: text.index,
      content_index: 0,
      delta,
      logprobs: [],
    });
  };
  const wholeText = (id: string, pieces: string[]) => {
    closeText();
    openText(id);
    for (const piece of pieces) textDelta(piece);
    closeText();
  };
  /** The stored chunk lengths of the turn's assistant items, by item id (set when the turn ends). */
  let storedChunks = new Map<string, number[] | undefined>();
  const sent = (id: string) => outputs.some((item) => item.id === id);

  /** Items the turn produced that this stream has not sent (a replay, a very fast turn, missed live events). */
  const replay = (items: OpenAIItem[]) => {
    for (const item of items) {
      if (sent(item.id)) continue;
      if (item.type === 'message' && item.role === 'assistant') {
        const body = item.content.map((part) => part.text).join('');
        wholeText(item.id, textChunks(body, storedChunks.get(item.id)));
      } else if (item.type === 'function_call') {
        functionCall(item.id, item.call_id, item.name, item.arguments);
      } else if (item.type === 'mcp_list_tools') {
        listTools(item);
      } else if (item.type === 'mcp_approval_request' || item.type === 'mcp_elicitation_request') {
        wholeItem(item);
      } else if (item.type === 'mcp_call') {
        startServerCall(item.id, item.id, item.server_label, item.name, item.arguments, null, item.approval_request_id);
        if (item.status !== 'in_progress')
          finishServerCall(item.id, item.output ?? item.error, item.status === 'failed');
      }
    }
  };

  /** Live events were missed: text deltas are ignored until a persisted event arrives live again. */
  let missed = false;
  /** The first step whose text deltas this stream received from the start (see `retrieval`). */
  const liveFromStep = options.retrieval?.liveFromStep ?? 0;
  /** The newest step a handled event named. */
  let lastStep = 0;
  /**
   * After missed live events, the assistant text of the steps up to `step` as stored: the text item that was
   * streaming gets the rest of its text as one delta, and the ones whose deltas were all lost are sent whole.
   */
  const catchUpText = (items: Item[], step: number) => {
    for (const item of items) {
      if (item.content.type !== 'assistant_message' || item.messageId !== message.id || item.step > step) continue;
      const stored = item.content.text;
      const pieces = textChunks(stored, item.content.chunks);
      if (text?.id === item.id) {
        if (stored.startsWith(text.text)) for (const piece of chunksAfter(pieces, text.text.length)) textDelta(piece);
        closeText();
      } else if (!sent(item.id)) {
        wholeText(item.id, pieces);
      }
    }
  };

  const finish = async () => {
    if (ended) return;
    const row = (await loadMessage(db, message.id)) ?? message;
    const items = await loadResponseItems(db, row);
    storedChunks = new Map(
      items.flatMap((item) => (item.content.type === 'assistant_message' ? [[item.id, item.content.chunks]] : [])),
    );
    cutReplies = new Set(
      items.flatMap((item) =>
        item.content.type === 'assistant_message' && item.content.incomplete !== undefined ? [item.id] : [],
      ),
    );
    if (missed || liveFromStep > 0) catchUpText(items, Number.POSITIVE_INFINITY);
    closeText();
    replay(outputItems(items, message.id));
    const response: ResponseObject = projectResponse(row, items);
    ended = true;
    send({
      type:
        response.status === 'completed' || response.status === 'incomplete'
          ? FINAL_EVENT[response.status]
          : FINAL_EVENT.failed,
      response,
    });
  };

  const handle = async (event: LiveSessionEvent, stored: boolean) => {
    if (ended || event.message_id !== message.id) return;
    if (event.kind === 'message.delta') {
      if (missed || event.data.step < liveFromStep) return;
      const { itemId, text: delta } = event.data;
      if (text?.id !== itemId) {
        closeText();
        openText(itemId);
      }
      textDelta(delta);
      return;
    }
    const step = event.kind === 'message.event' && 'step' in event.data ? event.data.step : lastStep;
    lastStep = Math.max(lastStep, step);
    if (event.kind === 'message.status' && TERMINAL.has(event.data.status)) {
      await finish();
      return;
    }
    if ((missed || step < liveFromStep) && 'seq' in event) {
      // A step's text is stored with its persisted events: take what the lost deltas carried from there.
      catchUpText(await loadMessageItems(db, message.id), step);
      // Published after live delivery came back: the next step's deltas arrive whole.
      if (!stored) missed = false;
    }
    if (event.kind === 'message.event') await handleMessageEvent(event.data);
  };
  const handleMessageEvent = async (data: MessageEventData) => {
    switch (data.type) {
      case 'tool_approval': {
        closeText();
        wholeItem({
          id: data.approvalId,
          type: 'mcp_approval_request',
          server_label: data.server,
          name: data.serverTool,
          arguments: data.arguments,
        });
        vendor('action_required', data.step, 'tool_approval', {
          call_id: data.callId,
          action_id: data.actionId,
          approval_request_id: data.approvalId,
          server_label: data.server,
          name: data.serverTool,
          arguments: data.arguments,
        });
        return;
      }
      case 'question':
      case 'tool_call': {
        closeText();
        const callId = data.callId ?? '';
        if (data.type === 'tool_call' && data.kind === 'server') {
          if (servers.has(callId)) return;
          startServerCall(
            data.itemId,
            callId,
            data.serverLabel ?? SERVER_LABEL,
            data.tool ?? data.name,
            data.arguments,
            data.step,
            data.approvalId ?? null,
          );
          return;
        }
        functionCall(data.itemId, callId, data.name, data.arguments);
        vendor('action_required', data.step, data.type === 'question' ? 'tool_ask_user_question' : 'tool_client', {
          call_id: callId,
          name: data.name,
          ...(data.type === 'question' ? { action_id: data.actionId } : {}),
        });
        return;
      }
      case 'tool_list': {
        closeText();
        const item = await loadItem(db, data.itemId);
        const listed = item === undefined ? undefined : toOpenAIItems([item])[0];
        if (listed?.type === 'mcp_list_tools') listTools(listed);
        return;
      }
      case 'tool_progress': {
        const call = servers.get(data.callId);
        vendor(
          'progress',
          data.step,
          'tool_server',
          {
            call_id: data.callId,
            ...(call === undefined ? {} : { server_label: call.label, name: call.name }),
            ...(data.progress === undefined ? {} : { progress: data.progress }),
            ...(data.total === undefined ? {} : { total: data.total }),
            ...(data.message === undefined ? {} : { message: data.message }),
          },
          true,
        );
        return;
      }
      case 'tool_result': {
        const content = (await loadCallOutput(db, message.session_id, data.callId))?.content ?? null;
        finishServerCall(data.callId, content?.type === 'function_call_output' ? content.output : null, data.isError);
        return;
      }
      default:
        return;
    }
  };
  let queue: Promise<void> = Promise.resolve();
  const enqueue = (work: () => Promise<void>) => {
    queue = queue.then(work).catch((error: unknown) => {
      failure = { error };
      wake?.();
    });
  };
  let started = false;
  let over = false;
  const stop = () => {
    if (over) return;
    over = true;
    ended = true;
    options.feed.close();
    wake?.();
  };
  const start = () => {
    options.feed.start(
      options.afterSeq,
      {
        event: (event, stored) => enqueue(() => handle(event, stored)),
        missed: () =>
          enqueue(async () => {
            missed = true;
          }),
      },
      { readStored: options.retrieval !== undefined },
    );
    options.release();
    const snapshot = projectResponse(message, [], { status: 'in_progress', output: [] });
    send({ type: 'response.created', response: snapshot });
    send({ type: 'response.in_progress', response: snapshot });
  };
  const iterator: AsyncIterableIterator<NumberedEvent> = {
    [Symbol.asyncIterator]: () => iterator,
    async next() {
      if (!started) {
        started = true;
        start();
      }
      for (;;) {
        if (over) return { done: true, value: undefined };
        const event = ready.shift();
        if (event !== undefined) {
          if (isFinalEvent(event)) stop();
          return { done: false, value: event };
        }
        if (failure !== null) {
          stop();
          throw failure.error;
        }
        await new Promise<void>((resolve) => {
          wake = resolve;
        });
        wake = null;
      }
    },
    async return() {
      stop();
      return { done: true, value: undefined };
    },
  };
  return iterator;
}

/**
 * Drains a turn's events and resolves with its final Response (completed, failed, cancelled or waiting for input);
 * rejects with 504 `response_timeout` saying `late` after `timeoutMs` (the turn goes on).
 */
export async function finalResponse(
  events: AsyncIterable<ResponseStreamEvent>,
  timeoutMs: number,
  late: string,
): Promise<ResponseObject> {
  const iterator = events[Symbol.asyncIterator]();
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new AppError('response_timeout', late)), timeoutMs);
  });
  try {
    for (;;) {
      const next = await Promise.race([iterator.next(), timeout]);
      if (next.done === true) throw new Error('the events of a turn ended without its final Response');
      if (isFinalEvent(next.value)) return next.value.response;
    }
  } finally {
    clearTimeout(timer);
    await iterator.return?.(undefined);
  }
}

/** The seq of the session event right before the first one of the message, from where its events are replayed. */
async function seqBefore(db: Executor, message: MessageRow): Promise<number> {
  const first = await db
    .selectFrom('session_events')
    .select((eb) => eb.fn.min<number | null>('seq').as('seq'))
    .where('session_id', '=', message.session_id)
    .where('message_id', '=', message.id)
    .executeTakeFirst();
  return first?.seq === null || first?.seq === undefined ? lastEventSeq(db, message.session_id) : Number(first.seq) - 1;
}

/**
 * A Response's events from its first stored one (numbered as its own stream numbered them), then live: for a
 * retrieval, or to follow a turn to its end once the request that started it is over.
 */
export async function storedResponseEvents(
  deps: { db: Executor; live: StreamHub },
  message: MessageRow,
  options: { vendorEvents: boolean; startingAfter: number | null },
): Promise<AsyncIterableIterator<ResponseStreamWireEvent>> {
  const { db } = deps;
  const feed = deps.live.follow(message.session_id);
  try {
    // Read after the feed opened: a step after the one in flight now starts after it, its deltas all arrive.
    const steps = (await loadMessage(db, message.id))?.step_count ?? message.step_count;
    return responseEvents({
      db,
      feed,
      afterSeq: await seqBefore(db, message),
      message,
      vendorEvents: options.vendorEvents,
      release: () => undefined,
      retrieval: { liveFromStep: steps + 2 },
      startingAfter: options.startingAfter,
    });
  } catch (error) {
    feed.close();
    throw error;
  }
}
