/**
 * /console/sessions: every session of the organization, newest first, filterable by agent and status, with paging.
 * A session reads as its title, or its first message while it has none; statuses refresh while the page is open.
 */
import { useQuery } from '@tanstack/react-query';
import { Link } from 'react-router';
import { api, unwrap } from '../api/client.ts';
import type { Session } from '../api/types.ts';
import { firstText, sessionName, useSessionPreview } from '../components/session-name.ts';
import { usePageTitle } from '../components/title.ts';
import {
  Badge,
  ErrorNote,
  Field,
  Id,
  Loading,
  offsetSummary,
  Pager,
  shortId,
  TableBox,
  When,
} from '../components/ui.tsx';
import { useUrlParams } from '../components/url-params.ts';

const PAGE = 25;
const STATUSES: Session['status'][] = ['idle', 'running', 'requires_action', 'failed'];
/** How often the list asks again, so statuses follow the sessions' turns. */
const REFRESH_MS = 5000;

function SessionRow({ session, agentName }: { session: Session; agentName: string | undefined }) {
  const preview = useSessionPreview(session);
  const first = firstText(preview);
  return (
    <tr>
      <td className="preview">
        <Link to={`/sessions/${session.id}`}>{sessionName(session, first)}</Link>
        {session.title === null && first !== undefined ? <span className="sr-only"> (untitled)</span> : null}
      </td>
      <td>
        {session.agentId === null ? (
          <span className="muted">none yet</span>
        ) : (
          <Link to={`/agents/${session.agentId}`}>{agentName ?? shortId(session.agentId)}</Link>
        )}
      </td>
      <td>
        <Badge value={session.status} />
      </td>
      <td className="num">{preview.data?.total ?? '…'}</td>
      <td>
        <When at={session.updatedAt} />
      </td>
      <td>
        <Id value={session.id} what="session" />
      </td>
    </tr>
  );
}

export default function SessionsPage() {
  usePageTitle('Sessions');
  const [params, updateParams] = useUrlParams();
  const agentId = params.get('agent') ?? '';
  const status = params.get('status') ?? '';
  const offset = Math.max(0, Number(params.get('offset') ?? 0) || 0);
  const agents = useQuery({ queryKey: ['agents'], queryFn: () => unwrap(api.GET('/v1/agents')) });
  const sessions = useQuery({
    queryKey: ['sessions', { agentId, offset }],
    queryFn: () =>
      unwrap(
        api.GET('/v1/sessions', { params: { query: { ...(agentId === '' ? {} : { agentId }), limit: PAGE, offset } } }),
      ),
    refetchInterval: REFRESH_MS,
  });
  const names = new Map((agents.data?.data ?? []).map((agent) => [agent.id, agent.name]));
  // Each change applies to the URL as it is then (url-params.ts): two quick changes keep both.
  const go = (changes: Record<string, string>) =>
    updateParams((next) => {
      // A new agent starts again from the newest sessions.
      const all = !('offset' in changes) && 'agent' in changes ? { ...changes, offset: '' } : changes;
      for (const [name, value] of Object.entries(all)) {
        if (value === '' || value === '0') next.delete(name);
        else next.set(name, value);
      }
    });
  const rows = (sessions.data?.data ?? []).filter((session) => status === '' || session.status === status);
  return (
    <section>
      <h1>Sessions</h1>
      <form className="filters" aria-label="Filter sessions" onSubmit={(event) => event.preventDefault()}>
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
        <Field label="Status">
          {(props) => (
            <select {...props} value={status} onChange={(e) => go({ status: e.target.value })}>
              <option value="">Any status</option>
              {STATUSES.map((value) => (
                <option key={value} value={value}>
                  {value.replaceAll('_', ' ')}
                </option>
              ))}
            </select>
          )}
        </Field>
      </form>
      <ErrorNote error={sessions.error} />
      {sessions.data === undefined ? (
        sessions.isPending ? (
          <Loading what="sessions" />
        ) : null
      ) : (
        <>
          {rows.length === 0 ? (
            <p className="muted">No sessions{status === '' ? '' : ' on this page match'}.</p>
          ) : (
            <TableBox label="Sessions">
              <table>
                <caption className="sr-only">Sessions</caption>
                <thead>
                  <tr>
                    <th scope="col">Session</th>
                    <th scope="col">Agent</th>
                    <th scope="col">Status</th>
                    <th scope="col" className="num">
                      Messages
                    </th>
                    <th scope="col">Last activity</th>
                    <th scope="col">Id</th>
                  </tr>
                </thead>
                <tbody>
                  {rows.map((session) => (
                    <SessionRow
                      key={session.id}
                      session={session}
                      agentName={session.agentId === null ? undefined : names.get(session.agentId)}
                    />
                  ))}
                </tbody>
              </table>
            </TableBox>
          )}
          <Pager
            summary={offsetSummary(offset, sessions.data.data.length, sessions.data.total)}
            onPrevious={offset === 0 ? null : () => go({ offset: String(Math.max(0, offset - PAGE)) })}
            onNext={offset + PAGE >= sessions.data.total ? null : () => go({ offset: String(offset + PAGE) })}
          />
        </>
      )}
    </section>
  );
}
