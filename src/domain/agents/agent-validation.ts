/**
 * The Agent rules that JSON Schema cannot say clearly: the exact shape of each mcpServers variant, uniqueness,
 * client tool parameter schemas, skill paths and model ids. Lengths, ranges and plain shapes are enforced by
 * the route schemas before these run; these still never trust their input.
 */
import { validationError } from '../../errors/app-error.ts';
import { isUuid } from '../../lib/ids.ts';
import { publicHttpsUrlProblem } from '../../lib/url-policy.ts';
import type { ModelRegistry } from '../../models/registry.ts';
import { reservedServerNameProblem } from '../../tools/naming.ts';
import { MAX_SAMPLING_MAX_TOKENS, type SamplingOptIn } from '../../tools/tool-config.ts';
import type { AgentConfig, ClientTool, McpServer, Skill, ToolApprovals } from './agent-types.ts';
import { INTERNAL_TOOLS, TOOLKIT_KINDS } from './agent-types.ts';
import { checkToolParameters } from './tool-parameters.ts';

export interface ValidationContext {
  models: ModelRegistry;
  allowInsecureDestinations: boolean;
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

const NON_BLANK = /\S/;
const TRIMMED = /^\S(?:[\s\S]*\S)?$/;

function exactKeys(item: Record<string, unknown>, path: string, required: string[], optional: string[]): void {
  for (const key of required) {
    if (!(key in item)) throw validationError(`${path}.${key}`, `${path}.${key} is required`);
  }
  for (const key of Object.keys(item)) {
    if (!required.includes(key) && !optional.includes(key)) {
      throw validationError(`${path}.${key}`, `${path}.${key} is not a recognised field of ${path}`);
    }
  }
}

function boundedString(value: unknown, path: string, min: number, max: number, pattern?: RegExp): string {
  if (typeof value !== 'string') throw validationError(path, `${path} must be a string`);
  const length = [...value].length;
  if (length < min || length > max) throw validationError(path, `${path} must be ${min}-${max} characters`);
  if (pattern === NON_BLANK && !NON_BLANK.test(value)) {
    throw validationError(path, `${path} must contain a non-whitespace character`);
  }
  if (pattern === TRIMMED && !TRIMMED.test(value)) {
    throw validationError(path, `${path} must not have leading or trailing whitespace`);
  }
  return value;
}

/** The name an entry gives its MCP server (its label in tool names and approvals). */
function serverName(value: unknown, path: string): string {
  const name = boundedString(value, path, 1, 100, NON_BLANK);
  const problem = reservedServerNameProblem(name);
  if (problem !== null) throw validationError(path, `${path} ${problem}`);
  return name;
}

const SAMPLING_KEYS = ['allowSampling', 'samplingMaxTokens'];

/** A connector's sampling opt-in (tool-config.ts `SamplingOptIn`), only the fields it names. */
function samplingOptIn(item: Record<string, unknown>, path: string): SamplingOptIn {
  const out: SamplingOptIn = {};
  if (item.allowSampling !== undefined) {
    if (typeof item.allowSampling !== 'boolean') {
      throw validationError(`${path}.allowSampling`, `${path}.allowSampling must be a boolean`);
    }
    out.allowSampling = item.allowSampling;
  }
  if (item.samplingMaxTokens !== undefined) {
    const cap = item.samplingMaxTokens;
    if (typeof cap !== 'number' || !Number.isInteger(cap) || cap < 1 || cap > MAX_SAMPLING_MAX_TOKENS) {
      throw validationError(
        `${path}.samplingMaxTokens`,
        `${path}.samplingMaxTokens must be an integer from 1 to ${MAX_SAMPLING_MAX_TOKENS}`,
      );
    }
    out.samplingMaxTokens = cap;
  }
  return out;
}

/** Parses one mcpServers entry: exactly one variant, exactly its properties. */
export function parseMcpServer(item: unknown, path: string, context: ValidationContext): McpServer {
  if (!isRecord(item)) throw validationError(path, `${path} must be an object`);
  if ('type' in item) {
    if (item.type !== 'url') throw validationError(`${path}.type`, `${path}.type must be "url"`);
    exactKeys(item, path, ['type', 'name', 'url'], SAMPLING_KEYS);
    const name = serverName(item.name, `${path}.name`);
    const url = boundedString(item.url, `${path}.url`, 1, 2000);
    const problem = publicHttpsUrlProblem(url, context.allowInsecureDestinations);
    if (problem !== null) throw validationError(`${path}.url`, `${path}.url ${problem}`);
    return { type: 'url', name, url, ...samplingOptIn(item, path) };
  }
  const kind = item.kind;
  if (kind === undefined) throw validationError(`${path}.kind`, `${path}.kind is required (or use "type":"url")`);
  if (kind === 'internal') {
    exactKeys(item, path, ['kind', 'name'], []);
    const name = INTERNAL_TOOLS.find((tool) => tool === item.name);
    if (name === undefined) {
      throw validationError(`${path}.name`, `${path}.name must be one of ${INTERNAL_TOOLS.join(', ')}`);
    }
    return { kind, name };
  }
  if (kind === 'custom') {
    exactKeys(item, path, ['kind', 'serverId'], ['name', ...SAMPLING_KEYS]);
    if (typeof item.serverId !== 'string' || !isUuid(item.serverId)) {
      throw validationError(`${path}.serverId`, `${path}.serverId must be a UUID`);
    }
    const sampling = samplingOptIn(item, path);
    if (item.name === undefined) return { kind, serverId: item.serverId.toLowerCase(), ...sampling };
    const name = serverName(item.name, `${path}.name`);
    return { kind, serverId: item.serverId.toLowerCase(), name, ...sampling };
  }
  const toolkitKind = TOOLKIT_KINDS.find((candidate) => candidate === kind);
  if (toolkitKind !== undefined) {
    exactKeys(item, path, ['kind', 'toolkit'], []);
    return { kind: toolkitKind, toolkit: boundedString(item.toolkit, `${path}.toolkit`, 1, 300, TRIMMED) };
  }
  throw validationError(
    `${path}.kind`,
    `${path}.kind must be one of internal, custom, ${TOOLKIT_KINDS.join(', ')} (or use "type":"url")`,
  );
}

/** A key that two entries share exactly when they configure the same server. */
function mcpIdentity(server: McpServer): string[] {
  if ('type' in server) return [`url-name:${server.name}`, `url:${server.url}`];
  if (server.kind === 'internal') return [`internal:${server.name}`];
  if (server.kind === 'custom') return [`custom:${server.serverId}`];
  return [`${server.kind}:${server.toolkit}`];
}

export function parseMcpServers(value: unknown, context: ValidationContext): McpServer[] {
  if (!Array.isArray(value)) throw validationError('mcpServers', 'mcpServers must be an array');
  if (value.length > 64) throw validationError('mcpServers', 'mcpServers must have at most 64 items');
  const seen = new Map<string, number>();
  return value.map((item, index) => {
    const server = parseMcpServer(item, `mcpServers[${index}]`, context);
    for (const identity of mcpIdentity(server)) {
      const first = seen.get(identity);
      if (first !== undefined) {
        throw validationError(`mcpServers[${index}]`, `mcpServers[${index}] duplicates mcpServers[${first}]`);
      }
      seen.set(identity, index);
    }
    return server;
  });
}

export function checkClientTools(tools: ClientTool[]): void {
  const names = new Map<string, number>();
  tools.forEach((tool, index) => {
    const path = `clientTools[${index}]`;
    const first = names.get(tool.name);
    if (first !== undefined) {
      throw validationError(`${path}.name`, `${path}.name "${tool.name}" duplicates clientTools[${first}].name`);
    }
    names.set(tool.name, index);
    if (!NON_BLANK.test(tool.description)) {
      throw validationError(`${path}.description`, `${path}.description must contain a non-whitespace character`);
    }
    const problem = checkToolParameters(tool.parameters, tool.strict, `${path}.parameters`);
    if (problem !== null) throw validationError(problem.path, `${problem.path}: ${problem.message}`);
  });
}

const REPO_PATTERN = /^[A-Za-z0-9_.-]+\/[A-Za-z0-9_.-]+$/;

/** Why a skill path breaks the rules of spec section 2, or null. */
export function skillPathProblem(path: string): string | null {
  if (path.startsWith('/')) return 'must be relative (no leading slash)';
  if (path.includes('\\')) return 'must not contain a backslash';
  if (/[?#]/.test(path)) return 'must not contain ? or #';
  if (/\s/.test(path)) return 'must not contain whitespace';
  for (const segment of path.split('/')) {
    if (segment === '') return 'must not contain empty segments or a trailing slash';
    if (segment === '.' || segment === '..') return 'must not contain . or .. segments';
    if (segment.toLowerCase() === 'skill.md') return 'must name the skill folder, not a SKILL.md file';
  }
  return null;
}

export function checkSkills(skills: Skill[]): void {
  const seen = new Map<string, number>();
  skills.forEach((skill, index) => {
    const path = `skills[${index}]`;
    if (!REPO_PATTERN.test(skill.repo) || skill.repo.split('/').some((part) => part === '.' || part === '..')) {
      throw validationError(`${path}.repo`, `${path}.repo must have the form owner/name`);
    }
    if (skill.repo.toLowerCase().endsWith('.git')) {
      throw validationError(`${path}.repo`, `${path}.repo must not end with .git`);
    }
    const problem = skillPathProblem(skill.path);
    if (problem !== null) throw validationError(`${path}.path`, `${path}.path ${problem}`);
    const key = `${skill.repo.toLowerCase()}\n${skill.path}`;
    const first = seen.get(key);
    if (first !== undefined) throw validationError(path, `${path} duplicates skills[${first}]`);
    seen.set(key, index);
  });
}

export function checkModel(model: string, context: ValidationContext): void {
  const problem = context.models.problem(model);
  if (problem !== null) throw validationError('model', problem);
}

export function checkNetworkPolicyDomains(domains: string[]): void {
  const seen = new Set<string>();
  domains.forEach((domain, index) => {
    if (seen.has(domain.toLowerCase())) {
      throw validationError(
        `networkPolicy.additional_allowed_domains[${index}]`,
        `networkPolicy.additional_allowed_domains[${index}] is listed twice`,
      );
    }
    seen.add(domain.toLowerCase());
  });
}

const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;
/** `<server name>__*`: a server's agent-local name (1-100 characters, not blank, no control characters). */
const SERVER_WILDCARD = /^(?=.*\S)(.{1,100})__\*$/su;
const hasControl = (text: string): boolean => [...text].some((char) => (char.codePointAt(0) ?? 0) < 0x20);

/** Keys of `toolApprovals.overrides`: a tool name (a built-in's, or an MCP tool's `<server>__<tool>`), or `<server name>__*`. */
export function checkToolApprovals(approvals: ToolApprovals): void {
  for (const key of Object.keys(approvals.overrides)) {
    if (TOOL_NAME.test(key) || (SERVER_WILDCARD.test(key) && !hasControl(key) && key.isWellFormed())) continue;
    throw validationError(
      `toolApprovals.overrides.${key}`,
      `toolApprovals.overrides keys must be a tool name (1-64 letters, digits, _ or -) or <server name>__* (server name 1-100 characters); got ${JSON.stringify(key.slice(0, 120))}`,
    );
  }
}

/** Runs every semantic rule over a complete config; throws the first problem found. */
export function checkAgentConfig(config: AgentConfig, context: ValidationContext): void {
  checkModel(config.model, context);
  checkClientTools(config.clientTools);
  checkSkills(config.skills);
  if (config.networkPolicy !== null) checkNetworkPolicyDomains(config.networkPolicy.additional_allowed_domains);
  checkToolApprovals(config.toolApprovals);
}
