/**
 * W3C Trace Context for turns. A turn's trace ids are derived from its run id (and the stored `traceparent` of
 * the request that submitted it), never kept in memory: whichever worker runs a step, or exports the run once it
 * ended, computes the same ids. So the `traceparent` sent with a model call is the id of the `chat` span that is
 * exported later, and an MCP call or webhook names the span it belongs to.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { createHash } from 'node:crypto';

export interface TraceParent {
  traceId: string;
  spanId: string;
  /** Trace flags; bit 0 = sampled. */
  flags: number;
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;
const ZERO_TRACE = '0'.repeat(32);
const ZERO_SPAN = '0'.repeat(16);

/**
 * Parses a `traceparent` header as W3C Trace Context level 1 says: version 00 has exactly four fields; a later
 * version may add fields after them; `ff`, upper-case hex and all-zero ids are invalid. Invalid is null (the
 * request then starts a new trace, as the specification asks).
 */
export function parseTraceparent(value: unknown): TraceParent | null {
  if (typeof value !== 'string' || value.length > 512) return null;
  const match = TRACEPARENT.exec(value.trim());
  if (match === null) return null;
  const [, version, traceId, spanId, flags, rest] = match;
  if (version === undefined || traceId === undefined || spanId === undefined || flags === undefined) return null;
  if (version === 'ff' || (version === '00' && rest !== undefined)) return null;
  if (traceId === ZERO_TRACE || spanId === ZERO_SPAN) return null;
  return { traceId, spanId, flags: Number.parseInt(flags, 16) };
}

export function formatTraceparent(parent: TraceParent): string {
  return `00-${parent.traceId}-${parent.spanId}-${(parent.flags & 0xff).toString(16).padStart(2, '0')}`;
}

/** A stable id of `hexLength` hex digits for `seed` (never all zeros). */
function derivedId(seed: string, hexLength: 16 | 32): string {
  const hex = createHash('sha256').update(seed).digest('hex').slice(0, hexLength);
  return /^0+$/.test(hex) ? `${hex.slice(0, -1)}1` : hex;
}

/** The trace of one run: its `invoke_agent` span and the remote parent it continues, if any. */
export interface RunTrace {
  runId: string;
  traceId: string;
  /** Span id of the run's `invoke_agent` span. */
  spanId: string;
  /** The submitting request's context (its HTTP server span, or the caller's span): the invoke_agent's parent. */
  parent: TraceParent | null;
  sampled: boolean;
}

export function runTrace(runId: string, storedTraceparent: string | null): RunTrace {
  const parent = parseTraceparent(storedTraceparent);
  return {
    runId,
    traceId: parent?.traceId ?? derivedId(`agentry-run:${runId}`, 32),
    spanId: derivedId(`agentry-run:${runId}:invoke_agent`, 16),
    parent,
    sampled: parent === null || (parent.flags & 1) === 1,
  };
}

/** Span id of the `chat` span of a run's step. */
export const chatSpanId = (runId: string, step: number): string => derivedId(`agentry-run:${runId}:chat:${step}`, 16);

/** Span id of the `execute_tool` span of a run's tool call. */
export const toolSpanId = (runId: string, callId: string): string =>
  derivedId(`agentry-run:${runId}:tool:${callId}`, 16);

/**
 * The `traceparent` an outgoing request of the run sends. With tracing on it names the span that will be exported
 * for the call (`spanId`); with tracing off the caller's own context is passed on unchanged (this service does not
 * take part in the trace), and a run nobody traces sends none.
 */
export function outgoingTraceparent(trace: RunTrace, spanId: string, tracing: boolean): string | null {
  if (tracing) return formatTraceparent({ traceId: trace.traceId, spanId, flags: trace.sampled ? 1 : 0 });
  return trace.parent === null ? null : formatTraceparent(trace.parent);
}

/**
 * The trace context of the HTTP request being handled, for code that records it with what the request creates (a
 * submitted message). Set by the request hooks only when there is one.
 */
const requestTrace = new AsyncLocalStorage<string>();

export function runWithTraceparent(traceparent: string, work: () => void): void {
  requestTrace.run(traceparent, work);
}

/** The `traceparent` of the request in progress, or null. */
export function currentTraceparent(): string | null {
  return requestTrace.getStore() ?? null;
}

/** The run and trace of the turn whose code is running, for the log lines it writes (logger.ts mixes them in). */
const turnLog = new AsyncLocalStorage<{ runId: string; traceId: string }>();

export function runInTurn<T>(fields: { runId: string; traceId: string }, work: () => T): T {
  return turnLog.run(fields, work);
}

/**
 * Fields every log line written inside a turn carries; empty elsewhere. A fresh object each time: pino merges each
 * line's own fields into what the mixin returns, which would otherwise carry them into the turn's later lines.
 */
export function turnLogFields(): { runId?: string; traceId?: string } {
  const fields = turnLog.getStore();
  return fields === undefined ? {} : { ...fields };
}
