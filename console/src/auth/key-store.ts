/**
 * The API key lives in this tab's session storage only: never in a URL, a cookie or local storage, so it leaves
 * with the tab and no other origin's script can read it. Listeners hear sign-in and sign-out.
 */
const STORAGE_KEY = 'agentry.apiKey';
const listeners = new Set<() => void>();

export function readKey(): string | null {
  try {
    return window.sessionStorage.getItem(STORAGE_KEY);
  } catch {
    return null;
  }
}

export function storeKey(key: string): void {
  window.sessionStorage.setItem(STORAGE_KEY, key);
  for (const listener of listeners) listener();
}

export function clearKey(): void {
  window.sessionStorage.removeItem(STORAGE_KEY);
  for (const listener of listeners) listener();
}

export function onKeyChange(listener: () => void): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}
