/** Organizations own everything; each starts with a default Agent and a numeric project id. */
import type { CompatSetting } from '../../config.ts';
import { AppError } from '../../errors/app-error.ts';
import type { Clock } from '../../lib/clock.ts';
import { newId } from '../../lib/ids.ts';
import type { Executor } from '../../storage/db.ts';
import { isUniqueViolation } from '../../storage/errors.ts';
import type { AgentService } from '../agents/agent-service.ts';
import { type AuditContext, appendAudit, CLI_AUDIT, SYSTEM_AUDIT } from '../audit/audit-log.ts';
import { SCOPES, type Scope } from '../auth/scopes.ts';
import { balanceUsd, setCredits } from '../billing/credits.ts';
import { generateApiKey, insertApiKey, revokeApiKeys } from './api-keys.ts';

export interface Org {
  id: string;
  name: string;
  projectId: number;
  creditBalanceUsd: number | null;
}

export interface OrgSummary extends Org {
  createdAt: number;
}

export interface OrgServiceDeps {
  db: Executor;
  clock: Clock;
  agents: AgentService;
}

const ORG_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$/;

/** An organization's numeric project id, or null when there is no such organization. */
export async function projectIdOf(db: Executor, orgId: string): Promise<number | null> {
  const row = await db.selectFrom('orgs').select('project_id').where('id', '=', orgId).executeTakeFirst();
  return row === undefined ? null : Number(row.project_id);
}

export function createOrgService(deps: OrgServiceDeps) {
  async function findByName(name: string): Promise<Org | undefined> {
    const row = await deps.db.selectFrom('orgs').selectAll().where('name', '=', name).executeTakeFirst();
    if (row === undefined) return undefined;
    return {
      id: row.id,
      name: row.name,
      projectId: row.project_id,
      creditBalanceUsd: balanceUsd(row.credit_balance_micros),
    };
  }

  async function requireByName(name: string): Promise<Org> {
    const org = await findByName(name);
    if (org === undefined) throw new AppError('not_found', `organization ${name} not found`);
    return org;
  }

  return {
    findByName,
    requireByName,

    /** Every organization, oldest first (by project id). */
    async list(): Promise<OrgSummary[]> {
      const rows = await deps.db.selectFrom('orgs').selectAll().orderBy('project_id').execute();
      return rows.map((row) => ({
        id: row.id,
        name: row.name,
        projectId: row.project_id,
        creditBalanceUsd: balanceUsd(row.credit_balance_micros),
        createdAt: row.created_at,
      }));
    },

    async count(): Promise<number> {
      const row = await deps.db
        .selectFrom('orgs')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .executeTakeFirstOrThrow();
      return Number(row.n);
    },

    /**
     * Creates an organization with its default Agent, in one transaction; with `adminKey`, that admin key too (every
     * scope), so that no reader ever sees the organization without its key.
     */
    async create(name: string, adminKey?: string, audit: AuditContext = CLI_AUDIT): Promise<Org> {
      if (!ORG_NAME.test(name)) {
        throw new AppError('validation_error', 'organization names are 1-100 letters, digits, _ . or -', {
          param: 'name',
        });
      }
      try {
        return await deps.db.transaction().execute(async (trx) => {
          const max = await trx
            .selectFrom('orgs')
            .select((eb) => eb.fn.max<number | null>('project_id').as('max'))
            .executeTakeFirstOrThrow();
          const org: Org = { id: newId(), name, projectId: Number(max.max ?? 0) + 1, creditBalanceUsd: null };
          await trx
            .insertInto('orgs')
            .values({
              id: org.id,
              name,
              project_id: org.projectId,
              credit_balance_micros: null,
              created_at: deps.clock.now(),
            })
            .execute();
          await deps.agents.createDefault(trx, org.id);
          const target = { orgId: org.id, targetType: 'organization', targetId: org.id };
          await appendAudit(trx, audit, { ...target, action: 'organization.created', after: { name } }, deps.clock);
          if (adminKey !== undefined) {
            const created = await insertApiKey(trx, { orgId: org.id, key: adminKey, scopes: SCOPES }, deps.clock);
            await appendAudit(trx, audit, keyCreated(org.id, created, SCOPES), deps.clock);
          }
          return org;
        });
      } catch (error) {
        if (isUniqueViolation(error)) {
          throw new AppError('validation_error', `organization ${name} already exists`, {
            param: 'name',
            cause: error,
          });
        }
        throw error;
      }
    },

    /**
     * `compat` fixes the key's Responses validation mode (auto, strict, openai); null follows the deployment.
     * `agentIds` limits the key to those agents of the organization (each must exist); null: every agent.
     */
    async createKey(
      orgId: string,
      scopes: readonly Scope[] = SCOPES,
      key = generateApiKey(),
      compat: CompatSetting | null = null,
      agentIds: readonly string[] | null = null,
      audit: AuditContext = CLI_AUDIT,
    ): Promise<string> {
      if (agentIds !== null) {
        const wanted = agentIds.map((id) => id.toLowerCase());
        const found = await deps.db
          .selectFrom('agents')
          .select('id')
          .where('org_id', '=', orgId)
          .where('id', 'in', wanted)
          .execute();
        const known = new Set(found.map((row) => row.id));
        const unknown = wanted.filter((id) => !known.has(id));
        if (unknown.length > 0) {
          throw new AppError('validation_error', `no such agent in the organization: ${unknown.join(', ')}`, {
            param: 'agents',
          });
        }
        agentIds = wanted;
      }
      const limited = agentIds;
      await deps.db.transaction().execute(async (trx) => {
        const created = await insertApiKey(trx, { orgId, key, scopes, compat, agentIds: limited }, deps.clock);
        await appendAudit(trx, audit, keyCreated(orgId, created, scopes, compat, limited), deps.clock);
      });
      return key;
    },

    /** Revokes keys by prefix or key (api-keys.ts `revokeApiKeys`), each revocation with its audit entry. */
    async revokeKeys(prefixOrKey: string, audit: AuditContext = CLI_AUDIT) {
      return deps.db.transaction().execute(async (trx) => {
        const result = await revokeApiKeys(trx, prefixOrKey, deps.clock.now());
        for (const key of result.keys) {
          await appendAudit(
            trx,
            audit,
            {
              orgId: key.orgId,
              action: 'api_key.revoked',
              targetType: 'api_key',
              targetId: key.id,
              before: { prefix: key.prefix, status: 'active' },
              after: { prefix: key.prefix, status: 'revoked' },
            },
            deps.clock,
          );
        }
        return result;
      });
    },

    /** Sets the credit balance in USD; null means unlimited. */
    async setCredits(orgId: string, usd: number | null, audit: AuditContext = CLI_AUDIT): Promise<void> {
      await deps.db.transaction().execute(async (trx) => {
        const before = await trx
          .selectFrom('orgs')
          .select('credit_balance_micros')
          .where('id', '=', orgId)
          .executeTakeFirst();
        await setCredits(trx, orgId, usd);
        await appendAudit(
          trx,
          audit,
          {
            orgId,
            action: 'credits.set',
            targetType: 'organization',
            targetId: orgId,
            before: { credit_balance_usd: balanceUsd(before?.credit_balance_micros ?? null) },
            after: { credit_balance_usd: usd },
          },
          deps.clock,
        );
      });
    },
  };
}

export type OrgService = ReturnType<typeof createOrgService>;

/** The audit entry of a new key: its prefix and scopes, never the key. */
function keyCreated(
  orgId: string,
  key: { id: string; prefix: string },
  scopes: readonly Scope[],
  compat: CompatSetting | null = null,
  agentIds: readonly string[] | null = null,
) {
  return {
    orgId,
    action: 'api_key.created',
    targetType: 'api_key',
    targetId: key.id,
    after: { prefix: key.prefix, scopes: [...scopes], compat, agent_ids: agentIds === null ? null : [...agentIds] },
  };
}

export interface BootstrapResult {
  /** True when this call created the organization `default`. */
  createdOrg: boolean;
  /** The generated admin key, to show once; null when none was generated (a bootstrap key, or a later start). */
  createdKey: string | null;
}

/**
 * First start: when no organization exists, create `default`. With a bootstrap key its admin key is exactly that
 * key; otherwise a new admin key is generated and returned once for the caller to show. Later starts do nothing.
 * Two processes racing here both end with one `default` organization; the organization and its key are committed
 * together, so a process that finds the organization finds its key too.
 */
export async function bootstrap(orgs: OrgService, bootstrapKey: string | null): Promise<BootstrapResult> {
  const nothing = { createdOrg: false, createdKey: null };
  if ((await orgs.count()) > 0) return nothing;
  const key = bootstrapKey ?? generateApiKey();
  try {
    await orgs.create('default', key, SYSTEM_AUDIT);
  } catch (error) {
    if (error instanceof AppError && error.code === 'validation_error') return nothing;
    throw error;
  }
  return { createdOrg: true, createdKey: bootstrapKey === null ? key : null };
}
