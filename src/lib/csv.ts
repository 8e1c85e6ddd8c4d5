/**
 * CSV text as RFC 4180 writes it (CRLF line ends; a field holding a comma, a quote, CR or LF is quoted, its quotes
 * doubled), safe to open in a spreadsheet: a text cell that starts with `=`, `+`, `-`, `@`, a tab or a carriage
 * return would be read as a formula there, so it gets a leading `'` (OWASP's advice for CSV injection). Numbers
 * are written as they are.
 */

const FORMULA_START = /^[=+\-@\t\r]/;
const NEEDS_QUOTES = /[",\r\n]/;

export type CsvCell = string | number | null;

/** One field: numbers as they are, null as empty, text defused and quoted when it must be. */
export function csvField(cell: CsvCell): string {
  if (cell === null) return '';
  if (typeof cell === 'number') return String(cell);
  const text = FORMULA_START.test(cell) ? `'${cell}` : cell;
  return NEEDS_QUOTES.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

/** One record, with its CRLF. */
export function csvRecord(cells: readonly CsvCell[]): string {
  return `${cells.map(csvField).join(',')}\r\n`;
}
