/**
 * Legacy Tasks (spec 4.5): the Task resource, its prompt statuses, and how a Task's status derives from them. A
 * Task's prompts are messages of its workspace (a hidden Session); the names here are those of the Tasks API.
 */
import type { MessageStatus } from '../turns/message-types.ts';
import type { TaskStreamEvent } from './task-stream-schema.ts';

export type { TaskStreamEvent };

export const PROMPT_STATUSES = ['pending', 'running', 'succeeded', 'failed', 'canceled'] as const;
export type PromptStatus = (typeof PROMPT_STATUSES)[number];
/** What a prompt ended as. */
export type FinishedPromptStatus = Extract<PromptStatus, 'succeeded' | 'failed' | 'canceled'>;

export const TASK_STATUSES = ['running', 'completed', 'failed', 'canceled'] as const;
export type TaskStatus = (typeof TASK_STATUSES)[number];

/** The task.* events of legacy organization webhooks. */
export const TASK_EVENT_TYPES = [
  'task.created',
  'task.running',
  'task.completed',
  'task.failed',
  'task.canceled',
] as const;
export type TaskEventType = (typeof TASK_EVENT_TYPES)[number];

/** A waiting turn (client tool or question) is still work in progress from the Task's point of view. */
export function promptStatusOf(status: MessageStatus): PromptStatus {
  switch (status) {
    case 'queued':
      return 'pending';
    case 'running':
    case 'requires_action':
      return 'running';
    case 'completed':
      return 'succeeded';
    case 'failed':
      return 'failed';
    case 'cancelled':
      return 'canceled';
  }
}

export function isPromptFinished(status: PromptStatus): status is FinishedPromptStatus {
  return status === 'succeeded' || status === 'failed' || status === 'canceled';
}

/** running while any prompt is pending or running; otherwise what the latest prompt ended as. */
export function taskStatusOf(prompts: readonly PromptStatus[]): TaskStatus {
  if (prompts.some((status) => !isPromptFinished(status))) return 'running';
  const last = prompts.at(-1);
  if (last === 'failed') return 'failed';
  if (last === 'canceled') return 'canceled';
  return 'completed';
}

export interface TaskPrompt {
  id: string;
  status: PromptStatus;
  submittedAt: string;
  startedAt: string | null;
  completedAt: string | null;
  runId: string;
}

export interface Task {
  id: string;
  object: 'task';
  workspaceId: string;
  agentId: string;
  title: string;
  status: TaskStatus;
  createdAt: string;
  updatedAt: string;
  /** When the latest prompt finished; null while the Task runs. */
  completedAt: string | null;
  prompts: TaskPrompt[];
}

export interface TaskPage {
  data: Task[];
  total: number;
  limit: number;
  offset: number;
}

export interface TaskContentPrompt {
  id: string;
  status: PromptStatus;
  prompt: string;
  /** The final response text; null until the prompt has one. */
  response: string | null;
  error: { code: string; message: string } | null;
  submittedAt: string;
  completedAt: string | null;
  events?: TaskStreamEvent[];
}

export interface TaskContent {
  id: string;
  object: 'task.content';
  status: TaskStatus;
  prompts: TaskContentPrompt[];
}

/** Prompt text, as the Tasks API accepts it. */
export const MAX_PROMPT_CHARS = 100_000;
export const MAX_TASK_FILES = 10;
