/**
 * The OpenAI request settings compatibility mode takes on POST /v1/responses (function tools, tool_choice, sampling
 * numbers, metadata, reasoning), normalised from a body its schema already validated (http/schemas/responses.ts);
 * response-request.ts assembles them.
 */
import type { ModelSettings, ToolSpec } from '../../models/types.ts';

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

export function tools(value: unknown): ToolSpec[] {
  if (!Array.isArray(value)) return [];
  // A hosted MCP tool names a server of the agent (an SDK's approval flow keys on its server_label): the agent
  // already runs its servers, so it adds nothing to the turn.
  return value.flatMap((tool: unknown) => {
    if (!isRecord(tool) || tool.type !== 'function' || typeof tool.name !== 'string') return [];
    const parameters = isRecord(tool.parameters)
      ? tool.parameters
      : { type: 'object', properties: {}, additionalProperties: false };
    return [
      {
        name: tool.name,
        description: typeof tool.description === 'string' ? tool.description : '',
        parameters,
        strict: tool.strict === true,
      },
    ];
  });
}

export const optionalNumber = (value: unknown): number | undefined => (typeof value === 'number' ? value : undefined);

export const optionalString = (value: unknown): string | null => (typeof value === 'string' ? value : null);

/** `auto` | `none` | `required` | `{type: "function", name}` (OpenAI also accepts `{name}` alone). */
export function toolChoice(value: unknown): { echo: unknown; setting?: ModelSettings['toolChoice'] } {
  if (value === 'auto' || value === 'none' || value === 'required') return { echo: value, setting: value };
  if (isRecord(value) && typeof value.name === 'string') {
    return { echo: { type: 'function', name: value.name }, setting: { name: value.name } };
  }
  return { echo: 'auto' };
}

export function reasoning(value: unknown): { effort: string | null; summary: string | null } {
  if (!isRecord(value)) return { effort: null, summary: null };
  return { effort: optionalString(value.effort), summary: optionalString(value.summary) };
}

export function metadataOf(value: unknown): Record<string, string> {
  if (!isRecord(value)) return {};
  return Object.fromEntries(
    Object.entries(value).flatMap(([key, entry]) => (typeof entry === 'string' ? [[key, entry]] : [])),
  );
}
