/**
 * /console/runs/{id}: one run and its trace as a waterfall (agent steps, model calls, tool calls) with durations,
 * tokens, cost and the bounded previews. The URL is the share link; `#span-<id>` opens one span.
 */
import { useQuery } from '@tanstack/react-query';
import { useEffect } from 'react';
import { Link, useLocation, useParams } from 'react-router';
import { api, unwrap } from '../api/client.ts';
import { traceQuery } from '../api/queries.ts';
import type { Span } from '../api/types.ts';
import { usePageTitle } from '../components/title.ts';
import { Badge, duration, ErrorNote, Loading, shortId, usd, When } from '../components/ui.tsx';
import { layout } from '../components/waterfall.ts';

const ACTIVE = new Set(['queued', 'running', 'requires_action']);

function Preview({ label, text }: { label: string; text: string | null }) {
  if (text === null || text === '') return null;
  return (
    <div className="kv">
      <span className="muted small">{label}</span>
      <pre>{text}</pre>
    </div>
  );
}

function SpanRow({
  span,
  depth,
  offset,
  width,
  open,
}: {
  span: Span;
  depth: number;
  offset: number;
  width: number;
  open: boolean;
}) {
  const attributes = Object.entries(span.attributes).filter(([name]) => name !== 'error');
  const error = span.attributes.error;
  return (
    <li className={`span depth-${depth} kind-${span.kind}`} id={`span-${span.id}`} data-span-kind={span.kind}>
      <details open={open}>
        <summary>
          <span className="span-label">
            <span className={`kind kind-${span.kind}`}>{span.kind.replace('_', ' ')}</span>{' '}
            <span className="span-name">{span.name}</span>
          </span>
          <span className="track" aria-hidden="true">
            <span
              className={`bar bar-${span.status}`}
              style={{ left: `${offset}%`, width: `${Math.max(width, 0.5)}%` }}
            />
          </span>
          <span className="span-meta">
            <Badge value={span.status} /> {duration(span.duration_ms)}
            {span.kind === 'model_call' ? ` · ${span.usage.total_tokens} tokens · ${usd(span.cost_usd)}` : ''}
          </span>
        </summary>
        <div className="span-body">
          <Preview label="Input" text={span.input_preview} />
          <Preview label="Output" text={span.output_preview} />
          {typeof error === 'object' && error !== null ? <Preview label="Error" text={JSON.stringify(error)} /> : null}
          {attributes.length === 0 ? null : (
            <p className="muted small">
              {attributes
                .map(([name, value]) => `${name}: ${typeof value === 'string' ? value : JSON.stringify(value)}`)
                .join(' · ')}{' '}
              · <a href={`#span-${span.id}`}>Link to this span</a>
            </p>
          )}
        </div>
      </details>
    </li>
  );
}

export default function TracePage() {
  const { id = '' } = useParams();
  const location = useLocation();
  usePageTitle(`Run ${shortId(id)}`);
  const run = useQuery({
    queryKey: ['run', id],
    queryFn: () => unwrap(api.GET('/v1/runs/{id}', { params: { path: { id } } })),
    refetchInterval: (query) => (query.state.data !== undefined && ACTIVE.has(query.state.data.status) ? 1000 : false),
  });
  const active = run.data !== undefined && ACTIVE.has(run.data.status);
  const trace = useQuery({ ...traceQuery(id), refetchInterval: active ? 1000 : false });
  const target = location.hash.startsWith('#span-') ? location.hash.slice('#span-'.length) : null;
  useEffect(() => {
    if (target !== null && trace.data !== undefined)
      document.getElementById(`span-${target}`)?.scrollIntoView({ block: 'center' });
  }, [target, trace.data]);
  const data = run.data;
  const { bars, totalMs } = layout(trace.data ?? [], data?.started_at ?? null, Date.now());
  return (
    <section>
      <div className="page-head">
        <h1>Run {shortId(id)}</h1>
        {data?.session_id == null ? null : (
          <div className="row">
            <Link className="button" to={`/sessions/${data.session_id}`}>
              Session
            </Link>
            {data.agent_id === null ? null : (
              <Link className="button" to={`/agents/${data.agent_id}/chat?session=${data.session_id}`}>
                Playground
              </Link>
            )}
          </div>
        )}
      </div>
      <ErrorNote error={run.error ?? trace.error} />
      {data === undefined ? (
        run.isPending ? (
          <Loading what="run" />
        ) : null
      ) : (
        <dl className="facts">
          <dt>Status</dt>
          <dd>
            <Badge value={data.status} />
            {data.error === null ? null : ` ${data.error.message} (${data.error.code})`}
          </dd>
          <dt>Model</dt>
          <dd>
            <code>{data.model}</code> {data.agent_version === null ? '' : `· agent v${data.agent_version}`}
          </dd>
          <dt>Source</dt>
          <dd>{data.source}</dd>
          <dt>Tokens</dt>
          <dd>
            {data.usage.input_tokens} in · {data.usage.output_tokens} out · {usd(data.cost_usd)}
          </dd>
          <dt>Started</dt>
          <dd>
            <When at={data.started_at} />
          </dd>
          <dt>Completed</dt>
          <dd>
            <When at={data.completed_at} />
          </dd>
          <dt>Input</dt>
          <dd className="preview">{data.input_preview}</dd>
          <dt>Output</dt>
          <dd className="preview">{data.output_preview ?? ''}</dd>
        </dl>
      )}
      <h2 id="trace">Trace</h2>
      {trace.data === undefined ? (
        trace.isPending ? (
          <Loading what="trace" />
        ) : null
      ) : bars.length === 0 ? (
        <p className="muted">No spans yet{active ? ': the run has not started a step.' : '.'}</p>
      ) : (
        <>
          <p className="muted small">
            {bars.length} spans over {duration(Math.round(totalMs))}. Open a row for its previews.
          </p>
          <ol className="waterfall" aria-labelledby="trace">
            {bars.map((bar) => (
              <SpanRow
                key={bar.span.id}
                span={bar.span}
                depth={bar.depth}
                offset={(bar.offsetMs / totalMs) * 100}
                width={(bar.widthMs / totalMs) * 100}
                open={bar.span.id === target}
              />
            ))}
          </ol>
        </>
      )}
    </section>
  );
}
