/**
 * The audit log (docs/audit-log.md): who changed what in an organization, appended by the change itself and never
 * edited. `appendAudit` is the one writer: call it with the executor of the change (its transaction, where the
 * change is one) so that a change is never committed without its entry. Summaries pass through `redact`, so a
 * secret (webhook secret, credential, API key, token header, environment value) is never stored.
 */

import type { Selectable } from 'kysely';
import { validationError } from '../../errors/app-error.ts';
import { type Clock, unixSeconds } from '../../lib/clock.ts';
import { newId } from '../../lib/ids.ts';
import type { Executor } from '../../storage/db.ts';
import type { AuditLogTable } from '../../storage/schema.ts';
import { type CursorPage, newestFirstPage } from '../pagination.ts';

export const ACTOR_TYPES = ['api_key', 'cli', 'admin', 'system'] as const;
export type ActorType = (typeof ACTOR_TYPES)[number];

/**
 * Who made a change: an API key (its id and displayed prefix), the `agentry` CLI, the operator's admin token
 * (the /v1/admin routes), or Agentry itself.
 */
export type AuditActor =
  | { type: 'api_key'; keyId: string; keyPrefix: string }
  | { type: 'cli' }
  | { type: 'admin' }
  | { type: 'system' };

/** Who made a change and the request it came with (null outside HTTP). */
export interface AuditContext {
  actor: AuditActor;
  requestId: string | null;
}

export const CLI_AUDIT: AuditContext = { actor: { type: 'cli' }, requestId: null };
export const SYSTEM_AUDIT: AuditContext = { actor: { type: 'system' }, requestId: null };
/** A change made through the /v1/admin routes, with the request's id. */
export const adminAudit = (requestId: string): AuditContext => ({ actor: { type: 'admin' }, requestId });

/** A summary of a resource before or after a change: small JSON, redacted on the way in. */
export type AuditSummary = Record<string, unknown>;

export interface AuditEntry {
  orgId: string;
  /** `<target type>.<verb>`, e.g. `agent.updated`, `api_key.revoked`, `webhook_endpoint.secret_rotated`. */
  action: string;
  targetType: string;
  targetId: string;
  before?: AuditSummary | null;
  after?: AuditSummary | null;
}

export const REDACTED = '[redacted]';

/** Field names whose values are secrets wherever they appear in a summary. */
const SECRET_NAME =
  /secret|token|password|passwd|credential|authorization|api[_-]?key|^key$|cookie|^env$|^environment$|^headers?$|private|bearer/i;
/** Values that look like secrets whatever their field: API keys, webhook secrets, provider keys, bearer headers. */
const SECRET_VALUE = /^(agk_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9+/=]{16,}|sk-|sk_|xox[abp]-|ghp_|github_pat_)|^bearer\s/i;
/** A hint the API shows anyway (`signing_secret_hint`: `whsec_…abcd`) is not a secret, whatever its name. */
const HINT_NAME = /_hint$/;

/** A copy of `value` with every secret replaced by `[redacted]` (by field name, and by the look of a value). */
export function redact(value: unknown, depth = 0): unknown {
  if (depth > 8) return REDACTED;
  if (typeof value === 'string') return SECRET_VALUE.test(value) ? REDACTED : value;
  if (Array.isArray(value)) return value.map((item) => redact(item, depth + 1));
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [key, inner] of Object.entries(value)) {
      const secret = SECRET_NAME.test(key) && !HINT_NAME.test(key) && inner !== null && inner !== undefined;
      out[key] = secret ? REDACTED : redact(inner, depth + 1);
    }
    return out;
  }
  return value;
}

const summaryText = (summary: AuditSummary | null | undefined): string | null =>
  summary === null || summary === undefined ? null : JSON.stringify(redact(summary));

/**
 * Appends one entry. Pass the executor the change is written with (its transaction) so that both commit or
 * neither does; outside a transaction, call it right after the change succeeds.
 */
export async function appendAudit(
  db: Executor,
  context: AuditContext,
  entry: AuditEntry,
  clock: Clock,
): Promise<string> {
  const id = newId();
  const actor = context.actor;
  await db
    .insertInto('audit_log')
    .values({
      id,
      org_id: entry.orgId,
      created_at: clock.now(),
      actor_type: actor.type,
      actor_key_id: actor.type === 'api_key' ? actor.keyId : null,
      actor_key_prefix: actor.type === 'api_key' ? actor.keyPrefix : null,
      request_id: context.requestId,
      action: entry.action,
      target_type: entry.targetType,
      target_id: entry.targetId,
      before: summaryText(entry.before),
      after: summaryText(entry.after),
    })
    .execute();
  return id;
}

/** The names of the top-level fields whose values differ between two configurations, sorted. */
export function changedFields(before: Record<string, unknown>, after: Record<string, unknown>): string[] {
  const names = new Set([...Object.keys(before), ...Object.keys(after)]);
  return [...names].filter((name) => JSON.stringify(before[name]) !== JSON.stringify(after[name])).sort();
}

/** An entry as `GET /v1/audit_log` and `agentry audit --json` show it. */
export interface AuditLogEntryView {
  id: string;
  object: 'audit_log_entry';
  created_at: number;
  actor: { type: ActorType; api_key_id: string | null; api_key_prefix: string | null };
  request_id: string | null;
  action: string;
  target: { type: string; id: string };
  before: AuditSummary | null;
  after: AuditSummary | null;
}

type AuditRow = Selectable<AuditLogTable>;

const actorTypeOf = (value: string): ActorType => ACTOR_TYPES.find((type) => type === value) ?? 'system';

const parseSummary = (text: string | null): AuditSummary | null => {
  if (text === null) return null;
  const value: unknown = JSON.parse(text);
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as AuditSummary) : null;
};

export function auditEntryView(row: AuditRow): AuditLogEntryView {
  return {
    id: row.id,
    object: 'audit_log_entry',
    created_at: unixSeconds(Number(row.created_at)),
    actor: { type: actorTypeOf(row.actor_type), api_key_id: row.actor_key_id, api_key_prefix: row.actor_key_prefix },
    request_id: row.request_id,
    action: row.action,
    target: { type: row.target_type, id: row.target_id },
    before: parseSummary(row.before),
    after: parseSummary(row.after),
  };
}

export interface AuditLogQuery {
  limit: number;
  after?: string;
  /** Exact action (`agent.updated`), or every action of a target type (`agent` or `agent.*`). */
  action?: string;
  targetType?: string;
  targetId?: string;
  /** `cli`, `system`, `api_key`, a key id, or a key prefix (at least 8 characters). */
  actor?: string;
  /** Epoch milliseconds, inclusive. */
  since?: number;
  /** Epoch milliseconds, exclusive. */
  until?: number;
}

/** One page of an organization's log (null: of every organization, for the CLI), newest first. */
export async function listAuditLog(
  db: Executor,
  orgId: string | null,
  query: AuditLogQuery,
): Promise<CursorPage<AuditLogEntryView & { org_id: string }>> {
  if (query.since !== undefined && query.until !== undefined && query.until <= query.since) {
    throw validationError('until', 'until must be later than since');
  }
  let select = db.selectFrom('audit_log').selectAll();
  if (orgId !== null) select = select.where('org_id', '=', orgId);
  if (query.action !== undefined) {
    // `agent.*` and `agent` name every action on agents; `agent.updated` names one.
    const action = query.action.endsWith('.*')
      ? query.action.slice(0, -1)
      : query.action.includes('.')
        ? query.action
        : `${query.action}.`;
    select = action.endsWith('.')
      ? select.where('action', '>=', action).where('action', '<', `${action.slice(0, -1)}/`)
      : select.where('action', '=', action);
  }
  if (query.targetType !== undefined) select = select.where('target_type', '=', query.targetType);
  if (query.targetId !== undefined) select = select.where('target_id', '=', query.targetId);
  if (query.actor !== undefined) {
    const actor = query.actor;
    const type = ACTOR_TYPES.find((candidate) => candidate === actor);
    if (type !== undefined) select = select.where('actor_type', '=', type);
    else select = select.where((eb) => eb.or([eb('actor_key_id', '=', actor), eb('actor_key_prefix', '=', actor)]));
  }
  if (query.since !== undefined) select = select.where('created_at', '>=', query.since);
  if (query.until !== undefined) select = select.where('created_at', '<', query.until);
  return newestFirstPage(
    select,
    query.after === undefined ? { limit: query.limit } : { limit: query.limit, after: query.after },
    {
      createdAt: 'created_at',
      id: 'id',
      anchor: async (after) => {
        let anchor = db.selectFrom('audit_log').select(['id', 'created_at']).where('id', '=', after);
        if (orgId !== null) anchor = anchor.where('org_id', '=', orgId);
        const row = await anchor.executeTakeFirst();
        return row === undefined ? undefined : { id: row.id, created_at: Number(row.created_at) };
      },
      unknownAfter: (after) => `after names no audit log entry of this organization: ${after}`,
      view: (row) => ({ ...auditEntryView(row), org_id: row.org_id }),
    },
  );
}
