/**
 * Data retention (docs/retention.md): how many days each organization keeps its sessions, runs and traces,
 * session events, files and webhook delivery history, and the sweeper that deletes what is older, in small
 * batches, each its own short statement or transaction, so the turn path never waits long on it.
 *
 * An organization's own setting per kind: null follows the deployment's default (AGENTRY_RETENTION_*_DAYS), 0
 * keeps forever, n > 0 keeps n days. What is kept: sessions by their last change (`updated_at`; a session with a
 * turn in progress, waiting for input or queued is kept until that is over), runs by creation (ended runs only),
 * session events, files and webhook attempts by when they were written.
 *
 * Several processes may sweep at once (every process that runs background jobs does): each delete picks its rows
 * and deletes them in one statement or transaction, so two sweepers at most both find nothing left to do.
 */

import type { Logger } from 'pino';
import { RETENTION_KINDS, type RetentionDays, type RetentionKind } from '../../config.ts';
import type { Clock } from '../../lib/clock.ts';
import type { Executor } from '../../storage/db.ts';
import type { OrgRetentionTable } from '../../storage/schema.ts';
import { type AuditContext, appendAudit, CLI_AUDIT } from '../audit/audit-log.ts';
import { deleteExpiredFiles } from '../files/file-retention.ts';
import { deleteExpiredRuns, deleteExpiredSessionEvents, deleteExpiredSessions } from '../turns/retention.ts';
import { deleteExpiredWebhookHistory } from '../webhooks/webhook-retention.ts';

const DAY_MS = 86_400_000;

/** The column of `org_retention` that holds each kind. */
const COLUMNS = {
  sessions: 'sessions_days',
  runs: 'runs_days',
  sessionEvents: 'session_events_days',
  files: 'files_days',
  webhooks: 'webhooks_days',
} as const satisfies Record<RetentionKind, keyof OrgRetentionTable>;

/** An organization's own settings: per kind, null (the default), 0 (forever) or days. */
export type RetentionSettings = Record<RetentionKind, number | null>;

export interface OrgRetention {
  orgId: string;
  /** What the organization set. */
  own: RetentionSettings;
  /** What applies: days, or null to keep forever. */
  effective: RetentionDays;
}

export interface RetentionDeps {
  db: Executor;
  clock: Clock;
  logger: Logger;
  /** The deployment's defaults (config.retention). */
  defaults: RetentionDays;
  /** Where the files folder is (`<dataDir>/files`). */
  dataDir: string;
  /** Rows per batch (AGENTRY_RETENTION_BATCH). */
  batch: number;
  /** Told the counts of each sweep (the metrics). */
  onSweep?: (counts: SweepCounts) => void;
}

/** Rows deleted by one sweep, per kind. */
export type SweepCounts = Record<RetentionKind, number>;

const noSettings = (): RetentionSettings => ({
  sessions: null,
  runs: null,
  sessionEvents: null,
  files: null,
  webhooks: null,
});

function ownOf(row: Partial<Record<(typeof COLUMNS)[RetentionKind], number | null>> | undefined): RetentionSettings {
  const own = noSettings();
  if (row === undefined) return own;
  for (const kind of RETENTION_KINDS) own[kind] = row[COLUMNS[kind]] ?? null;
  return own;
}

export function createRetentionService(deps: RetentionDeps) {
  const { db } = deps;

  function effectiveOf(own: RetentionSettings): RetentionDays {
    const effective = { ...deps.defaults };
    for (const kind of RETENTION_KINDS) {
      const value = own[kind];
      if (value !== null) effective[kind] = value === 0 ? null : value;
    }
    return effective;
  }

  async function get(orgId: string): Promise<OrgRetention> {
    const row = await db.selectFrom('org_retention').selectAll().where('org_id', '=', orgId).executeTakeFirst();
    const own = ownOf(row);
    return { orgId, own, effective: effectiveOf(own) };
  }

  /** The deletes of one kind, one batch each; each resolves to the rows it deleted. */
  const deleters: Record<RetentionKind, (batch: { orgId: string; before: number; limit: number }) => Promise<number>> =
    {
      sessions: (batch) => deleteExpiredSessions(db, { ...batch, now: deps.clock.now() }),
      runs: (batch) => deleteExpiredRuns(db, batch),
      sessionEvents: (batch) => deleteExpiredSessionEvents(db, batch),
      files: (batch) => deleteExpiredFiles(db, deps.dataDir, batch),
      webhooks: (batch) => deleteExpiredWebhookHistory(db, batch),
    };

  let sweeping: Promise<SweepCounts> | null = null;
  let stopped = false;

  async function sweepOnce(): Promise<SweepCounts> {
    const started = deps.clock.now();
    const counts: SweepCounts = { sessions: 0, runs: 0, sessionEvents: 0, files: 0, webhooks: 0 };
    const orgs = await db
      .selectFrom('orgs')
      .leftJoin('org_retention', 'org_retention.org_id', 'orgs.id')
      .select(['orgs.id as orgId', ...Object.values(COLUMNS).map((column) => `org_retention.${column}` as const)])
      .orderBy('orgs.id')
      .execute();
    let batches = 0;
    for (const org of orgs) {
      const effective = effectiveOf(ownOf(org));
      for (const kind of RETENTION_KINDS) {
        const days = effective[kind];
        if (days === null) continue;
        const before = deps.clock.now() - days * DAY_MS;
        for (;;) {
          if (stopped) return counts;
          const deleted = await deleters[kind]({ orgId: org.orgId, before, limit: deps.batch });
          batches += 1;
          counts[kind] += deleted;
          if (deleted === 0) break;
          // Between batches, the turns and requests of this process go first.
          await new Promise((resolve) => setImmediate(resolve));
        }
      }
    }
    const total = RETENTION_KINDS.reduce((sum, kind) => sum + counts[kind], 0);
    const log = { deleted: counts, batches, orgs: orgs.length, durationMs: deps.clock.now() - started };
    deps.onSweep?.(counts);
    if (total > 0) deps.logger.info(log, `retention sweep deleted ${total} rows`);
    else deps.logger.debug(log, 'retention sweep: nothing past its retention');
    return counts;
  }

  return {
    get,

    /**
     * Changes the organization's settings: each kind given is set (null: back to the default, 0: forever, n:
     * days); the others stay. Resolves to the settings after the change.
     */
    async update(
      orgId: string,
      change: Partial<RetentionSettings>,
      audit: AuditContext = CLI_AUDIT,
    ): Promise<OrgRetention> {
      const before = (await get(orgId)).own;
      const own = { ...before, ...change };
      const row = {
        org_id: orgId,
        sessions_days: own.sessions,
        runs_days: own.runs,
        session_events_days: own.sessionEvents,
        files_days: own.files,
        webhooks_days: own.webhooks,
        updated_at: deps.clock.now(),
      };
      const { org_id: _, ...columns } = row;
      await db.transaction().execute(async (trx) => {
        await trx
          .insertInto('org_retention')
          .values(row)
          .onConflict((conflict) => conflict.column('org_id').doUpdateSet(columns))
          .execute();
        await appendAudit(
          trx,
          audit,
          {
            orgId,
            action: 'organization.retention_updated',
            targetType: 'organization',
            targetId: orgId,
            before: { ...before },
            after: { ...own },
          },
          deps.clock,
        );
      });
      return get(orgId);
    },

    /**
     * Deletes everything past its organization's retention, batch after batch, and resolves to the counts. A sweep
     * asked for while one runs in this process joins it.
     */
    sweep(): Promise<SweepCounts> {
      sweeping ??= sweepOnce().finally(() => {
        sweeping = null;
      });
      return sweeping;
    },

    /** Ends a sweep in progress after its current batch. */
    async stop(): Promise<void> {
      stopped = true;
      await sweeping?.catch(() => undefined);
    },
  };
}

export type RetentionService = ReturnType<typeof createRetentionService>;
