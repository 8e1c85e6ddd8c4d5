/** A real pino logger whose JSON lines a test reads back, parsed. */
import { Writable } from 'node:stream';
import pino from 'pino';

export function capturedLogger(level: pino.Level = 'info'): {
  logger: pino.Logger;
  lines: () => Record<string, unknown>[];
} {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n')) if (line !== '') lines.push(JSON.parse(line));
      done();
    },
  });
  return { logger: pino({ level }, stream), lines: () => lines };
}

/** The lines whose message starts with `prefix`. */
export const linesStarting = (lines: Record<string, unknown>[], prefix: string): Record<string, unknown>[] =>
  lines.filter((line) => String(line.msg).startsWith(prefix));
