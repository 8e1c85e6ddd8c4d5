/**
 * Prometheus metrics (prom-client), served at GET /metrics when AGENTRY_METRICS is on (docs/observability.md).
 * Each server has its own registry. With metrics off every recording call is a no-op, so the engine and routes
 * call them unconditionally.
 */
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { Executor } from '../storage/db.ts';
import type { Metrics } from './metrics-types.ts';

/** Seconds buckets from 5 ms to 10 minutes: HTTP calls, model calls and whole turns all fit. */
const SECONDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];

export function createMetrics(): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'agentry_process_' });
  const turnLabels = ['agent', 'source'] as const;
  const turnsStarted = new Counter({
    name: 'agentry_turns_started_total',
    help: 'Turns started, by agent id and source (sessions, responses, tasks)',
    labelNames: turnLabels,
    registers: [registry],
  });
  const turnsCompleted = new Counter({
    name: 'agentry_turns_completed_total',
    help: 'Turns that completed, by agent id and source',
    labelNames: turnLabels,
    registers: [registry],
  });
  const turnsFailed = new Counter({
    name: 'agentry_turns_failed_total',
    help: 'Turns that failed, by agent id and source',
    labelNames: turnLabels,
    registers: [registry],
  });
  const turnsCancelled = new Counter({
    name: 'agentry_turns_cancelled_total',
    help: 'Turns cancelled (interrupted), by agent id and source',
    labelNames: turnLabels,
    registers: [registry],
  });
  const turnDuration = new Histogram({
    name: 'agentry_turn_duration_seconds',
    help: 'From the start of a turn to its end (waits for people and client tools included)',
    labelNames: [...turnLabels, 'outcome'],
    buckets: SECONDS,
    registers: [registry],
  });
  const queueWait = new Histogram({
    name: 'agentry_turn_queue_wait_seconds',
    help: 'From the acceptance of a message to the start of its turn',
    labelNames: turnLabels,
    buckets: SECONDS,
    registers: [registry],
  });
  const modelLatency = new Histogram({
    name: 'agentry_model_call_duration_seconds',
    help: 'Model calls, from request to the end of the streamed answer, by model and outcome',
    labelNames: ['model', 'outcome'],
    buckets: SECONDS,
    registers: [registry],
  });
  const modelTokens = new Counter({
    name: 'agentry_model_tokens_total',
    help: 'Tokens of model calls, by model and direction (input, output)',
    labelNames: ['model', 'direction'],
    registers: [registry],
  });
  const modelCost = new Counter({
    name: 'agentry_model_cost_usd_total',
    help: 'Cost of model calls in USD, by model',
    labelNames: ['model'],
    registers: [registry],
  });
  const toolLatency = new Histogram({
    name: 'agentry_tool_call_duration_seconds',
    help: 'Server-side tool calls (MCP and built-in tools), by tool, kind and outcome',
    labelNames: ['tool', 'kind', 'outcome'],
    buckets: SECONDS,
    registers: [registry],
  });
  const streams = new Gauge({
    name: 'agentry_sse_streams_active',
    help: 'Open Server-Sent Events streams, by surface (sessions, responses, tasks, tool_runs, chat_completions)',
    labelNames: ['surface'],
    registers: [registry],
  });
  const webhookAttempts = new Counter({
    name: 'agentry_webhook_deliveries_total',
    help: 'Webhook deliveries settled, by outcome: delivered, retry (an attempt failed, tried again later), failed (given up)',
    labelNames: ['outcome'],
    registers: [registry],
  });
  const webhookLatency = new Histogram({
    name: 'agentry_webhook_attempt_duration_seconds',
    help: 'Webhook delivery attempts, request to answer',
    buckets: SECONDS,
    registers: [registry],
  });
  const retentionDeleted = new Counter({
    name: 'agentry_retention_deleted_total',
    help: 'Rows the retention sweeper deleted, by kind: sessions, runs, sessionEvents, files, webhooks',
    labelNames: ['kind'],
    registers: [registry],
  });
  const takeovers = new Counter({
    name: 'agentry_lease_takeovers_total',
    help: 'Turns resumed by this worker after the worker running them stopped or died',
    registers: [registry],
  });
  const httpLatency = new Histogram({
    name: 'agentry_http_request_duration_seconds',
    help: 'API requests, by method, route pattern and status code',
    labelNames: ['method', 'route', 'status'],
    buckets: SECONDS,
    registers: [registry],
  });
  let database: Executor | null = null;
  new Gauge({
    name: 'agentry_webhook_backlog',
    help: 'Webhook deliveries waiting to be delivered (pending), across the deployment',
    registers: [registry],
    async collect() {
      if (database === null) return;
      const row = await database
        .selectFrom('webhook_deliveries')
        .select((eb) => eb.fn.countAll<number | string>().as('count'))
        .where('status', '=', 'pending')
        .executeTakeFirst();
      this.set(Number(row?.count ?? 0));
    },
  });

  const seconds = (ms: number) => ms / 1000;
  return {
    enabled: true,
    turnStarted(labels, queueWaitMs) {
      turnsStarted.inc(labels);
      queueWait.observe(labels, seconds(Math.max(0, queueWaitMs)));
    },
    turnEnded(labels, durationMs) {
      const { outcome, ...rest } = labels;
      (outcome === 'completed' ? turnsCompleted : outcome === 'failed' ? turnsFailed : turnsCancelled).inc(rest);
      if (durationMs !== null) turnDuration.observe(labels, seconds(Math.max(0, durationMs)));
    },
    modelCall(labels, durationMs, usage) {
      modelLatency.observe(labels, seconds(durationMs));
      modelTokens.inc({ model: labels.model, direction: 'input' }, usage.inputTokens);
      modelTokens.inc({ model: labels.model, direction: 'output' }, usage.outputTokens);
      modelCost.inc({ model: labels.model }, usage.costMicros / 1_000_000);
    },
    toolCall(labels, durationMs) {
      toolLatency.observe(labels, seconds(durationMs));
    },
    sseStreams(delta, surface) {
      streams.inc({ surface }, delta);
    },
    webhookAttempt(durationMs) {
      webhookLatency.observe(seconds(durationMs));
    },
    webhookOutcomes(counts) {
      for (const outcome of ['delivered', 'failed', 'retry'] as const) {
        if (counts[outcome] > 0) webhookAttempts.inc({ outcome }, counts[outcome]);
      }
    },
    retentionDeleted(counts) {
      for (const [kind, count] of Object.entries(counts)) if (count > 0) retentionDeleted.inc({ kind }, count);
    },
    leaseTakeover() {
      takeovers.inc();
    },
    httpRequest(labels, durationMs) {
      httpLatency.observe({ ...labels, status: String(labels.status) }, seconds(durationMs));
    },
    watchDatabase(db) {
      database = db;
    },
    async scrape() {
      return { contentType: registry.contentType, body: await registry.metrics() };
    },
  };
}
