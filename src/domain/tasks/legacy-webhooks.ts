/**
 * Legacy organization webhooks (`/v1/webhooks`, docs/legacy.md): the task.* notifications of the Tasks API.
 * Best-effort by contract: one attempt per event, no retry, no history. Kept apart from webhook endpoints (their
 * own table, limit and routes); the destination passes the same egress guard. This module is the one writer of
 * `legacy_webhooks`.
 */

import { AppError, notFound, validationError } from '../../errors/app-error.ts';
import { type Clock, iso } from '../../lib/clock.ts';
import { EgressError, type Resolver, resolveDestination } from '../../lib/egress.ts';
import { newId } from '../../lib/ids.ts';
import type { SecretBox } from '../../lib/secret-box.ts';
import type { Dialect, Executor } from '../../storage/db.ts';
import type { LegacyWebhookRow } from '../../storage/schema.ts';
import { type AuditContext, appendAudit, SYSTEM_AUDIT } from '../audit/audit-log.ts';
import { TASK_EVENT_TYPES, type TaskEventType } from './task-types.ts';

/** The hosted product allows three per organization. */
export const MAX_LEGACY_WEBHOOKS_PER_ORG = 3;

export interface LegacyWebhook {
  id: string;
  object: 'webhook';
  url: string;
  events: TaskEventType[];
  description: string | null;
  hasSecret: boolean;
  isActive: boolean;
  createdAt: string;
  lastTriggeredAt: string | null;
  failureCount: number;
}

export interface LegacyWebhookInput {
  url: string;
  events: TaskEventType[];
  description?: string;
  secret?: string;
}

export function eventsOf(text: string): TaskEventType[] {
  try {
    const value: unknown = JSON.parse(text);
    if (Array.isArray(value)) return TASK_EVENT_TYPES.filter((type) => value.includes(type));
  } catch {
    // Written by this module as a JSON array; anything else subscribes to nothing.
  }
  return [];
}

function view(row: LegacyWebhookRow): LegacyWebhook {
  return {
    id: row.id,
    object: 'webhook',
    url: row.url,
    events: eventsOf(row.events),
    description: row.description,
    hasSecret: row.sealed_secret !== null,
    isActive: row.is_active === 1,
    createdAt: iso(row.created_at),
    lastTriggeredAt: row.last_triggered_at === null ? null : iso(row.last_triggered_at),
    failureCount: row.failure_count,
  };
}

export interface LegacyWebhookServiceDeps {
  db: Executor;
  dialect: Dialect;
  clock: Clock;
  /** Secrets are stored sealed with it, and opened for the notifier. */
  secrets: SecretBox;
  allowInsecureDestinations: boolean;
  resolver?: Resolver;
}

/** An active webhook to notify. */
export interface LegacySubscriber {
  id: string;
  url: string;
  /** The X-Webhook-Secret value, decrypted; throws SecretKeyError when the key is not the one it was stored with. */
  secret(): string | null;
}

export function createLegacyWebhookService(deps: LegacyWebhookServiceDeps) {
  const { db } = deps;

  async function checkUrl(url: string): Promise<void> {
    try {
      await resolveDestination(url, { allowInsecure: deps.allowInsecureDestinations, resolver: deps.resolver });
    } catch (error) {
      if (!(error instanceof EgressError)) throw error;
      // A name that does not resolve now may later; each attempt checks again.
      if (error.code === 'dns_failed') return;
      throw validationError(
        'url',
        error.message.startsWith('URL ') ? `url ${error.message.slice(4)}` : `url is refused: ${error.message}`,
      );
    }
  }

  return {
    /** Creates a webhook; the same URL again updates and returns the existing one (201 either way). */
    async create(orgId: string, input: LegacyWebhookInput, audit: AuditContext = SYSTEM_AUDIT): Promise<LegacyWebhook> {
      await checkUrl(input.url);
      return db.transaction().execute(async (trx) => {
        if (deps.dialect === 'postgres') {
          await trx.selectFrom('orgs').select('id').where('id', '=', orgId).forUpdate().executeTakeFirst();
        }
        const existing = await trx
          .selectFrom('legacy_webhooks')
          .selectAll()
          .where('org_id', '=', orgId)
          .where('url', '=', input.url)
          .executeTakeFirst();
        const fields = {
          events: JSON.stringify([...new Set(input.events)]),
          description: input.description ?? null,
          sealed_secret: input.secret === undefined ? null : deps.secrets.seal(input.secret),
        };
        if (existing !== undefined) {
          const row = await trx
            .updateTable('legacy_webhooks')
            .set({ ...fields, is_active: 1 })
            .where('id', '=', existing.id)
            .returningAll()
            .executeTakeFirstOrThrow();
          await appendAudit(
            trx,
            audit,
            {
              orgId,
              action: 'legacy_webhook.updated',
              ...target(row.id),
              before: summaryOf(existing),
              after: summaryOf(row),
            },
            deps.clock,
          );
          return view(row);
        }
        const count = await trx
          .selectFrom('legacy_webhooks')
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .where('org_id', '=', orgId)
          .executeTakeFirstOrThrow();
        if (Number(count.n) >= MAX_LEGACY_WEBHOOKS_PER_ORG) {
          throw new AppError(
            'limit_exceeded',
            `An organization can have at most ${MAX_LEGACY_WEBHOOKS_PER_ORG} legacy webhooks; delete one first (or use /v1/webhook_endpoints)`,
          );
        }
        const row: LegacyWebhookRow = {
          id: newId(),
          org_id: orgId,
          url: input.url,
          ...fields,
          is_active: 1,
          created_at: deps.clock.now(),
          last_triggered_at: null,
          failure_count: 0,
        };
        await trx.insertInto('legacy_webhooks').values(row).execute();
        await appendAudit(
          trx,
          audit,
          { orgId, action: 'legacy_webhook.created', ...target(row.id), after: summaryOf(row) },
          deps.clock,
        );
        return view(row);
      });
    },

    async list(orgId: string): Promise<{ data: LegacyWebhook[] }> {
      const rows = await db
        .selectFrom('legacy_webhooks')
        .selectAll()
        .where('org_id', '=', orgId)
        .orderBy('created_at', 'desc')
        .orderBy('id', 'desc')
        .execute();
      return { data: rows.map(view) };
    },

    async get(orgId: string, id: string): Promise<LegacyWebhook> {
      const row = await db
        .selectFrom('legacy_webhooks')
        .selectAll()
        .where('org_id', '=', orgId)
        .where('id', '=', id.toLowerCase())
        .executeTakeFirst();
      if (row === undefined) throw notFound('webhook', id);
      return view(row);
    },

    async delete(orgId: string, id: string, audit: AuditContext = SYSTEM_AUDIT): Promise<void> {
      await db.transaction().execute(async (trx) => {
        const row = await trx
          .deleteFrom('legacy_webhooks')
          .where('org_id', '=', orgId)
          .where('id', '=', id.toLowerCase())
          .returningAll()
          .executeTakeFirst();
        if (row === undefined) throw notFound('webhook', id);
        await appendAudit(
          trx,
          audit,
          { orgId, action: 'legacy_webhook.deleted', ...target(row.id), before: summaryOf(row) },
          deps.clock,
        );
      });
    },

    /** Active webhooks of the organization subscribed to `type`, with their secrets (for the notifier only). */
    async subscribers(orgId: string, type: TaskEventType): Promise<LegacySubscriber[]> {
      const rows = await db
        .selectFrom('legacy_webhooks')
        .select(['id', 'url', 'events', 'sealed_secret'])
        .where('org_id', '=', orgId)
        .where('is_active', '=', 1)
        .execute();
      return rows
        .filter((row) => eventsOf(row.events).includes(type))
        .map(({ id, url, sealed_secret: sealed }) => ({
          id,
          url,
          secret: () => (sealed === null ? null : deps.secrets.open(sealed)),
        }));
    },

    /** Records the outcome of one attempt. */
    async recordAttempt(id: string, ok: boolean, at: number): Promise<void> {
      await db
        .updateTable('legacy_webhooks')
        .set((eb) => ({
          last_triggered_at: at,
          failure_count: ok ? eb.ref('failure_count') : eb('failure_count', '+', 1),
        }))
        .where('id', '=', id)
        .execute();
    },
  };
}

export type LegacyWebhookService = ReturnType<typeof createLegacyWebhookService>;

const target = (id: string) => ({ targetType: 'legacy_webhook', targetId: id });

/** What the audit log keeps of a legacy webhook: whether it signs, never its secret. */
const summaryOf = (row: LegacyWebhookRow) => ({
  url: row.url,
  events: JSON.parse(row.events) as unknown,
  description: row.description,
  signed: row.sealed_secret !== null,
});
