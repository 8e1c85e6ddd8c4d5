/**
 * A message's own options for its turn (`messages.options`), mostly from the Responses surface's compatibility mode,
 * and the guard they are read back through; the turn reads them in place of the agent's settings.
 */
import {
  isAbsentOr,
  isArrayOf,
  isJsonObject,
  isNullableNumber,
  isNullableString,
  isNumber,
  isOneOf,
  isString,
} from '../../lib/guards.ts';
import { CONTEXT_POLICIES, type ContextPolicy } from '../../models/context-fit.ts';
import {
  isModelSettings,
  isResponseFormat,
  isToolSpec,
  type ModelSettings,
  type ResponseFormat,
  type ToolSpec,
} from '../../models/types.ts';
import type { Agent } from '../agents/agent-types.ts';

/** Per-message additions (mostly from the Responses surface's compatibility mode), for this turn only. */
export interface MessageOptions {
  instructions?: string;
  /** Function tools of this response; they behave as client tools. */
  tools?: ToolSpec[];
  settings?: ModelSettings;
  /**
   * The structure every model call of the turn is asked for and the final reply is checked against; null asks for
   * free text even when the agent has an output format. Absent at submit: the agent's output format, fixed here.
   */
  responseFormat?: ResponseFormat | null;
  /** What the Responses surface echoes back in the Response object. */
  echo?: ResponseEcho;
  /** A model in place of the agent's for this turn (the older API's per-action config). */
  model?: string;
  /** How this turn keeps its context within the model's window, in place of the agent's (Responses `truncation`). */
  contextPolicy?: ContextPolicy;
  /** The compaction threshold of this turn, in place of the agent's (Responses `context_management`). */
  compactThreshold?: number | null;
}

/** Request settings a Response object repeats (absent fields of older rows take their defaults). */
export interface ResponseEcho {
  metadata: Record<string, string>;
  toolChoice: unknown;
  temperature: number | null;
  topP: number | null;
  parallelToolCalls: boolean;
  /** Absent in rows written before previous_response_id was echoed. */
  previousResponseId?: string | null;
  presencePenalty?: number;
  frequencyPenalty?: number;
  topLogprobs?: number;
  maxOutputTokens?: number | null;
  maxToolCalls?: number | null;
  serviceTier?: string;
  safetyIdentifier?: string | null;
  promptCacheKey?: string | null;
  reasoning?: { effort: string | null; summary: string | null };
  /** The tools the turn could use, in Responses tool shapes (see responses/response-tools.ts). */
  tools?: Record<string, unknown>[];
  /** Absent in rows written before background Responses: false. */
  background?: boolean;
  /** false: not retrievable, deleted once answered. Absent in older rows: true. */
  store?: boolean;
  /** The request's `truncation`, else the agent's policy as it; absent in rows written before it was honoured. */
  truncation?: 'auto' | 'disabled';
}

function isResponseEcho(value: unknown): value is ResponseEcho {
  if (!isJsonObject(value) || !isJsonObject(value.metadata)) return false;
  const { reasoning } = value;
  return (
    Object.values(value.metadata).every(isString) &&
    isNullableNumber(value.temperature) &&
    isNullableNumber(value.topP) &&
    typeof value.parallelToolCalls === 'boolean' &&
    isAbsentOr(value.previousResponseId, isNullableString) &&
    isAbsentOr(value.presencePenalty, isNumber) &&
    isAbsentOr(value.frequencyPenalty, isNumber) &&
    isAbsentOr(value.topLogprobs, isNumber) &&
    isAbsentOr(value.maxOutputTokens, isNullableNumber) &&
    isAbsentOr(value.maxToolCalls, isNullableNumber) &&
    isAbsentOr(value.serviceTier, isString) &&
    isAbsentOr(value.safetyIdentifier, isNullableString) &&
    isAbsentOr(value.promptCacheKey, isNullableString) &&
    (reasoning === undefined ||
      (isJsonObject(reasoning) && isNullableString(reasoning.effort) && isNullableString(reasoning.summary))) &&
    isAbsentOr(value.tools, (tools) => isArrayOf(tools, isJsonObject)) &&
    isAbsentOr(value.background, (flag) => typeof flag === 'boolean') &&
    isAbsentOr(value.store, (flag) => typeof flag === 'boolean') &&
    isAbsentOr(value.truncation, (mode) => mode === 'auto' || mode === 'disabled')
  );
}

/** What `messages.options` holds (see MessageOptions). */
export function isMessageOptions(value: unknown): value is MessageOptions {
  return (
    isJsonObject(value) &&
    isAbsentOr(value.instructions, isString) &&
    isAbsentOr(value.tools, (tools) => isArrayOf(tools, isToolSpec)) &&
    isAbsentOr(value.settings, isModelSettings) &&
    isAbsentOr(value.responseFormat, (format) => format === null || isResponseFormat(format)) &&
    isAbsentOr(value.echo, isResponseEcho) &&
    isAbsentOr(value.model, isString) &&
    isAbsentOr(value.contextPolicy, (policy) => isOneOf(CONTEXT_POLICIES, policy)) &&
    isAbsentOr(value.compactThreshold, isNullableNumber)
  );
}

/** The message's options with the agent's output format when the message asks for none (see MessageOptions). */
export function withAgentFormat(
  options: MessageOptions | null | undefined,
  agent: Pick<Agent, 'outputFormat'>,
): MessageOptions | null {
  if (options?.responseFormat !== undefined || agent.outputFormat === null) return options ?? null;
  return { ...options, responseFormat: agent.outputFormat };
}
