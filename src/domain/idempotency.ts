/**
 * Idempotency-Key, shared by every route that accepts it. A key is stored per (organization, scope, key) with a
 * hash of the request, in the same transaction as the work it guards, so that:
 * - the same key and request replays the original status and body;
 * - the same key with another request is a 409 idempotency_conflict;
 * - concurrent duplicates create one resource: on Postgres the second INSERT waits on the first one's row
 *   lock and then sees its committed answer; on SQLite write transactions are serialized (BEGIN IMMEDIATE).
 * A failed operation stores nothing, so a retry with the same key runs again.
 */
import { AppError } from '../errors/app-error.ts';
import type { Clock } from '../lib/clock.ts';
import { sha256Hex, stableStringify } from '../lib/hash.ts';
import type { Executor } from '../storage/db.ts';
import { parseJsonColumn } from '../storage/json-column.ts';
import { prepare } from '../storage/prepared.ts';

export interface IdempotentResult<T> {
  status: number;
  body: T;
  replayed: boolean;
}

export interface IdempotencyRequest {
  orgId: string;
  /** Where the key applies, e.g. "POST /v1/agents" or "POST /v1/sessions/<id>/messages". */
  scope: string;
  key: string | undefined;
  /** What must match for a replay: usually the validated body. */
  request: unknown;
}

export interface IdempotencyDeps {
  db: Executor;
  clock: Clock;
  ttlMs: number;
}

// A replay body's type is the caller's T; every guarded operation returns a JSON object or array, so we check that.
const isReplayBody = <T>(value: unknown): value is T => typeof value === 'object' && value !== null;

const replayBody = <T>(text: string): T => parseJsonColumn<T>(text, isReplayBody, 'idempotency_keys.response_body');

interface KeyParams {
  org_id: string;
  scope: string;
  key: string;
}

// One statement claims the key: a new row, or an expired one taken over; a live row is left alone.
const claimKey = prepare((db, p: KeyParams & { requestHash: string; now: number; expiredBefore: number }) =>
  db
    .insertInto('idempotency_keys')
    .values({
      org_id: p.org_id,
      scope: p.scope,
      key: p.key,
      request_hash: p.requestHash,
      status_code: 0,
      response_body: '',
      created_at: p.now,
    })
    .onConflict((conflict) =>
      conflict
        .columns(['org_id', 'scope', 'key'])
        .doUpdateSet({ request_hash: p.requestHash, status_code: 0, response_body: '', created_at: p.now })
        .where('idempotency_keys.created_at', '<', p.expiredBefore),
    ),
);

const storedAnswer = prepare((db, p: KeyParams) =>
  db
    .selectFrom('idempotency_keys')
    .select(['request_hash', 'status_code', 'response_body'])
    .where('org_id', '=', p.org_id)
    .where('scope', '=', p.scope)
    .where('key', '=', p.key),
);

const storeAnswer = prepare((db, p: KeyParams & { status: number; body: string }) =>
  db
    .updateTable('idempotency_keys')
    .set({ status_code: p.status, response_body: p.body })
    .where('org_id', '=', p.org_id)
    .where('scope', '=', p.scope)
    .where('key', '=', p.key),
);

export function createIdempotency(deps: IdempotencyDeps) {
  return {
    /** Runs `operation` in a transaction, at most once per key. */
    async run<T>(
      request: IdempotencyRequest,
      operation: (trx: Executor) => Promise<{ status: number; body: T }>,
    ): Promise<IdempotentResult<T>> {
      const { key } = request;
      if (key === undefined) {
        const result = await deps.db.transaction().execute(operation);
        return { ...result, replayed: false };
      }
      const requestHash = sha256Hex(stableStringify(request.request));
      const now = deps.clock.now();
      const where = { org_id: request.orgId, scope: request.scope, key };
      return deps.db.transaction().execute(async (trx) => {
        // One statement claims the key: a new row, or an expired one taken over; a live row is left alone.
        const claimed = await claimKey.run(trx, { ...where, requestHash, now, expiredBefore: now - deps.ttlMs });
        if (claimed === 0n) {
          const existing = await storedAnswer.first(trx, where);
          if (existing === undefined) throw new Error(`idempotency key ${key} vanished while it was claimed`);
          if (existing.request_hash !== requestHash) {
            throw new AppError(
              'idempotency_conflict',
              'this Idempotency-Key was already used with a different request',
              {
                param: 'Idempotency-Key',
              },
            );
          }
          return { status: existing.status_code, body: replayBody<T>(existing.response_body), replayed: true };
        }
        const result = await operation(trx);
        // Sent with the COMMIT on Postgres (prepared.ts runDeferred): it only stores what the transaction answers.
        await storeAnswer.runDeferred(trx, { ...where, status: result.status, body: JSON.stringify(result.body) });
        return { ...result, replayed: false };
      });
    },

    /**
     * The stored answer for this key and request, if one is complete and live; throws idempotency_conflict for
     * another request. Lets a caller skip slow preparation (network calls) before `run` when it will replay anyway.
     */
    async lookup<T>(request: IdempotencyRequest): Promise<IdempotentResult<T> | null> {
      const { key } = request;
      if (key === undefined) return null;
      const existing = await deps.db
        .selectFrom('idempotency_keys')
        .select(['request_hash', 'status_code', 'response_body', 'created_at'])
        .where('org_id', '=', request.orgId)
        .where('scope', '=', request.scope)
        .where('key', '=', key)
        .executeTakeFirst();
      if (existing === undefined || existing.status_code === 0) return null;
      if (existing.created_at < deps.clock.now() - deps.ttlMs) return null;
      if (existing.request_hash !== sha256Hex(stableStringify(request.request))) {
        throw new AppError('idempotency_conflict', 'this Idempotency-Key was already used with a different request', {
          param: 'Idempotency-Key',
        });
      }
      return { status: existing.status_code, body: replayBody<T>(existing.response_body), replayed: true };
    },

    /** Drops keys past their retention; called periodically. */
    async sweep(): Promise<number> {
      const result = await deps.db
        .deleteFrom('idempotency_keys')
        .where('created_at', '<', deps.clock.now() - deps.ttlMs)
        .executeTakeFirst();
      return Number(result.numDeletedRows);
    },
  };
}

export type Idempotency = ReturnType<typeof createIdempotency>;
