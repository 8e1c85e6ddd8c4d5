/**
 * Writing a run's trace. Every write happens inside the transaction of the state change it describes (the
 * engine's fenced step writes, the API's answer and client-output writes, the turn endings), so a trace never
 * disagrees with the conversation log.
 *
 * Ordering (`seq`): a trace page is pre-order, a parent before its children. Each step owns a block of
 * SPAN_BLOCK sequence numbers: its agent_step span is `step * SPAN_BLOCK`, its model_call `+ 1`, its i-th
 * tool_call `+ 2 + i`. Any span of a step can therefore be inserted at any time (even after later steps) and
 * still sort into place, and `ORDER BY seq` is the pre-order walk. A step has at most SPAN_BLOCK - 2 tool calls
 * and a run at most 2,147 steps (maxSteps is capped at 128) before seq would leave a 32-bit integer.
 */
import type { Executor } from '../../storage/db.ts';
import { prepareInsert } from '../../storage/prepared.ts';
import type { SpanRow } from '../../storage/schema.ts';
import type { CallKind, CallServer } from '../turns/items.ts';
import { preview } from './preview.ts';
import type { SpanKind, SpanStatus } from './run-types.ts';

export const SPAN_BLOCK = 1_000_000;

/** Sequence number of the `slot`-th span of `step` (0 = agent_step, 1 = model_call, 2.. = tool calls). */
export function spanSeq(step: number, slot: number): number {
  if (slot >= SPAN_BLOCK) throw new RangeError(`step ${step} has more spans than a seq block holds`);
  return step * SPAN_BLOCK + slot;
}

export interface NewSpan {
  id: string;
  kind: SpanKind;
  name: string;
  status: SpanStatus;
  seq: number;
  parentId: string | null;
  startedAt: number;
  endedAt: number | null;
  input: string | null;
  output: string | null;
  usage?: { inputTokens: number; outputTokens: number; costMicros: number };
  attributes: Record<string, unknown>;
}

const insertSpanRows = prepareInsert('spans');

/** Inserts spans of a run. Previews are cut here. */
export async function insertSpans(
  trx: Executor,
  target: { orgId: string; runId: string },
  spans: NewSpan[],
): Promise<void> {
  if (spans.length === 0) return;
  const rows: SpanRow[] = spans.map((span) => ({
    id: span.id,
    org_id: target.orgId,
    run_id: target.runId,
    parent_id: span.parentId,
    kind: span.kind,
    name: span.name,
    status: span.status,
    seq: span.seq,
    started_at: span.startedAt,
    ended_at: span.endedAt,
    input_preview: span.input === null ? null : preview(span.input),
    output_preview: span.output === null ? null : preview(span.output),
    input_tokens: span.usage?.inputTokens ?? 0,
    output_tokens: span.usage?.outputTokens ?? 0,
    cost_micros: span.usage?.costMicros ?? 0,
    attributes: JSON.stringify(span.attributes),
  }));
  // Nothing reads a span back in the transaction that writes it: sent with the next statement on Postgres.
  await insertSpanRows.run(trx, rows, { deferred: true });
}

/** Clears the previews of a run's spans (a Response created with `store: false` keeps no content). */
export async function clearSpanPreviews(trx: Executor, runId: string): Promise<void> {
  await trx
    .updateTable('spans')
    .set({ input_preview: null, output_preview: null })
    .where('run_id', '=', runId)
    .execute();
}

/**
 * The tool-call attributes every tool_call span carries; server calls add where they ran (`server`, its connector
 * `server_id`, the server's own `tool` name) and `attempts`, counted when the call starts running.
 */
export const toolCallAttributes = (callId: string, kind: CallKind, server?: CallServer) => ({
  call_id: callId,
  kind,
  ...(server === undefined ? {} : { server: server.label, server_id: server.id, tool: server.tool }),
});

function parseAttributes(attributes: string): Record<string, unknown> {
  const parsed: unknown = JSON.parse(attributes);
  return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? { ...parsed } : {};
}

function callIdOf(attributes: string): unknown {
  return parseAttributes(attributes).call_id;
}

/** The running tool_call span of `callId` in the run of `messageId`, if any. */
export async function openToolSpan(trx: Executor, messageId: string, callId: string) {
  // A run has few open tool spans; the call id lives in attributes, so match it here rather than in SQL.
  const open = await trx
    .selectFrom('spans')
    .select(['id', 'parent_id', 'attributes'])
    .where('run_id', '=', (eb) => eb.selectFrom('messages').select('run_id').where('id', '=', messageId))
    .where('kind', '=', 'tool_call')
    .where('status', '=', 'running')
    .execute();
  return open.find((row) => callIdOf(row.attributes) === callId);
}

/**
 * Marks the start of one execution of a server call: its span's start time, and `attempts` + 1. Returns the
 * attempt this is (1 for the first run; more after the process running it died). Without a span (runs from
 * before traces existed) every run counts as the first.
 */
export async function startToolSpan(
  trx: Executor,
  start: { messageId: string; callId: string; now: number },
): Promise<{ attempt: number }> {
  const span = await openToolSpan(trx, start.messageId, start.callId);
  if (span === undefined) return { attempt: 1 };
  const attributes = parseAttributes(span.attributes);
  const attempt = (typeof attributes.attempts === 'number' ? attributes.attempts : 0) + 1;
  await trx
    .updateTable('spans')
    .set({ started_at: start.now, attributes: JSON.stringify({ ...attributes, attempts: attempt }) })
    .where('id', '=', span.id)
    .execute();
  return { attempt };
}

/**
 * Ends the running tool_call span of `callId` in the run of `messageId` with the call's output, and ends its
 * agent_step once none of the step's tool calls is still running. A no-op when there is no such span (runs from
 * before traces existed).
 */
export async function endToolSpan(
  trx: Executor,
  end: { messageId: string; callId: string; status: SpanStatus; output: string; now: number },
): Promise<void> {
  const span = await openToolSpan(trx, end.messageId, end.callId);
  if (span === undefined) return;
  await trx
    .updateTable('spans')
    .set({ status: end.status, ended_at: end.now, output_preview: preview(end.output) })
    .where('id', '=', span.id)
    .execute();
  if (span.parent_id === null) return;
  const sibling = await trx
    .selectFrom('spans')
    .select('id')
    .where('parent_id', '=', span.parent_id)
    .where('status', '=', 'running')
    .executeTakeFirst();
  if (sibling !== undefined) return;
  await trx
    .updateTable('spans')
    .set({ status: 'completed', ended_at: end.now })
    .where('id', '=', span.parent_id)
    .where('status', '=', 'running')
    .execute();
}

/**
 * Ends every span of the run still running when its turn ends failed or cancelled: tool calls left without an
 * output carry `toolOutput` (the same text the log records for them), their steps just end.
 */
export async function closeOpenSpans(
  trx: Executor,
  runId: string,
  status: Exclude<SpanStatus, 'running' | 'completed'>,
  toolOutput: string,
  now: number,
): Promise<void> {
  await trx
    .updateTable('spans')
    .set({ status, ended_at: now, output_preview: preview(toolOutput) })
    .where('run_id', '=', runId)
    .where('kind', '=', 'tool_call')
    .where('status', '=', 'running')
    .execute();
  await trx
    .updateTable('spans')
    .set({ status, ended_at: now })
    .where('run_id', '=', runId)
    .where('status', '=', 'running')
    .execute();
}
