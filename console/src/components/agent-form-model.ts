/**
 * The agent form as plain data: from an Agent, to a create or update body, and the API's `param` of a validation
 * error mapped back to the form row it names (`mcpServers[3].url` is the second URL row, say).
 */
import { DOMAIN_ALLOWLISTS, INTERNAL_TOOLS } from '../api/enums.ts';
import { formChecks } from './ui.tsx';

export { belongsTo } from './ui.tsx';

import type {
  Agent,
  AgentBudget,
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
  /** `budget`: the cap in USD (empty: none) and its period. Not versioned: changing it alone keeps the version. */
  budget: { limitUsd: string; period: BudgetPeriod };
}

export type BudgetPeriod = NonNullable<AgentBudget>['period'];
export const BUDGET_PERIODS: readonly BudgetPeriod[] = ['month', 'lifetime'];

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
    budget: { limitUsd: '', period: 'month' },
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
  if (agent.budget !== null) form.budget = { limitUsd: String(agent.budget.limitUsd), period: agent.budget.period };
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
   * What the form edits; `contextPolicy`, `compactThreshold` and `outputFormat` are set through the API and left as
   * they are here.
   */
  body: Required<
    Omit<
      AgentCreate,
      'description' | 'networkPolicy' | 'contextPolicy' | 'compactThreshold' | 'outputFormat' | 'budget'
    >
  > & {
    description: string | null;
    networkPolicy: NetworkPolicyInput | null;
    budget: AgentBudget;
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
      budget:
        form.budget.limitUsd.trim() === ''
          ? null
          : { limitUsd: Number(form.budget.limitUsd), period: form.budget.period },
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
  if (body.budget !== null) create.budget = body.budget;
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
  if (!same(body.budget, agent.budget)) update.budget = body.budget;
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

/** The label of the field a form key names, as the form shows it; null for a key that is no field. */
export function labelOf(key: string): string | null {
  const top: Record<string, string> = {
    name: 'Name',
    description: 'Description',
    instructions: 'Instructions',
    model: 'Model',
    maxSteps: 'Max steps',
    internal: 'Built-in tools',
    mcpServers: 'MCP servers',
    clientTools: 'Client tools',
    skills: 'Skills',
    networkPolicy: 'Network policy',
    toolApprovals: 'Tool approvals',
    'toolApprovals.overrides': 'Approval overrides',
    'toolApprovals.timeoutSeconds': 'Approval timeout',
    budget: 'Budget',
    'budget.limitUsd': 'Budget (USD)',
    'budget.period': 'Budget period',
  };
  if (top[key] !== undefined) return top[key];
  const row = /^(urls|connectors|toolkits|clientTools|skills)\[(\d+)\](?:\.(\w+))?/.exec(key);
  if (row === null) return null;
  const n = Number(row[2]) + 1;
  const part = row[3];
  switch (row[1]) {
    case 'urls':
      return part === 'url' ? `Server ${n} URL` : part === 'name' ? `Server ${n} name` : `Server ${n}`;
    case 'connectors':
      return `Connector ${n}`;
    case 'toolkits':
      return `Toolkit ${n}`;
    case 'clientTools':
      return part === undefined ? `Tool ${n}` : `Tool ${n} ${part === 'parameters' ? 'parameters' : part}`;
    default:
      return part === 'repo' ? `Skill ${n} repository` : part === 'path' ? `Skill ${n} folder` : `Skill ${n}`;
  }
}

const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

/** Every error the form's own values show before anything is sent, keyed like the form, in words for people. */
export function checkForm(form: AgentForm): LocalErrors {
  const check = formChecks();
  check.required('name', 'Name', form.name);
  check.wholeNumber('maxSteps', 'Max steps', form.maxSteps, 1, 128);
  form.urls.forEach((row, i) => {
    check.required(`urls[${i}].name`, `Server ${i + 1} name`, row.name);
    check.url(`urls[${i}].url`, `Server ${i + 1} URL`, row.url);
  });
  form.connectors.forEach((row, i) => {
    if (row.serverId === '') check.add(`connectors[${i}]`, `Choose the connector of Connector ${i + 1}`);
    const first = form.connectors.findIndex((other) => other.serverId === row.serverId);
    if (first < i) check.add(`connectors[${i}]`, `Connector ${i + 1} is the same as Connector ${first + 1}`);
  });
  form.toolkits.forEach((toolkit, i) => {
    check.required(`toolkits[${i}]`, `Toolkit ${i + 1}`, toolkit);
  });
  form.clientTools.forEach((tool, i) => {
    if (tool.name.trim() === '') check.add(`clientTools[${i}].name`, `Tool ${i + 1} name is required`);
    else if (!TOOL_NAME.test(tool.name))
      check.add(`clientTools[${i}].name`, `Tool ${i + 1} name may use only letters, digits, _ and - (64 at most)`);
    check.required(`clientTools[${i}].description`, `Tool ${i + 1} description`, tool.description);
  });
  form.skills.forEach((skill, i) => {
    if (!/^[^/\s]+\/[^/\s]+$/.test(skill.repo.trim()))
      check.add(`skills[${i}].repo`, `Skill ${i + 1} repository must be owner/name`);
  });
  check.wholeNumber('toolApprovals.timeoutSeconds', 'Approval timeout', form.approvals.timeoutSeconds, 1, 86_400 * 7);
  const limit = form.budget.limitUsd.trim();
  if (limit !== '' && !(Number(limit) >= 0))
    check.add('budget.limitUsd', 'Budget must be a number of US dollars, 0 or more');
  return { ...check.errors, ...buildBody(form).local };
}

/**
 * The form key an agent warning concerns, read from what its message names (`internal tool "sandbox"`, `remote
 * MCP server "crm"`, `MCP server <id>`, a skill, the network policy, the model); null when none.
 */
export function warningKey(form: AgentForm, warning: { code: string; message: string }): string | null {
  if (warning.code.startsWith('model')) return 'model';
  if (/^internal tool "/.test(warning.message) || warning.code === 'network_egress_disabled') return 'internal';
  const remote = /^remote MCP server "([^"]*)"/.exec(warning.message);
  if (remote !== null) {
    const index = form.urls.findIndex((row) => row.name === remote[1]);
    return index < 0 ? 'mcpServers' : `urls[${index}]`;
  }
  const connector = form.connectors.findIndex((row) => row.serverId !== '' && warning.message.includes(row.serverId));
  if (connector >= 0) return `connectors[${connector}]`;
  if (warning.code.startsWith('skill')) return 'skills';
  if (warning.code.includes('network') || warning.code.includes('traffic')) return 'networkPolicy';
  if (warning.code === 'tools_truncated' || warning.code === 'tool_unavailable') return 'mcpServers';
  return null;
}
