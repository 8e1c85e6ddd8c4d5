import { describe, expect, it } from 'vitest';
import { base64Bytes, resultText } from './content.ts';

describe('resultText', () => {
  it('joins text parts and summarises what a text model cannot read', () => {
    const png = Buffer.alloc(12_345).toString('base64');
    const wav = Buffer.alloc(10).toString('base64');
    const text = resultText(
      [
        { type: 'text', text: 'first' },
        { type: 'image', data: png, mimeType: 'image/png' },
        { type: 'audio', data: wav, mimeType: 'audio/wav' },
        { type: 'resource_link', uri: 'file:///report.pdf', name: 'report', mimeType: 'application/pdf' },
        { type: 'resource_link', uri: 'https://example.com/x', name: 'x' },
        { type: 'resource', resource: { uri: 'mem://note', mimeType: 'text/markdown', text: '# Note' } },
        { type: 'resource', resource: { uri: 'mem://blob', blob: Buffer.from('abcd').toString('base64') } },
        { type: 'text', text: 'last' },
      ],
      undefined,
    );
    expect(text).toBe(
      [
        'first',
        '[image: image/png, 12345 bytes]',
        '[audio: audio/wav, 10 bytes]',
        '[resource: file:///report.pdf (application/pdf)]',
        '[resource: https://example.com/x]',
        '[resource: mem://note (text/markdown)]\n# Note',
        '[resource: mem://blob, 4 bytes]',
        'last',
      ].join('\n'),
    );
  });

  it('names parts of unknown types and skips malformed ones', () => {
    expect(resultText([{ type: 'hologram' }, null, 'text', { type: 'text', text: 'kept' }], undefined)).toBe(
      '[hologram content]\nkept',
    );
  });

  it('falls back to the structured content when there is no text', () => {
    expect(resultText([], { sum: 3 })).toBe('{"sum":3}');
    expect(resultText([{ type: 'text', text: '3' }], { sum: 3 })).toBe('3');
    expect(resultText([], undefined)).toBe('');
  });

  it('counts base64 bytes without decoding, padding and line breaks included', () => {
    for (const size of [0, 1, 2, 3, 4, 5, 100, 1001]) {
      const encoded = Buffer.alloc(size).toString('base64');
      expect(base64Bytes(encoded)).toBe(size);
      expect(base64Bytes(encoded.replace(/(.{8})/g, '$1\n'))).toBe(size);
    }
  });
});
