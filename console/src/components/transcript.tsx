/**
 * A session's messages as a conversation: the user's text and attached files, the agent's reply (streamed while the turn runs), and
 * the tool calls of the turn with their arguments and results (live events first, then the run's trace).
 */
import { useQuery } from '@tanstack/react-query';
import type { ReactNode } from 'react';
import { Link } from 'react-router';
import { traceQuery } from '../api/queries.ts';
import type { Message } from '../api/types.ts';
import { MessageAttachments } from './attachments.tsx';
import type { LiveMessage } from './live-session.ts';
import { Badge } from './ui.tsx';

interface CallView {
  callId: string;
  name: string;
  kind: string;
  arguments: string | null;
  output: string | null;
  status: string;
  progress: string | null;
}

const ACTIVE = new Set(['queued', 'running', 'requires_action']);

function textOf(parts: { type: string; text?: string }[] | undefined): string {
  // A prompt part shows the text it expanded to (what the model read).
  return (parts ?? [])
    .flatMap((part) => (part.type === 'text' || part.type === 'mcp_prompt' ? [part.text ?? ''] : []))
    .join('\n');
}

/** Tool calls of a message: the trace's tool_call spans, completed by live events not in the trace yet. */
function useCalls(message: Message, live: LiveMessage | undefined): CallView[] {
  const trace = useQuery({ ...traceQuery(message.runId ?? ''), enabled: message.runId !== null });
  const calls = new Map<string, CallView>();
  for (const span of trace.data ?? []) {
    if (span.kind !== 'tool_call') continue;
    const callId = typeof span.attributes.call_id === 'string' ? span.attributes.call_id : span.id;
    const kind = typeof span.attributes.kind === 'string' ? span.attributes.kind : 'server';
    calls.set(callId, {
      callId,
      name: span.name,
      kind,
      arguments: span.input_preview,
      output: span.output_preview,
      status: span.status,
      progress: null,
    });
  }
  for (const call of live?.calls ?? []) {
    const known = calls.get(call.callId);
    if (known !== undefined) {
      if (known.status === 'running') {
        calls.set(call.callId, {
          ...known,
          progress: call.progress,
          status: call.done ? (call.isError ? 'failed' : 'completed') : known.status,
        });
      }
      continue;
    }
    calls.set(call.callId, {
      callId: call.callId,
      name: call.name,
      kind: call.kind,
      arguments: call.arguments,
      output: null,
      status: call.done ? (call.isError ? 'failed' : 'completed') : 'running',
      progress: call.progress,
    });
  }
  return [...calls.values()];
}

function ToolCalls({ message, live }: { message: Message; live: LiveMessage | undefined }) {
  const calls = useCalls(message, live);
  if (calls.length === 0 && (live?.tools.length ?? 0) === 0) return null;
  return (
    <ul className="tool-calls" aria-label="Tool calls">
      {(live?.tools ?? []).map((listing) => (
        <li key={`list-${listing.server}`} className="muted small">
          Tools of {listing.server}: {listing.tools.join(', ')}
        </li>
      ))}
      {calls.map((call) => (
        <li key={call.callId} className="tool-call" data-call-id={call.callId}>
          <div className="row">
            <span className="tool-name">
              {call.kind === 'question' ? 'Question' : call.kind === 'client' ? 'Client tool' : 'Tool'}{' '}
              <code>{call.name}</code>
            </span>
            <Badge value={call.status} />
            {call.progress === null || call.progress === '' ? null : (
              <span className="muted small">{call.progress}</span>
            )}
          </div>
          {call.arguments === null ? null : (
            <div className="kv">
              <span className="muted small">Arguments</span>
              <pre>{call.arguments}</pre>
            </div>
          )}
          {call.output === null || call.status === 'running' ? null : (
            <div className="kv">
              <span className="muted small">Result</span>
              <pre>{call.output}</pre>
            </div>
          )}
        </li>
      ))}
    </ul>
  );
}

interface TranscriptProps {
  messages: Message[];
  live: Record<string, LiveMessage>;
  /** What to show under a message that waits for input (the forms of the playground). */
  actions?: (message: Message) => ReactNode;
}

export function Transcript({ messages, live, actions }: TranscriptProps) {
  return (
    <ol className="transcript" aria-label="Conversation">
      {messages.map((message) => {
        const streaming = live[message.id];
        const active = ACTIVE.has(message.status);
        const reply =
          active || textOf(message.response?.parts) === '' ? (streaming?.text ?? '') : textOf(message.response?.parts);
        return (
          <li key={message.id} className="turn" data-message-id={message.id} data-status={message.status}>
            <div className="bubble user">
              <span className="sr-only">You: </span>
              {textOf(message.parts) === '' ? null : <p>{textOf(message.parts)}</p>}
              <MessageAttachments parts={message.parts} />
            </div>
            <div className="bubble agent" aria-busy={active}>
              <div className="row small">
                <span className="muted">Agent</span>
                <Badge value={message.status} />
                {message.runId === null ? null : (
                  <Link to={`/runs/${message.runId}`} className="small">
                    Trace
                  </Link>
                )}
              </div>
              <ToolCalls message={message} live={streaming} />
              {reply === '' ? null : <p className="reply">{reply}</p>}
              {message.error === null ? null : (
                <p className="field-error">
                  {message.error.message} ({message.error.code})
                </p>
              )}
              {(streaming?.warnings ?? []).map((warning) => (
                <p key={warning} className="note warning small">
                  {warning}
                </p>
              ))}
              {actions?.(message)}
            </div>
          </li>
        );
      })}
    </ol>
  );
}
