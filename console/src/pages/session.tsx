/** /console/sessions/{id}: one session's transcript, with links to its agent's playground and its runs. */
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import { Link, useNavigate, useParams } from 'react-router';
import { ApiError, api, unwrap } from '../api/client.ts';
import { messagesQuery } from '../api/queries.ts';
import type { Session } from '../api/types.ts';
import { useCan } from '../auth/session.tsx';
import { firstText, sessionName, useSessionPreview } from '../components/session-name.ts';
import { usePageTitle } from '../components/title.ts';
import { Transcript } from '../components/transcript.tsx';
import { Badge, ConfirmButton, ErrorNote, Field, Id, Loading, When } from '../components/ui.tsx';

/** The session's title, renamed in place; an empty title removes it (lists then show the first message). */
function TitleForm({ session }: { session: Session }) {
  const queryClient = useQueryClient();
  const [title, setTitle] = useState(session.title ?? '');
  const save = useMutation({
    mutationFn: () =>
      unwrap(
        api.PATCH('/v1/sessions/{id}', {
          params: { path: { id: session.id } },
          body: { title: title.trim() === '' ? null : title.trim() },
        }),
      ),
    onSuccess: async (saved) => {
      queryClient.setQueryData(['session', session.id], saved);
      await queryClient.invalidateQueries({ queryKey: ['sessions'] });
    },
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    save.mutate();
  };
  const error =
    save.error instanceof ApiError && save.error.param === 'title' ? 'A title is at most 200 characters' : undefined;
  return (
    <form className="row" onSubmit={submit} noValidate aria-label="Rename the session">
      <Field label="Title" error={error} hint="Empty: lists show the first message">
        {(props) => <input {...props} value={title} maxLength={200} onChange={(e) => setTitle(e.target.value)} />}
      </Field>
      <button type="submit" disabled={save.isPending || title.trim() === (session.title ?? '')}>
        Rename
      </button>
      {save.isSuccess ? <output className="ok small">Saved</output> : null}
      {error === undefined ? <ErrorNote error={save.error} /> : null}
    </form>
  );
}

export default function SessionPage() {
  const { id = '' } = useParams();
  usePageTitle('Session');
  const canWrite = useCan('sessions:write');
  const navigate = useNavigate();
  const queryClient = useQueryClient();
  const session = useQuery({
    queryKey: ['session', id],
    queryFn: () => unwrap(api.GET('/v1/sessions/{id}', { params: { path: { id } } })),
  });
  const messages = useQuery(messagesQuery(id));
  const remove = useMutation({
    mutationFn: () => unwrap(api.DELETE('/v1/sessions/{id}', { params: { path: { id } } })),
    onSuccess: async () => {
      await queryClient.invalidateQueries({ queryKey: ['sessions'] });
      navigate('/sessions');
    },
  });
  const current = session.data?.session;
  const preview = useSessionPreview({ id, updatedAt: current?.updatedAt ?? '' });
  return (
    <section>
      <div className="page-head">
        <h1>{current === undefined ? 'Session' : sessionName(current, firstText(preview))}</h1>
        {current === undefined ? null : (
          <div className="row">
            {current.agentId !== null && canWrite ? (
              <Link className="button primary" to={`/agents/${current.agentId}/chat?session=${current.id}`}>
                Continue in playground
              </Link>
            ) : null}
            <Link className="button" to={`/runs?conversation=${current.conversationId}`}>
              Runs
            </Link>
          </div>
        )}
      </div>
      <ErrorNote error={session.error ?? messages.error ?? remove.error} />
      {current === undefined ? null : (
        <dl className="facts">
          <dt>Id</dt>
          <dd>
            <Id value={current.id} what="session" />
          </dd>
          <dt>Status</dt>
          <dd>
            <Badge value={current.status} />
          </dd>
          <dt>Conversation</dt>
          <dd>
            <code>{current.conversationId}</code>
          </dd>
          <dt>Created</dt>
          <dd>
            <When at={current.createdAt} />
          </dd>
        </dl>
      )}
      {current !== undefined && canWrite ? <TitleForm key={current.title ?? ''} session={current} /> : null}
      <h2>Transcript</h2>
      {messages.data === undefined ? (
        messages.isPending ? (
          <Loading what="transcript" />
        ) : null
      ) : messages.data.data.length === 0 ? (
        <p className="muted">No messages.</p>
      ) : (
        <>
          {messages.data.total > messages.data.data.length ? (
            <p className="muted small">
              The latest {messages.data.data.length} of {messages.data.total} messages.
            </p>
          ) : null}
          <Transcript messages={messages.data.data} live={{}} />
        </>
      )}
      {canWrite && current !== undefined ? (
        <div className="danger-zone">
          <ConfirmButton
            label="Delete session"
            consequence="Delete this session? A running turn is interrupted; its runs and traces are kept."
            confirm="Confirm delete"
            onConfirm={() => remove.mutate()}
            pending={remove.isPending}
            danger
          />
        </div>
      ) : null}
    </section>
  );
}
