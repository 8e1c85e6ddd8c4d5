import { describe, expect, it } from 'vitest';
import { inputPreview, PREVIEW_CHARS } from './preview.ts';

describe('a run input preview', () => {
  it('is the text when there is some, attachments or not', () => {
    expect(inputPreview('hello', [{ kind: 'image', filename: 'a.png' }])).toBe('hello');
    expect(inputPreview('', [])).toBe('');
  });

  it('names the files of an input without text, by name where it has one', () => {
    const files = [
      { kind: 'image', filename: 'chart.png' },
      { kind: 'file', filename: 'notes.md' },
      { kind: 'image', filename: undefined },
    ] as const;
    expect(inputPreview('', files)).toBe('[image chart.png] [file notes.md] [image]');
  });

  it('names the tool outputs of an input without text, one a line, before its files', () => {
    const outputs = [
      { callId: 'call_abc123', output: '19C' },
      { callId: 'call_def456', output: '{"rain":true}' },
    ];
    expect(inputPreview('', [], outputs)).toBe(
      '[tool output call_abc123] 19C\n[tool output call_def456] {"rain":true}',
    );
    expect(inputPreview('', [{ kind: 'image', filename: undefined }], outputs.slice(0, 1))).toBe(
      '[tool output call_abc123] 19C\n[image]',
    );
    expect(inputPreview('and now?', [], outputs)).toBe('and now?');
    const long = inputPreview('', [], [{ callId: 'call_1', output: 'y'.repeat(2 * PREVIEW_CHARS) }]);
    expect(long).toBe(`[tool output call_1] ${'y'.repeat(PREVIEW_CHARS)}`.slice(0, PREVIEW_CHARS));
  });

  it('is cut at the bound of the column, however many files were sent', () => {
    const files = Array.from({ length: 16 }, (_, index) => ({
      kind: 'file' as const,
      filename: `${index}`.repeat(200),
    }));
    const shown = inputPreview('', files);
    expect(shown).toHaveLength(PREVIEW_CHARS);
    expect(shown.startsWith(`[file ${'0'.repeat(200)}] [file ${'1'.repeat(200)}]`)).toBe(true);
  });
});
