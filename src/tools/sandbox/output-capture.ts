/**
 * Captures a command's stdout and stderr under one byte budget. The first `keepBytes` bytes (both streams
 * together, in arrival order) are kept; later bytes are counted and dropped, and the text gets a note saying how
 * much is missing. Past `killBytes` in total the owner is told once, so that it kills a command that would
 * otherwise write forever.
 */

export type OutputStream = 'stdout' | 'stderr';

export class OutputCapture {
  readonly #keepBytes: number;
  readonly #killBytes: number;
  readonly #onKillLimit: () => void;
  readonly #chunks: Record<OutputStream, Buffer[]> = { stdout: [], stderr: [] };
  readonly #dropped: Record<OutputStream, number> = { stdout: 0, stderr: 0 };
  #kept = 0;
  #seen = 0;
  #overLimit = false;

  constructor(keepBytes: number, killBytes: number, onKillLimit: () => void) {
    this.#keepBytes = keepBytes;
    this.#killBytes = killBytes;
    this.#onKillLimit = onKillLimit;
  }

  add(stream: OutputStream, chunk: Buffer): void {
    this.#seen += chunk.byteLength;
    const room = Math.max(0, this.#keepBytes - this.#kept);
    if (room > 0) {
      const part = chunk.byteLength <= room ? chunk : chunk.subarray(0, room);
      this.#chunks[stream].push(part);
      this.#kept += part.byteLength;
    }
    this.#dropped[stream] += Math.max(0, chunk.byteLength - room);
    if (!this.#overLimit && this.#seen > this.#killBytes) {
      this.#overLimit = true;
      this.#onKillLimit();
    }
  }

  /** Bytes written to both streams so far, kept or not. */
  get totalBytes(): number {
    return this.#seen;
  }

  get truncated(): boolean {
    return this.#dropped.stdout > 0 || this.#dropped.stderr > 0;
  }

  /** The kept text of one stream (UTF-8; a character cut at the limit shows as U+FFFD), with a note if cut. */
  text(stream: OutputStream): string {
    const text = Buffer.concat(this.#chunks[stream]).toString('utf8');
    const dropped = this.#dropped[stream];
    if (dropped === 0) return text;
    const separator = text === '' || text.endsWith('\n') ? '' : '\n';
    return `${text}${separator}[output truncated: ${dropped} more bytes of ${stream} were not kept]\n`;
  }
}
