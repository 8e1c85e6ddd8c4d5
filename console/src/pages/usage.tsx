/**
 * /console/usage: the organization's credit balance and its usage over a range of UTC days (`GET /v1/usage`,
 * grouped by day and by agent or model): cost or tokens per day as a stacked bar chart (SVG), a table of the
 * range's totals, and the range as CSV (every key: day, agent, API key, model, source, end user). The range and
 * the view are in the URL (`?from=YYYY-MM-DD&to=YYYY-MM-DD&by=agent|model&metric=cost|tokens`).
 */
import { useMutation, useQuery } from '@tanstack/react-query';
import { useSearchParams } from 'react-router';
import { api, toApiError, unwrap } from '../api/client.ts';
import type { UsageGroup as Group, UsageList } from '../api/types.ts';
import { readKey } from '../auth/key-store.ts';
import { useOrganization } from '../auth/session.tsx';
import { saveFile } from '../components/save-file.ts';
import { usePageTitle } from '../components/title.ts';
import { ErrorNote, Field, Loading, TableBox, usd } from '../components/ui.tsx';

const COLORS = ['#3b5bdb', '#e8590c', '#2b8a3e', '#c2255c', '#5f3dc4', '#1098ad', '#a61e4d', '#5c940d'];
const DAY_MS = 86_400_000;
const MAX_DAYS = 366;
const MAX_PAGES = 20;
const PRESETS = [7, 30, 90] as const;
const DATE = /^\d{4}-\d{2}-\d{2}$/;

type By = 'agent' | 'model';
type Metric = 'cost' | 'tokens';

const isoDay = (ms: number) => new Date(ms).toISOString().slice(0, 10);
const dayMs = (day: string) => Date.parse(`${day}T00:00:00Z`);
const today = () => isoDay(Date.now());
const daysBefore = (day: string, n: number) => isoDay(dayMs(day) - n * DAY_MS);

/** One page of JSON (the route also answers CSV, which this never asks for). */
async function usagePage(query: {
  start_time: number;
  end_time: number;
  group_by: string;
  after?: string;
}): Promise<UsageList> {
  const answer = await unwrap(api.GET('/v1/usage', { params: { query: { ...query, limit: 1000 } } }));
  if (typeof answer === 'string') throw new Error('the usage report came back as CSV, not JSON');
  return answer;
}

/** Every group of the range (pages of 1,000, at most 20,000 groups). */
async function wholeReport(start: number, end: number, groupBy: string): Promise<{ groups: Group[]; cut: boolean }> {
  const groups: Group[] = [];
  let after: string | undefined;
  for (let page = 0; page < MAX_PAGES; page += 1) {
    const answer = await usagePage({
      start_time: start,
      end_time: end,
      group_by: groupBy,
      ...(after === undefined ? {} : { after }),
    });
    groups.push(...answer.data);
    if (!answer.has_more || answer.last_id === null) return { groups, cut: false };
    after = answer.last_id;
  }
  return { groups, cut: true };
}

/** The CSV of the range, fetched with the key in a header (never in a URL), handed to the browser as a file. */
async function downloadCsv(range: { start: number; end: number; name: string }): Promise<void> {
  const query = new URLSearchParams({
    group_by: 'day,agent,api_key,model,source,end_user',
    start_time: String(range.start),
    end_time: String(range.end),
  });
  const response = await fetch(`/v1/usage?${query}`, {
    headers: { authorization: `Bearer ${readKey() ?? ''}`, accept: 'text/csv' },
  });
  if (!response.ok) throw toApiError(response.status, await response.json().catch(() => null));
  saveFile(await response.blob(), range.name);
}

export default function UsagePage() {
  usePageTitle('Usage');
  const organization = useOrganization();
  const [params, setParams] = useSearchParams();
  const to = DATE.test(params.get('to') ?? '') ? (params.get('to') as string) : today();
  const from = DATE.test(params.get('from') ?? '') ? (params.get('from') as string) : daysBefore(to, 29);
  const by: By = params.get('by') === 'model' ? 'model' : 'agent';
  const metric: Metric = params.get('metric') === 'tokens' ? 'tokens' : 'cost';
  const dayCount = Math.round((dayMs(to) - dayMs(from)) / DAY_MS) + 1;
  const rangeError =
    Number.isNaN(dayCount) || dayCount < 1
      ? 'From must not be after To'
      : dayCount > MAX_DAYS
        ? `At most ${MAX_DAYS} days`
        : undefined;
  const start = dayMs(from) / 1000;
  const end = (dayMs(to) + DAY_MS) / 1000;
  const set = (changes: Record<string, string>) => setParams({ from, to, by, metric, ...changes }, { replace: false });

  const report = useQuery({
    queryKey: ['usage', { start, end, by }],
    queryFn: () => wholeReport(start, end, `day,${by}`),
    enabled: rangeError === undefined,
  });
  const agents = useQuery({ queryKey: ['agents'], queryFn: () => unwrap(api.GET('/v1/agents')) });
  const csv = useMutation({ mutationFn: downloadCsv });
  const names = new Map((agents.data?.data ?? []).map((agent) => [agent.id, agent.name]));

  const groups = report.data?.groups ?? [];
  const keyOf = (group: Group) => (by === 'agent' ? (group.agent_id ?? '') : (group.model ?? ''));
  const label = (key: string) => (by === 'model' ? key : (names.get(key) ?? `${key.slice(0, 8)}…`));
  const value = (group: { cost_usd: number; total_tokens: number }) =>
    metric === 'cost' ? group.cost_usd : group.total_tokens;
  const shown = (amount: number) => (metric === 'cost' ? usd(amount) : `${amount.toLocaleString('en')} tokens`);

  const totals = new Map<
    string,
    { turns: number; input: number; cached: number; output: number; tokens: number; cost: number }
  >();
  const perDay = new Map<string, number>();
  for (const group of groups) {
    const key = keyOf(group);
    const total = totals.get(key) ?? { turns: 0, input: 0, cached: 0, output: 0, tokens: 0, cost: 0 };
    totals.set(key, {
      turns: total.turns + group.turns,
      input: total.input + group.input_tokens,
      cached: total.cached + group.cached_input_tokens,
      output: total.output + group.output_tokens,
      tokens: total.tokens + group.total_tokens,
      cost: total.cost + group.cost_usd,
    });
    perDay.set(`${group.day}|${key}`, (perDay.get(`${group.day}|${key}`) ?? 0) + value(group));
  }
  const keys = [...totals.entries()]
    .sort((a, b) => (metric === 'cost' ? b[1].cost - a[1].cost : b[1].tokens - a[1].tokens) || a[0].localeCompare(b[0]))
    .map(([key]) => key);
  const days =
    rangeError === undefined ? Array.from({ length: dayCount }, (_, i) => daysBefore(to, dayCount - 1 - i)) : [];
  const dayTotals = days.map((d) => keys.reduce((sum, key) => sum + (perDay.get(`${d}|${key}`) ?? 0), 0));
  const max = Math.max(0, ...dayTotals);
  const width = 640;
  const height = 180;
  const step = days.length === 0 ? 0 : (width - 40) / days.length;
  const barWidth = Math.max(1, Math.min(48, step - (step > 6 ? 3 : 0)));
  const labelEvery = Math.max(1, Math.ceil(days.length / 12));
  const sum = (field: 'turns' | 'input' | 'cached' | 'output' | 'cost') =>
    [...totals.values()].reduce((acc, total) => acc + total[field], 0);

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
      <form className="filters" aria-label="Usage filters" onSubmit={(event) => event.preventDefault()}>
        <Field label="Range">
          {(props) => (
            <select
              {...props}
              value={PRESETS.find((n) => to === today() && from === daysBefore(to, n - 1)) ?? 'custom'}
              onChange={(e) => {
                const n = Number(e.target.value);
                if (Number.isInteger(n)) set({ from: daysBefore(today(), n - 1), to: today() });
              }}
            >
              {PRESETS.map((n) => (
                <option key={n} value={n}>
                  Last {n} days
                </option>
              ))}
              <option value="custom">Custom</option>
            </select>
          )}
        </Field>
        <Field label="From (UTC)" error={rangeError}>
          {(props) => (
            <input
              {...props}
              type="date"
              value={from}
              max={to}
              onChange={(e) => DATE.test(e.target.value) && set({ from: e.target.value })}
            />
          )}
        </Field>
        <Field label="To (UTC)">
          {(props) => (
            <input
              {...props}
              type="date"
              value={to}
              min={from}
              onChange={(e) => DATE.test(e.target.value) && set({ to: e.target.value })}
            />
          )}
        </Field>
        <Field label="View by">
          {(props) => (
            <select {...props} value={by} onChange={(e) => set({ by: e.target.value })}>
              <option value="agent">Agent</option>
              <option value="model">Model</option>
            </select>
          )}
        </Field>
        <Field label="Chart">
          {(props) => (
            <select {...props} value={metric} onChange={(e) => set({ metric: e.target.value })}>
              <option value="cost">Cost</option>
              <option value="tokens">Tokens</option>
            </select>
          )}
        </Field>
        <div className="field">
          <button
            type="button"
            disabled={rangeError !== undefined || csv.isPending}
            onClick={() => csv.mutate({ start, end, name: `usage-${from}-to-${to}.csv` })}
          >
            {csv.isPending ? 'Preparing CSV…' : 'Download CSV'}
          </button>
        </div>
      </form>
      <ErrorNote error={csv.error} />
      <ErrorNote error={report.error} />
      {report.isPending && rangeError === undefined ? <Loading what="usage" /> : null}
      {report.data === undefined ? null : (
        <>
          {report.data.cut ? (
            <p className="muted small">The range has more groups than the page draws; narrow it for all of them.</p>
          ) : null}
          <figure className="chart">
            <svg
              viewBox={`0 0 ${width} ${height + 24}`}
              role="img"
              aria-label={`Daily ${metric} per ${by}, ${from} to ${to}`}
            >
              {days.map((d, i) => {
                let y = height;
                const x = 30 + i * step;
                return (
                  <g key={d}>
                    {keys.map((key, k) => {
                      const amount = perDay.get(`${d}|${key}`) ?? 0;
                      const h = max === 0 ? 0 : (amount / max) * (height - 10);
                      y -= h;
                      return amount === 0 ? null : (
                        <rect
                          key={key}
                          x={x}
                          y={y}
                          width={barWidth}
                          height={Math.max(h, 1)}
                          fill={COLORS[k % COLORS.length]}
                        >
                          <title>{`${d} · ${label(key)}: ${shown(amount)}`}</title>
                        </rect>
                      );
                    })}
                    {i % labelEvery === 0 ? (
                      <text x={x + barWidth / 2} y={height + 16} textAnchor="middle" className="axis">
                        {d.slice(5)}
                      </text>
                    ) : null}
                  </g>
                );
              })}
              <line x1={26} y1={height} x2={width} y2={height} className="axis-line" />
              <text x={0} y={12} className="axis">
                {metric === 'cost' ? usd(max) : max.toLocaleString('en')}
              </text>
            </svg>
            <figcaption>
              {keys.length === 0 ? (
                <span className="muted">No usage in this range.</span>
              ) : max === 0 ? (
                <span className="muted">
                  Nothing to draw: these turns cost $0 (free or unpriced models). Chart tokens instead.
                </span>
              ) : (
                keys.map((key, k) => (
                  <span key={key} className="legend">
                    <span className={`swatch swatch-${k % COLORS.length}`} aria-hidden="true" /> {label(key)}
                  </span>
                ))
              )}
            </figcaption>
          </figure>
          <TableBox label={`Usage per ${by}`}>
            <table>
              <caption className="sr-only">Usage per {by}</caption>
              <thead>
                <tr>
                  <th scope="col">{by === 'agent' ? 'Agent' : 'Model'}</th>
                  <th scope="col" className="num">
                    Turns
                  </th>
                  <th scope="col" className="num">
                    Input tokens
                  </th>
                  <th scope="col" className="num">
                    Cached input
                  </th>
                  <th scope="col" className="num">
                    Output tokens
                  </th>
                  <th scope="col" className="num">
                    Cost
                  </th>
                </tr>
              </thead>
              <tbody>
                {keys.map((key) => {
                  const total = totals.get(key);
                  return total === undefined ? null : (
                    <tr key={key}>
                      <td>{label(key)}</td>
                      <td className="num">{total.turns}</td>
                      <td className="num">{total.input}</td>
                      <td className="num">{total.cached}</td>
                      <td className="num">{total.output}</td>
                      <td className="num">{usd(total.cost)}</td>
                    </tr>
                  );
                })}
              </tbody>
              <tfoot>
                <tr>
                  <th scope="row">Total</th>
                  <td className="num">{sum('turns')}</td>
                  <td className="num">{sum('input')}</td>
                  <td className="num">{sum('cached')}</td>
                  <td className="num">{sum('output')}</td>
                  <td className="num">{usd(sum('cost'))}</td>
                </tr>
              </tfoot>
            </table>
          </TableBox>
        </>
      )}
    </section>
  );
}
