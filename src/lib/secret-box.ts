/**
 * Encryption at rest for secrets Agentry must use later in clear (MCP connector headers such as
 * `Authorization`): AES-256-GCM with a random 96-bit nonce per value. The key comes from AGENTRY_SECRET_KEY, or
 * is generated once into `<data dir>/secret.key` (mode 0600) the first time a secret is stored. A sealed value
 * names the key it was sealed with (a short fingerprint), so opening it with another key fails with a message
 * that says so instead of a bare authentication error.
 *
 * Format: `v1.<key fingerprint>.<nonce b64url>.<tag b64url>.<ciphertext b64url>`.
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

const KEY_BYTES = 32;
const NONCE_BYTES = 12;

export class SecretKeyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** Parses a key given as 64 hex digits or base64 (standard or url-safe) of exactly 32 bytes; null if malformed. */
export function parseSecretKey(text: string): Buffer | null {
  const trimmed = text.trim();
  if (/^[0-9a-fA-F]{64}$/.test(trimmed)) return Buffer.from(trimmed, 'hex');
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(trimmed)) return null;
  const bytes = Buffer.from(trimmed.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
  return bytes.length === KEY_BYTES ? bytes : null;
}

const fingerprintOf = (key: Buffer): string => createHash('sha256').update(key).digest('hex').slice(0, 8);

export interface SecretBox {
  seal(plain: string): string;
  open(sealed: string): string;
}

export interface SecretBoxOptions {
  /** AGENTRY_SECRET_KEY, already validated by config. */
  configuredKey: Buffer | null;
  /** Where a generated key lives when none is configured. */
  keyFile: string;
}

/** The deployment's box: the key of AGENTRY_SECRET_KEY, else the one in `<data dir>/secret.key`. */
export function deploymentSecretBox(config: { secretKey: Buffer | null; dataDir: string }): SecretBox {
  return createSecretBox({ configuredKey: config.secretKey, keyFile: join(config.dataDir, 'secret.key') });
}

/** Loads (or, on first use, generates) the key lazily: deployments that store no secret never write a key file. */
export function createSecretBox(options: SecretBoxOptions): SecretBox {
  let key: Buffer | null = options.configuredKey;

  function loadKey(create: boolean): Buffer {
    if (key !== null) return key;
    try {
      const parsed = parseSecretKey(readFileSync(options.keyFile, 'utf8'));
      if (parsed === null) throw new SecretKeyError(`${options.keyFile} does not hold a valid 32-byte key`);
      key = parsed;
      return key;
    } catch (error) {
      if (error instanceof SecretKeyError) throw error;
      if (!create) {
        throw new SecretKeyError(
          `no secret key: set AGENTRY_SECRET_KEY or restore ${options.keyFile}, the key secrets were stored with`,
        );
      }
    }
    const generated = randomBytes(KEY_BYTES);
    mkdirSync(dirname(options.keyFile), { recursive: true });
    // `wx`: if another process created the file meanwhile, use its key rather than overwrite it.
    try {
      writeFileSync(options.keyFile, `${generated.toString('base64')}\n`, { mode: 0o600, flag: 'wx' });
      chmodSync(options.keyFile, 0o600);
      key = generated;
      return key;
    } catch {
      return loadKey(false);
    }
  }

  return {
    seal(plain) {
      const secret = loadKey(true);
      const nonce = randomBytes(NONCE_BYTES);
      const cipher = createCipheriv('aes-256-gcm', secret, nonce);
      const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
      const parts = [nonce, cipher.getAuthTag(), body].map((part) => part.toString('base64url'));
      return ['v1', fingerprintOf(secret), ...parts].join('.');
    },
    open(sealed) {
      const [version, fingerprint, nonce, tag, body] = sealed.split('.');
      if (
        version !== 'v1' ||
        fingerprint === undefined ||
        nonce === undefined ||
        tag === undefined ||
        body === undefined
      )
        throw new SecretKeyError('a stored secret is not in a known format');
      const secret = loadKey(false);
      if (fingerprintOf(secret) !== fingerprint) {
        throw new SecretKeyError(
          'a stored secret was encrypted with another key: every process needs the same AGENTRY_SECRET_KEY (or the same secret.key file)',
        );
      }
      const decipher = createDecipheriv('aes-256-gcm', secret, Buffer.from(nonce, 'base64url'));
      decipher.setAuthTag(Buffer.from(tag, 'base64url'));
      return Buffer.concat([decipher.update(Buffer.from(body, 'base64url')), decipher.final()]).toString('utf8');
    },
  };
}
