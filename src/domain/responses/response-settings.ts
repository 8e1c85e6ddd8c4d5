/**
 * The OpenAI request settings compatibility mode takes on POST /v1/responses: function tools, tool_choice,
 * sampling numbers, metadata, reasoning. Each is checked and normalised here; response-request.ts assembles them.
 */
import { validationError } from '../../errors/app-error.ts';
import type { ModelSettings, ToolSpec } from '../../models/types.ts';

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

function text(value: unknown, param: string, max: number): string {
  if (typeof value !== 'string') throw validationError(param, `${param} must be a string`);
  if (value.length < 1 || value.length > max) throw validationError(param, `${param} must be 1-${max} characters`);
  return value;
}

export function tools(value: unknown): ToolSpec[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value) || value.length > 128)
    throw validationError('tools', 'tools must be an array of at most 128 tools');
  return value.flatMap((tool, index) => {
    const param = `tools[${index}]`;
    // A hosted MCP tool names a server of the agent (an SDK's approval flow keys on its server_label): the agent
    // already runs its servers, so it adds nothing to the turn.
    if (isRecord(tool) && tool.type === 'mcp') {
      text(tool.server_label, `${param}.server_label`, 200);
      return [];
    }
    if (!isRecord(tool) || tool.type !== 'function') {
      throw validationError(
        `${param}.type`,
        `${param}.type must be function or mcp (hosted tools run on the agent, not per response)`,
      );
    }
    const name = text(tool.name, `${param}.name`, 64);
    if (!/^[A-Za-z0-9_-]+$/.test(name))
      throw validationError(`${param}.name`, `${param}.name must be letters, digits, _ or -`);
    const parameters = isRecord(tool.parameters)
      ? tool.parameters
      : { type: 'object', properties: {}, additionalProperties: false };
    return [
      {
        name,
        description: typeof tool.description === 'string' ? tool.description : '',
        parameters,
        strict: tool.strict === true,
      },
    ];
  });
}

export function optionalNumber(value: unknown, param: string, min: number, max: number): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < min || value > max) {
    throw validationError(param, `${param} must be a number between ${min} and ${max}`);
  }
  return value;
}

export function optionalString(value: unknown, param: string, max = 512): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'string' || value.length > max) {
    throw validationError(param, `${param} must be a string of at most ${max} characters`);
  }
  return value;
}

/** `auto` | `none` | `required` | `{type: "function", name}` (OpenAI also accepts `{name}` alone). */
export function toolChoice(value: unknown): { echo: unknown; setting?: ModelSettings['toolChoice'] } {
  if (value === undefined || value === null) return { echo: 'auto' };
  if (value === 'auto' || value === 'none' || value === 'required') return { echo: value, setting: value };
  if (isRecord(value) && typeof value.name === 'string' && (value.type === undefined || value.type === 'function')) {
    return { echo: { type: 'function', name: value.name }, setting: { name: value.name } };
  }
  throw validationError('tool_choice', 'tool_choice must be auto, none, required or {"type":"function","name":…}');
}

export function reasoning(value: unknown): { effort: string | null; summary: string | null } {
  if (!isRecord(value)) return { effort: null, summary: null };
  return {
    effort: optionalString(value.effort, 'reasoning.effort', 32),
    summary: optionalString(value.summary, 'reasoning.summary', 32),
  };
}

export function metadataOf(value: unknown): Record<string, string> {
  if (value === undefined || value === null) return {};
  if (!isRecord(value)) throw validationError('metadata', 'metadata must be an object of strings');
  const entries = Object.entries(value);
  if (
    entries.length > 16 ||
    entries.some(([key, entry]) => key.length > 64 || typeof entry !== 'string' || entry.length > 512)
  ) {
    throw validationError(
      'metadata',
      'metadata must have at most 16 string values (keys ≤ 64, values ≤ 512 characters)',
    );
  }
  return Object.fromEntries(entries.flatMap(([key, entry]) => (typeof entry === 'string' ? [[key, entry]] : [])));
}
