/** Schemas of the older API under /api/sdk (spec 4.7, 2 and 8; docs/legacy.md) and of Workflow Runs (4.8). */
import { Type } from 'typebox';
import {
  MAX_METADATA_KEY,
  MAX_METADATA_PAIRS,
  MAX_METADATA_VALUE,
  MAX_THREAD_FILE_IDS,
  THREAD_ROLES,
} from '../../domain/threads/thread-service.ts';
import { RequiredActions, RunUsage, SDK_RUN_STATUSES, SdkRunRef } from '../../domain/workflows/sdk-run-schema.ts';
import { WORKFLOW_RUN_STATUSES } from '../../domain/workflows/workflow-service.ts';
import { StringEnum, Uuid } from './common.ts';

const OPAQUE_ID = '^[A-Za-z0-9_-]{1,128}$';

export const Metadata = Type.Unsafe<Record<string, string>>({
  type: 'object',
  additionalProperties: { type: 'string', maxLength: MAX_METADATA_VALUE },
  propertyNames: { maxLength: MAX_METADATA_KEY },
  maxProperties: MAX_METADATA_PAIRS,
  description: `At most ${MAX_METADATA_PAIRS} pairs; keys at most ${MAX_METADATA_KEY} characters, values strings of at most ${MAX_METADATA_VALUE}`,
});

const Content = Type.String({ minLength: 1, maxLength: 100_000 });
const FileIds = Type.Array(Uuid, { maxItems: MAX_THREAD_FILE_IDS, description: 'Files uploaded to /api/sdk/files' });

export const NewThreadMessage = Type.Object(
  {
    role: StringEnum(THREAD_ROLES),
    content: Content,
    metadata: Type.Optional(Metadata),
    file_ids: Type.Optional(FileIds),
  },
  { additionalProperties: false },
);

export const Thread = Type.Object(
  {
    id: Type.String(),
    object: Type.Literal('thread'),
    created_at: Type.Integer({ description: 'Unix seconds' }),
    metadata: Type.Record(Type.String(), Type.String()),
  },
  { additionalProperties: false },
);

export const ThreadMessage = Type.Object(
  {
    id: Type.String(),
    object: Type.Literal('thread.message'),
    created_at: Type.Integer({ description: 'Unix seconds' }),
    thread_id: Type.String(),
    role: StringEnum(THREAD_ROLES),
    content: Type.String(),
    metadata: Type.Record(Type.String(), Type.String()),
    file_ids: Type.Array(Type.String()),
    agent_id: Type.Optional(Type.String({ description: 'Assistant messages of a run: the agent' })),
    name: Type.Optional(Type.String({ description: "Assistant messages of a run: the agent's name" })),
    run_id: Type.Optional(Type.String({ description: 'Assistant messages of a run: the run' })),
  },
  { additionalProperties: false },
);

export const ThreadCreateBody = Type.Object(
  {
    messages: Type.Optional(Type.Array(NewThreadMessage, { maxItems: 32 })),
    metadata: Type.Optional(Metadata),
  },
  { additionalProperties: false },
);

export const ThreadUpdateBody = Type.Object(
  { metadata: Metadata },
  { additionalProperties: false, description: 'Replaces the metadata ({} clears it)' },
);

export const ThreadParams = Type.Object({ thread_id: Type.String({ pattern: OPAQUE_ID }) });

export const ThreadListQuery = Type.Object(
  {
    limit: Type.Integer({ minimum: 1, maximum: 100, default: 20 }),
    order: Type.Unsafe<'asc' | 'desc'>({
      type: 'string',
      enum: ['asc', 'desc'],
      default: 'desc',
      description: 'By creation time',
    }),
    after: Type.Optional(Type.String({ pattern: OPAQUE_ID, description: 'A thread id: the page continues after it' })),
    before: Type.Optional(Type.String({ pattern: OPAQUE_ID, description: 'A thread id: the page ends before it' })),
  },
  { additionalProperties: false },
);

export const ThreadList = Type.Object(
  { list: Type.Array(Thread), has_more: Type.Boolean() },
  { additionalProperties: false },
);

export const ThreadMessageList = Type.Object({ list: Type.Array(ThreadMessage) }, { additionalProperties: false });

export const ToolRunParams = Type.Object({
  project_id: Type.String({
    minLength: 1,
    maxLength: 128,
    description: 'The numeric project id (GET /v1/organization)',
  }),
  agent_id: Type.String({ minLength: 1, maxLength: 128, description: 'The agent id' }),
});

export const ToolRunStatusParams = Type.Object({
  ...ToolRunParams.properties,
  run_id: Type.String({ minLength: 1, maxLength: 128 }),
});

export const ToolRunBody = Type.Object(
  {
    version: Type.Optional(
      Type.Union([Type.Integer({ minimum: 1 }), Type.Literal('latest')], {
        description: 'An agent version (each PATCH makes the next), or latest (default)',
      }),
    ),
    config: Type.Optional(
      Type.Record(Type.String(), Type.Unknown(), {
        description:
          'Per-action settings keyed by action name, e.g. {"MODEL":{"provider_id":"openai","model_id":"gpt-4o"}} or {"MODEL":{"model":"scripted"}}; the model overrides the agent\'s for this run',
      }),
    ),
    inputs: Type.Optional(
      Type.Array(Type.Unknown(), {
        maxItems: 32,
        description: 'The input: strings, or objects {messages:[{role, content}]} (the last user message is the input)',
      }),
    ),
    thread_id: Type.Optional(
      Type.String({ pattern: OPAQUE_ID, description: 'Its messages are the history; input and reply are appended' }),
    ),
    blocking: Type.Optional(Type.Boolean({ description: 'true (default): answer when the run ends' })),
    stream: Type.Optional(Type.Boolean({ description: 'true: text/event-stream of {type, content} events' })),
    contentOnly: Type.Optional(Type.Boolean({ description: 'true: answer {run_id, status, content} only' })),
    session_id: Type.Optional(Type.String({ maxLength: 200, description: 'Accepted for old clients; unused' })),
    block_filter: Type.Optional(Type.Array(Type.String(), { description: 'Accepted for old clients; unused' })),
  },
  { additionalProperties: false },
);

export const SdkRunBody = SdkRunRef;

export const SdkContentBody = Type.Object(
  {
    run_id: Type.String(),
    status: StringEnum(SDK_RUN_STATUSES),
    content: Type.Union([Type.String(), Type.Null()]),
  },
  { description: 'contentOnly: the reply only' },
);

export const WorkflowRun = Type.Object(
  {
    id: Type.String(),
    object: Type.Literal('workflow_agent.run'),
    status: StringEnum(WORKFLOW_RUN_STATUSES),
    agent_id: Type.String(),
    agent_version: Type.Integer(),
    thread_id: Type.Union([Type.String(), Type.Null()]),
    output: Type.Union([Type.String(), Type.Null()]),
    error: Type.Union([Type.Object({ code: Type.String(), message: Type.String() }), Type.Null()]),
    required_actions: RequiredActions,
    usage: RunUsage,
    created_at: Type.Integer(),
    started_at: Type.Union([Type.Integer(), Type.Null()]),
    completed_at: Type.Union([Type.Integer(), Type.Null()]),
  },
  { additionalProperties: false },
);

export const WorkflowOutputsBody = Type.Object(
  {
    outputs: Type.Array(
      Type.Object(
        {
          call_id: Type.String({ minLength: 1, maxLength: 512 }),
          output: Type.String({ maxLength: 1_000_000 }),
        },
        { additionalProperties: false },
      ),
      { minItems: 1, maxItems: 64 },
    ),
  },
  { additionalProperties: false },
);

export const SdkFileRecord = Type.Object(
  {
    uuid: Uuid,
    name: Type.String(),
    mimeType: Type.String(),
    size: Type.Integer({ description: 'Bytes' }),
    projectId: Type.Integer(),
    createdAt: Type.String({ format: 'date-time' }),
  },
  { additionalProperties: false },
);
