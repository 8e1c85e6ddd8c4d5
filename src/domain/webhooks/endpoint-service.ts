/**
 * Webhook endpoints: create, list, read, update, delete, rotate the signing secret. URLs are checked with the
 * egress guard at create and update (public HTTPS, no credentials or fragment, no private destination); the same
 * guard checks again at every attempt, since a name may resolve elsewhere later.
 */

import { AppError, notFound, validationError } from '../../errors/app-error.ts';
import type { Clock } from '../../lib/clock.ts';
import { type Resolver, storedDestinationProblem } from '../../lib/egress.ts';
import type { SecretBox } from '../../lib/secret-box.ts';
import type { Dialect, Executor } from '../../storage/db.ts';
import type { WebhookEndpointRow } from '../../storage/schema.ts';
import { type AuditContext, appendAudit, SYSTEM_AUDIT } from '../audit/audit-log.ts';
import { type CursorPage, type CursorQuery, newestFirstPage } from '../pagination.ts';
import { newEndpointId } from './ids.ts';
import { generateSecret, secretHint } from './signing.ts';
import type { WebhookSubscriptions } from './subscriptions.ts';
import { endpointFromRow, endpointWithSecret } from './views.ts';
import {
  MAX_ENDPOINTS_PER_ORG,
  type WebhookEndpoint,
  type WebhookEndpointWithSecret,
  type WebhookEventType,
} from './webhook-types.ts';

export interface EndpointServiceDeps {
  db: Executor;
  dialect: Dialect;
  clock: Clock;
  /** Signing secrets are stored sealed with it. */
  secrets: Pick<SecretBox, 'seal'>;
  allowInsecureDestinations: boolean;
  resolver?: Resolver;
  /** Told after every write that can change which events the organization receives. */
  subscriptions: Pick<WebhookSubscriptions, 'changed'>;
}

export interface EndpointInput {
  name: string;
  url: string;
  event_types: WebhookEventType[];
}

export type EndpointPatch = Partial<EndpointInput>;

export function createEndpointService(deps: EndpointServiceDeps) {
  const { db } = deps;

  /**
   * Drops the cached subscriptions once a write that can change them has ended, so every event this process writes
   * after the call returns sees the change (subscriptions.ts). Also after a failure: a commit whose answer was lost
   * may still have happened.
   */
  const changed = () => deps.subscriptions.changed();
  const subscriptionChange = <T>(write: (trx: Executor) => Promise<T>): Promise<T> =>
    db.transaction().execute(write).finally(changed);

  /** Changes an endpoint that exists and is not deleted; 404 otherwise. */
  async function updateLive(
    orgId: string,
    id: string,
    set: Partial<WebhookEndpointRow>,
    trx: Executor = db,
  ): Promise<WebhookEndpointRow> {
    const row = await trx
      .updateTable('webhook_endpoints')
      .set(set)
      .where('org_id', '=', orgId)
      .where('id', '=', id)
      .where('deleted_at', 'is', null)
      .returningAll()
      .executeTakeFirst();
    if (row === undefined) throw notFound('webhook endpoint', id);
    return row;
  }

  /** A new signing secret: in clear for the one answer that shows it, sealed for the row. */
  function newSecret(): { secret: string; stored: Pick<WebhookEndpointRow, 'sealed_secret' | 'secret_hint'> } {
    const secret = generateSecret();
    return { secret, stored: { sealed_secret: deps.secrets.seal(secret), secret_hint: secretHint(secret) } };
  }

  async function checkUrl(url: string): Promise<void> {
    const options = { allowInsecure: deps.allowInsecureDestinations, resolver: deps.resolver };
    const problem = await storedDestinationProblem(url, 'url', options);
    if (problem !== null) throw validationError('url', problem);
  }

  async function load(orgId: string, id: string, trx: Executor = db): Promise<WebhookEndpointRow> {
    const row = await trx
      .selectFrom('webhook_endpoints')
      .selectAll()
      .where('org_id', '=', orgId)
      .where('id', '=', id)
      .where('deleted_at', 'is', null)
      .executeTakeFirst();
    if (row === undefined) throw notFound('webhook endpoint', id);
    return row;
  }

  return {
    load,

    async list(orgId: string, query: CursorQuery): Promise<CursorPage<WebhookEndpoint>> {
      return newestFirstPage(
        db.selectFrom('webhook_endpoints').selectAll().where('org_id', '=', orgId).where('deleted_at', 'is', null),
        query,
        {
          createdAt: 'created_at',
          id: 'id',
          // Deleted endpoints still anchor a cursor, so deleting while paging skips nothing.
          anchor: (after) =>
            db
              .selectFrom('webhook_endpoints')
              .select(['id', 'created_at'])
              .where('org_id', '=', orgId)
              .where('id', '=', after)
              .executeTakeFirst(),
          unknownAfter: (after) => `after names no webhook endpoint: ${after}`,
          view: (row) => endpointFromRow(row),
        },
      );
    },

    async create(
      orgId: string,
      input: EndpointInput,
      audit: AuditContext = SYSTEM_AUDIT,
    ): Promise<WebhookEndpointWithSecret> {
      await checkUrl(input.url);
      return subscriptionChange(async (trx) => {
        // Serializes creates of one organization so that two concurrent ones cannot both take the 20th place
        // (SQLite write transactions are serialized already).
        if (deps.dialect === 'postgres') {
          await trx.selectFrom('orgs').select('id').where('id', '=', orgId).forUpdate().executeTakeFirst();
        }
        const count = await trx
          .selectFrom('webhook_endpoints')
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .where('org_id', '=', orgId)
          .where('deleted_at', 'is', null)
          .executeTakeFirstOrThrow();
        if (Number(count.n) >= MAX_ENDPOINTS_PER_ORG) {
          throw new AppError(
            'limit_exceeded',
            `An organization can have at most ${MAX_ENDPOINTS_PER_ORG} webhook endpoints; delete one first`,
          );
        }
        const now = deps.clock.now();
        const { secret, stored } = newSecret();
        const row: WebhookEndpointRow = {
          id: newEndpointId(),
          org_id: orgId,
          name: input.name,
          url: input.url,
          event_types: JSON.stringify(input.event_types),
          ...stored,
          created_at: now,
          updated_at: now,
          deleted_at: null,
        };
        await trx.insertInto('webhook_endpoints').values(row).execute();
        await appendAudit(
          trx,
          audit,
          { orgId, action: 'webhook_endpoint.created', ...target(row.id), after: summaryOf(row) },
          deps.clock,
        );
        return endpointWithSecret(row, secret);
      });
    },

    /** Every endpoint of the organization, oldest first (documents of agents as code). */
    async all(orgId: string): Promise<WebhookEndpoint[]> {
      const rows = await db
        .selectFrom('webhook_endpoints')
        .selectAll()
        .where('org_id', '=', orgId)
        .where('deleted_at', 'is', null)
        .orderBy('created_at')
        .orderBy('id')
        .execute();
      return rows.map((row) => endpointFromRow(row));
    },

    async get(orgId: string, id: string): Promise<WebhookEndpoint> {
      return endpointFromRow(await load(orgId, id));
    },

    /** Changes apply from now on: to events fanned out later (event_types) and to later attempts (url). */
    async update(
      orgId: string,
      id: string,
      patch: EndpointPatch,
      audit: AuditContext = SYSTEM_AUDIT,
    ): Promise<WebhookEndpoint> {
      const before = await load(orgId, id);
      if (patch.url !== undefined) await checkUrl(patch.url);
      const set: Partial<WebhookEndpointRow> = { updated_at: deps.clock.now() };
      if (patch.name !== undefined) set.name = patch.name;
      if (patch.url !== undefined) set.url = patch.url;
      if (patch.event_types !== undefined) set.event_types = JSON.stringify(patch.event_types);
      const updated = await subscriptionChange(async (trx) => {
        const after = await updateLive(orgId, id, set, trx);
        await appendAudit(
          trx,
          audit,
          {
            orgId,
            action: 'webhook_endpoint.updated',
            ...target(id),
            before: summaryOf(before),
            after: summaryOf(after),
          },
          deps.clock,
        );
        return after;
      });
      return endpointFromRow(updated);
    },

    /** Deletes the endpoint; its pending deliveries become `skipped` and are never attempted again. */
    async delete(
      orgId: string,
      id: string,
      audit: AuditContext = SYSTEM_AUDIT,
    ): Promise<{ id: string; object: 'webhook_endpoint.deleted'; deleted: true }> {
      await subscriptionChange(async (trx) => {
        const now = deps.clock.now();
        const deleted = await trx
          .updateTable('webhook_endpoints')
          .set({ deleted_at: now, updated_at: now })
          .where('org_id', '=', orgId)
          .where('id', '=', id)
          .where('deleted_at', 'is', null)
          .returningAll()
          .executeTakeFirst();
        if (deleted === undefined) throw notFound('webhook endpoint', id);
        await appendAudit(
          trx,
          audit,
          { orgId, action: 'webhook_endpoint.deleted', ...target(id), before: summaryOf(deleted) },
          deps.clock,
        );
        await trx
          .updateTable('webhook_deliveries')
          .set({
            status: 'skipped',
            error: JSON.stringify({ code: 'endpoint_deleted', message: 'the webhook endpoint was deleted' }),
            next_attempt_at: null,
            completed_at: now,
            updated_at: now,
          })
          .where('endpoint_id', '=', id)
          .where('status', '=', 'pending')
          .execute();
      });
      return { id, object: 'webhook_endpoint.deleted', deleted: true };
    },

    /** A new secret, returned once; attempts made from now on are signed with it. */
    async rotateSecret(
      orgId: string,
      id: string,
      audit: AuditContext = SYSTEM_AUDIT,
    ): Promise<WebhookEndpointWithSecret> {
      const { secret, stored } = newSecret();
      const row = await db.transaction().execute(async (trx) => {
        const before = await load(orgId, id, trx);
        const after = await updateLive(orgId, id, { ...stored, updated_at: deps.clock.now() }, trx);
        // Only the hints: the secrets themselves are never recorded.
        await appendAudit(
          trx,
          audit,
          {
            orgId,
            action: 'webhook_endpoint.secret_rotated',
            ...target(id),
            before: { signing_secret_hint: before.secret_hint },
            after: { signing_secret_hint: after.secret_hint },
          },
          deps.clock,
        );
        return after;
      });
      return endpointWithSecret(row, secret);
    },
  };
}

export type EndpointService = ReturnType<typeof createEndpointService>;

const target = (id: string) => ({ targetType: 'webhook_endpoint', targetId: id });

/** What the audit log keeps of an endpoint: never its secret, only the hint the API shows. */
const summaryOf = (row: WebhookEndpointRow) => ({
  name: row.name,
  url: row.url,
  event_types: JSON.parse(row.event_types) as unknown,
  signing_secret_hint: row.secret_hint,
});
