/**
 * Agents as code (docs/agents-as-code.md): the documents POST /v1/apply takes and GET /v1/export answers, one
 * schema per kind told apart by `kind`, the lock of what the last apply left, and the plan an apply answers. The
 * union is published as docs/agent-document.schema.json for editors.
 */
import { type Static, Type } from 'typebox';
import { AgentDocument } from './agents.ts';
import { NON_BLANK } from './common.ts';
import { Headers, McpServerCreateBody, OAuthSettings } from './mcp-servers.ts';
import { raw } from './raw-schema.ts';
import { ScheduleCreateBody } from './schedules.ts';
import { EndpointCreateBody } from './webhooks.ts';

const NameRef = (what: string) =>
  Type.String({ minLength: 1, maxLength: 100, pattern: NON_BLANK, description: `The name of ${what}` });

/** A secret written into a document as a reference: `${GITHUB_TOKEN}`, alone or inside text (`Bearer ${TOKEN}`). */
const SECRET_NOTE = `Write secrets as \${NAME} references (NAME: A-Z, 0-9, _), resolved from the secrets of the apply (the CLI: its environment); a reference left unresolved keeps the stored value of an existing connector`;

export const McpServerDocument = Type.Object(
  {
    kind: Type.Literal('mcp_server'),
    name: McpServerCreateBody.properties.name,
    url: McpServerCreateBody.properties.url,
    headers: Type.Optional({ ...Headers, description: `Static headers. ${SECRET_NOTE}. Absent: left as they are` }),
    oauth: Type.Optional(
      Type.Union([OAuthSettings, Type.Null()], {
        description: `The server signs in with OAuth; absent or null: it does not. client_secret: ${SECRET_NOTE}`,
      }),
    ),
  },
  {
    additionalProperties: false,
    title: 'MCP connector document',
    description: 'An MCP server connector of the organization, keyed by its name',
  },
);

const { agent_id: _agent, session_id: _session, ...scheduleFields } = ScheduleCreateBody.properties;

export const ScheduleDocument = Type.Object(
  { kind: Type.Literal('schedule'), ...scheduleFields, agent: NameRef('the agent each run talks to') },
  {
    additionalProperties: false,
    title: 'Schedule document',
    description: 'A schedule, keyed by its name; its agent named by name. Exactly one of cron or interval_seconds',
  },
);

export const WebhookEndpointDocument = Type.Object(
  { kind: Type.Literal('webhook_endpoint'), ...EndpointCreateBody.properties },
  {
    additionalProperties: false,
    title: 'Webhook endpoint document',
    description:
      'A webhook endpoint, keyed by its name. Its signing secret is never part of it: a new endpoint’s is shown once in the apply result',
  },
);

const KINDS = [AgentDocument, McpServerDocument, ScheduleDocument, WebhookEndpointDocument];

/** Any document: the `kind` field selects the schema, so a failure names the field of that kind. */
export const Document = raw<Static<(typeof KINDS)[number]>>({
  type: 'object',
  required: ['kind'],
  discriminator: { propertyName: 'kind' },
  oneOf: KINDS,
  title: 'Agentry document',
  description: 'An agent, MCP connector, schedule or webhook endpoint (docs/agents-as-code.md)',
});

const Marker = Type.String({ minLength: 1, maxLength: 100 });
const Markers = (what: string) =>
  Type.Optional(
    Type.Record(Type.String({ minLength: 1, maxLength: 100 }), Marker, {
      maxProperties: 1000,
      description: `Per ${what} name, the marker of the configuration the last apply left (a hash)`,
    }),
  );

export const ApplyLock = Type.Object(
  {
    agents: Type.Record(
      Type.String({ minLength: 1, maxLength: 100 }),
      Type.Integer({ minimum: 1, maximum: 2147483647 }),
      {
        maxProperties: 1000,
        description: 'Per agent name, the version the last apply left it at',
      },
    ),
    mcp_servers: Markers('MCP connector'),
    schedules: Markers('schedule'),
    webhook_endpoints: Markers('webhook endpoint'),
  },
  { additionalProperties: false, description: 'The content of agentry.lock.json' },
);

export const ApplyBody = Type.Object(
  {
    documents: Type.Array(Document, { maxItems: 1000 }),
    dry_run: Type.Optional(Type.Boolean({ description: 'Plan only: nothing is written' })),
    force: Type.Optional(Type.Boolean({ description: 'Apply even to resources changed since what the lock records' })),
    lock: Type.Optional(Type.Union([ApplyLock, Type.Null()])),
    secrets: Type.Optional(
      Type.Record(Type.String({ pattern: '^[A-Z_][A-Z0-9_]{0,127}$' }), Type.String({ maxLength: 8192 }), {
        maxProperties: 200,
        description: `Values of the \${NAME} references of connector documents; never stored in clear or answered`,
      }),
    ),
  },
  { additionalProperties: false },
);

export const ExportResult = Type.Object(
  {
    documents: Type.Array(Document),
    lock: ApplyLock,
  },
  { additionalProperties: false },
);

export const ApplyResult = Type.Object(
  {
    dry_run: Type.Boolean(),
    plan: Type.Array(
      Type.Object(
        {
          kind: Type.Union([
            Type.Literal('agent'),
            Type.Literal('mcp_server'),
            Type.Literal('schedule'),
            Type.Literal('webhook_endpoint'),
          ]),
          name: Type.String(),
          action: Type.Union([Type.Literal('create'), Type.Literal('update'), Type.Literal('unchanged')]),
          changes: Type.Array(Type.String(), { description: 'JSON pointers of the fields an update changes' }),
          version: Type.Union([Type.Integer(), Type.Null()], { description: "An agent's version; null otherwise" }),
          id: Type.Union([Type.String(), Type.Null()]),
          signing_secret: Type.Optional(
            Type.String({ description: 'A webhook endpoint this apply created: its signing secret, shown only here' }),
          ),
        },
        { additionalProperties: false },
      ),
    ),
    lock: ApplyLock,
  },
  { additionalProperties: false },
);
