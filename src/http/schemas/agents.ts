import { Type } from 'typebox';
import {
  APPROVAL_MODES,
  CONTEXT_POLICIES,
  DOMAIN_ALLOWLISTS,
  INTERNAL_TOOLS,
  TOOLKIT_KINDS,
} from '../../domain/agents/agent-types.ts';
import { DEFAULT_SAMPLING_MAX_TOKENS, MAX_SAMPLING_MAX_TOKENS } from '../../tools/tool-config.ts';
import { AgentBudget, AgentBudgetInput } from './budgets.ts';
import { NON_BLANK, StringEnum, TRIMMED, Uuid } from './common.ts';
import { OutputFormatView, outputFormatSchema } from './output-format.ts';

const literals = StringEnum;

const McpInternal = Type.Object(
  { kind: Type.Literal('internal'), name: literals(INTERNAL_TOOLS) },
  { additionalProperties: false, title: 'Internal tool server' },
);
const McpToolkit = Type.Object(
  { kind: literals(TOOLKIT_KINDS), toolkit: Type.String({ minLength: 1, maxLength: 300, pattern: TRIMMED }) },
  { additionalProperties: false, title: 'Third-party toolkit' },
);
const samplingOptIn = {
  allowSampling: Type.Optional(
    Type.Boolean({
      description:
        "true: the server's sampling/createMessage requests during a tool call are answered by the agent's model, billed to the run (default false: refused)",
    }),
  ),
  samplingMaxTokens: Type.Optional(
    Type.Integer({
      minimum: 1,
      maximum: MAX_SAMPLING_MAX_TOKENS,
      description: `Output tokens a sampling answer may take at most (default ${DEFAULT_SAMPLING_MAX_TOKENS})`,
    }),
  ),
};
const McpCustom = Type.Object(
  {
    kind: Type.Literal('custom'),
    serverId: Uuid,
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    ...samplingOptIn,
  },
  { additionalProperties: false, title: 'Custom server of the organization' },
);
const McpUrl = Type.Object(
  {
    type: Type.Literal('url'),
    name: Type.String({ minLength: 1, maxLength: 100, pattern: NON_BLANK }),
    url: Type.String({
      format: 'uri',
      maxLength: 2000,
      description: 'Public HTTPS Streamable-HTTP or SSE MCP endpoint',
    }),
    ...samplingOptIn,
  },
  { additionalProperties: false, title: 'Remote MCP server by URL' },
);
export const McpServer = Type.Union([McpInternal, McpToolkit, McpCustom, McpUrl]);

export const ClientTool = Type.Object(
  {
    type: Type.Literal('function'),
    name: Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_-]+$' }),
    description: Type.String({ minLength: 1, pattern: NON_BLANK }),
    parameters: Type.Unsafe<Record<string, unknown>>({
      type: 'object',
      additionalProperties: true,
      description:
        'JSON Schema of the arguments: root type object with additionalProperties false; see docs/agents.md for the accepted subset',
    }),
    strict: Type.Boolean({ description: 'true: every declared property must be required' }),
  },
  { additionalProperties: false },
);

export const Skill = Type.Object(
  {
    repo: Type.String({ minLength: 1, maxLength: 300, description: 'owner/name, without .git' }),
    path: Type.String({ minLength: 1, maxLength: 1000, description: 'relative folder of the skill inside the repo' }),
  },
  { additionalProperties: false },
);

const networkPolicyFields = {
  allow_network_egress: Type.Boolean(),
  domain_allowlist: literals(DOMAIN_ALLOWLISTS),
  additional_allowed_domains: Type.Array(Type.String({ minLength: 1, maxLength: 253, pattern: '^[^\\s/]+$' }), {
    maxItems: 128,
  }),
  allow_public_traffic: Type.Boolean(),
};

export const NetworkPolicyInput = Type.Object(
  {
    allow_network_egress: networkPolicyFields.allow_network_egress,
    domain_allowlist: networkPolicyFields.domain_allowlist,
    additional_allowed_domains: Type.Optional(networkPolicyFields.additional_allowed_domains),
    allow_public_traffic: Type.Optional(networkPolicyFields.allow_public_traffic),
  },
  { additionalProperties: false },
);
export const NetworkPolicy = Type.Object(networkPolicyFields, { additionalProperties: false });

const ApprovalMode = literals(APPROVAL_MODES);

/** Extension field (not in the Agent Platform API): which server tool calls wait for approval. */
export const ToolApprovals = Type.Object(
  {
    default: ApprovalMode,
    overrides: Type.Record(Type.String({ minLength: 1, maxLength: 103 }), ApprovalMode, {
      maxProperties: 256,
      description:
        'Per tool: keys are a built-in tool name (e.g. sandbox_run), <server name>__<tool> for an MCP tool, or <server name>__* for every tool of a server; the tool wins over the wildcard, the wildcard over default. A bare MCP tool name can only make calls ask (docs/tools.md)',
    }),
    timeoutSeconds: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: 604_800,
        description: 'A call nobody approved or denied within this many seconds is denied; absent: it waits',
      }),
    ),
  },
  {
    additionalProperties: false,
    title: 'ToolApprovals',
    description:
      'Extension field: approval of server tool calls (MCP tools and built-in tools that change things; read-only calls never ask). Default {"default":"auto","overrides":{}}. See docs/tools.md',
  },
);

const fields = {
  name: Type.String({ minLength: 1, maxLength: 100, pattern: NON_BLANK }),
  description: Type.String({ maxLength: 500, pattern: NON_BLANK }),
  instructions: Type.String({ maxLength: 100_000 }),
  model: Type.String({ minLength: 1, maxLength: 200, description: 'provider/model, e.g. openai/gpt-4.1 or scripted' }),
  maxSteps: Type.Integer({ minimum: 1, maximum: 128 }),
  mcpServers: Type.Array(McpServer, { maxItems: 64 }),
  clientTools: Type.Array(ClientTool, { maxItems: 64 }),
  skills: Type.Array(Skill, { maxItems: 128 }),
  outputFormat: Type.Union([
    outputFormatSchema(
      false,
      'Extension field: the structure of the replies when a message asks for none (docs/agents.md); null or {"type":"text"} for free text',
    ),
    Type.Null(),
  ]),
  contextPolicy: StringEnum(
    CONTEXT_POLICIES,
    "Extension field: how turns keep their context within the model's context window. truncation drops the oldest messages; compaction summarises the older conversation into a compaction item once the context passes compactThreshold (the default for agents created on a model other than scripted); none sends the whole conversation (a turn past the window fails with model_context_exceeded). See docs/context.md",
  ),
  compactThreshold: Type.Union(
    [
      Type.Integer({
        minimum: 1_000,
        maximum: 100_000_000,
        description:
          "Extension field: under the compaction policy, the estimated input tokens past which the older conversation is summarised; null: 80 % of the model's window less the output reserved. See docs/context.md",
      }),
      Type.Null(),
    ],
    { description: 'Extension field: null for 80 % of the window less the output reserved' },
  ),
};

export const AgentCreateBody = Type.Object(
  {
    name: fields.name,
    description: Type.Optional(fields.description),
    instructions: Type.Optional(fields.instructions),
    model: Type.Optional(fields.model),
    maxSteps: Type.Optional(fields.maxSteps),
    mcpServers: Type.Optional(fields.mcpServers),
    clientTools: Type.Optional(fields.clientTools),
    skills: Type.Optional(fields.skills),
    networkPolicy: Type.Optional(NetworkPolicyInput),
    toolApprovals: Type.Optional(ToolApprovals),
    outputFormat: Type.Optional(fields.outputFormat),
    contextPolicy: Type.Optional(fields.contextPolicy),
    compactThreshold: Type.Optional(fields.compactThreshold),
    budget: Type.Optional(AgentBudgetInput),
  },
  { additionalProperties: false },
);

export const AgentUpdateBody = Type.Object(
  {
    name: Type.Optional(fields.name),
    description: Type.Optional(Type.Union([fields.description, Type.Null()])),
    instructions: Type.Optional(fields.instructions),
    model: Type.Optional(fields.model),
    maxSteps: Type.Optional(fields.maxSteps),
    mcpServers: Type.Optional(fields.mcpServers),
    clientTools: Type.Optional(fields.clientTools),
    skills: Type.Optional(fields.skills),
    networkPolicy: Type.Optional(Type.Union([NetworkPolicyInput, Type.Null()])),
    toolApprovals: Type.Optional(ToolApprovals),
    outputFormat: Type.Optional(fields.outputFormat),
    contextPolicy: Type.Optional(fields.contextPolicy),
    version: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: 2147483647,
        description:
          'Extension field: the version this change expects to replace, as If-Match says it; another one current is a 409 version_conflict',
      }),
    ),
    compactThreshold: Type.Optional(fields.compactThreshold),
    budget: Type.Optional(AgentBudgetInput),
  },
  { additionalProperties: false, minProperties: 1 },
);

export const AgentUpdateHeaders = Type.Object({
  'if-match': Type.Optional(
    Type.String({
      pattern: '^\\s*("[1-9][0-9]{0,9}"|[1-9][0-9]{0,9})\\s*$',
      description:
        'The agent version this change expects to replace ("3" or 3). Another version current is a 409 version_conflict whose details name it.',
    }),
  ),
});

export const Agent = Type.Object(
  {
    id: Uuid,
    object: Type.Literal('agent'),
    name: Type.String(),
    description: Type.Union([Type.String(), Type.Null()]),
    instructions: Type.String(),
    model: Type.String(),
    maxSteps: Type.Integer(),
    mcpServers: Type.Array(McpServer),
    clientTools: Type.Array(ClientTool),
    skills: Type.Array(Skill),
    networkPolicy: Type.Union([NetworkPolicy, Type.Null()]),
    toolApprovals: ToolApprovals,
    outputFormat: Type.Union([OutputFormatView, Type.Null()], {
      description: 'Extension field: the structure of replies to messages that ask for none; null for free text',
    }),
    contextPolicy: fields.contextPolicy,
    compactThreshold: fields.compactThreshold,
    budget: AgentBudget,
    isDefault: Type.Boolean(),
    version: Type.Integer({ description: 'Rises on every change; each version is kept' }),
    createdAt: Type.String({ format: 'date-time' }),
    updatedAt: Type.String({ format: 'date-time' }),
  },
  { additionalProperties: false },
);

/** Create, update and get also say what will not work as configured; the agent is saved either way. */
export const AgentView = Type.Object({
  agent: Agent,
  warnings: Type.Array(Type.Object({ code: Type.String(), message: Type.String() }), {
    description:
      'Non-fatal notes: model_not_configured when the model provider has no API key here (turns fail until it is set), then the warnings every message accepted for this agent carries (tool_unavailable, skill_unavailable, network_egress_disabled, public_traffic_unsupported: configured, but this deployment cannot run it as configured)',
  }),
});
export const AgentList = Type.Object({ data: Type.Array(Agent) });

const versionFields = Type.Omit(Agent, ['id', 'object', 'budget', 'isDefault', 'version', 'createdAt', 'updatedAt']);

export const AgentConfig = Type.Object(versionFields.properties, {
  additionalProperties: false,
  description: 'Everything a version of an agent fixes',
});

export const AgentVersion = Type.Object(
  {
    object: Type.Literal('agent.version'),
    agentId: Uuid,
    version: Type.Integer(),
    actor: Type.Union([Type.String(), Type.Null()], {
      description: 'Who made the version: the API key prefix, `cli` for the command line; null when not recorded',
    }),
    createdAt: Type.String({ format: 'date-time' }),
    config: AgentConfig,
    diff: Type.Optional(
      Type.Object(
        {
          from: Type.Integer(),
          changes: Type.Array(
            Type.Object(
              {
                path: Type.String({ description: 'JSON pointer into the config, e.g. /instructions' }),
                op: Type.Union([Type.Literal('add'), Type.Literal('remove'), Type.Literal('replace')]),
                before: Type.Optional(Type.Unknown()),
                after: Type.Optional(Type.Unknown()),
              },
              { additionalProperties: false },
            ),
          ),
        },
        { additionalProperties: false, description: 'With diff_from: what changed from that version to this one' },
      ),
    ),
  },
  { additionalProperties: false },
);

export const AgentVersionList = Type.Object(
  {
    object: Type.Literal('list'),
    data: Type.Array(AgentVersion),
    has_more: Type.Boolean(),
    next_cursor: Type.Union([Type.String(), Type.Null()], { description: 'Pass as cursor for the next page' }),
  },
  { description: 'Versions of an agent, newest first' },
);

const VersionNumber = Type.Integer({ minimum: 1, maximum: 2147483647 });

export const AgentVersionParams = Type.Object({ id: Uuid, version: VersionNumber });

export const AgentVersionQuery = Type.Object({
  diff_from: Type.Optional({ ...VersionNumber, description: 'Also answer what changed from this version' }),
});

export const AgentVersionListQuery = Type.Object({
  limit: Type.Integer({ minimum: 1, maximum: 100, default: 20 }),
  cursor: Type.Optional(
    Type.String({ minLength: 1, maxLength: 20, description: 'The next_cursor of the previous page, unchanged' }),
  ),
});

/** In a document, a connector of the organization named by its name: the same document applies in any organization. */
const McpConnectorByName = Type.Object(
  {
    kind: Type.Literal('custom'),
    server: Type.String({
      minLength: 1,
      maxLength: 100,
      pattern: NON_BLANK,
      description: 'The name of an MCP connector of the organization, or of one the same apply creates',
    }),
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    ...samplingOptIn,
  },
  { additionalProperties: false, title: 'Custom server of the organization, by name' },
);

export const AgentDocument = Type.Object(
  {
    kind: Type.Literal('agent'),
    ...AgentCreateBody.properties,
    mcpServers: Type.Optional(
      Type.Array(Type.Union([McpInternal, McpToolkit, McpCustom, McpConnectorByName, McpUrl]), { maxItems: 64 }),
    ),
  },
  { additionalProperties: false, title: 'Agent document', description: 'An agent, keyed by its name' },
);
