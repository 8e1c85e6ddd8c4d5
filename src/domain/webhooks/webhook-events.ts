/**
 * The webhook events (docs/webhooks.md, spec section 6): each `type` with the `data` it carries, declared once as
 * JSON Schemas. Producers (turn transitions, sessions, workflow runs, schedule runs, the test route) are typed by
 * them through `WebhookEventInput`; the OpenAPI document shows the envelope as the `WebhookEvent` component; a
 * test validates delivered bodies against it.
 */
import { type Static, type TSchema, Type } from 'typebox';

export const WEBHOOK_EVENT_TYPES = [
  'agent.session.created',
  'agent.session.in_progress',
  'agent.session.action_required',
  'agent.session.idle',
  'agent.session.failed',
  'agent.session.turn.completed',
  'agent.session.turn.failed',
  'agent.session.turn.cancelled',
  'workflow.run.created',
  'workflow.run.in_progress',
  'workflow.run.action_required',
  'workflow.run.completed',
  'workflow.run.failed',
  'workflow.run.cancelled',
  'schedule.run.created',
  'schedule.run.running',
  'schedule.run.completed',
  'schedule.run.failed',
  'schedule.run.cancelled',
  'schedule.run.skipped',
  'mcp_server.authorization_required',
  'budget.threshold',
  'budget.exceeded',
] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

const Id = Type.String();
const ErrorData = Type.Object({ code: Type.String(), message: Type.String() });
const FunctionCallAction = Type.Object({
  type: Type.Literal('function_call'),
  call_id: Type.String(),
  name: Type.String(),
});

const SessionData = Type.Object({ id: Id });
const TurnData = Type.Object({ id: Id, session_id: Type.String() });
const ActionRequiredData = Type.Object({
  id: Id,
  turn_id: Type.String(),
  required_action: Type.Union([
    FunctionCallAction,
    Type.Object({
      type: Type.Literal('tool_approval'),
      action_id: Type.Integer(),
      call_id: Type.String(),
      tool: Type.String(),
      server: Type.String(),
    }),
    Type.Object({ type: Type.Literal('ask_user_question'), action_id: Type.Integer() }),
  ]),
  required_actions_count: Type.Integer({ minimum: 1 }),
  schedule_id: Type.Optional(Type.String()),
  schedule_run_id: Type.Optional(Type.String()),
});
const WorkflowRunData = Type.Object({ id: Id });
const ScheduleRunData = Type.Object({
  id: Id,
  schedule_id: Type.String(),
  session_id: Type.Optional(Type.String()),
  turn_id: Type.Optional(Type.String()),
  trigger: Type.Union([Type.Literal('scheduled'), Type.Literal('manual')]),
  status: Type.Union([
    Type.Literal('preparing'),
    Type.Literal('running'),
    Type.Literal('completed'),
    Type.Literal('failed'),
    Type.Literal('cancelled'),
    Type.Literal('skipped'),
  ]),
});

const AuthorizationRequiredData = Type.Object({
  id: Id,
  name: Type.String(),
  user: Type.Union([Type.String(), Type.Null()], {
    description: 'The end user whose credential failed, or null for the organization credential',
  }),
  reason: Type.String(),
});

const BudgetData = Type.Object({
  scope: Type.Union([Type.Literal('agent'), Type.Literal('session'), Type.Literal('schedule')]),
  id: Type.String({ description: 'The agent, session or schedule id' }),
  period: Type.Union([Type.Literal('month'), Type.Literal('lifetime')]),
  period_key: Type.Union([Type.String({ description: 'YYYY-MM (UTC) of a monthly budget' }), Type.Null()]),
  limit_usd: Type.Number(),
  spent_usd: Type.Number(),
  threshold: Type.Number({ description: 'The fraction of the limit crossed: 0.8 or 1' }),
});

/** The `data` of each webhook event type. */
const DATA = {
  'agent.session.created': SessionData,
  'agent.session.in_progress': SessionData,
  'agent.session.action_required': ActionRequiredData,
  'agent.session.idle': SessionData,
  'agent.session.failed': SessionData,
  'agent.session.turn.completed': TurnData,
  'agent.session.turn.failed': Type.Object({ id: Id, session_id: Type.String(), error: ErrorData }),
  'agent.session.turn.cancelled': TurnData,
  'workflow.run.created': WorkflowRunData,
  'workflow.run.in_progress': WorkflowRunData,
  'workflow.run.action_required': Type.Object({ id: Id, required_action: FunctionCallAction }),
  'workflow.run.completed': WorkflowRunData,
  'workflow.run.failed': Type.Object({ id: Id, error: ErrorData }),
  'workflow.run.cancelled': WorkflowRunData,
  'schedule.run.created': ScheduleRunData,
  'schedule.run.running': ScheduleRunData,
  'schedule.run.completed': ScheduleRunData,
  'schedule.run.failed': ScheduleRunData,
  'schedule.run.cancelled': ScheduleRunData,
  'schedule.run.skipped': ScheduleRunData,
  'mcp_server.authorization_required': AuthorizationRequiredData,
  'budget.threshold': BudgetData,
  'budget.exceeded': BudgetData,
} as const satisfies Record<WebhookEventType, TSchema>;

/** The `data` of a webhook event of type `K`. */
export type WebhookEventData<K extends WebhookEventType = WebhookEventType> = Static<(typeof DATA)[K]>;

const envelope = <K extends WebhookEventType>(type: K) =>
  Type.Object({
    id: Type.String({ description: 'evt_…' }),
    object: Type.Literal('event'),
    created_at: Type.Integer({ description: 'Unix seconds' }),
    type: Type.Literal(type),
    data: DATA[type],
  });

export const WebhookEventSchema = Type.Union(
  [
    envelope('agent.session.created'),
    envelope('agent.session.in_progress'),
    envelope('agent.session.action_required'),
    envelope('agent.session.idle'),
    envelope('agent.session.failed'),
    envelope('agent.session.turn.completed'),
    envelope('agent.session.turn.failed'),
    envelope('agent.session.turn.cancelled'),
    envelope('workflow.run.created'),
    envelope('workflow.run.in_progress'),
    envelope('workflow.run.action_required'),
    envelope('workflow.run.completed'),
    envelope('workflow.run.failed'),
    envelope('workflow.run.cancelled'),
    envelope('schedule.run.created'),
    envelope('schedule.run.running'),
    envelope('schedule.run.completed'),
    envelope('schedule.run.failed'),
    envelope('schedule.run.cancelled'),
    envelope('schedule.run.skipped'),
    envelope('mcp_server.authorization_required'),
    envelope('budget.threshold'),
    envelope('budget.exceeded'),
  ],
  {
    $id: 'WebhookEvent',
    description:
      'The body of a webhook delivery (and an item of GET /v1/webhook_endpoints/{id}/events): an event envelope whose data is typed by its type',
  },
);

/** A webhook event as delivered. */
export type WebhookEventBody = Static<typeof WebhookEventSchema>;

// Every type has its envelope in the union, and nothing else is in it.
type Missing = Exclude<WebhookEventType, WebhookEventBody['type']>;
const everyType: [Missing] extends [never] ? true : never = true;
void everyType;

/** A webhook event as a producer hands it to the outbox: its type, the data of that type, and trace context. */
export type WebhookEventInput = {
  [K in WebhookEventType]: {
    type: K;
    data: WebhookEventData<K>;
    /** Trace context its deliveries carry (`traceparent` header). */
    traceparent?: string | null;
  };
}[WebhookEventType];
