/**
 * The retention sweeper's part of the webhooks (docs/retention.md): an organization's delivery history older than
 * its retention. Attempts go, and so do ended manual deliveries (redeliveries); the automatic delivery of an event
 * to an endpoint stays, as the record that the event was assigned to it, so the event can still be redelivered
 * (the events themselves stay, as the spec says).
 */
import type { Executor } from '../../storage/db.ts';

/** Deletes up to `limit` attempts, then up to `limit` ended manual deliveries; resolves to the rows deleted. */
export async function deleteExpiredWebhookHistory(
  db: Executor,
  batch: { orgId: string; before: number; limit: number },
): Promise<number> {
  const { orgId, before, limit } = batch;
  const attempts = await db
    .deleteFrom('webhook_attempts')
    .where(
      'id',
      'in',
      db
        .selectFrom('webhook_attempts')
        .select('id')
        .where('org_id', '=', orgId)
        .where('attempted_at', '<', before)
        .orderBy('attempted_at')
        .limit(limit),
    )
    .executeTakeFirst();
  const deliveries = await db
    .deleteFrom('webhook_deliveries')
    .where(
      'id',
      'in',
      db
        .selectFrom('webhook_deliveries')
        .select('id')
        .where('org_id', '=', orgId)
        .where('completed_at', '<', before)
        .where('kind', '=', 'manual')
        .orderBy('completed_at')
        .limit(limit),
    )
    .executeTakeFirst();
  return Number(attempts.numDeletedRows) + Number(deliveries.numDeletedRows);
}
