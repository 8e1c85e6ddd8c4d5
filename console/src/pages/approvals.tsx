/**
 * /console/approvals: the tool calls waiting for a decision in every session of the organization
 * (GET /v1/approvals?status=pending), oldest waiting last, with their tool, server, arguments, agent, session and
 * age; approve or deny each in place (the session's answer route). The list is read again every few seconds, so
 * calls that arrive or are decided elsewhere appear and go without a reload.
 */
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Link } from 'react-router';
import { api, unwrap } from '../api/client.ts';
import type { Approval } from '../api/types.ts';
import { useCan } from '../auth/session.tsx';
import { usePageTitle } from '../components/title.ts';
import { ErrorNote, Field, Loading, When } from '../components/ui.tsx';

const REFRESH_MS = 3000;

/** How long ago `at` (Unix seconds) was, in the largest unit that fits. */
function age(at: number, now: number): string {
  const seconds = Math.max(0, Math.round(now / 1000 - at));
  if (seconds < 60) return `${seconds} s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min`;
  if (seconds < 86_400) return `${Math.floor(seconds / 3600)} h`;
  return `${Math.floor(seconds / 86_400)} d`;
}

function Pending({ approval, canDecide, now }: { approval: Approval; canDecide: boolean; now: number }) {
  const [reason, setReason] = useState('');
  const queryClient = useQueryClient();
  const decide = useMutation({
    mutationFn: (approved: boolean) =>
      unwrap(
        api.POST('/v1/sessions/{id}/messages/{messageId}/answer', {
          params: { path: { id: approval.session_id, messageId: approval.message_id } },
          body: { actionId: approval.action_id, answer: reason.trim() === '' ? { approved } : { approved, reason } },
        }),
      ),
    onSettled: () => queryClient.invalidateQueries({ queryKey: ['approvals'] }),
  });
  return (
    <li className="card">
      <form
        className="action-form approval"
        aria-label={`Approval of ${approval.tool} for ${approval.agent_name}`}
        onSubmit={(event) => {
          event.preventDefault();
          decide.mutate(true);
        }}
      >
        <p>
          <code>{approval.server_tool}</code> on <code>{approval.server}</code> · agent{' '}
          <Link to={`/agents/${approval.agent_id}`}>{approval.agent_name}</Link> · session{' '}
          <Link to={`/agents/${approval.agent_id}/chat?session=${approval.session_id}`}>
            {approval.session_title ?? approval.session_id}
          </Link>{' '}
          · waiting{' '}
          <span title={new Date(approval.created_at * 1000).toISOString()}>{age(approval.created_at, now)}</span>
        </p>
        <pre>{approval.arguments}</pre>
        {approval.expires_at === null ? null : (
          <p className="muted small">
            Denied automatically at <When at={approval.expires_at} />
          </p>
        )}
        {canDecide ? (
          <>
            <Field label="Reason (optional)" hint="Told to the agent with your decision">
              {(props) => (
                <input {...props} value={reason} onChange={(e) => setReason(e.target.value)} maxLength={2000} />
              )}
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
          </>
        ) : null}
      </form>
    </li>
  );
}

export default function ApprovalsPage() {
  usePageTitle('Approvals');
  const canDecide = useCan('sessions:write');
  const [after, setAfter] = useState<string[]>([]);
  const cursor = after.at(-1);
  const approvals = useQuery({
    queryKey: ['approvals', 'pending', cursor ?? ''],
    queryFn: () =>
      unwrap(
        api.GET('/v1/approvals', {
          params: { query: { status: 'pending', limit: 20, ...(cursor === undefined ? {} : { after: cursor }) } },
        }),
      ),
    refetchInterval: REFRESH_MS,
  });
  const now = approvals.dataUpdatedAt === 0 ? Date.now() : approvals.dataUpdatedAt;
  return (
    <section>
      <h1>Approvals</h1>
      <p className="muted">
        Tool calls waiting for your decision in every session, newest first. The list refreshes on its own.
      </p>
      <ErrorNote error={approvals.error} />
      {approvals.data === undefined ? (
        approvals.isPending ? (
          <Loading what="approvals" />
        ) : null
      ) : (
        <>
          {approvals.data.data.length === 0 ? (
            <p className="muted">No tool calls are waiting for approval.</p>
          ) : (
            <ul className="plain-list" aria-label="Waiting tool calls">
              {approvals.data.data.map((approval) => (
                <Pending key={approval.id} approval={approval} canDecide={canDecide} now={now} />
              ))}
            </ul>
          )}
          <nav className="pager" aria-label="Pages">
            <button type="button" disabled={after.length === 0} onClick={() => setAfter([])}>
              Newest
            </button>
            <button
              type="button"
              disabled={!approvals.data.has_more}
              onClick={() => setAfter([...after, approvals.data?.last_id ?? ''])}
            >
              Older
            </button>
          </nav>
        </>
      )}
    </section>
  );
}
