/**
 * A run's spans as a waterfall: a time axis of offsets from the run's start, one row per span with its bar placed
 * and scaled by its duration, bars coloured by span kind (a legend says which is which; a failed span is outlined,
 * a running one striped), and each row opening on its previews. The trace page and the playground's trace drawer
 * both show it; `compact` lays each row on two lines for a narrow drawer.
 */
import { useQuery } from '@tanstack/react-query';
import { Link } from 'react-router';
import { api, unwrap } from '../api/client.ts';
import { traceQuery } from '../api/queries.ts';
import type { Span } from '../api/types.ts';
import { Badge, duration, ErrorNote, Loading, shortId, usd } from './ui.tsx';
import { layout } from './waterfall.ts';

const ACTIVE = new Set(['queued', 'running', 'requires_action']);

/** A run and its spans, both polled each second while the run is active. */
export function useRunTrace(runId: string) {
  const run = useQuery({
    queryKey: ['run', runId],
    queryFn: () => unwrap(api.GET('/v1/runs/{id}', { params: { path: { id: runId } } })),
    refetchInterval: (query) => (query.state.data !== undefined && ACTIVE.has(query.state.data.status) ? 1000 : false),
  });
  const active = run.data !== undefined && ACTIVE.has(run.data.status);
  const trace = useQuery({ ...traceQuery(runId), refetchInterval: active ? 1000 : false });
  return { run, trace, active };
}

const SPAN_KINDS = ['agent_step', 'model_call', 'tool_call', 'compaction'] as const;

const kindLabel = (kind: string) => kind.replaceAll('_', ' ');

/** Round steps (1, 2 or 5 × a power of ten) so that the axis has at most `most` intervals over `totalMs`. */
function axisTicks(totalMs: number, most = 4): number[] {
  const rough = totalMs / most;
  const power = 10 ** Math.floor(Math.log10(Math.max(rough, 1)));
  const step = [1, 2, 5, 10].map((factor) => factor * power).find((candidate) => candidate >= rough) ?? 10 * power;
  const ticks: number[] = [];
  for (let at = 0; at <= totalMs + 1e-9; at += step) ticks.push(at);
  return ticks;
}

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
  offsetMs,
}: {
  span: Span;
  depth: number;
  offset: number;
  width: number;
  open: boolean;
  offsetMs: number;
}) {
  const attributes = Object.entries(span.attributes).filter(([name]) => name !== 'error');
  const error = span.attributes.error;
  return (
    <li className={`span depth-${depth} kind-${span.kind}`} id={`span-${span.id}`} data-span-kind={span.kind}>
      <details open={open}>
        <summary>
          <span className="span-label">
            <span className={`kind kind-${span.kind}`}>{kindLabel(span.kind)}</span>{' '}
            <span className="span-name">{span.name}</span>
          </span>
          <span className="track" aria-hidden="true">
            <span
              className={`bar bar-kind-${span.kind} bar-${span.status}`}
              style={{ left: `${offset}%`, width: `${Math.max(width, 0.5)}%` }}
            />
          </span>
          <span className="span-meta">
            <Badge value={span.status} /> {duration(span.duration_ms)} at +{duration(Math.round(offsetMs))}
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
              · <Link to={`/runs/${span.run_id}#span-${span.id}`}>Link to this span</Link>
            </p>
          )}
        </div>
      </details>
    </li>
  );
}

interface WaterfallProps {
  spans: Span[];
  /** The run's start (Unix seconds): offsets are counted from it. */
  runStartedAt: number | null;
  /** The id of the span to open, if any. */
  openSpan?: string | null;
  /** The id of the heading naming the waterfall. */
  labelledBy: string;
  compact?: boolean;
}

export function TraceWaterfall({ spans, runStartedAt, openSpan = null, labelledBy, compact = false }: WaterfallProps) {
  const { bars, totalMs } = layout(spans, runStartedAt, Date.now());
  const ticks = axisTicks(totalMs);
  const kinds = SPAN_KINDS.filter((kind) => spans.some((span) => span.kind === kind));
  return (
    <div className={compact ? 'trace-view compact' : 'trace-view'}>
      <p className="muted small">
        {bars.length} spans over {duration(Math.round(totalMs))}, from the run's start. Open a row for its previews.
      </p>
      <ul className="trace-legend" aria-label="Span kinds">
        {kinds.map((kind) => (
          <li key={kind}>
            <span className={`swatch bar-kind-${kind}`} aria-hidden="true" /> {kindLabel(kind)}
          </li>
        ))}
        <li>
          <span className="swatch bar-failed" aria-hidden="true" /> failed (outlined)
        </li>
      </ul>
      <div className="span-axis">
        <span className="span-label" />
        <ol className="axis-ticks" aria-label="Time from the run's start">
          {ticks.map((at) => (
            <li
              key={at}
              className={at === 0 ? 'tick-start' : at / totalMs > 0.85 ? 'tick-end' : undefined}
              style={{ left: `${(at / totalMs) * 100}%` }}
              data-offset-ms={at}
            >
              +{duration(at)}
            </li>
          ))}
        </ol>
        <span className="span-meta" />
      </div>
      <ol className="waterfall" aria-labelledby={labelledBy}>
        {bars.map((bar) => (
          <SpanRow
            key={bar.span.id}
            span={bar.span}
            depth={bar.depth}
            offset={(bar.offsetMs / totalMs) * 100}
            width={(bar.widthMs / totalMs) * 100}
            offsetMs={bar.offsetMs}
            open={bar.span.id === openSpan}
          />
        ))}
      </ol>
    </div>
  );
}

/** The spans of a run once loaded: the waterfall, or what stands for it while there is none. */
export function RunSpans({
  spans,
  pending,
  active,
  ...rest
}: Omit<WaterfallProps, 'spans'> & { spans: Span[] | undefined; pending: boolean; active: boolean }) {
  if (spans === undefined) return pending ? <Loading what="trace" /> : null;
  if (spans.length === 0) {
    return <p className="muted">No spans yet{active ? ': the run has not started a step.' : '.'}</p>;
  }
  return <TraceWaterfall spans={spans} {...rest} />;
}

/** The playground's drawer: one run's waterfall beside the chat, with the trace page linked and a Close button. */
export function TraceDrawer({ runId, onClose }: { runId: string; onClose: () => void }) {
  const { run, trace, active } = useRunTrace(runId);
  return (
    <section className="trace-drawer" aria-labelledby="trace-drawer-heading">
      <div className="row">
        <h2 id="trace-drawer-heading" className="small-heading">
          Trace of run {shortId(runId)}
        </h2>
        <Link to={`/runs/${runId}`} className="small">
          Full page
        </Link>
        <button type="button" onClick={onClose}>
          Close trace
        </button>
      </div>
      {run.data === undefined ? null : (
        <p className="small">
          <Badge value={run.data.status} /> <code>{run.data.model}</code> · {run.data.usage.input_tokens} in ·{' '}
          {run.data.usage.output_tokens} out · {usd(run.data.cost_usd)}
        </p>
      )}
      <ErrorNote error={run.error ?? trace.error} />
      <RunSpans
        spans={trace.data}
        pending={trace.isPending}
        active={active}
        runStartedAt={run.data?.started_at ?? null}
        labelledBy="trace-drawer-heading"
        compact
      />
    </section>
  );
}
