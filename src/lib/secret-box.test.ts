import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createSecretBox, parseSecretKey, SecretKeyError } from './secret-box.ts';

const dirs: string[] = [];
const keyFile = () => {
  const dir = mkdtempSync(join(tmpdir(), 'agentry-secret-'));
  dirs.push(dir);
  return join(dir, 'secret.key');
};
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('secret box', () => {
  it('seals and opens; the sealed text does not contain the secret and differs each time', () => {
    const box = createSecretBox({ configuredKey: randomBytes(32), keyFile: keyFile() });
    const a = box.seal('Bearer top-secret');
    const b = box.seal('Bearer top-secret');
    expect(a).not.toContain('top-secret');
    expect(a).not.toBe(b);
    expect(box.open(a)).toBe('Bearer top-secret');
  });

  it('generates a key file (0600) on first seal only, and a second box over the same file opens', () => {
    const file = keyFile();
    const box = createSecretBox({ configuredKey: null, keyFile: file });
    expect(() => statSync(file)).toThrow();
    const sealed = box.seal('x');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(parseSecretKey(readFileSync(file, 'utf8'))).toHaveLength(32);
    expect(createSecretBox({ configuredKey: null, keyFile: file }).open(sealed)).toBe('x');
  });

  it('refuses to open with another key, saying so', () => {
    const sealed = createSecretBox({ configuredKey: randomBytes(32), keyFile: keyFile() }).seal('x');
    const other = createSecretBox({ configuredKey: randomBytes(32), keyFile: keyFile() });
    expect(() => other.open(sealed)).toThrow(SecretKeyError);
    expect(() => other.open(sealed)).toThrow(/AGENTRY_SECRET_KEY/);
  });

  it('detects tampering', () => {
    const box = createSecretBox({ configuredKey: randomBytes(32), keyFile: keyFile() });
    const parts = box.seal('hello').split('.');
    parts[4] = Buffer.from('jello').toString('base64url');
    expect(() => box.open(parts.join('.'))).toThrow();
  });

  it('parses keys as hex or base64 of 32 bytes only', () => {
    const key = randomBytes(32);
    expect(parseSecretKey(key.toString('hex'))).toEqual(key);
    expect(parseSecretKey(key.toString('base64'))).toEqual(key);
    expect(parseSecretKey(key.toString('base64url'))).toEqual(key);
    expect(parseSecretKey(randomBytes(16).toString('base64'))).toBeNull();
    expect(parseSecretKey('not a key!')).toBeNull();
  });
});
