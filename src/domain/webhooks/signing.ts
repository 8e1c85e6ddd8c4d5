/**
 * Standard Webhooks signing: `webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">`, keyed by the
 * base64-decoded bytes of the secret after its `whsec_` prefix. Secrets are `whsec_` + base64 of 32 random bytes.
 */
import { createHash, createHmac, createSecretKey, type KeyObject, randomBytes } from 'node:crypto';
import type { SecretBox } from '../../lib/secret-box.ts';

const PREFIX = 'whsec_';

export function generateSecret(): string {
  return `${PREFIX}${randomBytes(32).toString('base64')}`;
}

/** What list and get show instead of the secret: enough to tell two secrets apart, not to sign. */
export function secretHint(secret: string): string {
  return `${PREFIX}…${secret.slice(-4)}`;
}

/** The HMAC key of a secret: the base64-decoded bytes after `whsec_`. */
export function signingKey(secret: string): KeyObject {
  return createSecretKey(Buffer.from(secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : secret, 'base64'));
}

/**
 * The `webhook-id` of an event at an endpoint: derived, so every delivery of that pair (automatic, retries, manual
 * redeliveries) carries the same one without a lookup, and two endpoints never share one.
 */
export function webhookIdFor(eventId: string, endpointId: string): string {
  return `msg_${createHash('sha256').update(`${eventId}:${endpointId}`).digest('base64url').slice(0, 32)}`;
}

/** The `webhook-signature` header value for one attempt. */
export function sign(key: KeyObject, webhookId: string, timestamp: number, body: string): string {
  return `v1,${createHmac('sha256', key).update(`${webhookId}.${timestamp}.${body}`).digest('base64')}`;
}

export interface SignedHeaders {
  'content-type': string;
  'user-agent': string;
  'webhook-id': string;
  'webhook-timestamp': string;
  'webhook-signature': string;
  [name: string]: string;
}

const KEY_CACHE_LIMIT = 1024;

/**
 * Signs attempts with secrets as stored (sealed), keeping the keys of recently used ones: each secret is decrypted
 * and its key imported once, not per attempt (an HMAC with a prepared key takes about 2 µs), and a burst signs with
 * the same few secrets thousands of times. Owned by its user (the dispatcher), so rotated secrets simply stop being
 * looked up and age out. `open` throws (SecretKeyError) when the key is not the one a secret was sealed with.
 */
export function createSigner(secrets: Pick<SecretBox, 'open'>) {
  const keys = new Map<string, KeyObject>();
  return {
    headers(sealedSecret: string, webhookId: string, timestamp: number, body: string): SignedHeaders {
      let key = keys.get(sealedSecret);
      if (key === undefined) {
        if (keys.size >= KEY_CACHE_LIMIT) keys.clear();
        key = signingKey(secrets.open(sealedSecret));
        keys.set(sealedSecret, key);
      }
      return {
        'content-type': 'application/json',
        'user-agent': 'Agentry-Webhooks/1',
        'webhook-id': webhookId,
        'webhook-timestamp': String(timestamp),
        'webhook-signature': sign(key, webhookId, timestamp, body),
      };
    },
  };
}

export type Signer = ReturnType<typeof createSigner>;
