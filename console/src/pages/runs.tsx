/**
 * /console/runs: runs of every surface, newest first, with cursor paging. Agent and conversation filter on the
 * server; status and source filter the rows of each page (the API has no such filters). Filters live in the URL,
 * so a filtered view can be shared.
 */
import { useQuery } from '@tanstack/react-query';
import { Link } from 'react-router';
import { api, unwrap } from '../api/client.ts';
import type { Run } from '../api/types.ts';
import { usePageTitle } from '../components/title.ts';
import {
  Badge,
  ErrorNote,
  Field,
  Id,
  Loading,
  Pager,
  shortId,
  TableBox,
  usd,
  useCursorPages,
  When,
} from '../components/ui.tsx';
import { useUrlParams } from '../components/url-params.ts';

const STATUSES: Run['status'][] = ['queued', 'running', 'requires_action', 'completed', 'failed', 'cancelled'];
const SOURCES: Run['source'][] = ['sessions', 'responses', 'tasks', 'sdk', 'console', 'schedule'];
const CONVERSATION = /^conv_[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

/** A run's duration from its whole-second start and end times. */
function elapsed(seconds: number): string {
  if (seconds < 1) return '< 1 s';
  if (seconds < 60) return `${seconds} s`;
  const minutes = Math.floor(seconds / 60);
  return minutes < 60 ? `${minutes} min ${seconds % 60} s` : `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}

export default function RunsPage() {
  usePageTitle('Runs');
  const [params, updateParams] = useUrlParams();
  const agent = params.get('agent') ?? '';
  const conversation = params.get('conversation') ?? '';
  const status = params.get('status') ?? '';
  const source = params.get('source') ?? '';
  const cursor = params.get('cursor') ?? '';
  const conversationOk = conversation === '' || CONVERSATION.test(conversation);
  const agents = useQuery({ queryKey: ['agents'], queryFn: () => unwrap(api.GET('/v1/agents')) });
  const runs = useQuery({
    queryKey: ['runs', { agent, conversation, cursor }],
    queryFn: () =>
      unwrap(
        api.GET('/v1/runs', {
          params: {
            query: {
              limit: 50,
              ...(agent === '' ? {} : { agent_id: agent }),
              ...(conversation === '' ? {} : { conversation_id: conversation }),
              ...(cursor === '' ? {} : { cursor }),
            },
          },
        }),
      ),
    enabled: conversationOk,
  });
  const names = new Map((agents.data?.data ?? []).map((item) => [item.id, item.name]));
  // Each change applies to the URL as it is then (url-params.ts): two quick changes keep both.
  const set = (changes: Record<string, string>) =>
    updateParams((next) => {
      for (const [name, value] of Object.entries(changes)) {
        if (value === '') next.delete(name);
        else next.set(name, value);
      }
      // A new filter starts again from the newest runs.
      if (!('cursor' in changes)) next.delete('cursor');
    });
  const pages = useCursorPages(cursor, (next) => set({ cursor: next }));
  const rows = (runs.data?.data ?? []).filter(
    (run) => (status === '' || run.status === status) && (source === '' || run.source === source),
  );
  return (
    <section>
      <h1>Runs</h1>
      <form className="filters" aria-label="Filter runs" onSubmit={(event) => event.preventDefault()}>
        <Field label="Agent">
          {(props) => (
            <select {...props} value={agent} onChange={(e) => set({ agent: e.target.value })}>
              <option value="">All agents</option>
              {(agents.data?.data ?? []).map((item) => (
                <option key={item.id} value={item.id}>
                  {item.name}
                </option>
              ))}
            </select>
          )}
        </Field>
        <Field
          label="Conversation"
          error={conversationOk ? undefined : 'A conversation id is conv_ followed by a UUID'}
        >
          {(props) => (
            <input
              {...props}
              placeholder="conv_…"
              value={conversation}
              onChange={(e) => set({ conversation: e.target.value.trim() })}
              spellCheck={false}
            />
          )}
        </Field>
        <Field label="Status">
          {(props) => (
            <select {...props} value={status} onChange={(e) => set({ status: e.target.value, cursor })}>
              <option value="">Any status</option>
              {STATUSES.map((value) => (
                <option key={value} value={value}>
                  {value.replaceAll('_', ' ')}
                </option>
              ))}
            </select>
          )}
        </Field>
        <Field label="Source">
          {(props) => (
            <select {...props} value={source} onChange={(e) => set({ source: e.target.value, cursor })}>
              <option value="">Any source</option>
              {SOURCES.map((value) => (
                <option key={value} value={value}>
                  {value}
                </option>
              ))}
            </select>
          )}
        </Field>
      </form>
      <ErrorNote error={runs.error} />
      {runs.data === undefined ? (
        runs.isPending && conversationOk ? (
          <Loading what="runs" />
        ) : null
      ) : (
        <>
          {rows.length === 0 ? (
            <p className="muted">No runs{status !== '' || source !== '' ? ' on this page match' : ''}.</p>
          ) : (
            <TableBox label="Runs">
              <table>
                <caption className="sr-only">Runs</caption>
                <thead>
                  <tr>
                    <th scope="col">Input</th>
                    <th scope="col">Agent</th>
                    <th scope="col">Status</th>
                    <th scope="col">Source</th>
                    <th scope="col" className="num">
                      Duration
                    </th>
                    <th scope="col" className="num">
                      Tokens
                    </th>
                    <th scope="col" className="num">
                      Cost
                    </th>
                    <th scope="col">Created</th>
                    <th scope="col">Id</th>
                  </tr>
                </thead>
                <tbody>
                  {rows.map((run) => (
                    <tr key={run.id}>
                      <td className="preview">
                        <Link
                          to={`/runs/${run.id}`}
                          aria-label={`Trace of run ${shortId(run.id)}: ${run.input_preview ?? 'no input'}`}
                        >
                          {run.input_preview === null || run.input_preview === '' ? (
                            <span className="muted">no input</span>
                          ) : (
                            run.input_preview
                          )}
                        </Link>
                      </td>
                      <td>
                        {run.agent_id === null ? '—' : (names.get(run.agent_id) ?? shortId(run.agent_id))}
                        {run.agent_version === null ? null : <span className="muted small"> v{run.agent_version}</span>}
                      </td>
                      <td>
                        <Badge value={run.status} />
                      </td>
                      <td>{run.source}</td>
                      <td className="num">
                        {run.started_at === null
                          ? '—'
                          : run.completed_at === null
                            ? 'running'
                            : elapsed(run.completed_at - run.started_at)}
                      </td>
                      <td className="num">{run.usage.total_tokens}</td>
                      <td className="num">{usd(run.cost_usd)}</td>
                      <td>
                        <When at={run.created_at} />
                      </td>
                      <td>
                        <Id value={run.id} what="run" />
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </TableBox>
          )}
          <Pager
            summary={pages.summary(runs.data.data.length, 'runs')}
            onPrevious={pages.onPrevious}
            onNext={runs.data.has_more ? pages.onNext(runs.data.next_cursor) : null}
          />
        </>
      )}
    </section>
  );
}
