/** Plain-text tables for the CLI's list commands: left-aligned columns two spaces apart, one header line. */

export function formatTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((title, column) =>
    Math.max(title.length, ...rows.map((row) => (row[column] ?? '').length)),
  );
  const line = (cells: readonly string[]) =>
    cells
      .map((cell, column) => (column === cells.length - 1 ? cell : cell.padEnd(widths[column] ?? 0)))
      .join('  ')
      .trimEnd();
  return `${[line(header), ...rows.map(line)].join('\n')}\n`;
}

/** Epoch milliseconds as `2026-11-23 05:12 UTC`. */
export function formatTime(millis: number): string {
  return `${new Date(millis).toISOString().slice(0, 16).replace('T', ' ')} UTC`;
}
