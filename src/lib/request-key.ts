/**
 * The API key of the HTTP request being handled, for what the request submits: a queued turn records the key that
 * asked for it, so the key's limit of concurrent turns applies to it (docs/operations.md, "Limits"). Set by the
 * request hooks once the key is authenticated; absent outside requests (schedules, the CLI).
 */
import { AsyncLocalStorage } from 'node:async_hooks';

const requestKey = new AsyncLocalStorage<string>();

export function runWithRequestKey(keyId: string, work: () => void): void {
  requestKey.run(keyId, work);
}

/** The id of the API key of the request in progress, or null. */
export function currentRequestKey(): string | null {
  return requestKey.getStore() ?? null;
}
