/** /console/sessions/{id}: one session's transcript, with links to its agent's playground and its runs. */
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Link, useNavigate, useParams } from 'react-router';
import { api, unwrap } from '../api/client.ts';
import { messagesQuery } from '../api/queries.ts';
import { useCan } from '../auth/session.tsx';
import { usePageTitle } from '../components/title.ts';
import { Transcript } from '../components/transcript.tsx';
import { Badge, ErrorNote, Loading, When } from '../components/ui.tsx';

export default function SessionPage() {
  const { id = '' } = useParams();
  usePageTitle('Session');
  const canWrite = useCan('sessions:write');
  const navigate = useNavigate();
  const queryClient = useQueryClient();
  const [confirming, setConfirming] = useState(false);
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
  return (
    <section>
      <div className="page-head">
        <h1>Session</h1>
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
            <code>{current.id}</code>
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
          {confirming ? (
            <div className="row">
              <span>Delete this session? A running turn is interrupted; its runs and traces are kept.</span>
              <button type="button" className="danger" onClick={() => remove.mutate()}>
                Confirm delete
              </button>
              <button type="button" onClick={() => setConfirming(false)}>
                Keep it
              </button>
            </div>
          ) : (
            <button type="button" className="danger" onClick={() => setConfirming(true)}>
              Delete session
            </button>
          )}
        </div>
      ) : null}
    </section>
  );
}
