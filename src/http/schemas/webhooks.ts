import { Type } from 'typebox';
import type { WebhookEventBody } from '../../domain/webhooks/webhook-events.ts';
import { DELIVERY_KINDS, DELIVERY_STATUSES, WEBHOOK_EVENT_TYPES } from '../../domain/webhooks/webhook-types.ts';
import { CursorList as cursorList, NON_BLANK, StringEnum, VISIBLE_ASCII } from './common.ts';
import { Session } from './sessions.ts';

const UnixSeconds = Type.Integer({ description: 'Unix time in seconds' });
const NullableSeconds = Type.Union([UnixSeconds, Type.Null()]);

const EndpointId = Type.String({ pattern: '^we_[0-9A-Za-z]{1,64}$', description: 'A webhook endpoint id (we_…)' });
const EventId = Type.String({ pattern: '^evt_[0-9A-Za-z]{1,64}$', description: 'An event id (evt_…)' });
const EventType = StringEnum(WEBHOOK_EVENT_TYPES, 'A supported event type (GET /v1/webhook_event_types)');

const EventTypes = Type.Array(EventType, {
  minItems: 1,
  uniqueItems: true,
  description: 'The complete list of event types to receive',
});
const Name = Type.String({ minLength: 1, maxLength: 100, pattern: NON_BLANK });
const Url = Type.String({
  minLength: 1,
  maxLength: 2048,
  format: 'uri',
  description: 'Public HTTPS URL: no embedded credentials, no fragment, no private, loopback or link-local destination',
});

export const EndpointParams = Type.Object({ id: EndpointId });
export const EndpointEventParams = Type.Object({ id: EndpointId, event_id: EventId });

export const WebhookEndpoint = Type.Object(
  {
    object: Type.Literal('webhook_endpoint'),
    id: EndpointId,
    name: Type.String(),
    url: Type.String(),
    event_types: Type.Array(EventType),
    created_at: UnixSeconds,
    updated_at: UnixSeconds,
    signing_secret_hint: Type.String({ description: 'whsec_… and the last four characters of the secret' }),
  },
  { additionalProperties: false },
);

export const WebhookEndpointWithSecret = Type.Object(
  {
    ...WebhookEndpoint.properties,
    signing_secret: Type.String({
      pattern: '^whsec_[A-Za-z0-9+/=]+$',
      description: 'whsec_ + base64 of 32 random bytes. Shown only in this answer: store it now.',
    }),
  },
  { additionalProperties: false },
);

export const WebhookEndpointList = cursorList(WebhookEndpoint, 'Webhook endpoints, newest first');

/** An event of the history: the `WebhookEvent` component, the body its deliveries carry, data typed by its type. */
const WebhookEvent = Type.Unsafe<WebhookEventBody>({ $ref: 'WebhookEvent#' });

export const WebhookEventList = cursorList(WebhookEvent, 'Events assigned to the endpoint, newest first');

export const WebhookEventTypeList = Type.Object({
  object: Type.Literal('list'),
  data: Type.Array(Type.Object({ type: EventType, description: Type.String() })),
});

export const CursorQuery = Type.Object(
  {
    limit: Type.Integer({ minimum: 1, maximum: 100, default: 20 }),
    after: Type.Optional(
      Type.String({ minLength: 1, maxLength: 200, description: 'The last_id of the previous page' }),
    ),
  },
  { additionalProperties: false },
);

export const EndpointCreateBody = Type.Object(
  { name: Name, url: Url, event_types: EventTypes },
  { additionalProperties: false },
);

export const EndpointUpdateBody = Type.Object(
  { name: Type.Optional(Name), url: Type.Optional(Url), event_types: Type.Optional(EventTypes) },
  { additionalProperties: false, minProperties: 1 },
);

export const EmptyBody = Type.Object({}, { additionalProperties: false });

export const EndpointDeleted = Type.Object({
  id: EndpointId,
  object: Type.Literal('webhook_endpoint.deleted'),
  deleted: Type.Literal(true),
});

export const TestBody = Type.Object({ event_type: EventType }, { additionalProperties: false });

export const TestResult = Type.Object({
  object: Type.Literal('webhook_endpoint.test'),
  webhook_endpoint_id: EndpointId,
  event_type: EventType,
  success: Type.Literal(true),
  status_code: Type.Integer({ description: "The receiver's HTTP status, whatever it was" }),
  event_id: EventId,
  delivery_id: Type.String(),
});

export const WebhookDelivery = Type.Object(
  {
    object: Type.Literal('webhook_delivery'),
    id: Type.String({ description: 'dlv_…' }),
    webhook_endpoint_id: EndpointId,
    event_id: EventId,
    webhook_id: Type.String({ description: 'The webhook-id header: the same for every delivery of this event here' }),
    kind: StringEnum(DELIVERY_KINDS),
    replay_key: Type.Union([Type.String(), Type.Null()], {
      description: 'The Idempotency-Key of a manual redelivery; null for the automatic one',
    }),
    status: StringEnum(DELIVERY_STATUSES, 'skipped: the endpoint was deleted before the delivery succeeded'),
    attempts: Type.Integer({ minimum: 0 }),
    status_code: Type.Union([Type.Integer(), Type.Null()], { description: "The last attempt's HTTP status" }),
    error: Type.Union([Type.Object({ code: Type.String(), message: Type.String() }), Type.Null()], {
      description: 'Why the last attempt failed',
    }),
    created_at: UnixSeconds,
    last_attempt_at: NullableSeconds,
    next_attempt_at: Type.Union([UnixSeconds, Type.Null()], { description: 'When pending: the next attempt' }),
    expires_at: Type.Integer({ description: 'End of the retry window (Unix seconds)' }),
    completed_at: NullableSeconds,
  },
  { additionalProperties: false },
);

export const DeliveryQuery = Type.Object(
  {
    replay_key: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 255,
        pattern: VISIBLE_ASCII,
        description: 'Select the manual delivery made with this Idempotency-Key',
      }),
    ),
  },
  { additionalProperties: false },
);

export const RedeliverHeaders = Type.Object({
  'idempotency-key': Type.String({
    minLength: 1,
    maxLength: 255,
    pattern: VISIBLE_ASCII,
    description: 'Required: the same key returns the same manual delivery while its history is retained',
  }),
});

const FollowUpAction = Type.Union([
  Type.Object({
    type: Type.Literal('function_call'),
    turn_id: Type.String(),
    call_id: Type.String(),
    name: Type.String(),
    arguments: Type.String(),
  }),
  Type.Object({
    type: Type.Literal('ask_user_question'),
    turn_id: Type.String(),
    action_id: Type.Integer(),
    question: Type.String(),
    options: Type.Union([Type.Array(Type.Unknown()), Type.Null()]),
  }),
  Type.Object(
    {
      type: Type.Literal('tool_approval'),
      turn_id: Type.String(),
      action_id: Type.Integer(),
      call_id: Type.String(),
      tool: Type.String(),
      server: Type.String(),
      arguments: Type.String(),
      approval_id: Type.String(),
    },
    { description: 'A server tool call waiting for approval: answer with {approved, reason?} on the answer route' },
  ),
  Type.Object(
    {
      type: Type.Literal('mcp_elicitation'),
      turn_id: Type.String(),
      action_id: Type.Integer(),
      call_id: Type.String(),
      tool: Type.String(),
      server: Type.String(),
      elicitation_id: Type.String(),
      mode: Type.Union([Type.Literal('form'), Type.Literal('url')]),
      message: Type.String(),
      requested_schema: Type.Union([Type.Record(Type.String(), Type.Unknown()), Type.Null()]),
      url: Type.Union([Type.String(), Type.Null()]),
    },
    {
      description:
        'An MCP server asking for input during a tool call: answer with {action, content?} on the answer route',
    },
  ),
]);

export const BetaHeaders = Type.Object({
  'agentry-beta': Type.String({
    // What the route accepts: agents=v1 alone or among other comma-separated values.
    pattern: '^(?:.*,)?\\s*agents=v1\\s*(?:,.*)?$',
    description: 'agents=v1 (alone or in a comma-separated list)',
  }),
});

export const FollowUpSession = Type.Object({
  session: Type.Object(
    {
      ...Session.properties,
      required_actions: Type.Array(FollowUpAction, {
        description: 'Pending calls of the waiting turns, oldest first; answer them with the Session protocol',
      }),
    },
    { additionalProperties: false },
  ),
});
