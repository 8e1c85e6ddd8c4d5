/**
 * The live side of a session: follows its event stream, keeps the streamed text of running turns and the tool
 * activity per message, and asks the data cache to refetch messages whenever a persisted event says something
 * changed (and after every reconnect, since deltas are not replayed): the Message and Session GETs stay the truth,
 * and lists of sessions refetch so their statuses follow.
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

function apply(current: LiveMessage, event: SessionEvent): LiveMessage {
  if (event.kind === 'message.delta') {
    const { step, text } = event.data;
    const gap = current.text !== '' && current.step !== null && step !== current.step ? '\n\n' : '';
    return { ...current, text: current.text + gap + text, step };
  }
  if (event.kind !== 'message.event') return current;
  const data = event.data;
  switch (data.type) {
    case 'tool_call':
    case 'question':
    case 'tool_approval': {
      const callId = data.callId;
      if (callId === null || current.calls.some((call) => call.callId === callId)) return current;
      const call: LiveCall = {
        callId,
        name: data.name,
        arguments: data.arguments,
        kind: data.type === 'question' ? 'question' : data.kind,
        done: false,
        isError: false,
        progress: null,
      };
      return { ...current, calls: [...current.calls, call] };
    }
    case 'tool_result':
      return {
        ...current,
        calls: current.calls.map((call) =>
          call.callId === data.callId ? { ...call, done: true, isError: data.isError } : call,
        ),
      };
    case 'tool_progress': {
      const count =
        data.progress === undefined ? null : `${data.progress}${data.total === undefined ? '' : `/${data.total}`}`;
      const progress = [count, data.message ?? null].filter((part) => part !== null).join(' ');
      return {
        ...current,
        calls: current.calls.map((call) =>
          call.callId === data.callId ? { ...call, progress: progress || call.progress } : call,
        ),
      };
    }
    case 'tool_list':
      return { ...current, tools: [...current.tools, { server: data.serverLabel, tools: data.tools }] };
    case 'warning':
      return { ...current, warnings: [...current.warnings, data.message] };
    default:
      return current;
  }
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
        // Lists of sessions (the playground's beside the chat) show its status: they follow too.
        void queryClient.invalidateQueries({ queryKey: ['sessions'] });
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
          if (messageId !== undefined && (event.kind === 'message.delta' || event.kind === 'message.event')) {
            setState((previous) => ({
              ...previous,
              messages: { ...previous.messages, [messageId]: apply(previous.messages[messageId] ?? EMPTY, event) },
            }));
          }
          if (event.kind !== 'message.delta') reconcile(event.run_id ?? null);
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
