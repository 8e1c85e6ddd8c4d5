/** Bounded previews of what went into and came out of a run or a span (DESIGN 5: cut at 1,000 characters). */
import type { Attachment } from '../turns/items.ts';
import type { MessagePart } from '../turns/message-types.ts';

export const PREVIEW_CHARS = 1000;

export const preview = (text: string): string => (text.length > PREVIEW_CHARS ? text.slice(0, PREVIEW_CHARS) : text);

/** A file given with a run's input: how the model reads it, and its name where the input shows one. */
export interface PreviewedFile {
  kind: 'image' | 'file';
  filename: string | undefined;
}

/**
 * What a run's input submits for a waiting call: a tool output (a `function_call_output`: the call it answers and
 * what it says), or a decision on an approval request (its id, and `approved` or `denied` with the reason).
 */
export interface PreviewedOutput {
  callId: string;
  output: string;
  /** `approval` for a decision on an approval request; a tool output otherwise. */
  kind?: 'approval';
}

/**
 * A run's input preview: the submitted text; for input without text, what was sent instead, so that the run still
 * says it: one line `[tool output call_abc123] <output>` per tool output (`[approval mcpr_…] approved` per decision on
 * an approval request), then the files on one line,
 * `[image chart.png] [file notes.md]`, or `[image]` where the input keeps no name.
 */
export function inputPreview(
  text: string,
  files: readonly PreviewedFile[],
  outputs: readonly PreviewedOutput[] = [],
): string {
  if (text !== '') return preview(text);
  const lines = outputs.map(({ callId, output, kind }) => `[${kind ?? 'tool output'} ${callId}] ${output}`);
  const named = files.map(({ kind, filename }) => (filename === undefined ? `[${kind}]` : `[${kind} ${filename}]`));
  if (named.length > 0) lines.push(named.join(' '));
  return preview(lines.join('\n'));
}

/** Attachments named as their message's parts show them (a Sessions message's; other surfaces keep no names). */
export function previewedFiles(attachments: readonly Attachment[], parts: readonly MessagePart[]): PreviewedFile[] {
  const names = new Map<string, string>();
  for (const part of parts) {
    if (part.type === 'image' || part.type === 'file') names.set(part.fileId, part.filename);
  }
  return attachments.map((attachment) => ({ kind: attachment.kind, filename: names.get(attachment.fileId) }));
}
