/** /console/sessions: every session of the organization, newest first, filterable by agent, with paging. */
import { useQuery } from '@tanstack/react-query';
import { Link, useSearchParams } from 'react-router';
import { api, unwrap } from '../api/client.ts';
import { usePageTitle } from '../components/title.ts';
import { Badge, ErrorNote, Field, Loading, shortId, When } from '../components/ui.tsx';

const PAGE = 25;

export default function SessionsPage() {
  usePageTitle('Sessions');
  const [params, setParams] = useSearchParams();
  const agentId = params.get('agent') ?? '';
  const offset = Math.max(0, Number(params.get('offset') ?? 0) || 0);
  const agents = useQuery({ queryKey: ['agents'], queryFn: () => unwrap(api.GET('/v1/agents')) });
  const sessions = useQuery({
    queryKey: ['sessions', { agentId, offset }],
    queryFn: () =>
      unwrap(
        api.GET('/v1/sessions', { params: { query: { ...(agentId === '' ? {} : { agentId }), limit: PAGE, offset } } }),
      ),
  });
  const names = new Map((agents.data?.data ?? []).map((agent) => [agent.id, agent.name]));
  const go = (next: Record<string, string>) =>
    setParams(Object.fromEntries(Object.entries(next).filter(([, value]) => value !== '')));
  return (
    <section>
      <h1>Sessions</h1>
      <div className="filters">
        <Field label="Agent">
          {(props) => (
            <select {...props} value={agentId} onChange={(e) => go({ agent: e.target.value })}>
              <option value="">All agents</option>
              {(agents.data?.data ?? []).map((agent) => (
                <option key={agent.id} value={agent.id}>
                  {agent.name}
                </option>
              ))}
            </select>
          )}
        </Field>
      </div>
      <ErrorNote error={sessions.error} />
      {sessions.data === undefined ? (
        sessions.isPending ? (
          <Loading what="sessions" />
        ) : null
      ) : sessions.data.data.length === 0 ? (
        <p className="muted">No sessions.</p>
      ) : (
        <>
          <table>
            <caption className="sr-only">Sessions</caption>
            <thead>
              <tr>
                <th scope="col">Session</th>
                <th scope="col">Agent</th>
                <th scope="col">Status</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {sessions.data.data.map((session) => (
                <tr key={session.id}>
                  <td>
                    <Link to={`/sessions/${session.id}`}>{session.title ?? shortId(session.id)}</Link>
                  </td>
                  <td>
                    {session.agentId === null ? (
                      <span className="muted">none yet</span>
                    ) : (
                      <Link to={`/agents/${session.agentId}`}>
                        {names.get(session.agentId) ?? shortId(session.agentId)}
                      </Link>
                    )}
                  </td>
                  <td>
                    <Badge value={session.status} />
                  </td>
                  <td>
                    <When at={session.createdAt} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
          <nav className="pager" aria-label="Pages">
            <span className="muted small">
              {offset + 1}–{offset + sessions.data.data.length} of {sessions.data.total}
            </span>
            <button
              type="button"
              disabled={offset === 0}
              onClick={() => go({ agent: agentId, offset: String(Math.max(0, offset - PAGE)) })}
            >
              Previous
            </button>
            <button
              type="button"
              disabled={offset + PAGE >= sessions.data.total}
              onClick={() => go({ agent: agentId, offset: String(offset + PAGE) })}
            >
              Next
            </button>
          </nav>
        </>
      )}
    </section>
  );
}
