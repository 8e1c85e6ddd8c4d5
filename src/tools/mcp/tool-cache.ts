/**
 * Tool lists per MCP server, so a turn never lists per call and rarely per turn. A list is reused until its
 * time-to-live passes: the server's own positive cache hint (`ttlMs`, clamped to 1 s - 24 h), else the deployment default
 * (AGENTRY_MCP_TOOLS_TTL_MS). A `list_changed` notification ends it at once. Connectors keep their list in the
 * database too, so a fresh process (or another worker) starts from the stored list instead of listing again.
 * Concurrent turns that need the same list share one listing. A listing that fails falls back to the last list
 * known (the calls themselves will then report the server's state), and only fails the source when there is none.
 */
import type { Logger } from 'pino';
import type { Clock } from '../../lib/clock.ts';
import type { Discovery, ListedMcpTool, ServerOffers } from './discovery-types.ts';

/** What is known about one server's list before asking the cache: the stored copy, for connectors. */
export interface StoredList {
  tools: ListedMcpTool[] | null;
  fetchedAt: number | null;
  ttlMs: number | null;
  offers: ServerOffers | null;
}

/** A server's cached listing: its tools, and what it offers besides (null when not known). */
export interface CachedListing {
  tools: ListedMcpTool[];
  offers: ServerOffers | null;
}

export interface ListTarget {
  /** Identity of the server configuration; a changed configuration never reuses an older list. */
  key: string;
  version: number;
  stored: StoredList | null;
  list(signal: AbortSignal): Promise<Discovery>;
  /** Persists a fresh listing (connectors) or does nothing (toolkits, ad-hoc URLs). */
  record(discovery: Discovery): Promise<void>;
  recordFailure(error: { code: string; message: string }): Promise<void>;
}

interface Entry extends CachedListing {
  version: number;
  fetchedAt: number;
  ttlMs: number;
  stale: boolean;
}

export interface ToolListCache {
  get(target: ListTarget, signal: AbortSignal): Promise<CachedListing>;
  /** A `list_changed` arrived for this key: the next use lists again. */
  invalidate(key: string): void;
}

const MIN_TTL_MS = 1000;
const MAX_TTL_MS = 24 * 3600_000;

export function createToolListCache(options: { clock: Clock; defaultTtlMs: number; logger: Logger }): ToolListCache {
  const entries = new Map<string, Entry>();
  const inflight = new Map<string, Promise<CachedListing>>();
  // A hint of 0 ("already stale") is what SDK servers send unless configured; taken literally it would list on
  // every turn, so only a positive hint replaces the default.
  const ttlOf = (hint: number | null) =>
    hint === null || hint <= 0 ? options.defaultTtlMs : Math.min(MAX_TTL_MS, Math.max(MIN_TTL_MS, hint));

  async function refresh(
    target: ListTarget,
    signal: AbortSignal,
    fallback: CachedListing | null,
  ): Promise<CachedListing> {
    try {
      const discovery = await target.list(signal);
      const now = options.clock.now();
      const listing = { tools: discovery.tools, offers: discovery.offers ?? fallback?.offers ?? null };
      entries.set(target.key, {
        ...listing,
        version: target.version,
        fetchedAt: now,
        ttlMs: ttlOf(discovery.ttlMs),
        stale: false,
      });
      await target.record(discovery);
      return listing;
    } catch (error) {
      if (signal.aborted) throw error;
      const message = error instanceof Error ? error.message : String(error);
      await target.recordFailure({ code: 'list_failed', message }).catch(() => undefined);
      if (fallback === null) throw error;
      options.logger.warn({ server: target.key, err: error }, 'listing MCP tools failed; using the last known list');
      return fallback;
    }
  }

  return {
    async get(target, signal) {
      const now = options.clock.now();
      const entry = entries.get(target.key);
      const own = entry !== undefined && entry.version === target.version ? entry : undefined;
      if (own !== undefined && !own.stale && now < own.fetchedAt + own.ttlMs) return own;
      const stored = target.stored;
      if (
        own === undefined &&
        stored !== null &&
        stored.tools !== null &&
        stored.fetchedAt !== null &&
        now < stored.fetchedAt + ttlOf(stored.ttlMs)
      ) {
        const listing = { tools: stored.tools, offers: stored.offers };
        entries.set(target.key, {
          ...listing,
          version: target.version,
          fetchedAt: stored.fetchedAt,
          ttlMs: ttlOf(stored.ttlMs),
          stale: false,
        });
        return listing;
      }
      const running = inflight.get(target.key);
      if (running !== undefined) return running;
      const fallback =
        own ?? (stored?.tools === null || stored === null ? null : { tools: stored.tools, offers: stored.offers });
      const listing = refresh(target, signal, fallback).finally(() => inflight.delete(target.key));
      inflight.set(target.key, listing);
      return listing;
    },
    invalidate(key) {
      const entry = entries.get(key);
      if (entry !== undefined) entry.stale = true;
    },
  };
}
