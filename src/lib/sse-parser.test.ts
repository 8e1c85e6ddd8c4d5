import { StringDecoder } from 'node:string_decoder';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SseLimitError, SseParser } from './sse-parser.ts';

/** Feeds `bytes` cut at `cuts` (byte offsets) through a UTF-8 decoder and the parser, as a socket would. */
function parseBytes(bytes: Buffer, cuts: number[]): string[] {
  const parser = new SseParser();
  const decoder = new StringDecoder('utf8');
  const events: string[] = [];
  let start = 0;
  for (const cut of [...cuts.filter((c) => c > 0 && c < bytes.length)].sort((a, b) => a - b).concat(bytes.length)) {
    events.push(...parser.feed(decoder.write(bytes.subarray(start, cut))));
    start = cut;
  }
  events.push(...parser.feed(decoder.end()));
  return events;
}

const parseText = (text: string) => parseBytes(Buffer.from(text, 'utf8'), []);

describe('SseParser', () => {
  it('dispatches each event on its blank line, with LF, CRLF or CR line endings', () => {
    expect(parseText('data: a\n\ndata: b\n\n')).toEqual(['a', 'b']);
    expect(parseText('data: a\r\n\r\ndata: b\r\n\r\n')).toEqual(['a', 'b']);
    expect(parseText('data: a\r\rdata: b\r\r')).toEqual(['a', 'b']);
  });

  it('joins multi-line data with LF and strips one space after the colon only', () => {
    expect(parseText('data: {"a":\ndata:  1}\n\n')).toEqual(['{"a":\n 1}']);
    expect(parseText('data:x\ndata\n\n')).toEqual(['x\n']);
  });

  it('skips comments and other fields, and events without data', () => {
    expect(parseText(': keep-alive\n\nevent: message\nid: 7\nretry: 10\ndata: x\n\nevent: ping\n\n')).toEqual(['x']);
    expect(parseText('database: no\ndatum: no\ndata: yes\n\n')).toEqual(['yes']);
  });

  it('drops an event that the stream ends without terminating, and strips a leading BOM', () => {
    expect(parseText('data: a\n\ndata: b\n')).toEqual(['a']);
    expect(parseText('\uFEFFdata: a\n\n')).toEqual(['a']);
  });

  it('keeps a CRLF split between two chunks one line break', () => {
    // Read as two line breaks, the LF would end the event after `a` alone.
    const parser = new SseParser();
    expect(parser.feed('data: a\r')).toEqual([]);
    expect(parser.feed('\ndata: b\r')).toEqual([]);
    expect(parser.feed('\n\r\n')).toEqual(['a\nb']);
  });

  it('gives the same events however the bytes are split, multi-byte characters included', () => {
    const data = fc.string({ unit: fc.constantFrom('a', 'é', '€', '🎉', '"', ':', ' ', '\\'), maxLength: 12 });
    fc.assert(
      fc.property(
        fc.array(fc.array(data, { minLength: 1, maxLength: 3 }), { minLength: 1, maxLength: 5 }),
        fc.constantFrom('\n', '\r\n', '\r'),
        fc.array(fc.nat(), { maxLength: 12 }),
        (events, newline, cuts) => {
          const text = events.map(
            (lines) => `${lines.map((line) => `data: ${line}`).join(newline)}${newline}${newline}`,
          );
          const bytes = Buffer.from(`: comment${newline}${text.join('')}`, 'utf8');
          const expected = events.map((lines) => lines.join('\n'));
          expect(
            parseBytes(
              bytes,
              cuts.map((cut) => cut % (bytes.length + 1)),
            ),
          ).toEqual(expected);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('refuses a line longer than its limit instead of buffering it forever', () => {
    const parser = new SseParser(16);
    expect(() => parser.feed('data: 0123456789abcdef')).toThrow(SseLimitError);
  });
});
