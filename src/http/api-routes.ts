/**
 * Every route of the API, the console and the event streams: what app.ts registers for the `all` and `api` roles.
 * app.ts imports this module only for those roles, so a `worker` process, which serves the probes alone, never
 * loads the route modules, their schemas or what they
import (test/startup-imports.test.ts).
 */
import type { StreamHub } from '../bus/live-hub.ts';
import type { Deps } from '../deps.ts';
import { createAgentLimitHook } from './agent-limits.ts';
import type { Lifecycle } from './lifecycle.ts';
import { a2aRoutes } from './routes/a2a.ts';
import { adminRoutes } from './routes/admin.ts';
import { agentRoutes } from './routes/agents.ts';
import { approvalRoutes } from './routes/approvals.ts';
import { auditLogRoutes } from './routes/audit-log.ts';
import { builtinToolRoutes } from './routes/builtin-tools.ts';
import { chatCompletionRoutes } from './routes/chat-completions.ts';
import { consoleRoutes } from './routes/console.ts';
import { conversationRoutes } from './routes/conversations.ts';
import { fileRoutes } from './routes/files.ts';
import { legacyWebhookRoutes } from './routes/legacy-webhooks.ts';
import { mcpEndpointRoutes } from './routes/mcp-server.ts';
import { mcpServerRoutes } from './routes/mcp-servers.ts';
import { memoryRoutes } from './routes/memories.ts';
import { messageRoutes } from './routes/messages.ts';
import { modelRoutes } from './routes/models.ts';
import { organizationRoutes } from './routes/organization.ts';
import { reportRoutes } from './routes/reports.ts';
import { responseRoutes } from './routes/responses.ts';
import { retentionRoutes } from './routes/retention.ts';
import { runRoutes } from './routes/runs.ts';
import { scheduleRoutes } from './routes/schedules.ts';
import { sdkRoutes } from './routes/sdk.ts';
import { sdkFileRoutes } from './routes/sdk-files.ts';
import { sessionFollowUpRoutes } from './routes/session-followup.ts';
import { sessionRoutes } from './routes/sessions.ts';
import { streamRoutes } from './routes/stream.ts';
import { systemRoutes } from './routes/system.ts';
import { taskRoutes } from './routes/tasks.ts';
import { usageRoutes } from './routes/usage.ts';
import { webhookRoutes } from './routes/webhooks.ts';
import { workflowRunRoutes } from './routes/workflow-runs.ts';
import type { App } from './types.ts';

export function registerApiRoutes(app: App, deps: Deps, lifecycle: Lifecycle, hub: StreamHub): void {
  // Keys limited to named agents: before the routes, so that every one of them has the hooks.
  const agentLimits = createAgentLimitHook(deps);
  app.addHook('preValidation', agentLimits.check);
  app.addHook('preSerialization', agentLimits.filter);
  systemRoutes(app, deps, lifecycle);
  agentRoutes(app, deps);
  builtinToolRoutes(app, deps);
  memoryRoutes(app, deps);
  sessionRoutes(app, deps);
  messageRoutes(app, deps);
  approvalRoutes(app, deps);
  responseRoutes(app, deps);
  chatCompletionRoutes(app, deps);
  runRoutes(app, deps);
  fileRoutes(app, deps);
  conversationRoutes(app, deps);
  modelRoutes(app, deps);
  webhookRoutes(app, deps);
  mcpServerRoutes(app, deps);
  mcpEndpointRoutes(app, deps);
  reportRoutes(app, deps);
  scheduleRoutes(app, deps);
  sessionFollowUpRoutes(app, deps);
  organizationRoutes(app, deps);
  auditLogRoutes(app, deps);
  adminRoutes(app, deps);
  retentionRoutes(app, deps);
  taskRoutes(app, deps);
  a2aRoutes(app, deps);
  legacyWebhookRoutes(app, deps);
  sdkRoutes(app, deps);
  sdkFileRoutes(app, deps);
  workflowRunRoutes(app, deps);
  consoleRoutes(app);
  streamRoutes(app, deps, hub);
  usageRoutes(app, deps);
}
