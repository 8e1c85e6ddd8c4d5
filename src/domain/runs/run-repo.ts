/** Queries over runs and spans. Every read is scoped to the organization by the caller's run lookup. */
import type { Executor } from '../../storage/db.ts';
import type { RunRow, SpanRow } from '../../storage/schema.ts';
import type { RunCursor } from './cursor.ts';

export interface RunFilter {
  agentId?: string;
  sessionId?: string;
}

export function findRun(db: Executor, orgId: string, runId: string): Promise<RunRow | undefined> {
  return db.selectFrom('runs').selectAll().where('id', '=', runId).where('org_id', '=', orgId).executeTakeFirst();
}

export function findRunOfMessage(db: Executor, orgId: string, messageId: string): Promise<RunRow | undefined> {
  return db
    .selectFrom('runs')
    .selectAll()
    .where('message_id', '=', messageId)
    .where('org_id', '=', orgId)
    .executeTakeFirst();
}

/** Runs newest first, (created_at, id) descending, strictly after `after`; `limit` rows at most. */
export function listRuns(
  db: Executor,
  orgId: string,
  filter: RunFilter,
  after: RunCursor | null,
  limit: number,
): Promise<RunRow[]> {
  let query = db.selectFrom('runs').selectAll().where('org_id', '=', orgId);
  if (filter.agentId !== undefined) query = query.where('agent_id', '=', filter.agentId);
  if (filter.sessionId !== undefined) query = query.where('session_id', '=', filter.sessionId);
  if (after !== null) {
    query = query.where((eb) =>
      eb.or([
        eb('created_at', '<', after.created_at),
        eb.and([eb('created_at', '=', after.created_at), eb('id', '<', after.id)]),
      ]),
    );
  }
  return query.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(limit).execute();
}

/** Spans of a run in pre-order (seq), strictly after `afterSeq`; `limit` rows at most. */
export function listSpans(db: Executor, runId: string, afterSeq: number | null, limit: number): Promise<SpanRow[]> {
  let query = db.selectFrom('spans').selectAll().where('run_id', '=', runId);
  if (afterSeq !== null) query = query.where('seq', '>', afterSeq);
  return query.orderBy('seq').limit(limit).execute();
}
