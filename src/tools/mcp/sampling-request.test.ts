import { describe, expect, it } from 'vitest';
import { MAX_SAMPLING_MEDIA_BASE64, SamplingRequestRefused, samplingOf } from './sampling-request.ts';

describe('samplingOf', () => {
  it('keeps text, decodes images and audio, and names other content', () => {
    const png = Buffer.from([0x89, 0x50, 0x4e, 0x47]).toString('base64');
    const request = samplingOf({
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'what is this?' },
            { type: 'image', data: png, mimeType: 'IMAGE/PNG' },
          ],
        },
        { role: 'assistant', content: { type: 'tool_use', id: 't1', name: 'x', input: {} } },
        { role: 'user', content: { type: 'audio', data: 'UklGRg==', mimeType: 'audio/wav' } },
      ],
      maxTokens: 10,
    });
    expect(request.systemPrompt).toBeNull();
    expect(request.messages).toEqual([
      {
        role: 'user',
        content: [
          { type: 'text', text: 'what is this?' },
          { type: 'image', mediaType: 'image/png', data: new Uint8Array([0x89, 0x50, 0x4e, 0x47]) },
        ],
      },
      { role: 'assistant', content: [{ type: 'text', text: '[non-text content]' }] },
      { role: 'user', content: [{ type: 'audio', mediaType: 'audio/wav', data: new Uint8Array(Buffer.from('RIFF')) }] },
    ]);
  });

  it('refuses media past the bound in all, across messages, before decoding any', () => {
    const half = 'A'.repeat(MAX_SAMPLING_MEDIA_BASE64 / 2 + 4);
    const image = (data: string) => ({
      role: 'user' as const,
      content: { type: 'image', data, mimeType: 'image/png' },
    });
    expect(() => samplingOf({ messages: [image(half)], maxTokens: 1 })).not.toThrow();
    expect(() => samplingOf({ messages: [image(half), image(half)], maxTokens: 1 })).toThrow(SamplingRequestRefused);
    expect(() => samplingOf({ messages: [image(half), image(half)], maxTokens: 1 })).toThrow(/at most 4194304/);
  });

  it('refuses a media part whose type is not of its kind', () => {
    expect(() =>
      samplingOf({
        messages: [{ role: 'user', content: { type: 'image', data: 'AAAA', mimeType: 'text/html' } }],
        maxTokens: 1,
      }),
    ).toThrow(/image content with media type "text\/html"/);
  });
});
