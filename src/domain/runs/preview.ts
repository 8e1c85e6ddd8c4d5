/** Bounded previews of what went into and came out of a run or a span (DESIGN 5: cut at 1,000 characters). */
export const PREVIEW_CHARS = 1000;

export const preview = (text: string): string => (text.length > PREVIEW_CHARS ? text.slice(0, PREVIEW_CHARS) : text);

/** A file given with a run's input: how the model reads it, and its name where the input shows one. */
export interface PreviewedFile {
  kind: 'image' | 'file';
  filename: string | undefined;
}

/**
 * A run's input preview: the submitted text; for input of files alone (no text), the files, so that the run still
 * says what was sent: `[image chart.png] [file notes.md]`, or `[image]` where the input keeps no name.
 */
export function inputPreview(text: string, files: readonly PreviewedFile[]): string {
  if (text !== '' || files.length === 0) return preview(text);
  const named = files.map(({ kind, filename }) => (filename === undefined ? `[${kind}]` : `[${kind} ${filename}]`));
  return preview(named.join(' '));
}
