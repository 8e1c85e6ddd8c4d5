/**
 * GET /v1/approvals: the tool calls of every session of the organization that wait for a decision (and the
 * decisions taken), for an inbox (docs/tools.md, "Approvals"). Decisions are sent on the session's answer route.
 */
import { Type } from 'typebox';
import type { Deps } from '../../deps.ts';
import { APPROVAL_STATUSES, listApprovals } from '../../domain/approvals/approval-list.ts';
import { orgOf } from '../auth.ts';
import { CursorList, errorResponses, StringEnum, Uuid } from '../schemas/common.ts';
import type { App } from '../types.ts';

const UnixSeconds = Type.Integer({ minimum: 0, description: 'Unix time in seconds' });
const NullableSeconds = Type.Union([UnixSeconds, Type.Null()]);
const APPROVAL_ID = '^mcpr_[0-9a-f]{32}$';

const Approval = Type.Object(
  {
    id: Type.String({ pattern: APPROVAL_ID, description: 'The approval id (mcpr_…), as on the required action' }),
    object: Type.Literal('tool_approval'),
    status: StringEnum(APPROVAL_STATUSES, 'pending: waits for a decision; approved or denied once decided'),
    agent_id: Uuid,
    agent_name: Type.String(),
    session_id: Uuid,
    session_title: Type.Union([Type.String(), Type.Null()]),
    message_id: Uuid,
    action_id: Type.Integer({
      description: 'The actionId to send on POST /v1/sessions/{id}/messages/{messageId}/answer',
    }),
    call_id: Type.String(),
    tool: Type.String({ description: 'The name the model called' }),
    server: Type.String({ description: 'The MCP server (its label) the tool belongs to' }),
    server_tool: Type.String({ description: "The tool's name on its server" }),
    arguments: Type.String({ description: 'The arguments, as the JSON text the model sent' }),
    reason: Type.Union([Type.String(), Type.Null()], { description: 'The reason given with the decision' }),
    decided_by: Type.Union([Type.String(), Type.Null()], {
      description: 'answer (the answer route), responses (an mcp_approval_response) or timeout',
    }),
    expires_at: Type.Union([UnixSeconds, Type.Null()], {
      description: "When a pending call is denied for want of a decision (the agent's timeoutSeconds); null: never",
    }),
    decided_at: NullableSeconds,
    created_at: UnixSeconds,
  },
  { additionalProperties: false },
);

const ApprovalList = CursorList(Approval, "The organization's tool approvals, newest first");

const ApprovalListQuery = Type.Object(
  {
    status: Type.Optional(StringEnum(APPROVAL_STATUSES, 'Only approvals in this status, e.g. pending')),
    limit: Type.Integer({ minimum: 1, maximum: 100, default: 20 }),
    after: Type.Optional(Type.String({ pattern: APPROVAL_ID, description: 'The last_id of the previous page' })),
  },
  { additionalProperties: false },
);

export function approvalRoutes(app: App, deps: Deps): void {
  app.route({
    method: 'GET',
    url: '/v1/approvals',
    config: { scopes: ['sessions:read'] },
    schema: {
      summary: 'List tool approvals',
      description:
        'Tool calls that needed approval in every session of the organization, newest first; status=pending lists those that wait for a decision. Decide one with POST /v1/sessions/{session_id}/messages/{message_id}/answer and {actionId: action_id, answer: {approved, reason?}}. Pass last_id as after while has_more is true.',
      tags: ['Sessions'],
      querystring: ApprovalListQuery,
      response: { 200: ApprovalList, ...errorResponses(400, 401, 403) },
    },
    handler: async (request) => {
      const { status, limit, after } = request.query;
      return listApprovals(deps.storage.db, orgOf(request), {
        limit,
        ...(status === undefined ? {} : { status }),
        ...(after === undefined ? {} : { after }),
      });
    },
  });
}
