/**
 * The API key of the HTTP request being handled, for code that records who submitted what it creates (a turn's
 * run keeps it, so usage can be reported per key; a session with pending work keeps it, for the key's limit of
 * concurrent turns). Set by the request hooks after authentication; work that no request started (schedules, the
 * engine) sees none.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

const requestKey = new AsyncLocalStorage<string>();

export function runWithApiKey(keyId: string, work: () => void): void {
  requestKey.run(keyId, work);
}

/** The id of the API key of the request in progress, or null. */
export function currentApiKeyId(): string | null {
  return requestKey.getStore() ?? null;
}
