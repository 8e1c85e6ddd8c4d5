/**
 * OpenTelemetry traces over OTLP/HTTP through the official JS SDK, built only when an OTLP endpoint is configured
 * (config.tracing; docs/observability.md). Two sources of spans:
 * - HTTP server spans, one per API request (hooks in http/observability-hooks.ts);
 * - each ended run, exported from its stored trace (domain/runs/spans.ts: the engine's own record of steps,
 *   model calls and tool calls) as GenAI spans: `invoke_agent` for the turn, `chat` per model call,
 *   `execute_tool` per tool call. Their ids are derived from the run (lib/trace-context.ts), so the `traceparent`
 *   sent with a model call, an MCP call or a webhook names the span exported for it.
 *
 * No global tracer provider or context manager is registered: the provider belongs to this server's
 * dependencies, so several servers (tests) can live in one process.
 */
import {
  type Attributes,
  context,
  type HrTime,
  type Span,
  type SpanKind,
  SpanStatusCode,
  TraceFlags,
  type Tracer,
  trace,
} from '@opentelemetry/api';
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as ProtoExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  type IdGenerator,
  ParentBasedSampler,
  RandomIdGenerator,
  type Sampler,
  type SpanExporter,
  TraceIdRatioBasedSampler,
  TracerProvider,
} from '@opentelemetry/sdk-trace';
import type { TracingConfig } from '../config.ts';
import type { TraceParent } from '../lib/trace-context.ts';
import { createRunExporter, type RunExporter, type RunExporterDeps } from './run-export.ts';

/** Lets the caller choose the ids of the next span (derived run ids); random otherwise. */
class ChosenIds implements IdGenerator {
  private readonly random = new RandomIdGenerator();
  nextTraceId: string | null = null;
  nextSpanId: string | null = null;

  generateTraceId(): string {
    const id = this.nextTraceId ?? this.random.generateTraceId();
    this.nextTraceId = null;
    return id;
  }

  generateSpanId(): string {
    const id = this.nextSpanId ?? this.random.generateSpanId();
    this.nextSpanId = null;
    return id;
  }
}

function sampler(config: TracingConfig): Sampler {
  const ratio = new TraceIdRatioBasedSampler(config.samplerRatio);
  switch (config.sampler) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return ratio;
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: ratio });
    default:
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

export interface SpanSpec {
  name: string;
  kind: SpanKind;
  startTime: number;
  endTime: number;
  attributes: Attributes;
  /** Set when the span ended in error. */
  error?: { type: string; message: string };
  /** Ids to use instead of random ones. */
  traceId?: string;
  spanId?: string;
  parent?: TraceParent | null;
}

export interface Tracing {
  readonly config: TracingConfig;
  readonly tracer: Tracer;
  /** Starts a span with a remote or local parent (or none) and, when given, chosen ids. */
  startSpan(spec: Omit<SpanSpec, 'endTime' | 'error' | 'startTime'> & { startTime?: number }): Span;
  /** Records a finished span; returns whether it is sampled (its children should be recorded too). */
  record(spec: SpanSpec): boolean;
  /** The exporter of this tracing's ended runs (run-export.ts), for a process that runs turns. */
  runExporter(options: Omit<RunExporterDeps, 'tracing'>): RunExporter;
  forceFlush(): Promise<void>;
  shutdown(): Promise<void>;
}

/**
 * Epoch milliseconds as [seconds, nanoseconds]. The SDK reads a plain number smaller than this process's start
 * time as an offset from it (performance.now()), which would misplace steps that an earlier process ran.
 */
function hrTime(epochMs: number): HrTime {
  const seconds = Math.floor(epochMs / 1000);
  return [seconds, Math.round((epochMs - seconds * 1000) * 1_000_000)];
}

export function createTracing(config: TracingConfig, exporter?: SpanExporter): Tracing {
  const ids = new ChosenIds();
  const options = { url: config.url, headers: config.headers, timeoutMillis: config.timeoutMs };
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ ...config.resourceAttributes, 'service.name': config.serviceName }),
    sampler: sampler(config),
    idGenerator: ids,
    spanProcessors: [
      new BatchSpanProcessor({
        exporter:
          exporter ?? (config.protocol === 'http/json' ? new JsonExporter(options) : new ProtoExporter(options)),
        ...config.batch,
      }),
    ],
  });
  const tracer = provider.getTracer('agentry');

  function startSpan(spec: Omit<SpanSpec, 'endTime' | 'error' | 'startTime'> & { startTime?: number }): Span {
    const parent = spec.parent ?? null;
    const parentContext =
      parent === null
        ? context.active()
        : trace.setSpanContext(context.active(), {
            traceId: parent.traceId,
            spanId: parent.spanId,
            traceFlags: parent.flags & TraceFlags.SAMPLED,
            isRemote: true,
          });
    ids.nextTraceId = spec.traceId ?? null;
    ids.nextSpanId = spec.spanId ?? null;
    try {
      return tracer.startSpan(
        spec.name,
        {
          kind: spec.kind,
          attributes: spec.attributes,
          ...(spec.startTime === undefined ? {} : { startTime: hrTime(spec.startTime) }),
          ...(parent === null ? { root: true } : {}),
        },
        parentContext,
      );
    } finally {
      ids.nextTraceId = null;
      ids.nextSpanId = null;
    }
  }

  const tracing: Tracing = {
    config,
    tracer,
    startSpan,
    runExporter: (options) => createRunExporter({ ...options, tracing }),
    record(spec) {
      const span = startSpan(spec);
      if (spec.error !== undefined) {
        span.setAttribute('error.type', spec.error.type);
        span.setStatus({ code: SpanStatusCode.ERROR, message: spec.error.message });
      }
      span.end(hrTime(spec.endTime));
      return (span.spanContext().traceFlags & TraceFlags.SAMPLED) === TraceFlags.SAMPLED;
    },
    forceFlush: () => provider.forceFlush(),
    shutdown: () => provider.shutdown(),
  };
  return tracing;
}
