/** An agent's stored versions as the API shows them: the newest-first list and one version with its diff. */

import { notFound, validationError } from '../../errors/app-error.ts';
import { iso } from '../../lib/clock.ts';
import { jsonDiff } from '../../lib/json-diff.ts';
import type { Executor } from '../../storage/db.ts';
import { type AgentVersionRecord, findAgentVersionRecord, listAgentVersions } from './agent-repo.ts';
import type { AgentVersionPage, AgentVersionView } from './agent-types.ts';

/** A `cursor` of the versions list: the last version of the previous page. */
function versionCursor(cursor: string): number {
  if (!/^[1-9][0-9]{0,9}$/.test(cursor)) throw validationError('cursor', 'cursor must be the next_cursor of a page');
  return Number(cursor);
}

function versionView(agentId: string, record: AgentVersionRecord): AgentVersionView {
  return {
    object: 'agent.version',
    agentId,
    version: record.version,
    actor: record.actor,
    createdAt: iso(record.createdAt),
    config: record.config,
  };
}

/** The agent's versions, newest first (GET /v1/agents/{id}/versions). */
export async function listVersions(
  db: Executor,
  id: string,
  page: { limit: number; cursor?: string },
): Promise<AgentVersionPage> {
  const before = page.cursor === undefined ? undefined : versionCursor(page.cursor);
  const rows = await listAgentVersions(db, id, {
    limit: page.limit + 1,
    ...(before === undefined ? {} : { before }),
  });
  const data = rows.slice(0, page.limit).map((row) => versionView(id, row));
  const hasMore = rows.length > page.limit;
  const last = data.at(-1);
  return {
    object: 'list',
    data,
    has_more: hasMore,
    next_cursor: hasMore && last !== undefined ? String(last.version) : null,
  };
}

/**
 * One version of the agent; with `diffFrom`, also what changed from that version to this one (JSON-pointer paths
 * into the config).
 */
export async function readVersion(
  db: Executor,
  id: string,
  version: number,
  diffFrom?: number,
): Promise<AgentVersionView> {
  const record = await findAgentVersionRecord(db, id, version);
  if (record === undefined) throw notFound('agent version', `${id}@${version}`);
  const view = versionView(id, record);
  if (diffFrom === undefined) return view;
  const from = await findAgentVersionRecord(db, id, diffFrom);
  if (from === undefined) throw validationError('diff_from', `agent ${id} has no version ${diffFrom}`);
  return { ...view, diff: { from: diffFrom, changes: jsonDiff(from.config, record.config) } };
}
