/**
 * The older API's run object and the events of a streamed tool run (docs/legacy.md), declared once as JSON Schemas:
 * sdk-run.ts builds both typed by them, the routes answer with them, and the OpenAPI document shows the run as the
 * `SdkRun` component and the stream's data lines as `ToolRunStreamEvent`, which a test validates what the stream
 * sends against.
 */
import { type Static, type TSchema, Type } from 'typebox';
import { WORKFLOW_RUN_STATUSES } from './workflow-service.ts';

const literals = <T extends string>(values: readonly T[]) => Type.Unsafe<T>({ type: 'string', enum: [...values] });
const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);

export const SDK_RUN_STATUSES = ['running', 'succeeded', 'errored', 'requires_action'] as const;
export type SdkRunStatus = (typeof SDK_RUN_STATUSES)[number];

/** The client function calls a run waits for. */
export const RequiredActions = Type.Array(
  Type.Object(
    { type: Type.Literal('function_call'), call_id: Type.String(), name: Type.String(), arguments: Type.String() },
    { additionalProperties: false },
  ),
);

export const RunUsage = Type.Object({
  input_tokens: Type.Integer(),
  output_tokens: Type.Integer(),
  total_tokens: Type.Integer(),
});

/** The results of the run's single action: `[[{value, error}]]`. */
const Execution = Type.Array(Type.Array(Type.Object({ value: Type.Unknown(), error: Nullable(Type.String()) })));

export const SdkRunBodySchema = Type.Object(
  {
    run: Type.Object({
      run_id: Type.String(),
      app_id: Type.String({ description: 'The agent id' }),
      version: Type.Integer(),
      thread_id: Nullable(Type.String()),
      status: Type.Object({
        run: literals(SDK_RUN_STATUSES),
        workflow: literals(WORKFLOW_RUN_STATUSES),
      }),
      created: Type.Integer({ description: 'Unix seconds' }),
      completed: Nullable(Type.Integer()),
      results: Type.Union([Execution, Type.Null()], {
        description: 'results[0][0].value.content is the reply; null while the run goes on',
      }),
      required_actions: RequiredActions,
      usage: RunUsage,
    }),
  },
  { $id: 'SdkRun', description: 'The run (blocking calls, status reads, and the last event of a streamed run)' },
);

/** The run object of blocking calls and status reads. */
export type SdkRunBody = Static<typeof SdkRunBodySchema>;

/** Where another schema carries the run object: the `SdkRun` component, described once. */
export const SdkRunRef = Type.Unsafe<SdkRunBody>({ $ref: 'SdkRun#' });

/** The name the single action (the agent's model step) has in results and stream events. */
export const AGENT_BLOCK = 'AGENT';
const BlockName = Type.Literal(AGENT_BLOCK);

export const ToolRunStreamEventSchema = Type.Union(
  [
    Type.Object(
      {
        type: Type.Literal('run_status'),
        content: Type.Object({
          status: literals(SDK_RUN_STATUSES),
          run_id: Type.String(),
          required_actions: Type.Optional(RequiredActions),
        }),
      },
      { description: 'running once the run is admitted; its outcome at the end (with the calls it waits for)' },
    ),
    Type.Object(
      {
        type: Type.Literal('tokens'),
        content: Type.Object({ block_name: BlockName, tokens: Type.Object({ text: Type.String() }) }),
      },
      { description: 'A text delta of the reply' },
    ),
    Type.Object(
      {
        type: Type.Literal('block_execution'),
        content: Type.Object({ block_name: BlockName, execution: Execution }),
      },
      { description: "The action's results once the run ended or waits (empty while it goes on)" },
    ),
    Type.Object(
      { type: Type.Literal('final'), content: SdkRunRef },
      { description: 'The run object, last before `data: [DONE]`' },
    ),
  ],
  {
    $id: 'ToolRunStreamEvent',
    description:
      'One data line of a streamed tool run (POST /api/sdk/p/{project_id}/a/{agent_id}/r with stream true): {type, content}, content typed by type; the stream ends with `data: [DONE]`',
  },
);

/** One event of a streamed tool run. */
export type ToolRunStreamEvent = Static<typeof ToolRunStreamEventSchema>;
