/**
 * An incremental parser of `text/event-stream` bodies (the WHATWG EventSource format) that yields each event's
 * data. Text is fed as it arrives, split anywhere: lines end with LF, CRLF or CR (a CRLF split between two chunks
 * included); `data:` lines of one event are joined with LF; comments (`:`), `event:`, `id:` and `retry:` are
 * skipped, since the clients this serves only read data. An event is dispatched by the blank line after it; an
 * unterminated event at the end of the stream is dropped, as the format requires. Decoding bytes to text (and
 * multi-byte characters split across chunks) is the caller's job, e.g. with a StringDecoder.
 */

const LF = 10;
const SPACE = 32;
const COLON = 58;

export class SseLimitError extends Error {
  constructor(limit: number) {
    super(`event-stream line or event longer than ${limit} characters`);
    this.name = new.target.name;
  }
}

export class SseParser {
  /** Text after the last line break, waiting for the rest of its line. */
  #partial = '';
  #data = '';
  #hasData = false;
  /** The previous chunk ended with CR: a LF starting the next one belongs to that line break. */
  #skipLeadingLf = false;
  #start = true;
  readonly #maxChars: number;

  /** `maxChars` bounds one line and one event's data, so that a stream without line breaks cannot grow forever. */
  constructor(maxChars = 16 * 1024 * 1024) {
    this.#maxChars = maxChars;
  }

  /** The data of every event completed by `chunk`, in order. Throws SseLimitError past `maxChars`. */
  feed(chunk: string): string[] {
    const events: string[] = [];
    // The held-back text has no line break, so the search for one starts where the new chunk does.
    const searchFrom = this.#partial.length;
    let text = searchFrom === 0 ? chunk : this.#partial + chunk;
    this.#partial = '';
    let position = 0;
    if (this.#start && text.length > 0) {
      this.#start = false;
      if (text.charCodeAt(0) === 0xfeff) position = 1;
    }
    if (this.#skipLeadingLf && text.length > position) {
      this.#skipLeadingLf = false;
      if (text.charCodeAt(position) === LF) position++;
    }
    // Most streams use LF only; searching for CR once tells whether the slower path is needed at all.
    let cr = text.indexOf('\r', Math.max(position, searchFrom));
    let lf = text.indexOf('\n', Math.max(position, searchFrom));
    while (lf !== -1 || cr !== -1) {
      let end: number;
      let next: number;
      if (cr === -1 || (lf !== -1 && lf < cr)) {
        end = lf;
        next = lf + 1;
      } else {
        end = cr;
        next = cr + 1;
        if (next === text.length) this.#skipLeadingLf = true;
        else if (text.charCodeAt(next) === LF) next++;
      }
      this.#line(text, position, end, events);
      position = next;
      if (lf !== -1 && lf < position) lf = text.indexOf('\n', position);
      if (cr !== -1 && cr < position) cr = text.indexOf('\r', position);
    }
    if (position < text.length) {
      text = position === 0 ? text : text.slice(position);
      if (text.length > this.#maxChars) throw new SseLimitError(this.#maxChars);
      this.#partial = text;
    }
    return events;
  }

  #line(text: string, start: number, end: number, events: string[]): void {
    if (start === end) {
      if (this.#hasData) events.push(this.#data);
      this.#data = '';
      this.#hasData = false;
      return;
    }
    // Only `data` matters here; comments and the other fields are skipped. `data` alone is a field with an empty
    // value; `datum:` or `database:` are other fields.
    const length = end - start;
    if (
      length < 4 ||
      text.charCodeAt(start) !== 100 || // d
      text.charCodeAt(start + 1) !== 97 || // a
      text.charCodeAt(start + 2) !== 116 || // t
      text.charCodeAt(start + 3) !== 97 || // a
      (length > 4 && text.charCodeAt(start + 4) !== COLON)
    ) {
      return;
    }
    let valueStart = Math.min(start + 5, end);
    if (valueStart < end && text.charCodeAt(valueStart) === SPACE) valueStart++;
    const value = valueStart >= end ? '' : text.slice(valueStart, end);
    if (this.#hasData) {
      if (this.#data.length + value.length + 1 > this.#maxChars) throw new SseLimitError(this.#maxChars);
      this.#data = `${this.#data}\n${value}`;
    } else {
      this.#data = value;
      this.#hasData = true;
    }
  }
}
