/** /console/agents: the organization's agents, with links to edit, chat and their runs. */
import { useQuery } from '@tanstack/react-query';
import { Link } from 'react-router';
import { api, unwrap } from '../api/client.ts';
import { useCan } from '../auth/session.tsx';
import { usePageTitle } from '../components/title.ts';
import { ErrorNote, Id, Loading, Pager, TableBox, When } from '../components/ui.tsx';

export const agentsQuery = {
  queryKey: ['agents'] as const,
  queryFn: () => unwrap(api.GET('/v1/agents')),
};

export default function AgentsPage() {
  usePageTitle('Agents');
  const agents = useQuery(agentsQuery);
  const canWrite = useCan('agents:write');
  const canChat = useCan('sessions:write');
  return (
    <section>
      <div className="page-head">
        <h1>Agents</h1>
        {canWrite ? (
          <Link className="button primary" to="/agents/new">
            New agent
          </Link>
        ) : null}
      </div>
      <ErrorNote error={agents.error} />
      {agents.data === undefined ? (
        agents.isPending ? (
          <Loading what="agents" />
        ) : null
      ) : (
        <>
          <TableBox label="Agents">
            <table>
              <caption className="sr-only">Agents of the organization</caption>
              <thead>
                <tr>
                  <th scope="col">Name</th>
                  <th scope="col">Model</th>
                  <th scope="col">Version</th>
                  <th scope="col">Updated</th>
                  <th scope="col">Id</th>
                  <th scope="col">
                    <span className="sr-only">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {agents.data.data.map((agent) => (
                  <tr key={agent.id}>
                    <td>
                      <Link to={`/agents/${agent.id}`}>{agent.name}</Link>
                      {agent.isDefault ? <span className="tag">default</span> : null}
                      {agent.description === null ? null : <div className="muted small">{agent.description}</div>}
                    </td>
                    <td>
                      <code>{agent.model}</code>
                    </td>
                    <td>v{agent.version}</td>
                    <td>
                      <When at={agent.updatedAt} />
                    </td>
                    <td>
                      <Id value={agent.id} what="agent" />
                    </td>
                    <td className="actions">
                      {canChat ? (
                        <Link to={`/agents/${agent.id}/chat`} aria-label={`Chat with ${agent.name}`}>
                          Chat
                        </Link>
                      ) : null}
                      <Link to={`/runs?agent=${agent.id}`} aria-label={`Runs of ${agent.name}`}>
                        Runs
                      </Link>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </TableBox>
          <Pager summary={`${agents.data.data.length} agents`} onPrevious={null} onNext={null} />
        </>
      )}
    </section>
  );
}
