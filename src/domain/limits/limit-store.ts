/**
 * The operator's limits of organizations and API keys (table `limits`, migration 0031): requests per minute and
 * concurrent turns. Set only through the operator's routes (/v1/admin) and the CLI, never by a tenant's key. A
 * field not set (null) follows the deployment's default (AGENTRY_DEFAULT_RPM, AGENTRY_DEFAULT_CONCURRENT_TURNS).
 */

import type { LimitDefaults } from '../../config.ts';
import type { Clock } from '../../lib/clock.ts';
import type { LimitSubject } from '../../storage/column-values.ts';
import type { Executor } from '../../storage/db.ts';
import { type AuditContext, appendAudit } from '../audit/audit-log.ts';

export interface Limits {
  requestsPerMinute: number | null;
  concurrentTurns: number | null;
}

export const NO_LIMITS: Limits = { requestsPerMinute: null, concurrentTurns: null };

/** A change of limits: an absent field is kept, null clears it (back to the default). */
export type LimitsPatch = Partial<Limits>;

/** The limits that apply: the subject's own where set, else the deployment's default. */
export function effectiveLimits(own: Limits, defaults: LimitDefaults): Limits {
  return {
    requestsPerMinute: own.requestsPerMinute ?? defaults.requestsPerMinute,
    concurrentTurns: own.concurrentTurns ?? defaults.concurrentTurns,
  };
}

const asLimit = (value: number | string | null): number | null => (value === null ? null : Number(value));

/** The limits set for an organization or a key (nulls where none is set). */
export async function readLimits(db: Executor, kind: LimitSubject, subjectId: string): Promise<Limits> {
  const row = await db
    .selectFrom('limits')
    .select(['requests_per_minute', 'concurrent_turns'])
    .where('kind', '=', kind)
    .where('subject_id', '=', subjectId)
    .executeTakeFirst();
  if (row === undefined) return NO_LIMITS;
  return { requestsPerMinute: asLimit(row.requests_per_minute), concurrentTurns: asLimit(row.concurrent_turns) };
}

/** Applies a change to the limits of an organization or key, recorded in the audit log; returns what is now set. */
export async function writeLimits(
  db: Executor,
  target: { kind: LimitSubject; subjectId: string; orgId: string },
  patch: LimitsPatch,
  change: { audit: AuditContext; clock: Clock },
): Promise<Limits> {
  const now = change.clock.now();
  return db.transaction().execute(async (trx) => {
    const current = await readLimits(trx, target.kind, target.subjectId);
    const next: Limits = {
      requestsPerMinute: patch.requestsPerMinute === undefined ? current.requestsPerMinute : patch.requestsPerMinute,
      concurrentTurns: patch.concurrentTurns === undefined ? current.concurrentTurns : patch.concurrentTurns,
    };
    const entry = {
      orgId: target.orgId,
      action: 'limits.updated',
      targetType: target.kind,
      targetId: target.subjectId,
      before: { ...current },
      after: { ...next },
    };
    await appendAudit(trx, change.audit, entry, change.clock);
    if (next.requestsPerMinute === null && next.concurrentTurns === null) {
      await trx
        .deleteFrom('limits')
        .where('kind', '=', target.kind)
        .where('subject_id', '=', target.subjectId)
        .execute();
      return next;
    }
    await trx
      .insertInto('limits')
      .values({
        kind: target.kind,
        subject_id: target.subjectId,
        org_id: target.orgId,
        requests_per_minute: next.requestsPerMinute,
        concurrent_turns: next.concurrentTurns,
        updated_at: now,
      })
      .onConflict((conflict) =>
        conflict.columns(['kind', 'subject_id']).doUpdateSet({
          requests_per_minute: next.requestsPerMinute,
          concurrent_turns: next.concurrentTurns,
          updated_at: now,
        }),
      )
      .execute();
    return next;
  });
}

/** Whether any organization or key has a limit of concurrent turns of its own. */
export async function anyTurnLimit(db: Executor): Promise<boolean> {
  const row = await db
    .selectFrom('limits')
    .select('subject_id')
    .where('concurrent_turns', 'is not', null)
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}
