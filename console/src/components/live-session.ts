/**
 * The live side of a session: follows its event stream, keeps the streamed text of running turns and the tool
 * activity per message, and asks the data cache to refetch messages whenever a persisted event says something
 * changed (and after every reconnect, since deltas are not replayed): the Message GETs stay the truth.
 */
import { useQueryClient } from '@tanstack/react-query';
import { useEffect, useRef, useState } from 'react';
import { followSession, type SessionEvent } from '../api/session-stream.ts';

export interface LiveCall {
  callId: string;
  name: string;
  arguments: string | null;
  kind: string;
  done: boolean;
  isError: boolean;
  progress: string | null;
}

export interface LiveMessage {
  text: string;
  step: number | null;
  calls: LiveCall[];
  tools: { server: string; tools: string[] }[];
  warnings: string[];
}

export type Connection = 'connecting' | 'live' | 'reconnecting';

export interface LiveSession {
  messages: Record<string, LiveMessage>;
  connection: Connection;
  reconnects: number;
}

const EMPTY: LiveMessage = { text: '', step: null, calls: [], tools: [], warnings: [] };
const str = (value: unknown): string | null => (typeof value === 'string' ? value : null);

function apply(current: LiveMessage, event: SessionEvent): LiveMessage {
  const data = event.data;
  if (event.kind === 'message.delta') {
    const step = typeof data.step === 'number' ? data.step : null;
    const gap = current.text !== '' && step !== null && current.step !== null && step !== current.step ? '\n\n' : '';
    return { ...current, text: current.text + gap + (str(data.text) ?? ''), step };
  }
  if (event.kind !== 'message.event') return current;
  const type = str(data.type);
  const callId = str(data.callId);
  if ((type === 'tool_call' || type === 'question' || type === 'tool_approval') && callId !== null) {
    if (current.calls.some((call) => call.callId === callId)) return current;
    const call: LiveCall = {
      callId,
      name: str(data.name) ?? (type === 'question' ? 'ask_user_question' : 'tool'),
      arguments: str(data.arguments),
      kind: type === 'question' ? 'question' : (str(data.kind) ?? 'server'),
      done: false,
      isError: false,
      progress: null,
    };
    return { ...current, calls: [...current.calls, call] };
  }
  if ((type === 'tool_result' || type === 'tool_progress') && callId !== null) {
    const calls = current.calls.map((call) => {
      if (call.callId !== callId) return call;
      if (type === 'tool_result') return { ...call, done: true, isError: data.isError === true };
      const message = str(data.message);
      const progress =
        typeof data.progress === 'number'
          ? `${data.progress}${typeof data.total === 'number' ? `/${data.total}` : ''}`
          : null;
      return { ...call, progress: [progress, message].filter((part) => part !== null).join(' ') || call.progress };
    });
    return { ...current, calls };
  }
  if (type === 'tool_list') {
    const tools = Array.isArray(data.tools)
      ? data.tools.filter((tool): tool is string => typeof tool === 'string')
      : [];
    return { ...current, tools: [...current.tools, { server: str(data.serverLabel) ?? 'server', tools }] };
  }
  if (type === 'warning') return { ...current, warnings: [...current.warnings, str(data.message) ?? 'warning'] };
  return current;
}

/** Follows the session while mounted; `null` follows nothing. */
export function useLiveSession(sessionId: string | null): LiveSession {
  const queryClient = useQueryClient();
  const [state, setState] = useState<LiveSession>({ messages: {}, connection: 'connecting', reconnects: 0 });
  const pending = useRef<number | null>(null);

  useEffect(() => {
    setState({ messages: {}, connection: 'connecting', reconnects: 0 });
    if (sessionId === null) return;
    const controller = new AbortController();
    // Several events arrive together (status, completed, session status): one refetch for the burst.
    const reconcile = (runId: string | null) => {
      if (runId !== null) void queryClient.invalidateQueries({ queryKey: ['trace', runId] });
      if (pending.current !== null) return;
      pending.current = window.setTimeout(() => {
        pending.current = null;
        void queryClient.invalidateQueries({ queryKey: ['messages', sessionId] });
        void queryClient.invalidateQueries({ queryKey: ['session', sessionId] });
      }, 30);
    };
    void followSession(
      sessionId,
      {
        onOpen: (reconnected) => {
          setState((previous) => ({
            ...previous,
            connection: 'live',
            reconnects: previous.reconnects + (reconnected ? 1 : 0),
          }));
          if (reconnected) reconcile(null);
        },
        onDrop: () => setState((previous) => ({ ...previous, connection: 'reconnecting' })),
        onEvent: (event) => {
          const messageId = event.message_id;
          if (messageId !== null && (event.kind === 'message.delta' || event.kind === 'message.event')) {
            setState((previous) => ({
              ...previous,
              messages: { ...previous.messages, [messageId]: apply(previous.messages[messageId] ?? EMPTY, event) },
            }));
          }
          if (event.kind !== 'message.delta') reconcile(event.run_id);
        },
      },
      controller.signal,
    );
    return () => {
      controller.abort();
      if (pending.current !== null) window.clearTimeout(pending.current);
      pending.current = null;
    };
  }, [sessionId, queryClient]);

  return state;
}
