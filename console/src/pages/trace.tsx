/**
 * /console/runs/{id}: one run and its trace as a waterfall (agent steps, model calls, tool calls) on a time axis
 * from the run's start, coloured by span kind, with durations,
 * tokens, cost and the bounded previews. The URL is the share link; `#span-<id>` opens one span.
 */
import { useEffect } from 'react';
import { Link, useLocation, useParams } from 'react-router';
import { usePageTitle } from '../components/title.ts';
import { RunSpans, useRunTrace } from '../components/trace-waterfall.tsx';
import { Badge, ErrorNote, Loading, shortId, usd, When } from '../components/ui.tsx';

export default function TracePage() {
  const { id = '' } = useParams();
  const location = useLocation();
  usePageTitle(`Run ${shortId(id)}`);
  const { run, trace, active } = useRunTrace(id);
  const target = location.hash.startsWith('#span-') ? location.hash.slice('#span-'.length) : null;
  useEffect(() => {
    if (target !== null && trace.data !== undefined)
      document.getElementById(`span-${target}`)?.scrollIntoView({ block: 'center' });
  }, [target, trace.data]);
  const data = run.data;
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
      <RunSpans
        spans={trace.data}
        pending={trace.isPending}
        active={active}
        runStartedAt={data?.started_at ?? null}
        openSpan={target}
        labelledBy="trace"
      />
    </section>
  );
}
