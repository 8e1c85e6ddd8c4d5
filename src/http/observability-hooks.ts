/**
 * Per-request observability: an HTTP server span per API request (when traces are exported), the request
 * latency histogram (when metrics are on), and the request's trace context for what it submits (a message keeps
 * it, so its turn joins the caller's trace). Without tracing, metrics and an incoming `traceparent`, a request
 * pays one header lookup.
 */
import type { Span, SpanKind, SpanStatusCode } from '@opentelemetry/api';
import type { FastifyRequest } from 'fastify';
import { formatTraceparent, parseTraceparent, runWithTraceparent } from '../lib/trace-context.ts';
import type { Metrics } from '../observability/metrics-types.ts';
import type { Tracing } from '../observability/tracing.ts';
import type { App } from './types.ts';

/** The route pattern (`/v1/sessions/:sessionId`), never the raw URL: bounded label values and span names. */
// The API's enum values, written out: this module loads with every server, the OpenTelemetry packages only when
// traces are configured.
const SERVER = 1 as SpanKind.SERVER;
const ERROR = 2 as SpanStatusCode.ERROR;

const routeOf = (request: FastifyRequest): string => request.routeOptions.url ?? 'unmatched';

export function registerObservabilityHooks(app: App, tracing: Tracing | null, metrics: Metrics): void {
  if (tracing === null && !metrics.enabled) {
    // Only an incoming trace context is kept, for a message the request submits.
    app.addHook('preHandler', (request, _reply, done) => {
      const incoming = parseTraceparent(request.headers.traceparent);
      if (incoming === null) return done();
      runWithTraceparent(formatTraceparent(incoming), done);
    });
    return;
  }
  const spans = new WeakMap<FastifyRequest, Span>();

  app.addHook('onRequest', (request, reply, done) => {
    const route = routeOf(request);
    const span = tracing === null ? undefined : startServerSpan(tracing, request, route);
    if (span !== undefined) spans.set(request, span);
    // 'close' also ends streamed (hijacked) answers and requests whose client went away.
    reply.raw.once('close', () => {
      const status = reply.raw.statusCode;
      metrics.httpRequest({ method: request.method, route, status }, reply.elapsedTime);
      if (span === undefined) return;
      span.setAttribute('http.response.status_code', status);
      if (status >= 500) {
        span.setAttribute('error.type', String(status));
        span.setStatus({ code: ERROR });
      }
      span.end();
    });
    done();
  });

  // After the body is parsed, so the handler and everything it awaits see the request's trace context.
  app.addHook('preHandler', (request, _reply, done) => {
    const span = spans.get(request);
    if (span !== undefined) return runWithTraceparent(traceparentOfSpan(span), done);
    const incoming = parseTraceparent(request.headers.traceparent);
    if (incoming !== null) return runWithTraceparent(formatTraceparent(incoming), done);
    done();
  });
}

function startServerSpan(tracing: Tracing, request: FastifyRequest, route: string): Span {
  const url = request.url;
  const query = url.indexOf('?');
  const userAgent = request.headers['user-agent'];
  return tracing.startSpan({
    name: `${request.method} ${route}`,
    kind: SERVER,
    parent: parseTraceparent(request.headers.traceparent),
    attributes: {
      'http.request.method': request.method,
      'http.route': route,
      'url.path': query < 0 ? url : url.slice(0, query),
      'url.scheme': request.protocol,
      'server.address': request.hostname,
      'client.address': request.ip,
      'agentry.request.id': request.id,
      ...(typeof userAgent === 'string' ? { 'user_agent.original': userAgent } : {}),
    },
  });
}

function traceparentOfSpan(span: Span): string {
  const { traceId, spanId, traceFlags } = span.spanContext();
  return formatTraceparent({ traceId, spanId, flags: traceFlags });
}
