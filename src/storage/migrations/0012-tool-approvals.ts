import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

/**
 * Approval of tool calls (docs/tools.md, "Approvals"). `agents.tool_approvals` holds the agent's policy (JSON, null
 * for the default: every call runs without asking). `tool_approvals` holds one row per call that needed approval:
 * the exact call that was shown (tool, server, arguments), its one decision (`pending` → `approved` | `denied`,
 * changed only by a conditional update, so a decision is taken once), the optional deadline after which it is
 * denied, and when an approved call was started (set once, before it runs, so it never runs twice).
 */
export const toolApprovals: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema.alterTable('agents').addColumn('tool_approvals', 'text').execute();
    await db.schema
      .createTable('tool_approvals')
      // `mcpr_` + 32 hex digits: also the `approval_request_id` of the Responses surface.
      .addColumn('id', 'text', (col) => col.primaryKey())
      .addColumn('org_id', 'text', (col) => col.notNull())
      .addColumn('session_id', 'text', (col) => col.notNull().references('sessions.id').onDelete('cascade'))
      .addColumn('message_id', 'text', (col) => col.notNull())
      .addColumn('call_id', 'text', (col) => col.notNull())
      .addColumn('action_id', 'integer', (col) => col.notNull())
      // The exposed tool name, the server's label and the tool's name there, and the arguments as called.
      .addColumn('tool', 'text', (col) => col.notNull())
      .addColumn('server_label', 'text', (col) => col.notNull())
      .addColumn('server_tool', 'text', (col) => col.notNull())
      .addColumn('arguments', 'text', (col) => col.notNull())
      .addColumn('status', 'text', (col) => col.notNull())
      .addColumn('reason', 'text')
      // answer (the answer route), responses (an mcp_approval_response), timeout.
      .addColumn('decided_by', 'text')
      .addColumn('expires_at', 'bigint')
      .addColumn('decided_at', 'bigint')
      .addColumn('started_at', 'bigint')
      .addColumn('created_at', 'bigint', (col) => col.notNull())
      .addUniqueConstraint('tool_approvals_call', ['message_id', 'call_id'])
      .execute();
    await db.schema.createIndex('tool_approvals_due').on('tool_approvals').columns(['status', 'expires_at']).execute();
    await db.schema.createIndex('tool_approvals_session').on('tool_approvals').column('session_id').execute();
  },
};
