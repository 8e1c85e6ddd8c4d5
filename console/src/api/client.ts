/**
 * The one API client of the console: openapi-fetch over the generated `paths` types, so every request and answer
 * is typed from the server's OpenAPI document. The key comes from the tab's session storage on every request;
 * a 401 signs the tab out.
 */
import createClient, { type Middleware } from 'openapi-fetch';
import { clearKey, readKey } from '../auth/key-store.ts';
import type { paths } from './schema';

/** An error answer of the API: its status and the common error body's fields. */
export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly param: string | null;

  constructor(status: number, code: string, message: string, param: string | null) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.param = param;
  }
}

function field(value: unknown, name: string): unknown {
  return typeof value === 'object' && value !== null && name in value
    ? (value as Record<string, unknown>)[name]
    : undefined;
}

/** The error of an answer body, whatever shape it has (a proxy's HTML page included). */
export function toApiError(status: number, body: unknown): ApiError {
  const error = field(body, 'error');
  const code = field(error, 'code');
  const message = field(error, 'message');
  const param = field(error, 'param');
  return new ApiError(
    status,
    typeof code === 'string' ? code : `http_${status}`,
    typeof message === 'string' ? message : `The server answered ${status}`,
    typeof param === 'string' ? param : null,
  );
}

const auth: Middleware = {
  onRequest({ request }) {
    const key = readKey();
    if (key !== null && !request.headers.has('authorization')) request.headers.set('authorization', `Bearer ${key}`);
    return request;
  },
  onResponse({ response }) {
    // Revoked or expired while the tab was open: back to sign-in, with the key gone.
    if (response.status === 401 && readKey() !== null) clearKey();
    return response;
  },
};

export const api = createClient<paths>({ baseUrl: window.location.origin });
api.use(auth);

/** The data of a successful answer, or the API's error thrown as an ApiError. */
export async function unwrap<T>(pending: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<T> {
  const { data, error, response } = await pending;
  if (!response.ok || data === undefined) throw toApiError(response.status, error);
  return data;
}

/** A fresh Idempotency-Key (crypto.randomUUID needs a secure context; plain-HTTP hosts other than localhost are not). */
export function idempotencyKey(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return `console-${Array.from(bytes, (byte) => byte.toString(16).padStart(2, '0')).join('')}`;
}
