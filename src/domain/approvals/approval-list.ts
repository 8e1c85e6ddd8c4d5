/**
 * The organization's tool approvals across its sessions (GET /v1/approvals; docs/tools.md, "Approvals"): an inbox of
 * the calls that wait for a decision, and the decisions taken. Read-only: approvals.ts is the one writer.
 */
import { unixSeconds } from '../../lib/clock.ts';
import type { Executor } from '../../storage/db.ts';
import type { ToolApprovalsTable } from '../../storage/schema.ts';
import { type CursorPage, type CursorQuery, newestFirstPage } from '../pagination.ts';

export const APPROVAL_STATUSES = [
  'pending',
  'approved',
  'denied',
] as const satisfies readonly ToolApprovalsTable['status'][];
export type ApprovalStatus = (typeof APPROVAL_STATUSES)[number];

export interface ApprovalView {
  id: string;
  object: 'tool_approval';
  status: ApprovalStatus;
  agent_id: string;
  agent_name: string;
  session_id: string;
  session_title: string | null;
  message_id: string;
  action_id: number;
  call_id: string;
  tool: string;
  server: string;
  server_tool: string;
  arguments: string;
  reason: string | null;
  decided_by: string | null;
  expires_at: number | null;
  decided_at: number | null;
  created_at: number;
}

export interface ApprovalListQuery extends CursorQuery {
  status?: ApprovalStatus;
}

const seconds = (ms: number | null) => (ms === null ? null : unixSeconds(Number(ms)));

/** One page of the organization's approvals, newest first, optionally of one status. */
export async function listApprovals(
  db: Executor,
  orgId: string,
  query: ApprovalListQuery,
): Promise<CursorPage<ApprovalView>> {
  let select = db
    .selectFrom('tool_approvals as t')
    .innerJoin('sessions as s', 's.id', 't.session_id')
    .innerJoin('agents as a', 'a.id', 's.agent_id')
    .selectAll('t')
    .select(['a.id as agent_id', 'a.name as agent_name', 's.title as session_title'])
    .where('t.org_id', '=', orgId);
  if (query.status !== undefined) select = select.where('t.status', '=', query.status);
  return newestFirstPage(
    select,
    query.after === undefined ? { limit: query.limit } : { limit: query.limit, after: query.after },
    {
      createdAt: 't.created_at',
      id: 't.id',
      anchor: async (after) => {
        const row = await db
          .selectFrom('tool_approvals')
          .select(['id', 'created_at'])
          .where('id', '=', after)
          .where('org_id', '=', orgId)
          .executeTakeFirst();
        return row === undefined ? undefined : { id: row.id, created_at: Number(row.created_at) };
      },
      unknownAfter: (after) => `after names no approval of this organization: ${after}`,
      view: (row): ApprovalView => ({
        id: row.id,
        object: 'tool_approval',
        status: row.status,
        agent_id: row.agent_id,
        agent_name: row.agent_name,
        session_id: row.session_id,
        session_title: row.session_title,
        message_id: row.message_id,
        action_id: row.action_id,
        call_id: row.call_id,
        tool: row.tool,
        server: row.server_label,
        server_tool: row.server_tool,
        arguments: row.arguments,
        reason: row.reason,
        decided_by: row.decided_by,
        expires_at: seconds(row.expires_at),
        decided_at: seconds(row.decided_at),
        created_at: unixSeconds(Number(row.created_at)),
      }),
    },
  );
}
