import { describe, expect, it } from 'vitest';
import { storableText } from './storable-text.ts';

describe('storableText', () => {
  it('keeps ordinary text, emoji included, unchanged', () => {
    expect(storableText('héllo 👋 wörld')).toBe('héllo 👋 wörld');
  });
  it('replaces NUL and lone surrogates with U+FFFD', () => {
    expect(storableText('a\u0000b')).toBe('a\uFFFDb');
    expect(storableText('x\uD800y')).toBe('x\uFFFDy');
    expect(storableText('\uDC00')).toBe('\uFFFD');
  });
});
