/** Names for the API shapes the console uses, all derived from the generated OpenAPI types. */
import type { paths } from './schema';

type JsonOf<R> = R extends { content: { 'application/json': infer B } } ? B : never;
type Ok<Op> = Op extends { responses: infer R }
  ? R extends { 200: infer A }
    ? JsonOf<A>
    : R extends { 201: infer C }
      ? JsonOf<C>
      : R extends { 202: infer D }
        ? JsonOf<D>
        : never
  : never;
type Body<Op> = Op extends { requestBody?: { content: { 'application/json': infer B } } } ? B : never;

export type Organization = Ok<paths['/v1/organization']['get']>;
export type Scope = Organization['api_key']['scopes'][number];

export type Agent = Ok<paths['/v1/agents/{id}']['get']>['agent'];
export type AgentCreate = Body<paths['/v1/agents']['post']>;
export type AgentUpdate = Body<paths['/v1/agents/{id}']['patch']>;
export type McpServerEntry = Agent['mcpServers'][number];
export type ClientTool = Agent['clientTools'][number];
export type InternalToolName = Extract<McpServerEntry, { kind: 'internal' }>['name'];
export type Memory = Ok<paths['/v1/agents/{id}/memories/{memoryId}']['get']>;
export type NetworkPolicy = NonNullable<Agent['networkPolicy']>;
export type NetworkPolicyInput = NonNullable<AgentCreate['networkPolicy']>;
export type ToolApprovals = Agent['toolApprovals'];
export type ApprovalMode = ToolApprovals['default'];

export type Session = Ok<paths['/v1/sessions/{id}']['get']>['session'];
export type Message = Ok<paths['/v1/sessions/{id}/messages/{messageId}']['get']>['message'];
export type RequiredAction = Message['requiredActions'][number];

export type Run = Ok<paths['/v1/runs/{id}']['get']>;
export type Span = Ok<paths['/v1/runs/{id}/trace']['get']>['data'][number];
export type UsageList = Ok<paths['/v1/usage']['get']>;
export type UsageGroup = UsageList['data'][number];

export type WebhookEndpoint = Ok<paths['/v1/webhook_endpoints/{id}']['get']>;
export type WebhookEvent = Ok<paths['/v1/webhook_endpoints/{id}/events']['get']>['data'][number];
export type WebhookDelivery = Ok<paths['/v1/webhook_endpoints/{id}/events/{event_id}/delivery']['get']>;

export type FileObject = Ok<paths['/v1/files/{id}']['get']>;
export type McpServer = Ok<paths['/v1/mcp_servers/{id}']['get']>;

export type Schedule = Ok<paths['/v1/schedules/{id}']['get']>;
export type ScheduleCreate = Body<paths['/v1/schedules']['post']>;
export type ScheduleRun = Ok<paths['/v1/schedules/{schedule_id}/runs/{id}']['get']>;
export type Approval = Ok<paths['/v1/approvals']['get']>['data'][number];
export type AuditEntry = Ok<paths['/v1/audit_log']['get']>['data'][number];
export type Retention = Ok<paths['/v1/organization/retention']['get']>;
export type AgentBudget = Agent['budget'];
