/**
 * GET /v1/audit_log: who changed what in the organization (docs/audit-log.md). Read-only: the log is appended by
 * the changes themselves, and no route edits or deletes an entry.
 */
import type { Deps } from '../../deps.ts';
import { listAuditLog } from '../../domain/audit/audit-log.ts';
import { orgOf } from '../auth.ts';
import { AuditLogList, AuditLogQuery } from '../schemas/audit-log.ts';
import { errorResponses } from '../schemas/common.ts';
import type { App } from '../types.ts';

export function auditLogRoutes(app: App, deps: Deps): void {
  app.route({
    method: 'GET',
    url: '/v1/audit_log',
    config: { scopes: ['audit:read'] },
    schema: {
      summary: 'List the audit log',
      description:
        "Changes to the organization's keys, agents, connectors, webhooks, schedules, credits, approvals, memories and settings, newest first, with who made them (API key, CLI or system) and the request id; secrets are redacted. Filters: action (agent.updated, or agent / agent.* for every action on agents), target_type, target_id, actor (cli, system, api_key, a key id or prefix), since and until (Unix seconds, until exclusive). Pass last_id as after for the next page. Needs audit:read (accounts:write includes it).",
      tags: ['Audit log'],
      querystring: AuditLogQuery,
      response: { 200: AuditLogList, ...errorResponses(400, 401, 403) },
    },
    handler: async (request) => {
      const { limit = 20, after, action, target_type, target_id, actor, since, until } = request.query;
      const page = await listAuditLog(deps.storage.db, orgOf(request), {
        limit,
        ...(after === undefined ? {} : { after: after.toLowerCase() }),
        ...(action === undefined ? {} : { action }),
        ...(target_type === undefined ? {} : { targetType: target_type }),
        ...(target_id === undefined ? {} : { targetId: target_id }),
        ...(actor === undefined ? {} : { actor }),
        ...(since === undefined ? {} : { since: since * 1000 }),
        ...(until === undefined ? {} : { until: until * 1000 }),
      });
      // The organization is the key's own: entries do not repeat it.
      return { ...page, data: page.data.map(({ org_id: _org, ...entry }) => entry) };
    },
  });
}
