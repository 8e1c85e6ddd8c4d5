/** Projects stored run and span rows to the Run and Span resources (DESIGN 5). */
import { unixSeconds } from '../../lib/clock.ts';
import { isJsonObject } from '../../lib/guards.ts';
import { readJsonColumn } from '../../storage/json-column.ts';
import type { RunRow, SpanRow } from '../../storage/schema.ts';
import { conversationIdOf } from '../sessions/session-service.ts';
import { type MessageError, warningsOf } from '../turns/message-types.ts';
import { type Run, type RunUsage, type RunWarning, responseIdOf, type Span } from './run-types.ts';

const usageOf = (row: { input_tokens: number; output_tokens: number }): RunUsage => ({
  input_tokens: row.input_tokens,
  output_tokens: row.output_tokens,
  total_tokens: row.input_tokens + row.output_tokens,
});

/** A run's usage also says how many of its input tokens the provider read from its prompt cache. */
const runUsageOf = (row: RunRow): RunUsage => ({
  ...usageOf(row),
  input_tokens_details: { cached_tokens: row.cached_input_tokens },
});

const usd = (micros: number): number => micros / 1_000_000;

const seconds = (millis: number | null): number | null => (millis === null ? null : unixSeconds(millis));

function errorOf(text: string | null): MessageError | null {
  if (text === null) return null;
  const parsed = readJsonColumn(text, 'runs.error');
  if (!isJsonObject(parsed)) return null;
  const { code, message } = parsed;
  return { code: typeof code === 'string' ? code : 'error', message: typeof message === 'string' ? message : '' };
}

function runWarningsOf(text: string | null): RunWarning[] {
  return warningsOf(text, 'runs.warnings').map(({ callId, ...warning }) =>
    callId === undefined ? warning : { ...warning, call_id: callId },
  );
}

export function runFromRow(row: RunRow): Run {
  return {
    id: row.id,
    object: 'run',
    agent_id: row.agent_id,
    session_id: row.session_id,
    conversation_id: conversationIdOf(row.session_id),
    message_id: row.message_id,
    response_id: responseIdOf(row.message_id),
    source: row.source,
    status: row.status,
    model: row.model,
    agent_version: row.agent_version,
    input_preview: row.input_preview,
    output_preview: row.output_preview,
    usage: runUsageOf(row),
    cost_usd: usd(row.cost_micros),
    error: errorOf(row.error),
    warnings: runWarningsOf(row.warnings),
    created_at: unixSeconds(row.created_at),
    started_at: seconds(row.started_at),
    completed_at: seconds(row.completed_at),
  };
}

function attributesOf(text: string): Record<string, unknown> {
  const parsed = readJsonColumn(text, 'spans.attributes');
  return isJsonObject(parsed) ? { ...parsed } : {};
}

export function spanFromRow(row: SpanRow): Span {
  return {
    id: row.id,
    run_id: row.run_id,
    parent_id: row.parent_id,
    kind: row.kind,
    name: row.name,
    status: row.status,
    started_at: unixSeconds(row.started_at),
    ended_at: seconds(row.ended_at),
    duration_ms: row.ended_at === null ? null : Math.max(0, row.ended_at - row.started_at),
    input_preview: row.input_preview,
    output_preview: row.output_preview,
    usage: usageOf(row),
    cost_usd: usd(row.cost_micros),
    attributes: attributesOf(row.attributes),
  };
}
