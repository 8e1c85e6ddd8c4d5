/**
 * GET and PATCH /v1/organization/retention: how long the organization keeps its data (docs/retention.md). Both
 * need `accounts:write`: retention decides what is deleted.
 */
import { Type } from 'typebox';
import { MAX_RETENTION_DAYS, RETENTION_KINDS, type RetentionDays, type RetentionKind } from '../../config.ts';
import type { Deps } from '../../deps.ts';
import type { OrgRetention, RetentionSettings } from '../../domain/retention/retention-service.ts';
import { auditOf, orgOf } from '../auth.ts';
import { errorResponses } from '../schemas/common.ts';
import type { App } from '../types.ts';

/** The API's name of each kind. */
const FIELDS = {
  sessions: 'sessions_days',
  runs: 'runs_days',
  sessionEvents: 'session_events_days',
  files: 'files_days',
  webhooks: 'webhooks_days',
} as const satisfies Record<RetentionKind, string>;
type Field = (typeof FIELDS)[RetentionKind];

const DESCRIPTIONS: Record<RetentionKind, string> = {
  sessions:
    'Sessions (and Conversations, Responses) with their messages, items, events and approvals, by their last change',
  runs: 'Ended runs with their traces (spans), by creation',
  sessionEvents: 'Session events (the event history of a session; its newest event stays), by creation',
  files: 'Uploaded files, rows and bytes, by upload',
  webhooks: 'Webhook delivery attempts and ended redeliveries, by when they were made',
};

const fieldsOf = <T>(schema: (kind: RetentionKind) => T) =>
  Object.fromEntries(RETENTION_KINDS.map((kind) => [FIELDS[kind], schema(kind)])) as Record<Field, T>;

const Days = (kind: RetentionKind, what: string) =>
  Type.Union([Type.Integer({ minimum: 0, maximum: MAX_RETENTION_DAYS }), Type.Null()], {
    description: `${DESCRIPTIONS[kind]}: ${what}`,
  });

const Retention = Type.Object(
  {
    object: Type.Literal('organization.retention'),
    ...fieldsOf((kind) =>
      Type.Union([Type.Integer({ minimum: 1 }), Type.Null()], {
        description: `${DESCRIPTIONS[kind]}: days kept; null keeps forever. What applies now.`,
      }),
    ),
    organization: Type.Object(
      fieldsOf((kind) => Days(kind, "the organization's own setting: days, 0 forever, null the default")),
      { additionalProperties: false, description: 'What the organization set' },
    ),
    defaults: Type.Object(
      fieldsOf((kind) =>
        Type.Union([Type.Integer({ minimum: 1 }), Type.Null()], {
          description: `${DESCRIPTIONS[kind]}: the deployment's default (AGENTRY_RETENTION_*_DAYS); null keeps forever`,
        }),
      ),
      { additionalProperties: false, description: "The deployment's defaults, for what the organization did not set" },
    ),
  },
  { additionalProperties: false },
);

const RetentionUpdate = Type.Object(
  fieldsOf((kind) => Type.Optional(Days(kind, 'days to keep; 0 keeps forever; null follows the default'))),
  { additionalProperties: false },
);

function view(retention: OrgRetention, defaults: RetentionDays) {
  const pick = (values: Record<RetentionKind, number | null>) => fieldsOf((kind) => values[kind]);
  return {
    object: 'organization.retention' as const,
    ...pick(retention.effective),
    organization: pick(retention.own),
    defaults: pick(defaults),
  };
}

export function retentionRoutes(app: App, deps: Deps): void {
  const tags = ['Organization'];
  app.route({
    method: 'GET',
    url: '/v1/organization/retention',
    config: { scopes: ['accounts:write'] },
    schema: {
      summary: "Get the organization's data retention",
      description:
        'How many days each kind of data is kept before the retention sweeper deletes it (docs/retention.md): what applies, what the organization set and the deployment defaults.',
      tags,
      response: { 200: Retention, ...errorResponses(401, 403) },
    },
    handler: async (request) => view(await deps.retention.get(orgOf(request)), deps.config.retention),
  });

  app.route({
    method: 'PATCH',
    url: '/v1/organization/retention',
    config: { scopes: ['accounts:write'] },
    schema: {
      summary: "Change the organization's data retention",
      description:
        'Sets the days each kind given is kept (0: forever; null: back to the deployment default); kinds not given stay. Data older than the new retention is deleted by the next sweep.',
      tags,
      body: RetentionUpdate,
      response: { 200: Retention, ...errorResponses(400, 401, 403) },
    },
    handler: async (request) => {
      const change: Partial<RetentionSettings> = {};
      for (const kind of RETENTION_KINDS) {
        const value = request.body[FIELDS[kind]];
        if (value !== undefined) change[kind] = value;
      }
      return view(await deps.retention.update(orgOf(request), change, auditOf(request)), deps.config.retention);
    },
  });
}
