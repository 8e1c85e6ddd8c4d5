/**
 * What the engine and routes record (metrics.ts implements it with prom-client, loaded only when metrics are on),
 * and the no-op used when they are off.
 */
import type { Executor } from '../storage/db.ts';

export type TurnOutcome = 'completed' | 'failed' | 'cancelled';

/** The streaming routes, as the `surface` label of the open-stream gauge names them. */
export type SseSurface = 'sessions' | 'responses' | 'tasks' | 'tool_runs' | 'chat_completions' | 'a2a';

export interface Metrics {
  readonly enabled: boolean;
  turnStarted(labels: { agent: string; source: string }, queueWaitMs: number): void;
  turnEnded(labels: { agent: string; source: string; outcome: TurnOutcome }, durationMs: number | null): void;
  modelCall(
    labels: { model: string; outcome: 'completed' | 'failed' | 'cancelled' },
    durationMs: number,
    usage: { inputTokens: number; outputTokens: number; costMicros: number },
  ): void;
  toolCall(labels: { tool: string; kind: string; outcome: 'completed' | 'failed' }, durationMs: number): void;
  /** A stream opened (+1) or closed (-1). */
  sseStreams(delta: 1 | -1, surface: SseSurface): void;
  webhookAttempt(durationMs: number): void;
  /** Deliveries settled: delivered, failed (given up or expired), retry (scheduled again). */
  webhookOutcomes(counts: { delivered: number; failed: number; retry: number }): void;
  leaseTakeover(): void;
  /** Rows one retention sweep deleted, by kind of data (docs/retention.md). */
  retentionDeleted(counts: Readonly<Record<string, number>>): void;
  httpRequest(labels: { method: string; route: string; status: number }, durationMs: number): void;
  /** Reads the gauges that live in the database (webhook backlog) from this executor at scrape time. */
  watchDatabase(db: Executor): void;
  /** The exposition: content type and text. */
  scrape(): Promise<{ contentType: string; body: string }>;
}

const noop = (): void => undefined;

export const noopMetrics: Metrics = {
  enabled: false,
  turnStarted: noop,
  turnEnded: noop,
  modelCall: noop,
  toolCall: noop,
  sseStreams: noop,
  webhookAttempt: noop,
  webhookOutcomes: noop,
  leaseTakeover: noop,
  retentionDeleted: noop,
  httpRequest: noop,
  watchDatabase: noop,
  scrape: async () => ({ contentType: 'text/plain; version=0.0.4; charset=utf-8', body: '' }),
};
