/**
 * Which webhook event types an organization's endpoints subscribe to. The outbox (domain/outbox.ts) asks before it
 * writes `webhook_events` rows and writes only the types some live endpoint of the organization receives, so a
 * state change of an organization without endpoints (most of them) writes no webhook rows at all.
 *
 * The answer is cached per organization and dropped whenever the endpoints may have changed:
 * - Changes made through this process: the endpoint service calls `changed()` once its write has committed and
 *   before it answers, so every state change this process writes afterwards sees the new endpoint. (The storage's
 *   change version also moves on the write itself, but that happens before the commit: a read in between, on
 *   another Postgres connection, would cache the old answer under the new version.)
 * - Changes made by other processes move the storage's change version (storage/change-signal.ts): on SQLite as
 *   soon as they commit (data_version), on Postgres when the NOTIFY of the trigger on `webhook_endpoints`
 *   (migration 0016) reaches this process, normally milliseconds after the commit.
 * - While the version is unknown (the Postgres listener is down) every call reads the endpoints.
 *
 * The guarantee: an endpoint (or its new `event_types`) receives the events of every state change that writes
 * its events after the endpoint change became visible to the writing process, which in the process that made the
 * change is before the API answered. A state change written in a process that has not heard of it yet (the
 * moments between another process's commit and the notification's arrival) records nothing for it, as it would
 * had it happened just before the change; the dispatcher's fan-out likewise never sends an endpoint events older
 * than the endpoint. A stale answer the other way (an endpoint deleted, a type dropped) only writes an event that
 * the fan-out assigns to nobody.
 */
import type { Executor } from '../../storage/db.ts';
import { parseEventTypes } from './views.ts';
import type { WebhookEventType } from './webhook-types.ts';

export interface WebhookSubscriptions {
  /**
   * The event types at least one live endpoint of the organization subscribes to. Read in `trx` (the caller's
   * transaction: SQLite has one connection, and a Postgres transaction should not wait for a second one) when the
   * cache cannot answer.
   */
  subscribedTypes(trx: Executor, orgId: string): Promise<ReadonlySet<WebhookEventType>>;
  /** Called by the endpoint service after a write to endpoints has committed. */
  changed(): void;
}

/** Organizations remembered at once; past that the cache starts over (each refill is one indexed read). */
const CACHE_MAX = 10_000;

const NONE: ReadonlySet<WebhookEventType> = new Set();

export function createWebhookSubscriptions(deps: { changeVersion: () => number | null }): WebhookSubscriptions {
  const cache = new Map<string, ReadonlySet<WebhookEventType>>();
  // Moved by `changed()`; the cache is valid for one (change version, local changes) pair.
  let localChanges = 0;
  let cachedVersion: number | null = null;
  let cachedChanges = 0;

  async function read(trx: Executor, orgId: string): Promise<ReadonlySet<WebhookEventType>> {
    const rows = await trx
      .selectFrom('webhook_endpoints')
      .select('event_types')
      .where('org_id', '=', orgId)
      .where('deleted_at', 'is', null)
      .execute();
    if (rows.length === 0) return NONE;
    const types = new Set<WebhookEventType>();
    for (const row of rows) for (const type of parseEventTypes(row.event_types)) types.add(type);
    return types;
  }

  return {
    async subscribedTypes(trx, orgId) {
      const version = deps.changeVersion();
      const changes = localChanges;
      if (version !== null) {
        if (version !== cachedVersion || changes !== cachedChanges) {
          cache.clear();
          cachedVersion = version;
          cachedChanges = changes;
        }
        const cached = cache.get(orgId);
        if (cached !== undefined) return cached;
      }
      const types = await read(trx, orgId);
      // Kept only if nothing changed while it was read: a change committed meanwhile may be missing from it.
      if (version !== null && deps.changeVersion() === version && localChanges === changes) {
        if (cache.size >= CACHE_MAX) cache.clear();
        cache.set(orgId, types);
      }
      return types;
    },

    changed() {
      localChanges += 1;
    },
  };
}
