/**
 * One signed delivery attempt through the egress guard. Shared by the dispatcher (automatic and manual
 * deliveries) and the test route, so both sign, time out and classify answers the same way.
 */
import { EgressError, postPinned, type Resolver } from '../../lib/egress.ts';
import { parseRetryAfter } from '../../lib/retry.ts';
import type { WebhookEventRow } from '../../storage/schema.ts';
import type { SignedHeaders, Signer } from './signing.ts';
import type { DeliveryError } from './webhook-types.ts';

/**
 * The request body of an event: the envelope of spec section 2. The stored `data` text is spliced in as is, so
 * every attempt and redelivery of an event sends exactly the same bytes.
 */
export function eventBody(event: Pick<WebhookEventRow, 'id' | 'type' | 'created_at' | 'data'>): string {
  return `{"id":${JSON.stringify(event.id)},"object":"event","created_at":${Math.floor(event.created_at / 1000)},"type":${JSON.stringify(event.type)},"data":${event.data}}`;
}

export interface AttemptTarget {
  url: string;
  /** The endpoint's signing secret as stored (sealed); the signer opens it. */
  sealedSecret: string;
  webhookId: string;
  body: string;
  traceparent?: string | null;
}

export interface AttemptOptions {
  signer: Signer;
  /** Epoch milliseconds now; the webhook-timestamp is derived from it. */
  now: number;
  timeoutMs: number;
  allowInsecure: boolean;
  signal?: AbortSignal;
  resolver?: Resolver;
}

export interface AttemptOutcome {
  /** A 2xx answer. */
  ok: boolean;
  /** The receiver's status; null when no answer arrived. */
  statusCode: number | null;
  error: DeliveryError | null;
  /** False when trying again cannot help (the destination is refused by the egress guard). */
  retriable: boolean;
  /** Stopped by our own shutdown: not an attempt to count. */
  aborted: boolean;
  retryAfterMs: number | null;
  attemptedAt: number;
  /** The webhook-timestamp header sent (Unix seconds). */
  timestamp: number;
  durationMs: number;
  /** Time spent computing the signature (for the benchmark). */
  signingMs: number;
}

export async function attemptDelivery(target: AttemptTarget, options: AttemptOptions): Promise<AttemptOutcome> {
  const timestamp = Math.floor(options.now / 1000);
  const signStarted = performance.now();
  let signed: SignedHeaders;
  try {
    signed = options.signer.headers(target.sealedSecret, target.webhookId, timestamp, target.body);
  } catch (error) {
    // The secret cannot be decrypted (another AGENTRY_SECRET_KEY): nothing is sent; retried until the key is right.
    const message = error instanceof Error ? error.message : String(error);
    return {
      attemptedAt: options.now,
      timestamp,
      signingMs: performance.now() - signStarted,
      ok: false,
      statusCode: null,
      error: { code: 'secret_unavailable', message: `the signing secret cannot be decrypted: ${message}` },
      retriable: true,
      aborted: false,
      retryAfterMs: null,
      durationMs: 0,
    };
  }
  const headers = target.traceparent == null ? signed : { ...signed, traceparent: target.traceparent };
  const signingMs = performance.now() - signStarted;
  const started = performance.now();
  const base = { attemptedAt: options.now, timestamp, signingMs };
  try {
    const response = await postPinned(target.url, target.body, {
      headers,
      timeoutMs: options.timeoutMs,
      allowInsecure: options.allowInsecure,
      signal: options.signal,
      resolver: options.resolver,
      // The answer is not used: keep only a little of it.
      maxResponseBytes: 1024,
    });
    const status = response.status;
    const ok = status >= 200 && status <= 299;
    return {
      ...base,
      ok,
      statusCode: status,
      error: ok
        ? null
        : status >= 300 && status <= 399
          ? { code: 'redirect', message: `the receiver answered ${status}; redirects are not followed` }
          : { code: 'unexpected_status', message: `the receiver answered ${status}; only 2xx counts as delivered` },
      retriable: true,
      aborted: false,
      retryAfterMs: ok ? null : parseRetryAfter(response.headers['retry-after'], options.now),
      durationMs: response.durationMs,
    };
  } catch (error) {
    const durationMs = Math.round(performance.now() - started);
    if (error instanceof EgressError) {
      return {
        ...base,
        ok: false,
        statusCode: null,
        error: { code: error.code, message: error.message },
        retriable: error.retriable,
        aborted: error.code === 'aborted',
        retryAfterMs: null,
        durationMs,
      };
    }
    return {
      ...base,
      ok: false,
      statusCode: null,
      error: { code: 'connect_failed', message: error instanceof Error ? error.message : String(error) },
      retriable: true,
      aborted: options.signal?.aborted === true,
      retryAfterMs: null,
      durationMs,
    };
  }
}
