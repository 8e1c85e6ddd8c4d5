/**
 * Lays a trace out in time. Spans carry their start in whole seconds and their duration in milliseconds, so
 * positions are rebuilt from the pre-order the API guarantees: a step starts no earlier than the previous one
 * ended, its model call starts with it, and its tool calls start when the model call ended (parallel calls
 * side by side).
 */
import type { Span } from '../api/types.ts';

export interface Bar {
  span: Span;
  depth: number;
  offsetMs: number;
  widthMs: number;
}

export function layout(spans: Span[], runStartedAt: number | null, nowMs: number): { bars: Bar[]; totalMs: number } {
  const origin = runStartedAt ?? spans[0]?.started_at ?? 0;
  const runningWidth = (span: Span, offset: number) =>
    span.duration_ms ?? Math.max(0, nowMs - (origin * 1000 + offset));
  const bars: Bar[] = [];
  let cursor = 0;
  let stepStart = 0;
  let toolsStart = 0;
  for (const span of spans) {
    const fromSeconds = (span.started_at - origin) * 1000;
    if (span.kind === 'agent_step') {
      stepStart = Math.max(cursor, fromSeconds);
      toolsStart = stepStart;
      const width = runningWidth(span, stepStart);
      bars.push({ span, depth: 0, offsetMs: stepStart, widthMs: width });
      cursor = stepStart + width;
    } else if (span.kind === 'compaction') {
      // The older conversation summarised before the next step: a bar of its own, between the steps.
      const start = Math.max(cursor, fromSeconds);
      const width = runningWidth(span, start);
      bars.push({ span, depth: 0, offsetMs: start, widthMs: width });
      cursor = start + width;
    } else if (span.kind === 'model_call') {
      const width = runningWidth(span, stepStart);
      bars.push({ span, depth: 1, offsetMs: stepStart, widthMs: width });
      toolsStart = stepStart + width;
    } else {
      const width = runningWidth(span, toolsStart);
      bars.push({ span, depth: 1, offsetMs: toolsStart, widthMs: width });
    }
  }
  const totalMs = Math.max(1, ...bars.map((bar) => bar.offsetMs + bar.widthMs));
  return { bars, totalMs };
}
