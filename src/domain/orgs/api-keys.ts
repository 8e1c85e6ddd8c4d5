/** API keys: `agk_` + 40 base62 characters, stored only as a SHA-256 hash with a short prefix for humans. */
import { COMPAT_SETTINGS, type CompatSetting } from '../../config.ts';
import type { Clock } from '../../lib/clock.ts';
import { sha256Hex } from '../../lib/hash.ts';
import { newId, randomBase62 } from '../../lib/ids.ts';
import type { Executor } from '../../storage/db.ts';
import { effectiveScopes, isScope, type Scope } from '../auth/scopes.ts';
import type { Limits } from '../limits/limit-store.ts';

export const KEY_PATTERN = /^agk_[A-Za-z0-9]{40}$/;
const PREFIX_LENGTH = 12;

export interface Principal {
  orgId: string;
  keyId: string;
  /** The key's displayed prefix: what a change made with it records as its actor. */
  keyPrefix: string;
  /** What the key may do: its granted scopes and the narrower ones they include (domain/auth/scopes.ts). */
  scopes: ReadonlySet<Scope>;
  /** The key's Responses validation mode; null follows the deployment's AGENTRY_RESPONSES_COMPAT. */
  compat: CompatSetting | null;
  /** The limits the operator set for the key's organization and for the key (nulls: the defaults apply). */
  limits: { organization: Limits; apiKey: Limits };
  /** The agents a key limited to named agents may see and use; null for a key that may use every agent. */
  agentIds: ReadonlySet<string> | null;
}

function agentIdsOf(value: string | null): ReadonlySet<string> | null {
  if (value === null) return null;
  const parsed: unknown = JSON.parse(value);
  return new Set(Array.isArray(parsed) ? parsed.filter((id): id is string => typeof id === 'string') : []);
}

const limitOf = (value: number | string | null): number | null => (value === null ? null : Number(value));

const compatOf = (value: string | null): CompatSetting | null =>
  COMPAT_SETTINGS.find((setting) => setting === value) ?? null;

export function generateApiKey(): string {
  return `agk_${randomBase62(40)}`;
}

export const keyPrefix = (key: string): string => key.slice(0, PREFIX_LENGTH);

export async function insertApiKey(
  db: Executor,
  input: {
    orgId: string;
    key: string;
    scopes: readonly Scope[];
    name?: string;
    expiresAt?: number;
    compat?: CompatSetting | null;
    /** The agents the key is limited to; null or absent: every agent. */
    agentIds?: readonly string[] | null;
  },
  clock: Clock,
): Promise<{ id: string; prefix: string }> {
  const id = newId();
  const prefix = keyPrefix(input.key);
  await db
    .insertInto('api_keys')
    .values({
      id,
      org_id: input.orgId,
      prefix,
      key_hash: sha256Hex(input.key),
      scopes: input.scopes.join(' '),
      name: input.name ?? null,
      created_at: clock.now(),
      expires_at: input.expiresAt ?? null,
      revoked_at: null,
      compat: input.compat ?? null,
      agent_ids: input.agentIds == null ? null : JSON.stringify(input.agentIds),
    })
    .execute();
  return { id, prefix };
}

/** The principal behind a key hash, or null when it is unknown, expired or revoked. */
async function lookupKey(
  db: Executor,
  hash: string,
  now: number,
): Promise<(Principal & { expiresAt: number | null }) | null> {
  // The limits come with the key: cached with it, and emptied with it when `limits` changes (change-signal.ts).
  const row = await db
    .selectFrom('api_keys')
    .leftJoin('limits as org_limits', (join) =>
      join.onRef('org_limits.subject_id', '=', 'api_keys.org_id').on('org_limits.kind', '=', 'organization'),
    )
    .leftJoin('limits as key_limits', (join) =>
      join.onRef('key_limits.subject_id', '=', 'api_keys.id').on('key_limits.kind', '=', 'api_key'),
    )
    .select([
      'api_keys.id',
      'api_keys.prefix',
      'api_keys.org_id',
      'api_keys.scopes',
      'api_keys.expires_at',
      'api_keys.revoked_at',
      'api_keys.compat',
      'api_keys.agent_ids',
      'org_limits.requests_per_minute as org_rpm',
      'org_limits.concurrent_turns as org_turns',
      'key_limits.requests_per_minute as key_rpm',
      'key_limits.concurrent_turns as key_turns',
    ])
    .where('api_keys.key_hash', '=', hash)
    .executeTakeFirst();
  if (row === undefined || row.revoked_at !== null) return null;
  if (row.expires_at !== null && row.expires_at <= now) return null;
  return {
    orgId: row.org_id,
    keyId: row.id,
    keyPrefix: row.prefix,
    scopes: effectiveScopes(row.scopes.split(' ').filter(isScope)),
    compat: compatOf(row.compat),
    limits: {
      organization: { requestsPerMinute: limitOf(row.org_rpm), concurrentTurns: limitOf(row.org_turns) },
      apiKey: { requestsPerMinute: limitOf(row.key_rpm), concurrentTurns: limitOf(row.key_turns) },
    },
    agentIds: agentIdsOf(row.agent_ids),
    expiresAt: row.expires_at,
  };
}

/**
 * Revokes keys by their displayed prefix (at least `agk_` + 4 characters) or by the full key.
 * Returns the prefixes revoked; an ambiguous prefix revokes nothing and says so.
 */
export async function revokeApiKeys(
  db: Executor,
  prefixOrKey: string,
  now: number,
): Promise<{ revoked: string[]; ambiguous: number; keys: { id: string; prefix: string; orgId: string }[] }> {
  let rows: { id: string; prefix: string; org_id: string }[];
  if (KEY_PATTERN.test(prefixOrKey)) {
    rows = await db
      .selectFrom('api_keys')
      .select(['id', 'prefix', 'org_id'])
      .where('key_hash', '=', sha256Hex(prefixOrKey))
      .execute();
  } else {
    const active = db.selectFrom('api_keys').select(['id', 'prefix', 'org_id']).where('revoked_at', 'is', null);
    // The stored prefix is 12 characters; a shorter one is matched in code (LIKE would treat `_` as a wildcard).
    rows =
      prefixOrKey.length >= PREFIX_LENGTH
        ? await active.where('prefix', '=', prefixOrKey.slice(0, PREFIX_LENGTH)).execute()
        : (await active.execute()).filter((row) => row.prefix.startsWith(prefixOrKey));
  }
  if (rows.length > 1) return { revoked: [], ambiguous: rows.length, keys: [] };
  for (const row of rows) {
    await db.updateTable('api_keys').set({ revoked_at: now }).where('id', '=', row.id).execute();
  }
  return {
    revoked: rows.map((row) => row.prefix),
    ambiguous: 0,
    keys: rows.map((row) => ({ id: row.id, prefix: row.prefix, orgId: row.org_id })),
  };
}

/** An API key as `agentry keys list` shows it: never the key, only its prefix. */
export interface ApiKeySummary {
  prefix: string;
  scopes: string[];
  name: string | null;
  createdAt: number;
  lastUsedAt: number | null;
  expiresAt: number | null;
  revokedAt: number | null;
  /** The agents the key is limited to; null: every agent. */
  agentIds: string[] | null;
}

/** The keys of an organization, oldest first, revoked ones included. */
export async function listApiKeys(db: Executor, orgId: string): Promise<ApiKeySummary[]> {
  const rows = await db
    .selectFrom('api_keys')
    .selectAll()
    .where('org_id', '=', orgId)
    .orderBy('created_at')
    .orderBy('id')
    .execute();
  return rows.map((row) => ({
    prefix: row.prefix,
    scopes: row.scopes.split(' ').filter((scope) => scope !== ''),
    name: row.name,
    createdAt: row.created_at,
    lastUsedAt: row.last_used_at,
    expiresAt: row.expires_at,
    revokedAt: row.revoked_at,
    agentIds: row.agent_ids === null ? null : [...(agentIdsOf(row.agent_ids) ?? [])],
  }));
}

const AUTH_CACHE_MAX = 10_000;
/** How stale `last_used_at` may be: it is written at most this often per key and process. */
const LAST_USED_RESOLUTION_MS = 60_000;

/**
 * Authenticates keys with a cache of known-good principals. The cache is not time-based: it is emptied whenever
 * the storage's change version moves (a write to the keys or agents by this or any other process:
 * storage/change-signal.ts), and bypassed while that version is unknown. Unknown keys are never cached.
 */
export function createAuthenticator(deps: { db: Executor; changeVersion: () => number | null }) {
  const cache = new Map<string, Principal & { expiresAt: number | null }>();
  const lastRecorded = new Map<string, number>();
  let version: number | null = null;

  /** Records a use of the key, unless this process did so within the last minute; never fails the request. */
  async function recordUse(keyId: string, now: number): Promise<void> {
    const last = lastRecorded.get(keyId);
    if (last !== undefined && now - last < LAST_USED_RESOLUTION_MS) return;
    if (lastRecorded.size >= AUTH_CACHE_MAX) lastRecorded.clear();
    lastRecorded.set(keyId, now);
    await deps.db
      .updateTable('api_keys')
      .set({ last_used_at: now })
      .where('id', '=', keyId)
      .execute()
      .catch(() => lastRecorded.delete(keyId));
  }

  async function principalOf(hash: string, now: number): Promise<Principal | null> {
    const current = deps.changeVersion();
    if (current === null) return lookupKey(deps.db, hash, now);
    if (current !== version) {
      cache.clear();
      version = current;
    }
    const cached = cache.get(hash);
    if (cached !== undefined && (cached.expiresAt === null || cached.expiresAt > now)) return cached;
    const principal = await lookupKey(deps.db, hash, now);
    if (principal === null) return null;
    // Kept only if nothing changed while it was read.
    if (deps.changeVersion() !== version) return principal;
    if (cache.size >= AUTH_CACHE_MAX) cache.clear();
    cache.set(hash, principal);
    return principal;
  }

  return {
    async authenticate(presented: string, now: number): Promise<Principal | null> {
      if (!KEY_PATTERN.test(presented)) return null;
      const principal = await principalOf(sha256Hex(presented), now);
      if (principal !== null) await recordUse(principal.keyId, now);
      return principal;
    },
  };
}

export type Authenticator = ReturnType<typeof createAuthenticator>;
