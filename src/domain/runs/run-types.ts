/** The Run and Span resources (DESIGN 5): snake_case, times in Unix seconds. */

import {
  RUN_SOURCES,
  type RunSource,
  SPAN_KINDS,
  SPAN_STATUSES,
  type SpanKind,
  type SpanStatus,
} from '../../storage/column-values.ts';
import type { MessageError, MessageStatus } from '../turns/message-types.ts';

export { RUN_SOURCES, type RunSource, SPAN_KINDS, SPAN_STATUSES, type SpanKind, type SpanStatus };

export interface RunUsage {
  input_tokens: number;
  /** Runs only: of input_tokens, those read from the provider's prompt cache. */
  input_tokens_details?: { cached_tokens: number };
  output_tokens: number;
  total_tokens: number;
}

export interface Run {
  id: string;
  object: 'run';
  agent_id: string;
  session_id: string;
  conversation_id: string;
  message_id: string;
  response_id: string;
  source: RunSource;
  status: MessageStatus;
  model: string;
  agent_version: number | null;
  input_preview: string;
  output_preview: string | null;
  usage: RunUsage;
  cost_usd: number;
  error: MessageError | null;
  /** Its message's warnings, in this resource's snake_case. */
  warnings: RunWarning[];
  created_at: number;
  started_at: number | null;
  completed_at: number | null;
}

export interface RunWarning {
  code: string;
  message: string;
  call_id?: string;
  tool?: string;
}

export interface Span {
  id: string;
  run_id: string;
  parent_id: string | null;
  kind: SpanKind;
  name: string;
  status: SpanStatus;
  started_at: number;
  ended_at: number | null;
  duration_ms: number | null;
  input_preview: string | null;
  output_preview: string | null;
  usage: RunUsage;
  cost_usd: number;
  attributes: Record<string, unknown>;
}

/** A cursor-paginated list (DESIGN 5). */
export interface Page<T> {
  object: 'list';
  data: T[];
  has_more: boolean;
  next_cursor: string | null;
}

export const responseIdOf = (messageId: string): string => `resp_${messageId}`;
