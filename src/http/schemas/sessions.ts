import { Type } from 'typebox';
import { SESSION_STATUSES } from '../../domain/sessions/session-service.ts';
import { NON_BLANK, OffsetPagination, StringEnum, Uuid } from './common.ts';
import { EndUser } from './memories.ts';

export const Session = Type.Object(
  {
    id: Uuid,
    object: Type.Literal('session'),
    agentId: Type.Union([Uuid, Type.Null()], {
      description: 'null for a Conversation created without an agent, until its first Response fixes one',
    }),
    title: Type.Union([Type.String(), Type.Null()]),
    endUser: Type.Union([Type.String(), Type.Null()], {
      description: 'The end user of your application this session serves (scopes the agent memory), or null',
    }),
    status: StringEnum(SESSION_STATUSES),
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
    title: Type.Optional(Type.String({ minLength: 1, maxLength: 200, pattern: NON_BLANK })),
    endUser: Type.Optional(EndUser),
  },
  { additionalProperties: false },
);
