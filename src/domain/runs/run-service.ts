/**
 * Runs and traces (spec 4.2): every executed Message has a Run, whatever surface started it; its trace is the
 * tree of agent steps, model calls and tool calls the engine recorded, read parent-first.
 */
import { notFound } from '../../errors/app-error.ts';
import type { Executor } from '../../storage/db.ts';
import type { RunRow } from '../../storage/schema.ts';
import { decodeRunCursor, decodeSpanCursor, encodeRunCursor, encodeSpanCursor } from './cursor.ts';
import { findRun, findRunOfMessage, listRuns, listSpans, type RunFilter } from './run-repo.ts';
import { type Page, type Run, responseIdOf, type Span } from './run-types.ts';
import { runFromRow, spanFromRow } from './run-view.ts';

export interface RunServiceDeps {
  db: Executor;
}

export interface PageRequest {
  limit: number;
  cursor?: string;
}

/** Splits `rows` (fetched with limit + 1) into a page and says whether more follow. */
function paginate<R, T>(rows: R[], limit: number, view: (row: R) => T, cursorOf: (row: R) => string): Page<T> {
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  const hasMore = rows.length > limit && last !== undefined;
  return {
    object: 'list',
    data: page.map(view),
    has_more: hasMore,
    next_cursor: hasMore ? cursorOf(last) : null,
  };
}

export function createRunService(deps: RunServiceDeps) {
  const { db } = deps;

  /** The cursor is checked before the run is looked up: a malformed request is a 400 whoever owns the run. */
  async function trace(lookup: () => Promise<RunRow>, page: PageRequest): Promise<Page<Span>> {
    const after = page.cursor === undefined ? null : decodeSpanCursor(page.cursor).seq;
    const run = await lookup();
    const rows = await listSpans(db, run.id, after, page.limit + 1);
    return paginate(rows, page.limit, spanFromRow, (row) => encodeSpanCursor({ seq: row.seq }));
  }

  return {
    /** Runs of the organization, newest first, optionally of one agent or one conversation. */
    async list(orgId: string, filter: RunFilter, page: PageRequest): Promise<Page<Run>> {
      const after = page.cursor === undefined ? null : decodeRunCursor(page.cursor);
      const rows = await listRuns(db, orgId, filter, after, page.limit + 1);
      return paginate(rows, page.limit, runFromRow, (row) =>
        encodeRunCursor({ created_at: row.created_at, id: row.id }),
      );
    },

    async get(orgId: string, runId: string): Promise<Run> {
      const row = await findRun(db, orgId, runId);
      if (row === undefined) throw notFound('run', runId);
      return runFromRow(row);
    },

    /** A page of the run's spans, parent-first. */
    async trace(orgId: string, runId: string, page: PageRequest): Promise<Page<Span>> {
      return trace(async () => {
        const run = await findRun(db, orgId, runId);
        if (run === undefined) throw notFound('run', runId);
        return run;
      }, page);
    },

    /** The trace of the run of a Response (= the run of its Message). */
    async responseTrace(orgId: string, messageId: string, page: PageRequest): Promise<Page<Span>> {
      return trace(async () => {
        const run = await findRunOfMessage(db, orgId, messageId);
        if (run === undefined) throw notFound('response', responseIdOf(messageId));
        return run;
      }, page);
    },
  };
}

export type RunService = ReturnType<typeof createRunService>;
