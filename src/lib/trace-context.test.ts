import { describe, expect, it } from 'vitest';
import {
  chatSpanId,
  formatTraceparent,
  outgoingTraceparent,
  parseTraceparent,
  runTrace,
  toolSpanId,
} from './trace-context.ts';

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const SPAN = '00f067aa0ba902b7';

describe('W3C traceparent', () => {
  it('parses version 00 and round-trips', () => {
    const parsed = parseTraceparent(`00-${TRACE}-${SPAN}-01`);
    expect(parsed).toEqual({ traceId: TRACE, spanId: SPAN, flags: 1 });
    expect(formatTraceparent(parsed ?? { traceId: '', spanId: '', flags: 0 })).toBe(`00-${TRACE}-${SPAN}-01`);
  });

  it('accepts a later version with more fields, and refuses what the specification refuses', () => {
    expect(parseTraceparent(`01-${TRACE}-${SPAN}-00-extra`)).toEqual({ traceId: TRACE, spanId: SPAN, flags: 0 });
    for (const bad of [
      `00-${TRACE}-${SPAN}-01-extra`,
      `ff-${TRACE}-${SPAN}-01`,
      `00-${'0'.repeat(32)}-${SPAN}-01`,
      `00-${TRACE}-${'0'.repeat(16)}-01`,
      `00-${TRACE.toUpperCase()}-${SPAN}-01`,
      `00-${TRACE}-${SPAN}`,
      `00-${TRACE}-${SPAN}-01, 00-${TRACE}-${SPAN}-01`,
      'x'.repeat(600),
      '',
      undefined,
      ['a'],
      `00-${TRACE}\u0000-${SPAN}-01`,
    ]) {
      expect(parseTraceparent(bad), String(bad)).toBeNull();
    }
  });
});

describe('run trace ids', () => {
  it('derives stable ids from the run, and continues a stored parent', () => {
    const own = runTrace('run-1', null);
    expect(own.traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(own).toEqual(runTrace('run-1', null));
    expect(own.traceId).not.toBe(runTrace('run-2', null).traceId);
    expect(own.parent).toBeNull();
    const joined = runTrace('run-1', `00-${TRACE}-${SPAN}-00`);
    expect(joined.traceId).toBe(TRACE);
    expect(joined.spanId).toBe(own.spanId);
    expect(joined.sampled).toBe(false);
    expect(chatSpanId('run-1', 1)).not.toBe(chatSpanId('run-1', 2));
    expect(toolSpanId('run-1', 'call_a')).toMatch(/^[0-9a-f]{16}$/);
  });

  it('sends the span of the call when tracing, the caller context unchanged when not, else nothing', () => {
    const joined = runTrace('run-1', `00-${TRACE}-${SPAN}-01`);
    const chat = chatSpanId('run-1', 1);
    expect(outgoingTraceparent(joined, chat, true)).toBe(`00-${TRACE}-${chat}-01`);
    expect(outgoingTraceparent(joined, chat, false)).toBe(`00-${TRACE}-${SPAN}-01`);
    expect(outgoingTraceparent(runTrace('run-1', null), chat, false)).toBeNull();
  });
});
