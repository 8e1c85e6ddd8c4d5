/**
 * Table types as Kysely sees them. Both dialects store the same column types: text ids, integer epoch
 * milliseconds for times, integer 0/1 for flags and JSON as text, so every query is identical on both.
 */
import type { ColumnType, Insertable, Selectable, Updateable } from 'kysely';
import type {
  CatchUpPolicy,
  DeliveryKind,
  DeliveryStatus,
  LimitSubject,
  MessageStatus,
  OverlapPolicy,
  RunSource,
  RunTrigger,
  ScheduleRunStatus,
  SessionStatus,
  SpanKind,
  SpanStatus,
  TaskNotifiedState,
  ThreadRole,
} from './column-values.ts';

type Millis = number;

export interface OrgsTable {
  id: string;
  name: string;
  project_id: number;
  /** Credit balance in millionths of a USD; null means unlimited. */
  credit_balance_micros: number | null;
  created_at: Millis;
}

export interface ApiKeysTable {
  id: string;
  org_id: string;
  prefix: string;
  key_hash: string;
  scopes: string;
  name: string | null;
  created_at: Millis;
  expires_at: Millis | null;
  revoked_at: Millis | null;
  /** Responses validation mode of this key: auto | strict | openai; null follows AGENTRY_RESPONSES_COMPAT. */
  compat: ColumnType<string | null, string | null | undefined, string | null>;
  last_used_at: Millis | null;
  /** JSON array of the agent ids the key is limited to (migration 0035); null: every agent of its organization. */
  agent_ids: ColumnType<string | null, string | null | undefined, string | null>;
}

/** An organization's retention in days per kind of data: null follows the deployment's default, 0 keeps forever. */
export interface OrgRetentionTable {
  org_id: string;
  sessions_days: number | null;
  runs_days: number | null;
  session_events_days: number | null;
  files_days: number | null;
  webhooks_days: number | null;
  updated_at: Millis;
}

export interface AgentsTable {
  id: string;
  org_id: string;
  name: string;
  description: string | null;
  instructions: string;
  model: string;
  max_steps: number;
  mcp_servers: string;
  client_tools: string;
  skills: string;
  network_policy: string | null;
  /** JSON ToolApprovals, or null for the default policy. */
  tool_approvals: string | null;
  /** JSON ResponseFormat of the agent's replies, or null for free text. */
  output_format: ColumnType<string | null, string | null | undefined, string | null>;
  /** How turns keep their context within the model's window (`truncation`, `none`); null in older rows: truncation. */
  context_policy: ColumnType<string | null, string | null | undefined, string | null>;
  compact_threshold: ColumnType<number | null, number | null | undefined, number | null>;
  /** The agent's spend cap in micro-dollars (migration 0032, docs/budgets.md); null: none. Not versioned. */
  budget_limit_micros: ColumnType<number | null, number | null | undefined, number | null>;
  /** `month` (calendar month, UTC) or `lifetime`; null when there is no cap. */
  budget_period: ColumnType<string | null, string | null | undefined, string | null>;
  is_default: number;
  version: number;
  workspace_provisioned_at: Millis | null;
  created_at: Millis;
  updated_at: Millis;
}

export interface AgentVersionsTable {
  agent_id: string;
  version: number;
  config: string;
  created_at: Millis;
  /** Who made the version: the API key's prefix, or `cli`; null for versions written before actors were kept. */
  actor: ColumnType<string | null, string | null | undefined, never>;
}

export interface SessionsTable {
  id: string;
  org_id: string;
  /** Null for a Conversation created without an agent, until its first Response fixes one. */
  agent_id: string | null;
  title: string | null;
  status: SessionStatus;
  created_at: Millis;
  updated_at: Millis;
  work_pending: ColumnType<number, number | undefined, number>;
  work_version: ColumnType<number, number | undefined, number>;
  lease_owner: ColumnType<string | null, string | null | undefined, string | null>;
  lease_expires_at: ColumnType<Millis | null, Millis | null | undefined, Millis | null>;
  lease_token: ColumnType<number, number | undefined, number>;
  /** JSON object of strings: the Conversation's metadata; null means {}. */
  metadata: ColumnType<string | null, string | null | undefined, string | null>;
  /** 1 for the workspace Session of legacy Tasks: not listed or readable through the Sessions API. */
  hidden: ColumnType<number, number | undefined, number>;
  /** The agent version every turn of the session runs; null follows the latest. */
  agent_version: ColumnType<number | null, number | null | undefined, number | null>;
  /** The end user the session serves (migration 0029); null when none was named. */
  end_user: ColumnType<string | null, string | null | undefined, string | null>;
  /** The API key that submitted the pending work (migration 0031), for its limit of concurrent turns; null: none. */
  turn_key_id: ColumnType<string | null, string | null | undefined, string | null>;
  /** The session's lifetime spend cap in micro-dollars (migration 0032); null: none. */
  budget_limit_micros: ColumnType<number | null, number | null | undefined, number | null>;
}

export interface MessagesTable {
  id: string;
  org_id: string;
  session_id: string;
  seq: number;
  status: MessageStatus;
  /** JSON: the submitted parts. */
  parts: string;
  response_text: string | null;
  /** JSON {code, message} when failed or cancelled. */
  error: string | null;
  input_tokens: number;
  /** Of input_tokens, those read from the provider's prompt cache. */
  cached_input_tokens: ColumnType<number, number | undefined, number>;
  output_tokens: number;
  cost_micros: number;
  step_count: number;
  cancel_requested: number;
  agent_id: string;
  agent_version: number | null;
  run_id: string;
  source: RunSource;
  created_at: Millis;
  started_at: Millis | null;
  completed_at: Millis | null;
  updated_at: Millis;
  /** JSON MessageOptions (Responses compatibility mode), or null. */
  options: ColumnType<string | null, string | null | undefined, string | null>;
  /** When DELETE /v1/responses/{id} removed the Response (its message and items stay in the session). */
  deleted_at: ColumnType<number | null, number | null | undefined, number | null>;
  /** W3C traceparent of the submitting request (or of its HTTP server span when tracing is on), or null. */
  traceparent: ColumnType<string | null, string | null | undefined, string | null>;
  /** JSON Warning[] (message-types.ts): what the acceptance noted and what the turn gave up; null when none. */
  warnings: ColumnType<string | null, string | null | undefined, string | null>;
}

export interface RunsTable {
  id: string;
  org_id: string;
  agent_id: string;
  session_id: string;
  message_id: string;
  source: RunSource;
  status: MessageStatus;
  model: string;
  agent_version: number | null;
  input_preview: string;
  output_preview: string | null;
  input_tokens: number;
  /** Of input_tokens, those read from the provider's prompt cache. */
  cached_input_tokens: ColumnType<number, number | undefined, number>;
  output_tokens: number;
  cost_micros: number;
  error: string | null;
  created_at: Millis;
  started_at: Millis | null;
  completed_at: Millis | null;
  /** When the ended run was exported as OpenTelemetry spans (null: not yet, or tracing is off). */
  exported_at: ColumnType<number | null, number | null | undefined, number | null>;
  /** The warnings of its message (messages.warnings), kept with the run. */
  warnings: ColumnType<string | null, string | null | undefined, string | null>;
  /** The API key whose request submitted the turn; null for scheduled turns and runs older than migration 0033. */
  api_key_id: ColumnType<string | null, string | null | undefined, never>;
  /** Its session's end user when the turn was accepted (runs outlive sessions); null when the session names none. */
  end_user: ColumnType<string | null, string | null | undefined, never>;
}

export interface SpansTable {
  id: string;
  org_id: string;
  run_id: string;
  parent_id: string | null;
  kind: SpanKind;
  name: string;
  status: SpanStatus;
  /** Pre-order position within the run: a parent always precedes its children. */
  seq: number;
  started_at: Millis;
  ended_at: Millis | null;
  input_preview: string | null;
  output_preview: string | null;
  input_tokens: number;
  output_tokens: number;
  cost_micros: number;
  /** JSON object; its keys depend on `kind` (see docs/runs.md). */
  attributes: string;
}

export interface ItemsTable {
  id: string;
  org_id: string;
  session_id: string;
  message_id: string;
  seq: number;
  step: number;
  type: string;
  call_id: string | null;
  /** JSON payload; its shape depends on `type` (see domain/turns/items.ts). */
  content: string;
  created_at: Millis;
}

export interface SessionEventsTable {
  id: string;
  session_id: string;
  seq: number;
  kind: string;
  message_id: string | null;
  run_id: string | null;
  data: string;
  created_at: Millis;
}

export interface WebhookEventsTable {
  id: string;
  org_id: string;
  type: string;
  data: string;
  created_at: Millis;
  dispatched_at: Millis | null;
  /** W3C traceparent naming the turn's invoke_agent span, sent with each delivery; null outside a traced turn. */
  traceparent: ColumnType<string | null, string | null | undefined, string | null>;
}

export interface WebhookEndpointsTable {
  id: string;
  org_id: string;
  name: string;
  url: string;
  /** JSON array of event type names. */
  event_types: string;
  /** The whsec_… signing secret, encrypted (lib/secret-box.ts); never logged, returned only by create and rotate. */
  sealed_secret: string;
  /** What reads show of the secret: `whsec_…` and its last four characters. */
  secret_hint: string;
  created_at: Millis;
  updated_at: Millis;
  deleted_at: Millis | null;
}

export interface WebhookDeliveriesTable {
  id: string;
  org_id: string;
  endpoint_id: string;
  event_id: string;
  webhook_id: string;
  kind: DeliveryKind;
  /** '' for the automatic or test delivery; the Idempotency-Key of a manual one. */
  replay_key: string;
  status: DeliveryStatus;
  attempts: ColumnType<number, number | undefined, number>;
  status_code: number | null;
  /** JSON {code, message}. */
  error: string | null;
  created_at: Millis;
  updated_at: Millis;
  next_attempt_at: Millis | null;
  deadline_at: Millis;
  last_attempt_at: Millis | null;
  completed_at: Millis | null;
  lease_owner: ColumnType<string | null, string | null | undefined, string | null>;
  lease_expires_at: ColumnType<Millis | null, Millis | null | undefined, Millis | null>;
  lease_token: ColumnType<number, number | undefined, number>;
}

export interface WebhookAttemptsTable {
  id: string;
  delivery_id: string;
  org_id: string;
  attempted_at: Millis;
  webhook_timestamp: number;
  url: string;
  status_code: number | null;
  error: string | null;
  duration_ms: number;
}

export interface A2aPushConfigsTable {
  id: string;
  org_id: string;
  /** The A2A task: a message id. */
  task_id: string;
  session_id: string;
  agent_id: string;
  /** The address the config was set through: notifications' report URLs are built on it. */
  base_url: string;
  /** The A2A config id, unique per task. */
  config_id: string;
  url: string;
  /** Sealed (lib/secret-box.ts); sent as X-A2A-Notification-Token. */
  sealed_token: string | null;
  /** `Bearer` when the config carries authentication. */
  auth_scheme: string | null;
  sealed_credentials: string | null;
  /** The task status last turned into a notification. */
  notified_status: string;
  seq: ColumnType<number, number | undefined, number>;
  /** 1 once the task ended and its end was notified. */
  done: ColumnType<number, number | undefined, number>;
  created_at: Millis;
  deleted_at: Millis | null;
}

export interface A2aPushDeliveriesTable {
  id: string;
  org_id: string;
  config_id: string;
  seq: number;
  task_status: string;
  /** The notification body, fixed when the state change was noticed. */
  body: string;
  status: DeliveryStatus;
  attempts: ColumnType<number, number | undefined, number>;
  status_code: number | null;
  error: string | null;
  created_at: Millis;
  updated_at: Millis;
  next_attempt_at: Millis | null;
  deadline_at: Millis;
  last_attempt_at: Millis | null;
  completed_at: Millis | null;
  lease_owner: ColumnType<string | null, string | null | undefined, string | null>;
  lease_expires_at: ColumnType<Millis | null, Millis | null | undefined, Millis | null>;
  lease_token: ColumnType<number, number | undefined, number>;
}

export interface FilesTable {
  id: string;
  org_id: string;
  filename: string;
  /** Lower-case `type/subtype`, without parameters. */
  media_type: string;
  bytes: number;
  /** Hex SHA-256 of the content. */
  sha256: string;
  purpose: string;
  /** Path of the content below `<AGENTRY_DATA_DIR>/files`: `<org id>/<file id>`. */
  storage_key: string;
  created_at: Millis;
  deleted_at: Millis | null;
}

export interface McpServersTable {
  id: string;
  org_id: string;
  name: string;
  url: string;
  /** Encrypted JSON header map (lib/secret-box.ts); never logged, never returned. */
  headers: string | null;
  /** JSON array of header names. */
  header_names: string;
  protocol: string | null;
  /** JSON array of listed tools. */
  tools: string | null;
  tools_fetched_at: Millis | null;
  tools_ttl_ms: number | null;
  /** JSON {code, message}. */
  last_error: string | null;
  /** `none` | `oauth` (migration 0028). */
  auth: ColumnType<string, string | undefined, string>;
  /** Sealed JSON OAuth client {client_id, client_secret?, issuer?, registered?}; never returned. */
  oauth_client: ColumnType<string | null, string | null | undefined, string | null>;
  oauth_scope: ColumnType<string | null, string | null | undefined, string | null>;
  /** JSON {resources, prompts}: what the server offers besides tools (migration 0041); null when not yet known. */
  capabilities: ColumnType<string | null, string | null | undefined, string | null>;
  created_at: Millis;
  updated_at: Millis;
}

/** The credential vault (migration 0028): one credential per (connector, end user; '' = the organization). */
export interface McpCredentialsTable {
  id: string;
  org_id: string;
  server_id: string;
  end_user: string;
  /** The connector URL the credential was issued for. */
  server_url: string;
  kind: string;
  /** Sealed JSON tokens or headers; never logged, never returned. */
  secret: string;
  expires_at: Millis | null;
  status: string;
  /** Held by a worker refreshing the credential until then. */
  lock_until: Millis | null;
  version: number;
  created_at: Millis;
  updated_at: Millis;
}

/** Authorizations started and not yet completed (migration 0028). */
export interface McpOauthStatesTable {
  state: string;
  org_id: string;
  server_id: string;
  end_user: string;
  secret: string;
  expires_at: Millis;
  created_at: Millis;
}

export interface AgentMcpServersTable {
  agent_id: string;
  server_id: string;
}

export interface ToolApprovalsTable {
  id: string;
  org_id: string;
  session_id: string;
  message_id: string;
  call_id: string;
  action_id: number;
  tool: string;
  server_label: string;
  server_tool: string;
  arguments: string;
  status: 'pending' | 'approved' | 'denied';
  reason: string | null;
  decided_by: string | null;
  expires_at: Millis | null;
  decided_at: Millis | null;
  started_at: Millis | null;
  created_at: Millis;
}

export interface IdempotencyKeysTable {
  org_id: string;
  scope: string;
  key: string;
  request_hash: string;
  status_code: number;
  response_body: string;
  created_at: Millis;
}

export interface TasksTable {
  id: string;
  org_id: string;
  /** The hidden Session the Task's prompts run in. */
  workspace_id: string;
  agent_id: string;
  title: string;
  created_at: Millis;
  updated_at: Millis;
  deleted_at: Millis | null;
  /** The last task.* webhook state sent. */
  notified_state: TaskNotifiedState;
  notify_pending: ColumnType<number, number | undefined, number>;
}

export interface TaskPromptsTable {
  message_id: string;
  task_id: string;
  org_id: string;
  seq: number;
  created_at: Millis;
}

export interface LegacyWebhooksTable {
  id: string;
  org_id: string;
  url: string;
  /** JSON array of task.* event names. */
  events: string;
  description: string | null;
  /** The X-Webhook-Secret value, encrypted (lib/secret-box.ts); never returned. */
  sealed_secret: string | null;
  is_active: ColumnType<number, number | undefined, number>;
  created_at: Millis;
  last_triggered_at: Millis | null;
  failure_count: ColumnType<number, number | undefined, number>;
}

export interface ThreadsTable {
  id: string;
  org_id: string;
  metadata: string | null;
  created_at: Millis;
}

export interface ThreadMessagesTable {
  id: string;
  org_id: string;
  thread_id: string;
  seq: number;
  role: ThreadRole;
  content: string;
  metadata: string | null;
  file_ids: string | null;
  agent_id: string | null;
  name: string | null;
  run_id: string | null;
  created_at: Millis;
}

export interface WorkflowRunsTable {
  /** The Run id of the turn that executes it. */
  id: string;
  org_id: string;
  agent_id: string;
  session_id: string;
  message_id: string;
  thread_id: string | null;
  version: number;
  blocking: number;
  stream: number;
  settled: ColumnType<number, number | undefined, number>;
  created_at: Millis;
}

/** A live engine process (src/engine/process-registry.ts). */
export interface EngineProcessesTable {
  id: string;
  role: string;
  started_at: Millis;
  heartbeat_at: Millis;
  expires_at: Millis;
  /** The turns the process runs at once (migration 0043); null in a row written before it. */
  slots: number | null;
}

/** The row rewritten to test whether writes work again after the disk was full (storage/storage-space.ts). */
export interface StorageProbeTable {
  id: string;
  probed_at: Millis;
}

export interface SchedulesTable {
  id: string;
  org_id: string;
  agent_id: string;
  name: string;
  input: string;
  cron: string | null;
  interval_seconds: number | null;
  timezone: string;
  session_id: string | null;
  overlap: OverlapPolicy;
  timeout_seconds: number | null;
  catch_up: CatchUpPolicy;
  enabled: number;
  next_run_at: Millis | null;
  anchor_at: Millis;
  version: number;
  /** The agent version the schedule's runs use; null follows the latest. */
  agent_version: ColumnType<number | null, number | null | undefined, number | null>;
  /** The schedule's spend cap in micro-dollars over all its runs (migration 0032); null: none. */
  budget_limit_micros: ColumnType<number | null, number | null | undefined, number | null>;
  /** `month` (calendar month, UTC) or `lifetime`; null when there is no cap. */
  budget_period: ColumnType<string | null, string | null | undefined, string | null>;
  created_at: Millis;
  updated_at: Millis;
}

/** The running spend of a budgeted scope in one period (migration 0032, domain/billing/budgets.ts). */
export interface BudgetSpendTable {
  scope: string;
  scope_id: string;
  /** `YYYY-MM` for a monthly budget, '' for a lifetime one. */
  period_key: string;
  org_id: string;
  spent_micros: ColumnType<number, number | undefined, number>;
  /** The largest step cost seen: the estimate that admits concurrent model calls near the cap. */
  max_step_micros: ColumnType<number, number | undefined, number>;
  /** The limit whose 80 % crossing was announced (budget.threshold); null: none yet. */
  threshold_limit_micros: ColumnType<number | null, number | null | undefined, number | null>;
  /** The limit whose crossing was announced (budget.exceeded); null: none yet. */
  exceeded_limit_micros: ColumnType<number | null, number | null | undefined, number | null>;
  updated_at: Millis;
}

/** A model call in flight under a budgeted scope (one per message), until its step is stored or it expires. */
export interface BudgetHoldsTable {
  scope: string;
  scope_id: string;
  holder: string;
  expires_at: Millis;
}

export interface ScheduleRunsTable {
  id: string;
  org_id: string;
  schedule_id: string;
  trigger: RunTrigger;
  status: ScheduleRunStatus;
  scheduled_at: Millis | null;
  session_id: string | null;
  message_id: string | null;
  run_id: string | null;
  error: string | null;
  result: string | null;
  input_tokens: number;
  output_tokens: number;
  deadline_at: Millis | null;
  timed_out_at: Millis | null;
  claimed_by: string | null;
  created_at: Millis;
  started_at: Millis | null;
  completed_at: Millis | null;
  updated_at: Millis;
}

/** An agent's memory across sessions (docs/memory.md); `end_user` null: the agent's own. */
export interface MemoriesTable {
  id: string;
  org_id: string;
  agent_id: string;
  end_user: string | null;
  content: string;
  created_at: Millis;
  updated_at: Millis;
}

/**
 * One change to an organization's configuration (docs/audit-log.md); inserted only. `actor_type` is `api_key`
 * (with the key's id and prefix), `cli` or `system`; `before` and `after` are JSON summaries, secrets redacted.
 */
export interface AuditLogTable {
  id: string;
  org_id: string;
  created_at: Millis;
  actor_type: string;
  actor_key_id: string | null;
  actor_key_prefix: string | null;
  request_id: string | null;
  action: string;
  target_type: string;
  target_id: string;
  before: string | null;
  after: string | null;
}

/** An operator's limits of an organization or an API key (migration 0031); a null column follows the default. */
export interface LimitsTable {
  kind: LimitSubject;
  /** The organization's id (kind `organization`) or the key's (kind `api_key`). */
  subject_id: string;
  org_id: string;
  requests_per_minute: number | null;
  concurrent_turns: number | null;
  updated_at: Millis;
}

/** Requests counted in one minute for one organization or key, where Redis does not count them. */
export interface RateWindowsTable {
  bucket: string;
  window_start: Millis;
  hits: number;
}

export interface Database {
  orgs: OrgsTable;
  api_keys: ApiKeysTable;
  agents: AgentsTable;
  agent_versions: AgentVersionsTable;
  sessions: SessionsTable;
  idempotency_keys: IdempotencyKeysTable;
  messages: MessagesTable;
  runs: RunsTable;
  spans: SpansTable;
  items: ItemsTable;
  session_events: SessionEventsTable;
  webhook_events: WebhookEventsTable;
  webhook_endpoints: WebhookEndpointsTable;
  webhook_deliveries: WebhookDeliveriesTable;
  webhook_attempts: WebhookAttemptsTable;
  a2a_push_configs: A2aPushConfigsTable;
  a2a_push_deliveries: A2aPushDeliveriesTable;
  files: FilesTable;
  mcp_servers: McpServersTable;
  agent_mcp_servers: AgentMcpServersTable;
  mcp_credentials: McpCredentialsTable;
  mcp_oauth_states: McpOauthStatesTable;
  tasks: TasksTable;
  task_prompts: TaskPromptsTable;
  legacy_webhooks: LegacyWebhooksTable;
  threads: ThreadsTable;
  thread_messages: ThreadMessagesTable;
  workflow_runs: WorkflowRunsTable;
  engine_processes: EngineProcessesTable;
  tool_approvals: ToolApprovalsTable;
  schedules: SchedulesTable;
  schedule_runs: ScheduleRunsTable;
  storage_probe: StorageProbeTable;
  memories: MemoriesTable;
  audit_log: AuditLogTable;
  limits: LimitsTable;
  rate_windows: RateWindowsTable;
  budget_spend: BudgetSpendTable;
  budget_holds: BudgetHoldsTable;
  org_retention: OrgRetentionTable;
}

export type OrgRow = Selectable<OrgsTable>;
export type ApiKeyRow = Selectable<ApiKeysTable>;
export type AgentRow = Selectable<AgentsTable>;
export type NewAgentRow = Insertable<AgentsTable>;
export type AgentUpdate = Updateable<AgentsTable>;
export type SessionRow = Selectable<SessionsTable>;
export type MessageRow = Selectable<MessagesTable>;
export type RunRow = Selectable<RunsTable>;
export type ItemRow = Selectable<ItemsTable>;
export type SessionEventRow = Selectable<SessionEventsTable>;
export type SpanRow = Selectable<SpansTable>;
export type FileRow = Selectable<FilesTable>;
export type ToolApprovalRow = Selectable<ToolApprovalsTable>;
export type McpServerRow = Selectable<McpServersTable>;
export type McpCredentialRow = Selectable<McpCredentialsTable>;
export type McpOauthStateRow = Selectable<McpOauthStatesTable>;
export type WebhookEventRow = Selectable<WebhookEventsTable>;
export type WebhookEndpointRow = Selectable<WebhookEndpointsTable>;
export type WebhookDeliveryRow = Selectable<WebhookDeliveriesTable>;
export type WebhookAttemptRow = Selectable<WebhookAttemptsTable>;
export type TaskRow = Selectable<TasksTable>;
export type LegacyWebhookRow = Selectable<LegacyWebhooksTable>;
export type ThreadRow = Selectable<ThreadsTable>;
export type MemoryRow = Selectable<MemoriesTable>;
export type ThreadMessageRow = Selectable<ThreadMessagesTable>;
export type WorkflowRunRow = Selectable<WorkflowRunsTable>;
export type ScheduleRow = Selectable<SchedulesTable>;
export type ScheduleRunRow = Selectable<ScheduleRunsTable>;
