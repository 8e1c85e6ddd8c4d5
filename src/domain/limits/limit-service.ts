/**
 * Limits of organizations and API keys for the operator (the /v1/admin routes and `agentry limits`), and what the
 * turn claim needs of them (domain/turns/claims.ts). See limit-store.ts.
 */
import type { LimitDefaults } from '../../config.ts';
import { notFound } from '../../errors/app-error.ts';
import type { Clock } from '../../lib/clock.ts';
import type { Executor } from '../../storage/db.ts';
import { type AuditContext, CLI_AUDIT } from '../audit/audit-log.ts';
import {
  anyTurnLimit,
  effectiveLimits,
  type Limits,
  type LimitsPatch,
  readLimits,
  writeLimits,
} from './limit-store.ts';

/** The limits of an organization or key: those set for it, and those that apply (defaults filled in). */
export interface LimitsView {
  own: Limits;
  effective: Limits;
}

export interface ApiKeyLimitsView extends LimitsView {
  orgId: string;
}

export type LimitService = ReturnType<typeof createLimitService>;

export function createLimitService(deps: {
  db: Executor;
  clock: Clock;
  defaults: LimitDefaults;
  changeVersion: () => number | null;
}) {
  const { db, defaults } = deps;
  const view = (own: Limits): LimitsView => ({ own, effective: effectiveLimits(own, defaults) });

  async function requireOrg(orgId: string): Promise<void> {
    const row = await db.selectFrom('orgs').select('id').where('id', '=', orgId).executeTakeFirst();
    if (row === undefined) throw notFound('organization', orgId);
  }

  async function orgOfKey(keyId: string): Promise<string> {
    const row = await db.selectFrom('api_keys').select('org_id').where('id', '=', keyId).executeTakeFirst();
    if (row === undefined) throw notFound('api_key', keyId);
    return row.org_id;
  }

  // Whether a claim must respect limits: cached until `limits` changes (the change version moves).
  let cachedAt: number | null = null;
  let cached = false;
  let refreshing = false;
  // What a claim needs (TurnLimits of domain/turns/leases.ts; deps.ts hands it to the engine).
  const turnLimits = {
    defaultConcurrentTurns: defaults.concurrentTurns,
    async inForce(): Promise<boolean> {
      if (defaults.concurrentTurns !== null) return true;
      const version = deps.changeVersion();
      if (version !== null && version === cachedAt) return cached;
      const found = await anyTurnLimit(db);
      // Kept only if nothing changed while it was read.
      if (version !== null && deps.changeVersion() === version) {
        cachedAt = version;
        cached = found;
      }
      return found;
    },
    knownNone(): boolean {
      if (defaults.concurrentTurns !== null) return false;
      const version = deps.changeVersion();
      if (version !== null && version === cachedAt) return !cached;
      // Not known now: read for the next caller (one read at a time), and answer no.
      if (!refreshing) {
        refreshing = true;
        turnLimits
          .inForce()
          .catch(() => undefined)
          .finally(() => {
            refreshing = false;
          });
      }
      return false;
    },
  };

  return {
    defaults,
    turnLimits,
    async organization(orgId: string): Promise<LimitsView> {
      await requireOrg(orgId);
      return view(await readLimits(db, 'organization', orgId));
    },
    async setOrganization(orgId: string, patch: LimitsPatch, audit: AuditContext = CLI_AUDIT): Promise<LimitsView> {
      await requireOrg(orgId);
      const change = { audit, clock: deps.clock };
      return view(await writeLimits(db, { kind: 'organization', subjectId: orgId, orgId }, patch, change));
    },
    async apiKey(keyId: string): Promise<ApiKeyLimitsView> {
      const orgId = await orgOfKey(keyId);
      return { orgId, ...view(await readLimits(db, 'api_key', keyId)) };
    },
    async setApiKey(keyId: string, patch: LimitsPatch, audit: AuditContext = CLI_AUDIT): Promise<ApiKeyLimitsView> {
      const orgId = await orgOfKey(keyId);
      const change = { audit, clock: deps.clock };
      const own = await writeLimits(db, { kind: 'api_key', subjectId: keyId, orgId }, patch, change);
      return { orgId, ...view(own) };
    },
    /** The active keys of an organization whose prefix starts with `prefix` (the CLI names keys by prefix). */
    async keysByPrefix(orgId: string, prefix: string): Promise<{ id: string; prefix: string }[]> {
      const keys = await db
        .selectFrom('api_keys')
        .select(['id', 'prefix'])
        .where('org_id', '=', orgId)
        .where('revoked_at', 'is', null)
        .orderBy('created_at')
        .execute();
      // Matched in code: LIKE would treat `_` as a wildcard.
      return keys.filter((key) => key.prefix.startsWith(prefix.slice(0, key.prefix.length)));
    },
    /** The limits that apply to a key's requests and turns, from what its principal carries. */
    applying(limits: { organization: Limits; apiKey: Limits }): { organization: Limits; apiKey: Limits } {
      return {
        organization: effectiveLimits(limits.organization, defaults),
        apiKey: effectiveLimits(limits.apiKey, defaults),
      };
    },
  };
}
