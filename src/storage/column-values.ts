/**
 * The closed sets of values that text columns hold (statuses, kinds, sources, policies). schema.ts types its
 * columns by them, so a read row's status is already its union and a write of any other value fails the typecheck;
 * the domain modules that own each concept re-export them beside their predicates. They live here, below the
 * domain, because the storage layer's table types need them.
 *
 * Every write of these columns is typed, so reads trust them; values from outside (request bodies, Redis) are still
 * checked where they enter.
 */

/** sessions.status */
export const SESSION_STATUSES = ['idle', 'running', 'requires_action', 'failed'] as const;
export type SessionStatus = (typeof SESSION_STATUSES)[number];

/** messages.status and runs.status: a run moves with its message. */
export const MESSAGE_STATUSES = ['queued', 'running', 'requires_action', 'completed', 'failed', 'cancelled'] as const;
export type MessageStatus = (typeof MESSAGE_STATUSES)[number];

/** messages.source and runs.source: the surfaces that start runs. */
export const RUN_SOURCES = [
  'responses',
  'sessions',
  'tasks',
  'sdk',
  'console',
  'schedule',
  'chat_completions',
  'mcp',
  'a2a',
] as const;
export type RunSource = (typeof RUN_SOURCES)[number];

/** spans.kind */
export const SPAN_KINDS = ['agent_step', 'model_call', 'tool_call', 'compaction'] as const;
export type SpanKind = (typeof SPAN_KINDS)[number];

/** spans.status */
export const SPAN_STATUSES = ['running', 'completed', 'failed', 'cancelled'] as const;
export type SpanStatus = (typeof SPAN_STATUSES)[number];

/** webhook_deliveries.status */
export const DELIVERY_STATUSES = ['pending', 'delivered', 'failed', 'skipped'] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];

/** webhook_deliveries.kind */
export const DELIVERY_KINDS = ['automatic', 'manual', 'test'] as const;
export type DeliveryKind = (typeof DELIVERY_KINDS)[number];

/** schedules.overlap */
export const OVERLAP_POLICIES = ['skip', 'queue'] as const;
export type OverlapPolicy = (typeof OVERLAP_POLICIES)[number];

/** schedules.catch_up */
export const CATCH_UP_POLICIES = ['skip', 'run_once'] as const;
export type CatchUpPolicy = (typeof CATCH_UP_POLICIES)[number];

/** schedule_runs.trigger */
export const RUN_TRIGGERS = ['scheduled', 'manual'] as const;
export type RunTrigger = (typeof RUN_TRIGGERS)[number];

/** schedule_runs.status */
export const SCHEDULE_RUN_STATUSES = ['preparing', 'running', 'completed', 'failed', 'cancelled', 'skipped'] as const;
export type ScheduleRunStatus = (typeof SCHEDULE_RUN_STATUSES)[number];

/** tasks.notified_state: the last task.* webhook state sent (`none` before the first). */
export const TASK_NOTIFIED_STATES = ['none', 'created', 'running', 'completed', 'failed', 'canceled'] as const;
export type TaskNotifiedState = (typeof TASK_NOTIFIED_STATES)[number];

/** thread_messages.role */
export const THREAD_ROLES = ['user', 'assistant'] as const;
export type ThreadRole = (typeof THREAD_ROLES)[number];

/** What a row of `limits` limits (migration 0031). */
export const LIMIT_SUBJECTS = ['organization', 'api_key'] as const;
export type LimitSubject = (typeof LIMIT_SUBJECTS)[number];
