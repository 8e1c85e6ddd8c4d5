import { Type } from 'typebox';
import { SESSION_STATUSES } from '../../domain/sessions/session-service.ts';
import { SessionBudget, SessionBudgetInput } from './budgets.ts';
import { NON_BLANK, OffsetPagination, StringEnum, Uuid } from './common.ts';

export const Session = Type.Object(
  {
    id: Uuid,
    object: Type.Literal('session'),
    agentId: Type.Union([Uuid, Type.Null()], {
      description: 'null for a Conversation created without an agent, until its first Response fixes one',
    }),
    agentVersion: Type.Union([Type.Integer(), Type.Null()], {
      description: "The agent version every turn runs (pinned at create); null follows the agent's latest version",
    }),
    title: Type.Union([Type.String(), Type.Null()]),
    status: StringEnum(SESSION_STATUSES),
    endUser: Type.Union([Type.String(), Type.Null()], {
      description:
        "Extension: the end user the session serves, named at creation (`endUser`, or the Response's `safety_identifier` / `user`); per-user memories and credentials are looked up by it",
    }),
    budget: SessionBudget,
    conversationId: Type.String({ description: 'conv_ + the session id; the Conversation of /v1/responses' }),
    createdAt: Type.String({ format: 'date-time' }),
    updatedAt: Type.String({ format: 'date-time' }),
  },
  { additionalProperties: false },
);

export const SessionEnvelope = Type.Object({ session: Session });

export const SessionList = Type.Object({
  data: Type.Array(Session),
  total: Type.Integer(),
  limit: Type.Integer(),
  offset: Type.Integer(),
});

export const SessionListQuery = Type.Object(
  { agentId: Type.Optional(Uuid), ...OffsetPagination },
  { additionalProperties: false },
);

export const SessionCreateBody = Type.Object(
  {
    agentId: Uuid,
    agentVersion: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: 2147483647,
        description: 'Pins the session to this version of the agent (400 when the agent has no such version)',
      }),
    ),
    title: Type.Optional(Type.String({ minLength: 1, maxLength: 200, pattern: NON_BLANK })),
    endUser: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 512,
        pattern: NON_BLANK,
        description: 'Extension: the end user the session serves (their memories and credentials are used)',
      }),
    ),
    budget: Type.Optional(SessionBudgetInput),
  },
  { additionalProperties: false },
);

export const SessionUpdateBody = Type.Object(
  {
    title: Type.Optional(
      Type.Union([Type.String({ minLength: 1, maxLength: 200, pattern: NON_BLANK }), Type.Null()], {
        description: 'The title lists show (null removes it; lists then show the first message)',
      }),
    ),
    budget: Type.Optional(SessionBudgetInput),
  },
  {
    additionalProperties: false,
    minProperties: 1,
    description: 'Extension: the fields of a session that can change, each only when given',
  },
);
