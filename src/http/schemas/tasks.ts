import { Type } from 'typebox';
import type { TaskStreamEvent as TaskStreamEventBody } from '../../domain/tasks/task-stream-schema.ts';
import { MAX_PROMPT_CHARS, MAX_TASK_FILES, PROMPT_STATUSES, TASK_STATUSES } from '../../domain/tasks/task-types.ts';
import { NON_BLANK, StringEnum, Uuid } from './common.ts';

const DateTime = Type.String({ format: 'date-time' });
const NullableDateTime = Type.Union([DateTime, Type.Null()]);
const PromptText = Type.String({ minLength: 1, maxLength: MAX_PROMPT_CHARS, pattern: NON_BLANK });

export const TaskPrompt = Type.Object(
  {
    id: Uuid,
    status: StringEnum(PROMPT_STATUSES),
    submittedAt: DateTime,
    startedAt: NullableDateTime,
    completedAt: NullableDateTime,
    runId: Type.String({ description: 'The Run of this prompt (GET /v1/runs/{id})' }),
  },
  { additionalProperties: false },
);

export const Task = Type.Object(
  {
    id: Uuid,
    object: Type.Literal('task'),
    workspaceId: Type.String({ description: 'The workspace the prompts run in; reusable by POST /v1/tasks' }),
    agentId: Uuid,
    title: Type.String(),
    status: StringEnum(
      TASK_STATUSES,
      'running while any prompt is pending or running; otherwise what the latest prompt ended as',
    ),
    createdAt: DateTime,
    updatedAt: DateTime,
    completedAt: NullableDateTime,
    prompts: Type.Array(TaskPrompt),
  },
  { additionalProperties: false },
);

export const TaskList = Type.Object({
  data: Type.Array(Task),
  total: Type.Integer(),
  limit: Type.Integer(),
  offset: Type.Integer(),
});

export const TaskListQuery = Type.Object(
  {
    limit: Type.Integer({ minimum: 1, default: 50, description: '1-100; values above 100 are treated as 100' }),
    offset: Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, default: 0 }),
  },
  { additionalProperties: false },
);

export const TaskCreateBody = Type.Object(
  {
    prompt: PromptText,
    agentId: Type.Optional(
      Type.String({ format: 'uuid', description: "Defaults to the organization's default Agent" }),
    ),
    workspaceId: Type.Optional(
      Type.String({ format: 'uuid', description: 'Reuse the workspace of an earlier Task; omit for a new one' }),
    ),
    files: Type.Optional(
      Type.Array(
        Type.Object(
          { id: Uuid, filename: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })) },
          { additionalProperties: false },
        ),
        { maxItems: MAX_TASK_FILES, description: 'Files (POST /v1/files) attached to the first prompt' },
      ),
    ),
  },
  { additionalProperties: false },
);

export const TaskPromptBody = Type.Object({ prompt: PromptText }, { additionalProperties: false });

export const TaskPromptAccepted = Type.Object({ promptId: Uuid, taskId: Uuid }, { additionalProperties: false });

/** A normalized event: the `TaskStreamEvent` component, also a data line of the Task's event stream. */
const TaskStreamEvent = Type.Unsafe<TaskStreamEventBody>({ $ref: 'TaskStreamEvent#' });

export const TaskContent = Type.Object(
  {
    id: Uuid,
    object: Type.Literal('task.content'),
    status: StringEnum(TASK_STATUSES),
    prompts: Type.Array(
      Type.Object(
        {
          id: Uuid,
          status: StringEnum(PROMPT_STATUSES),
          prompt: Type.String(),
          response: Type.Union([Type.String(), Type.Null()]),
          error: Type.Union([
            Type.Object({ code: Type.String(), message: Type.String() }, { additionalProperties: false }),
            Type.Null(),
          ]),
          submittedAt: DateTime,
          completedAt: NullableDateTime,
          events: Type.Optional(Type.Array(TaskStreamEvent, { description: 'With include=events' })),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
);

export const TaskContentQuery = Type.Object(
  { include: Type.Optional(StringEnum(['events'] as const, "events adds each prompt's normalized events")) },
  { additionalProperties: false },
);
