/** API keys: `agk_` + 40 base62 characters, stored only as a SHA-256 hash with a short prefix for humans. */
import type { Clock } from '../../lib/clock.ts';
import { sha256Hex } from '../../lib/hash.ts';
import { newId, randomBase62 } from '../../lib/ids.ts';
import type { Executor } from '../../storage/db.ts';
import { isScope, type Scope } from '../auth/scopes.ts';

export const KEY_PATTERN = /^agk_[A-Za-z0-9]{40}$/;
const PREFIX_LENGTH = 12;

export interface Principal {
  orgId: string;
  keyId: string;
  scopes: ReadonlySet<Scope>;
}

export function generateApiKey(): string {
  return `agk_${randomBase62(40)}`;
}

export const keyPrefix = (key: string): string => key.slice(0, PREFIX_LENGTH);

export async function insertApiKey(
  db: Executor,
  input: { orgId: string; key: string; scopes: readonly Scope[]; name?: string; expiresAt?: number },
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
    })
    .execute();
  return { id, prefix };
}

/** The principal behind a presented key, or null when it is malformed, unknown, expired or revoked. */
export async function authenticateKey(db: Executor, presented: string, now: number): Promise<Principal | null> {
  if (!KEY_PATTERN.test(presented)) return null;
  const row = await db
    .selectFrom('api_keys')
    .select(['id', 'org_id', 'scopes', 'expires_at', 'revoked_at'])
    .where('key_hash', '=', sha256Hex(presented))
    .executeTakeFirst();
  if (row === undefined || row.revoked_at !== null) return null;
  if (row.expires_at !== null && row.expires_at <= now) return null;
  return { orgId: row.org_id, keyId: row.id, scopes: new Set(row.scopes.split(' ').filter(isScope)) };
}

/**
 * Revokes keys by their displayed prefix (at least `agk_` + 4 characters) or by the full key.
 * Returns the prefixes revoked; an ambiguous prefix revokes nothing and says so.
 */
export async function revokeApiKeys(
  db: Executor,
  prefixOrKey: string,
  now: number,
): Promise<{ revoked: string[]; ambiguous: number }> {
  let rows: { id: string; prefix: string }[];
  if (KEY_PATTERN.test(prefixOrKey)) {
    rows = await db
      .selectFrom('api_keys')
      .select(['id', 'prefix'])
      .where('key_hash', '=', sha256Hex(prefixOrKey))
      .execute();
  } else {
    const active = db.selectFrom('api_keys').select(['id', 'prefix']).where('revoked_at', 'is', null);
    // The stored prefix is 12 characters; a shorter one is matched in code (LIKE would treat `_` as a wildcard).
    rows =
      prefixOrKey.length >= PREFIX_LENGTH
        ? await active.where('prefix', '=', prefixOrKey.slice(0, PREFIX_LENGTH)).execute()
        : (await active.execute()).filter((row) => row.prefix.startsWith(prefixOrKey));
  }
  if (rows.length > 1) return { revoked: [], ambiguous: rows.length };
  for (const row of rows) {
    await db.updateTable('api_keys').set({ revoked_at: now }).where('id', '=', row.id).execute();
  }
  return { revoked: rows.map((row) => row.prefix), ambiguous: 0 };
}
