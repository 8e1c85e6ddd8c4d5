/**
 * The body of a legacy Tasks webhook (`task.*`, docs/legacy.md), declared once as a JSON Schema per event: the
 * notifier builds each through `taskWebhookEvent`, typed by it; the OpenAPI document shows the union as the
 * `TaskWebhookEvent` component; a test validates delivered bodies against it. Its envelope is the Tasks API's
 * (`event`, `createdAt`, camelCase), not that of webhook endpoints (`WebhookEvent`).
 */
import { type Static, Type } from 'typebox';
import type { TaskEventType } from './task-types.ts';

/** What `data.status` says for each event: the event's own name. */
const STATUS = {
  'task.created': 'created',
  'task.running': 'running',
  'task.completed': 'completed',
  'task.failed': 'failed',
  'task.canceled': 'canceled',
} as const satisfies Record<TaskEventType, string>;

const data = <K extends TaskEventType>(type: K) =>
  Type.Object({
    taskId: Type.String(),
    status: Type.Literal(STATUS[type]),
    title: Type.String(),
    workspaceId: Type.String(),
    agentId: Type.String(),
    promptId: Type.Union([Type.String(), Type.Null()], {
      description: 'The latest prompt, whose start or end this is; null when the Task has none',
    }),
  });

const envelope = <K extends TaskEventType>(type: K) =>
  Type.Object({
    id: Type.String({ description: 'evt_…' }),
    event: Type.Literal(type),
    createdAt: Type.String({ format: 'date-time' }),
    data: data(type),
  });

export const TaskWebhookEventSchema = Type.Union(
  [
    envelope('task.created'),
    envelope('task.running'),
    envelope('task.completed'),
    envelope('task.failed'),
    envelope('task.canceled'),
  ],
  {
    $id: 'TaskWebhookEvent',
    description:
      'The body of a legacy Tasks webhook (POST /v1/webhooks): `event` names it (also in the X-Webhook-Event header) and data.status says the same',
  },
);

/** A legacy Tasks webhook as sent. */
export type TaskWebhookEvent = Static<typeof TaskWebhookEventSchema>;
/** The legacy Tasks webhook of event `K`. */
export type TaskWebhookEventOf<K extends TaskEventType> = Static<ReturnType<typeof envelope<K>>>;

// Every task.* type has its envelope in the union, and nothing else is in it.
type Missing = Exclude<TaskEventType, TaskWebhookEvent['event']>;
const everyType: [Missing] extends [never] ? true : never = true;
void everyType;

/** The Task an event is about, in the columns the body names. */
export interface TaskWebhookSubject {
  id: string;
  title: string;
  workspace_id: string;
  agent_id: string;
}

/** The body of event `type` about `task`, whose latest prompt is `promptId`: its data typed by the event. */
export function taskWebhookEvent<K extends TaskEventType>(
  type: K,
  task: TaskWebhookSubject,
  promptId: string | null,
  envelopeFields: { id: string; createdAt: string },
): TaskWebhookEventOf<K> {
  return {
    id: envelopeFields.id,
    event: type,
    createdAt: envelopeFields.createdAt,
    data: {
      taskId: task.id,
      status: STATUS[type],
      title: task.title,
      workspaceId: task.workspace_id,
      agentId: task.agent_id,
      promptId,
    },
  };
}
