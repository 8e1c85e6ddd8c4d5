import { Type } from 'typebox';
import { ACTOR_TYPES } from '../../domain/audit/audit-log.ts';
import { CursorList, StringEnum, Uuid } from './common.ts';

const UnixSeconds = Type.Integer({ minimum: 0, description: 'Unix time in seconds' });
const Summary = Type.Union([Type.Record(Type.String(), Type.Unknown()), Type.Null()], {
  description: 'A summary of the target before or after the change; secrets are always "[redacted]"',
});

export const AuditLogEntry = Type.Object(
  {
    id: Uuid,
    object: Type.Literal('audit_log_entry'),
    created_at: UnixSeconds,
    actor: Type.Object(
      {
        type: StringEnum(
          ACTOR_TYPES,
          'api_key: a request made with a key; cli: the agentry command; admin: the operator, through the /v1/admin routes; system: Agentry',
        ),
        api_key_id: Type.Union([Type.String(), Type.Null()]),
        api_key_prefix: Type.Union([Type.String(), Type.Null()], { description: 'As `agentry keys list` shows it' }),
      },
      { additionalProperties: false },
    ),
    request_id: Type.Union([Type.String(), Type.Null()], {
      description: 'The x-request-id of the request that made the change; null outside HTTP',
    }),
    action: Type.String({ description: 'What happened, e.g. agent.updated, api_key.revoked (docs/audit-log.md)' }),
    target: Type.Object({ type: Type.String(), id: Type.String() }, { additionalProperties: false }),
    before: Summary,
    after: Summary,
  },
  { additionalProperties: false },
);

export const AuditLogList = CursorList(AuditLogEntry, "The organization's audit log, newest first");

export const AuditLogQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 20 })),
    after: Type.Optional(Uuid),
    action: Type.Optional(
      Type.String({
        maxLength: 100,
        pattern: '^[a-z][a-z0-9_]*(\\.([a-z][a-z0-9_]*|\\*))?$',
        description: 'One action (agent.updated), or every action on a target type (agent or agent.*)',
      }),
    ),
    target_type: Type.Optional(
      Type.String({ maxLength: 64, pattern: '^[a-z][a-z0-9_]*$', description: 'agent, api_key, webhook_endpoint, …' }),
    ),
    target_id: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    actor: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 200,
        pattern: '^\\S+$',
        description: 'cli, system, api_key (any key), or one key by its id or its prefix',
      }),
    ),
    since: Type.Optional(UnixSeconds),
    until: Type.Optional(UnixSeconds),
  },
  { additionalProperties: false },
);
