/**
 * Rows of `engine_processes`: one per live engine process, kept alive by its heartbeat. A session leased by a
 * process whose row has lapsed is claimable at once (claims.ts); engine/process-registry.ts keeps the heartbeat.
 */
import type { Executor } from '../../storage/db.ts';

export interface EngineProcess {
  id: string;
  role: string;
  /** How many turns it runs at once (0: it runs none). */
  slots: number;
}

/** Writes (or revives) the process's row, alive until `now + ttlMs`. */
export async function registerProcess(db: Executor, process: EngineProcess, now: number, ttlMs: number): Promise<void> {
  await db
    .insertInto('engine_processes')
    .values({
      id: process.id,
      role: process.role,
      slots: process.slots,
      started_at: now,
      heartbeat_at: now,
      expires_at: now + ttlMs,
    })
    .onConflict((oc) => oc.column('id').doUpdateSet({ heartbeat_at: now, expires_at: now + ttlMs }))
    .execute();
}

/** Extends the row; false when it is gone (pruned while the process was frozen). */
export async function heartbeatProcess(db: Executor, id: string, now: number, ttlMs: number): Promise<boolean> {
  const result = await db
    .updateTable('engine_processes')
    .set({ heartbeat_at: now, expires_at: now + ttlMs })
    .where('id', '=', id)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

/** Deletes rows that lapsed before `before`. */
export async function pruneProcesses(db: Executor, before: number): Promise<void> {
  await db.deleteFrom('engine_processes').where('expires_at', '<', before).execute();
}

export async function removeProcess(db: Executor, id: string): Promise<void> {
  await db.deleteFrom('engine_processes').where('id', '=', id).execute();
}
