/**
 * The OpenAI request settings compatibility mode takes on POST /v1/responses (function tools, tool_choice, sampling
 * numbers, metadata, reasoning), normalised from a body its schema already validated (http/schemas/responses.ts);
 * response-request.ts assembles them.
 */
import { validationError } from '../../errors/app-error.ts';
import type { ContextPolicy } from '../../models/context-fit.ts';
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

/**
 * The settings Responses and Chat Completions share beyond sampling: `presence_penalty`, `frequency_penalty`, and
 * `parallel_tool_calls: false` (at most one tool call per model step).
 */
export function penaltySettings(body: Record<string, unknown>): ModelSettings {
  const settings: ModelSettings = {};
  const presencePenalty = optionalNumber(body.presence_penalty);
  const frequencyPenalty = optionalNumber(body.frequency_penalty);
  if (presencePenalty !== undefined) settings.presencePenalty = presencePenalty;
  if (frequencyPenalty !== undefined) settings.frequencyPenalty = frequencyPenalty;
  if (body.parallel_tool_calls === false) settings.parallelToolCalls = false;
  return settings;
}

export const optionalString = (value: unknown): string | null => (typeof value === 'string' ? value : null);

/** `auto` | `none` | `required` | `{type: "function", name}` (OpenAI also accepts `{name}` alone). */
export function toolChoice(value: unknown): { echo: unknown; setting?: ModelSettings['toolChoice'] } {
  if (value === 'auto' || value === 'none' || value === 'required') return { echo: value, setting: value };
  if (isRecord(value) && typeof value.name === 'string') {
    return { echo: { type: 'function', name: value.name }, setting: { name: value.name } };
  }
  return { echo: 'auto' };
}

/**
 * `truncation`: `auto` fits the context to the model's window (the truncation policy), `disabled` sends it whole
 * (a context too long fails the Response with the provider's error, as at OpenAI); absent or null: the agent's
 * policy.
 */
export function contextPolicyOf(value: unknown): ContextPolicy | undefined {
  if (value === 'auto') return 'truncation';
  return value === 'disabled' ? 'none' : undefined;
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

/**
 * `include` values a Response honours: the items they add are of kinds Agentry never produces (reasoning, hosted
 * search, code interpreter, computer use), so there is nothing to add. Logprobs and input image URLs cannot be
 * included: refused.
 */
export const INCLUDABLE = [
  'reasoning.encrypted_content',
  'file_search_call.results',
  'web_search_call.results',
  'web_search_call.action.sources',
  'code_interpreter_call.outputs',
  'computer_call_output.output.image_url',
];

/** Why each field a compatibility-mode body may carry cannot be honoured with this value (null: it can). */
const UNSUPPORTED: Record<string, (value: unknown) => string | null> = {
  prompt: (value) =>
    value === null ? null : 'prompt templates are not stored here: send the text as instructions or input',
  service_tier: (value) =>
    value === null || value === 'auto' || value === 'default'
      ? null
      : `service_tier ${JSON.stringify(value)} is not offered: one tier serves every request ("auto" or "default")`,
  top_logprobs: (value) =>
    value === null || value === 0 ? null : 'top_logprobs is not supported: responses carry no logprobs (send 0)',
  reasoning: (value) =>
    !isRecord(value) || Object.values(value).every((entry) => entry === null)
      ? null
      : "reasoning settings are not supported per request: the agent's model decides",
};

/**
 * `context_management`: `[{type: "compaction", compact_threshold?: N}]` turns on the compaction policy for the
 * Response (N: its threshold in tokens, else the default), null or `[]` leaves the context policy as it is.
 * Anything else is a 400 naming the field.
 */
export function compactionOf(value: unknown): { compactThreshold: number | null } | undefined {
  if (value === undefined || value === null) return undefined;
  if (!Array.isArray(value)) throw validationError('context_management', 'context_management must be an array or null');
  let found: { compactThreshold: number | null } | undefined;
  value.forEach((entry: unknown, index) => {
    const field = `context_management[${index}]`;
    if (!isRecord(entry) || entry.type !== 'compaction')
      throw validationError(`${field}.type`, 'the one context management offered is {"type": "compaction"}');
    const extra = Object.keys(entry).find((key) => key !== 'type' && key !== 'compact_threshold');
    if (extra !== undefined) throw validationError(`${field}.${extra}`, `unknown field ${extra}`);
    const threshold = entry.compact_threshold;
    if (threshold !== undefined && threshold !== null && !(Number.isInteger(threshold) && Number(threshold) >= 1_000))
      throw validationError(
        `${field}.compact_threshold`,
        'compact_threshold must be an integer of at least 1000 (tokens)',
      );
    found = { compactThreshold: typeof threshold === 'number' ? threshold : null };
  });
  return found;
}

/** Throws a 400 naming the first field (or `include` entry) of a compatibility-mode body that cannot be honoured. */
export function refuseUnsupported(body: Record<string, unknown>): void {
  for (const [field, why] of Object.entries(UNSUPPORTED)) {
    if (!Object.hasOwn(body, field) || body[field] === undefined) continue;
    const problem = why(body[field]);
    if (problem !== null) throw validationError(field, problem);
  }
  if (!Array.isArray(body.include)) return;
  body.include.forEach((entry: unknown, index) => {
    if (typeof entry === 'string' && INCLUDABLE.includes(entry)) return;
    throw validationError(
      `include[${index}]`,
      `include ${JSON.stringify(entry)} cannot be honoured here (${entry === 'message.output_text.logprobs' ? 'responses carry no logprobs' : 'not supported'}); the values accepted: ${INCLUDABLE.join(', ')}`,
    );
  });
}
