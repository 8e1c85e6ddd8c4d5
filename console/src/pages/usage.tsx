/**
 * /console/usage: the organization's credit balance and what its agents cost, per day, over the latest runs
 * (up to 500, read through the runs list): a small stacked bar chart and a table per agent.
 */
import { useQuery } from '@tanstack/react-query';
import { api, unwrap } from '../api/client.ts';
import type { Run } from '../api/types.ts';
import { useOrganization } from '../auth/session.tsx';
import { usePageTitle } from '../components/title.ts';
import { ErrorNote, Loading, usd } from '../components/ui.tsx';

const MAX_PAGES = 10;
const COLORS = ['#3b5bdb', '#e8590c', '#2b8a3e', '#c2255c', '#5f3dc4', '#1098ad', '#a61e4d', '#5c940d'];

async function recentRuns(): Promise<Run[]> {
  const runs: Run[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < MAX_PAGES; page += 1) {
    const answer = await unwrap(
      api.GET('/v1/runs', { params: { query: cursor === undefined ? { limit: 50 } : { limit: 50, cursor } } }),
    );
    runs.push(...answer.data);
    if (!answer.has_more || answer.next_cursor === null) break;
    cursor = answer.next_cursor;
  }
  return runs;
}

const day = (seconds: number) => new Date(seconds * 1000).toISOString().slice(0, 10);

export default function UsagePage() {
  usePageTitle('Usage');
  const organization = useOrganization();
  const runs = useQuery({ queryKey: ['runs', 'usage'], queryFn: recentRuns });
  const agents = useQuery({ queryKey: ['agents'], queryFn: () => unwrap(api.GET('/v1/agents')) });
  const names = new Map((agents.data?.data ?? []).map((agent) => [agent.id, agent.name]));
  const data = runs.data ?? [];
  const agentIds = [...new Set(data.map((run) => run.agent_id ?? 'none'))];
  const days = [...new Set(data.map((run) => day(run.created_at)))].sort();
  const cost = new Map<string, number>();
  const totals = new Map<string, { cost: number; runs: number; tokens: number }>();
  for (const run of data) {
    const agent = run.agent_id ?? 'none';
    const key = `${day(run.created_at)}|${agent}`;
    cost.set(key, (cost.get(key) ?? 0) + run.cost_usd);
    const total = totals.get(agent) ?? { cost: 0, runs: 0, tokens: 0 };
    totals.set(agent, {
      cost: total.cost + run.cost_usd,
      runs: total.runs + 1,
      tokens: total.tokens + run.usage.total_tokens,
    });
  }
  const dayTotals = days.map((d) => agentIds.reduce((sum, agent) => sum + (cost.get(`${d}|${agent}`) ?? 0), 0));
  const max = Math.max(0, ...dayTotals);
  const width = 640;
  const height = 180;
  const barWidth = days.length === 0 ? 0 : Math.min(48, (width - 40) / days.length - 6);
  const label = (agent: string) => (agent === 'none' ? 'no agent' : (names.get(agent) ?? agent.slice(0, 8)));
  return (
    <section>
      <h1>Usage</h1>
      <div className="card">
        <h2>Credits</h2>
        <p className="big">
          {organization === undefined
            ? '…'
            : organization.credit_balance_usd === null
              ? 'Unlimited'
              : usd(organization.credit_balance_usd)}
        </p>
        <p className="muted small">
          Set by an operator with <code>bin/agentry.js credits set --org {organization?.name ?? 'NAME'} USD</code>.
          Priced models debit it per call.
        </p>
      </div>
      <h2>Cost per agent per day</h2>
      <ErrorNote error={runs.error} />
      {runs.isPending ? <Loading what="runs" /> : null}
      {runs.data === undefined || data.length === 0 ? (
        runs.isPending ? null : (
          <p className="muted">No runs yet.</p>
        )
      ) : (
        <>
          <p className="muted small">
            Over the latest {data.length} runs{data.length >= MAX_PAGES * 50 ? ' (older runs are not counted)' : ''}.
          </p>
          <figure className="chart">
            <svg
              viewBox={`0 0 ${width} ${height + 24}`}
              role="img"
              aria-label={`Daily cost per agent, ${days[0]} to ${days[days.length - 1]}`}
            >
              {days.map((d, i) => {
                let y = height;
                const x = 30 + i * (barWidth + 6);
                return (
                  <g key={d}>
                    {agentIds.map((agent, a) => {
                      const value = cost.get(`${d}|${agent}`) ?? 0;
                      const h = max === 0 ? 0 : (value / max) * (height - 10);
                      y -= h;
                      return (
                        <rect
                          key={agent}
                          x={x}
                          y={y}
                          width={barWidth}
                          height={Math.max(h, value > 0 ? 1 : 0)}
                          fill={COLORS[a % COLORS.length]}
                        >
                          <title>{`${d} · ${label(agent)}: ${usd(value)}`}</title>
                        </rect>
                      );
                    })}
                    <text x={x + barWidth / 2} y={height + 16} textAnchor="middle" className="axis">
                      {d.slice(5)}
                    </text>
                  </g>
                );
              })}
              <line x1={26} y1={height} x2={width} y2={height} className="axis-line" />
              <text x={0} y={12} className="axis">
                {usd(max)}
              </text>
            </svg>
            <figcaption>
              {agentIds.map((agent, a) => (
                <span key={agent} className="legend">
                  <span className={`swatch swatch-${a % COLORS.length}`} aria-hidden="true" /> {label(agent)}
                </span>
              ))}
            </figcaption>
          </figure>
          <table>
            <caption className="sr-only">Cost per agent</caption>
            <thead>
              <tr>
                <th scope="col">Agent</th>
                <th scope="col" className="num">
                  Runs
                </th>
                <th scope="col" className="num">
                  Tokens
                </th>
                <th scope="col" className="num">
                  Cost
                </th>
              </tr>
            </thead>
            <tbody>
              {[...totals.entries()]
                .sort((a, b) => b[1].cost - a[1].cost)
                .map(([agent, total]) => (
                  <tr key={agent}>
                    <td>{label(agent)}</td>
                    <td className="num">{total.runs}</td>
                    <td className="num">{total.tokens}</td>
                    <td className="num">{usd(total.cost)}</td>
                  </tr>
                ))}
            </tbody>
          </table>
        </>
      )}
    </section>
  );
}
