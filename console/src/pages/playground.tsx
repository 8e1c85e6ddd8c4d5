/**
 * /console/agents/{id}/chat: chat with an agent in a session. Replies stream from the session's event stream;
 * a question is answered inline; a client tool call gets a form for its output; a tool call waiting for approval
 * shows its tool, server and arguments with Approve and Deny buttons (and an optional reason); an MCP server's
 * elicitation gets the form its schema asks for; a running turn can be interrupted. `?session=` picks the session
 * (a new one is opened by the first message). Beside the chat: the agent, edited in place and saved as a new
 * version, or the trace of a turn's run (`?trace=<run id>`), opened from the turn. Files attached to a message
 * (button, paste or drop) are uploaded as they are chosen and sent as file parts.
 * Stable hooks for tests: a text box labelled "Message", an "Attach files" button and a "Send" button.
 */
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useCallback, useEffect, useState } from 'react';
import { Link, useParams, useSearchParams } from 'react-router';
import { api, idempotencyKey, unwrap } from '../api/client.ts';
import { messagesQuery } from '../api/queries.ts';
import type { Message, RequiredAction, Session } from '../api/types.ts';
import { useCan } from '../auth/session.tsx';
import { AgentPanel } from '../components/agent-panel.tsx';
import {
  AttachmentPicker,
  type Attachments,
  attachmentError,
  fileDropHandlers,
  type ReadyAttachment,
  useAttachments,
} from '../components/attachments.tsx';
import { ElicitationForm } from '../components/elicitation-form.tsx';
import { useLiveSession } from '../components/live-session.ts';
import { firstText, sessionName, useSessionPreview } from '../components/session-name.ts';
import { usePageTitle } from '../components/title.ts';
import { TraceDrawer } from '../components/trace-waterfall.tsx';
import { Transcript } from '../components/transcript.tsx';
import { ConfirmButton, ErrorNote, Field, Loading, shortId, When } from '../components/ui.tsx';

/** A session in the playground's list: its name (title or first message), status and last activity. */
function SessionItem({ session, current }: { session: Session; current: boolean }) {
  const preview = useSessionPreview(session);
  return (
    <li>
      <Link to={`?session=${session.id}`} aria-current={current ? 'page' : undefined}>
        {sessionName(session, firstText(preview))}
      </Link>
      <span className="muted small">
        {' '}
        <span data-session-status={session.status}>{session.status.replaceAll('_', ' ')}</span> ·{' '}
        <When at={session.updatedAt} />
      </span>
    </li>
  );
}

function AnswerForm({
  session,
  message,
  action,
}: {
  session: Session;
  message: Message;
  action: Extract<RequiredAction, { type: 'ask_user_question' }>;
}) {
  const [answer, setAnswer] = useState('');
  const queryClient = useQueryClient();
  const send = useMutation({
    mutationFn: () =>
      unwrap(
        api.POST('/v1/sessions/{id}/messages/{messageId}/answer', {
          params: { path: { id: session.id, messageId: message.id } },
          body: { actionId: action.actionId, answer },
        }),
      ),
    onSuccess: () => queryClient.invalidateQueries({ queryKey: ['messages', session.id] }),
  });
  const options = (action.options ?? []).filter((option): option is string => typeof option === 'string');
  return (
    <form
      className="action-form"
      onSubmit={(event) => {
        event.preventDefault();
        send.mutate();
      }}
    >
      <p className="question">
        <strong>Question:</strong> {action.question}
      </p>
      <Field label="Your answer">
        {(props) => (
          <input
            {...props}
            list={options.length > 0 ? `options-${action.actionId}` : undefined}
            value={answer}
            onChange={(e) => setAnswer(e.target.value)}
          />
        )}
      </Field>
      {options.length > 0 ? (
        <datalist id={`options-${action.actionId}`}>
          {options.map((option) => (
            <option key={option} value={option} />
          ))}
        </datalist>
      ) : null}
      <ErrorNote error={send.error} />
      <button type="submit" className="primary" disabled={send.isPending}>
        Answer
      </button>
    </form>
  );
}

function ApprovalForm({
  session,
  message,
  action,
}: {
  session: Session;
  message: Message;
  action: Extract<RequiredAction, { type: 'tool_approval' }>;
}) {
  const [reason, setReason] = useState('');
  const queryClient = useQueryClient();
  const decide = useMutation({
    mutationFn: (approved: boolean) =>
      unwrap(
        api.POST('/v1/sessions/{id}/messages/{messageId}/answer', {
          params: { path: { id: session.id, messageId: message.id } },
          body: { actionId: action.actionId, answer: reason.trim() === '' ? { approved } : { approved, reason } },
        }),
      ),
    onSuccess: () => queryClient.invalidateQueries({ queryKey: ['messages', session.id] }),
  });
  return (
    <form
      className="action-form approval"
      aria-label={`Approve ${action.tool}`}
      onSubmit={(event) => {
        event.preventDefault();
        decide.mutate(true);
      }}
    >
      <p>
        <strong>Approval needed:</strong> <code>{action.serverTool}</code> on <code>{action.server}</code> wants to run
        with
      </p>
      <pre>{action.arguments}</pre>
      {action.expiresAt === null ? null : (
        <p className="muted small">Denied automatically at {new Date(action.expiresAt).toLocaleString()}</p>
      )}
      <Field label="Reason (optional)" hint="Told to the agent with your decision">
        {(props) => <input {...props} value={reason} onChange={(e) => setReason(e.target.value)} maxLength={2000} />}
      </Field>
      <ErrorNote error={decide.error} />
      <div className="actions">
        <button type="submit" className="primary" disabled={decide.isPending}>
          Approve
        </button>
        <button type="button" disabled={decide.isPending} onClick={() => decide.mutate(false)}>
          Deny
        </button>
      </div>
    </form>
  );
}

function ToolOutputForm({
  session,
  action,
}: {
  session: Session;
  action: Extract<RequiredAction, { type: 'function_call' }>;
}) {
  const [output, setOutput] = useState('');
  const queryClient = useQueryClient();
  const send = useMutation({
    mutationFn: () =>
      unwrap(
        api.POST('/v1/conversations/{conversation_id}/items', {
          params: { path: { conversation_id: session.conversationId } },
          body: { items: [{ type: 'function_call_output', call_id: action.callId, output }] },
        }),
      ),
    onSuccess: () => queryClient.invalidateQueries({ queryKey: ['messages', session.id] }),
  });
  return (
    <form
      className="action-form"
      onSubmit={(event) => {
        event.preventDefault();
        send.mutate();
      }}
    >
      <p>
        <strong>Client tool</strong> <code>{action.name}</code> was called with
      </p>
      <pre>{action.arguments}</pre>
      <Field label={`Output of ${action.name}`} hint="What your application would return to the agent">
        {(props) => <textarea {...props} rows={3} value={output} onChange={(e) => setOutput(e.target.value)} />}
      </Field>
      <ErrorNote error={send.error} />
      <button type="submit" className="primary" disabled={send.isPending}>
        Submit output
      </button>
    </form>
  );
}

/** A message as the composer sends it: its text and the uploaded files attached to it. */
interface Draft {
  text: string;
  files: ReadyAttachment[];
}

function partsOf(draft: Draft) {
  return [
    ...(draft.text.trim() === '' ? [] : [{ type: 'text' as const, text: draft.text }]),
    ...draft.files.map((file) => ({ type: 'file' as const, fileId: file.fileId })),
  ];
}

interface ConversationProps {
  /** Null until the first message opens a session. */
  session: Session | null;
  /** Opens a session whose conversation will send `draft` as soon as its stream is live. */
  onOpen: (draft: Draft) => void;
  opening: boolean;
  /** A first message to send once the stream is live (so not one delta is missed). */
  initial: Draft | null;
  onInitialSent: () => void;
  /** The run whose trace is open beside the chat, and how to open one. */
  tracing: string | null;
  onTrace: (runId: string) => void;
  /** The agent runs on the scripted model: the hint says which lines it plays. */
  scripted: boolean;
  /** The composer's files: the page's, so that they outlive the remount when the first message opens a session. */
  attachments: Attachments;
}

function Conversation({
  session,
  onOpen,
  opening,
  initial,
  onInitialSent,
  tracing,
  onTrace,
  scripted,
  attachments,
}: ConversationProps) {
  const sessionId = session?.id ?? null;
  const messages = useQuery({ ...messagesQuery(sessionId ?? ''), enabled: sessionId !== null });
  const live = useLiveSession(sessionId);
  const queryClient = useQueryClient();
  const [text, setText] = useState('');
  const list = sessionId === null ? [] : (messages.data?.data ?? []);
  const active = list.some(
    (message) => message.status === 'running' || message.status === 'queued' || message.status === 'requires_action',
  );
  const send = useMutation({
    mutationFn: (draft: Draft) =>
      unwrap(
        api.POST('/v1/sessions/{id}/messages', {
          params: { path: { id: sessionId ?? '' }, header: { 'idempotency-key': idempotencyKey() } },
          body: { parts: partsOf(draft) },
        }),
      ),
    onSuccess: async () => {
      setText('');
      attachments.clear();
      await queryClient.invalidateQueries({ queryKey: ['messages', sessionId] });
    },
    onError: (error, draft) => {
      // A refused first message comes back to the composer of the session it opened.
      setText((current) => (current === '' ? draft.text : current));
      const refused = attachmentError(error, draft.files, draft.text.trim() !== '');
      if (refused !== null) attachments.fail(refused.key, { error: refused.message });
    },
  });
  const refusedFile =
    send.variables === undefined
      ? null
      : attachmentError(send.error, send.variables.files, send.variables.text.trim() !== '');
  // A refused file is said at its chip.
  const sendError = refusedFile === null ? send.error : null;
  const blocked = attachments.uploading || attachments.items.some((item) => item.error !== null);
  const empty = text.trim() === '' && attachments.ready.length === 0;
  const interrupt = useMutation({
    mutationFn: () => unwrap(api.POST('/v1/sessions/{id}/interrupt', { params: { path: { id: sessionId ?? '' } } })),
    onSuccess: () => queryClient.invalidateQueries({ queryKey: ['messages', sessionId] }),
  });
  useEffect(() => {
    if (initial !== null && sessionId !== null && live.connection === 'live') {
      onInitialSent();
      send.mutate(initial);
    }
  }, [initial, sessionId, live.connection, onInitialSent, send.mutate]);
  const submit = (event: FormEvent) => {
    event.preventDefault();
    if (empty || blocked) return;
    const draft = { text, files: attachments.ready };
    if (session === null) onOpen(draft);
    else send.mutate(draft);
  };
  return (
    <div className="conversation">
      {session === null ? (
        <p className="muted">A new session opens with your first message.</p>
      ) : (
        <p className="muted small" aria-live="polite">
          Session <Link to={`/sessions/${session.id}`}>{shortId(session.id)}</Link> ·{' '}
          <span data-connection={live.connection}>
            {live.connection === 'live' ? 'live' : live.connection === 'reconnecting' ? 'reconnecting…' : 'connecting…'}
          </span>
          {live.reconnects > 0 ? ` · reconnected ${live.reconnects}×` : ''}
        </p>
      )}
      {session !== null && messages.isPending ? <Loading what="messages" /> : null}
      <ErrorNote error={messages.error} />
      {session !== null && list.length === 0 && !messages.isPending && initial === null ? (
        <p className="muted">No messages yet. Say something.</p>
      ) : null}
      <Transcript
        messages={list}
        live={live.messages}
        actions={(message) => (
          <>
            {message.runId === null ? null : (
              <button
                type="button"
                className="link small"
                aria-pressed={tracing === message.runId}
                onClick={() => onTrace(message.runId ?? '')}
              >
                Show trace beside the chat
              </button>
            )}
            {message.status !== 'requires_action' || session === null
              ? null
              : message.requiredActions.map((action) =>
                  action.type === 'ask_user_question' ? (
                    <AnswerForm key={`q-${action.actionId}`} session={session} message={message} action={action} />
                  ) : action.type === 'tool_approval' ? (
                    <ApprovalForm key={`a-${action.actionId}`} session={session} message={message} action={action} />
                  ) : action.type === 'mcp_elicitation' ? (
                    <ElicitationForm key={`e-${action.actionId}`} session={session} message={message} action={action} />
                  ) : (
                    <ToolOutputForm key={action.callId} session={session} action={action} />
                  ),
                )}
          </>
        )}
      />
      <form className="composer" onSubmit={submit} {...fileDropHandlers(attachments)}>
        <Field
          label="Message"
          hint={
            scripted ? (
              <>
                Enter sends; Shift+Enter adds a line; paste or drop files to attach them. The scripted model plays{' '}
                <code>call</code>, <code>ask</code> and <code>sleep</code> lines.
              </>
            ) : (
              'Enter sends; Shift+Enter adds a line; paste or drop files to attach them.'
            )
          }
        >
          {(props) => (
            <textarea
              {...props}
              rows={3}
              value={text}
              onChange={(e) => setText(e.target.value)}
              onKeyDown={(event) => {
                if (event.key === 'Enter' && !event.shiftKey && !event.nativeEvent.isComposing) submit(event);
              }}
            />
          )}
        </Field>
        <AttachmentPicker attachments={attachments} />
        <ErrorNote error={sendError ?? interrupt.error} />
        <div className="row">
          <button type="submit" className="primary" disabled={send.isPending || opening || empty || blocked}>
            Send
          </button>
          <ConfirmButton
            label="Interrupt"
            consequence="Stop the running turn? It ends cancelled; what it wrote so far is kept."
            confirm="Confirm interrupt"
            onConfirm={() => interrupt.mutate()}
            pending={interrupt.isPending}
            disabled={!active}
          />
          {interrupt.data === undefined ? null : interrupt.data.status === 'no_turn' ? (
            <output className="muted small">Nothing was running.</output>
          ) : active ? (
            <output className="muted small">Interrupting…</output>
          ) : null}
        </div>
      </form>
    </div>
  );
}

export default function PlaygroundPage() {
  const { id: agentId = '' } = useParams();
  const [params, setParams] = useSearchParams();
  const sessionId = params.get('session');
  const tracing = params.get('trace');
  const canEdit = useCan('agents:write');
  // The drawer is a view of the page: its run is in the URL, beside the session.
  const showTrace = (runId: string | null) =>
    setParams(
      (previous) => {
        const next = new URLSearchParams(previous);
        if (runId === null) next.delete('trace');
        else next.set('trace', runId);
        return next;
      },
      { replace: true },
    );
  const queryClient = useQueryClient();
  const agent = useQuery({
    queryKey: ['agent', agentId],
    queryFn: () => unwrap(api.GET('/v1/agents/{id}', { params: { path: { id: agentId } } })),
  });
  usePageTitle(`Playground ${agent.data?.agent.name ?? ''}`.trim());
  const sessions = useQuery({
    queryKey: ['sessions', { agentId }],
    queryFn: () => unwrap(api.GET('/v1/sessions', { params: { query: { agentId, limit: 20 } } })),
  });
  const session = useQuery({
    queryKey: ['session', sessionId],
    queryFn: () => unwrap(api.GET('/v1/sessions/{id}', { params: { path: { id: sessionId ?? '' } } })),
    enabled: sessionId !== null,
  });
  const [initial, setInitial] = useState<Draft | null>(null);
  const attachments = useAttachments();
  const open = useMutation({
    mutationFn: (_first: Draft | null) =>
      unwrap(
        api.POST('/v1/sessions', { body: { agentId }, params: { header: { 'idempotency-key': idempotencyKey() } } }),
      ),
    onSuccess: async (answer, first) => {
      queryClient.setQueryData(['session', answer.session.id], answer);
      setInitial(first);
      setParams({ session: answer.session.id });
      await queryClient.invalidateQueries({ queryKey: ['sessions'] });
    },
  });
  const clearInitial = useCallback(() => setInitial(null), []);

  return (
    <section className="playground">
      <div className="page-head">
        <h1>Playground{agent.data === undefined ? '' : `: ${agent.data.agent.name}`}</h1>
        <div className="row">
          <Link className="button" to={`/agents/${agentId}`}>
            Edit agent
          </Link>
          <button type="button" onClick={() => open.mutate(null)} disabled={open.isPending}>
            New session
          </button>
        </div>
      </div>
      <ErrorNote error={agent.error ?? open.error ?? session.error} />
      <div className={tracing === null ? 'workspace' : 'workspace tracing'}>
        <aside aria-label="Sessions of this agent">
          <h2 className="small-heading">Sessions</h2>
          {sessions.data === undefined ? null : sessions.data.data.length === 0 ? (
            <p className="muted small">None yet.</p>
          ) : (
            <ul className="session-list">
              {sessions.data.data.map((item) => (
                <SessionItem key={item.id} session={item} current={item.id === sessionId} />
              ))}
            </ul>
          )}
        </aside>
        <div>
          {sessionId !== null && session.data === undefined ? (
            session.isPending ? (
              <Loading what="session" />
            ) : null
          ) : (
            <Conversation
              key={sessionId ?? 'new'}
              session={session.data?.session ?? null}
              onOpen={(draft) => open.mutate(draft)}
              opening={open.isPending}
              initial={initial}
              onInitialSent={clearInitial}
              tracing={tracing}
              onTrace={showTrace}
              scripted={agent.data?.agent.model.startsWith('scripted') ?? false}
              attachments={attachments}
            />
          )}
        </div>
        <aside className="workspace-side" aria-label={tracing === null ? 'The agent' : 'Trace of a turn'}>
          {tracing !== null ? (
            <TraceDrawer key={tracing} runId={tracing} onClose={() => showTrace(null)} />
          ) : agent.data === undefined ? null : (
            <AgentPanel agent={agent.data.agent} canWrite={canEdit} />
          )}
        </aside>
      </div>
    </section>
  );
}
