/**
 * The agent form as plain data: from an Agent, to a create or update body, and the API's `param` of a validation
 * error mapped back to the form row it names (`mcpServers[3].url` is the second URL row, say).
 */
import { DOMAIN_ALLOWLISTS, INTERNAL_TOOLS } from '../api/enums.ts';
import type {
  Agent,
  AgentCreate,
  AgentUpdate,
  InternalToolName,
  McpServerEntry,
  NetworkPolicy,
  NetworkPolicyInput,
  ToolApprovals,
} from '../api/types.ts';

// The generated list and the generated type come from the same document; this fails to compile if they part.
export const INTERNAL_TOOL_NAMES: readonly InternalToolName[] = INTERNAL_TOOLS;
export const ALLOWLISTS: readonly NetworkPolicy['domain_allowlist'][] = DOMAIN_ALLOWLISTS;

export interface ClientToolRow {
  name: string;
  description: string;
  parameters: string;
  strict: boolean;
}

export interface AgentForm {
  name: string;
  description: string;
  instructions: string;
  model: string;
  maxSteps: string;
  internal: InternalToolName[];
  connectors: { serverId: string; name: string }[];
  urls: { name: string; url: string }[];
  toolkits: string[];
  clientTools: ClientToolRow[];
  skills: { repo: string; path: string }[];
  network: { enabled: boolean; egress: boolean; allowlist: NetworkPolicy['domain_allowlist']; domains: string };
  /** `toolApprovals`: the default mode, overrides one per line (`name: always_ask`), the timeout in seconds. */
  approvals: { default: ToolApprovals['default']; overrides: string; timeoutSeconds: string };
}

export const APPROVAL_MODES: readonly ToolApprovals['default'][] = ['auto', 'always_ask'];

export const EMPTY_PARAMETERS =
  '{\n  "type": "object",\n  "properties": {},\n  "required": [],\n  "additionalProperties": false\n}';

export function emptyForm(): AgentForm {
  return {
    name: '',
    description: '',
    instructions: '',
    model: '',
    maxSteps: '',
    internal: [],
    connectors: [],
    urls: [],
    toolkits: [],
    clientTools: [],
    skills: [],
    network: { enabled: false, egress: false, allowlist: 'none', domains: '' },
    approvals: { default: 'auto', overrides: '', timeoutSeconds: '' },
  };
}

export function formOf(agent: Agent): AgentForm {
  const form = emptyForm();
  form.name = agent.name;
  form.description = agent.description ?? '';
  form.instructions = agent.instructions;
  form.model = agent.model;
  form.maxSteps = String(agent.maxSteps);
  for (const entry of agent.mcpServers) {
    if ('kind' in entry && entry.kind === 'internal') form.internal.push(entry.name);
    else if ('kind' in entry && entry.kind === 'custom')
      form.connectors.push({ serverId: entry.serverId, name: entry.name ?? '' });
    else if ('kind' in entry && entry.kind === 'composio') form.toolkits.push(entry.toolkit);
    else if ('type' in entry) form.urls.push({ name: entry.name, url: entry.url });
  }
  form.clientTools = agent.clientTools.map((tool) => ({
    name: tool.name,
    description: tool.description,
    parameters: JSON.stringify(tool.parameters, null, 2),
    strict: tool.strict,
  }));
  form.skills = agent.skills.map((skill) => ({ ...skill }));
  if (agent.networkPolicy !== null) {
    form.network = {
      enabled: true,
      egress: agent.networkPolicy.allow_network_egress,
      allowlist: agent.networkPolicy.domain_allowlist,
      domains: (agent.networkPolicy.additional_allowed_domains ?? []).join('\n'),
    };
  }
  form.approvals = {
    default: agent.toolApprovals.default,
    overrides: Object.entries(agent.toolApprovals.overrides)
      .map(([key, mode]) => `${key}: ${mode}`)
      .join('\n'),
    timeoutSeconds: agent.toolApprovals.timeoutSeconds === undefined ? '' : String(agent.toolApprovals.timeoutSeconds),
  };
  return form;
}

/** The policy the approvals rows describe; a line that is not `key: auto|always_ask` is a local error. */
function toolApprovalsOf(form: AgentForm, local: LocalErrors): ToolApprovals {
  const overrides: Record<string, ToolApprovals['default']> = {};
  for (const line of form.approvals.overrides.split('\n')) {
    if (line.trim() === '') continue;
    const at = line.lastIndexOf(':');
    const key = line.slice(0, at).trim();
    const mode = APPROVAL_MODES.find((value) => value === line.slice(at + 1).trim());
    if (at < 0 || key === '' || mode === undefined) {
      local['toolApprovals.overrides'] = `"${line.trim()}" is not <tool or server__*>: auto|always_ask`;
      continue;
    }
    overrides[key] = mode;
  }
  const timeout = form.approvals.timeoutSeconds.trim();
  return {
    default: form.approvals.default,
    overrides,
    ...(timeout === '' ? {} : { timeoutSeconds: Number(timeout) }),
  };
}

/** Errors found before sending (JSON that does not parse), keyed like the API's `param`. */
export type LocalErrors = Record<string, string>;

interface Built {
  /**
   * What the form edits; `contextPolicy`, `compactThreshold`, `outputFormat` and `budget` are set through the API and
   * left as they are here.
   */
  body: Required<
    Omit<
      AgentCreate,
      'description' | 'networkPolicy' | 'contextPolicy' | 'compactThreshold' | 'outputFormat' | 'budget'
    >
  > & {
    description: string | null;
    networkPolicy: NetworkPolicyInput | null;
  };
  /** The form row each mcpServers entry came from, by index. */
  mcpKeys: string[];
  local: LocalErrors;
}

export function buildBody(form: AgentForm): Built {
  const local: LocalErrors = {};
  const mcpServers: McpServerEntry[] = [];
  const mcpKeys: string[] = [];
  for (const name of form.internal) {
    mcpServers.push({ kind: 'internal', name });
    mcpKeys.push('internal');
  }
  form.connectors.forEach((row, index) => {
    mcpServers.push(
      row.name.trim() === ''
        ? { kind: 'custom', serverId: row.serverId }
        : { kind: 'custom', serverId: row.serverId, name: row.name },
    );
    mcpKeys.push(`connectors[${index}]`);
  });
  form.urls.forEach((row, index) => {
    mcpServers.push({ type: 'url', name: row.name, url: row.url });
    mcpKeys.push(`urls[${index}]`);
  });
  form.toolkits.forEach((toolkit, index) => {
    mcpServers.push({ kind: 'composio', toolkit });
    mcpKeys.push(`toolkits[${index}]`);
  });
  const clientTools = form.clientTools.map((row, index) => {
    let parameters: Record<string, unknown> = {};
    try {
      const parsed: unknown = JSON.parse(row.parameters);
      if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed))
        parameters = parsed as Record<string, unknown>;
      else local[`clientTools[${index}].parameters`] = 'parameters must be a JSON object';
    } catch (error) {
      local[`clientTools[${index}].parameters`] =
        `parameters is not valid JSON: ${error instanceof Error ? error.message : ''}`;
    }
    return { type: 'function' as const, name: row.name, description: row.description, parameters, strict: row.strict };
  });
  const maxSteps = form.maxSteps.trim() === '' ? 32 : Number(form.maxSteps);
  const domains = form.network.domains
    .split(/[\s,]+/)
    .map((domain) => domain.trim())
    .filter((domain) => domain !== '');
  // Written out whole (as the API answers it), so an unchanged policy compares equal to the stored one.
  const networkPolicy: NetworkPolicyInput | null = form.network.enabled
    ? {
        allow_network_egress: form.network.egress,
        domain_allowlist: form.network.allowlist,
        additional_allowed_domains: domains,
        allow_public_traffic: false,
      }
    : null;
  return {
    body: {
      name: form.name,
      description: form.description === '' ? null : form.description,
      instructions: form.instructions,
      model: form.model.trim(),
      maxSteps,
      mcpServers,
      clientTools,
      skills: form.skills.map((skill) => ({ repo: skill.repo, path: skill.path })),
      networkPolicy,
      toolApprovals: toolApprovalsOf(form, local),
    },
    mcpKeys,
    local,
  };
}

/** The create body: empty optional fields are left to the server's defaults. */
export function createBody(built: Built): AgentCreate {
  const { body } = built;
  const create: AgentCreate = { name: body.name, instructions: body.instructions, maxSteps: body.maxSteps };
  if (body.description !== null) create.description = body.description;
  if (body.model !== '') create.model = body.model;
  if (body.mcpServers.length > 0) create.mcpServers = body.mcpServers;
  if (body.clientTools.length > 0) create.clientTools = body.clientTools;
  if (body.skills.length > 0) create.skills = body.skills;
  if (body.networkPolicy !== null) create.networkPolicy = body.networkPolicy;
  if (body.toolApprovals.default !== 'auto' || Object.keys(body.toolApprovals.overrides).length > 0)
    create.toolApprovals = body.toolApprovals;
  return create;
}

/** JSON with object keys sorted, so values compare equal whatever order their keys came in. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, inner: unknown) =>
    typeof inner === 'object' && inner !== null && !Array.isArray(inner)
      ? Object.fromEntries(Object.entries(inner).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : inner,
  );
}

const same = (a: unknown, b: unknown) => canonical(a) === canonical(b);

/** The update body: only the fields that differ from the agent as stored (each change is a new version). */
export function updateBody(built: Built, agent: Agent): AgentUpdate {
  const { body } = built;
  const update: AgentUpdate = {};
  if (body.name !== agent.name) update.name = body.name;
  if (body.description !== agent.description) update.description = body.description;
  if (body.instructions !== agent.instructions) update.instructions = body.instructions;
  if (body.model !== '' && body.model !== agent.model) update.model = body.model;
  if (body.maxSteps !== agent.maxSteps) update.maxSteps = body.maxSteps;
  if (!same(body.mcpServers, agent.mcpServers)) update.mcpServers = body.mcpServers;
  if (!same(body.clientTools, agent.clientTools)) update.clientTools = body.clientTools;
  if (!same(body.skills, agent.skills)) update.skills = body.skills;
  if (!same(body.networkPolicy, agent.networkPolicy)) update.networkPolicy = body.networkPolicy;
  if (!same(body.toolApprovals, agent.toolApprovals)) update.toolApprovals = body.toolApprovals;
  return update;
}

/**
 * The form key a `param` of the API names: `mcpServers[i]…` becomes the row it came from; anything else keeps its
 * own path. Fields show the error whose key is the longest prefix they own.
 */
export function formKeyOf(param: string, mcpKeys: string[]): string {
  const match = /^mcpServers\[(\d+)\](.*)$/.exec(param);
  if (match === null) return param;
  const key = mcpKeys[Number(match[1])];
  return key === undefined ? 'mcpServers' : `${key}${key === 'internal' ? '' : (match[2] ?? '')}`;
}

/** Whether an error at `errorKey` belongs to the field `fieldKey` (itself or something inside it). */
export function belongsTo(errorKey: string, fieldKey: string): boolean {
  return errorKey === fieldKey || errorKey.startsWith(`${fieldKey}.`) || errorKey.startsWith(`${fieldKey}[`);
}
