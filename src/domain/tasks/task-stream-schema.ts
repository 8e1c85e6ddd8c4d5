/**
 * The frames of a Task's event stream (GET /v1/tasks/{id}/events, docs/legacy.md), declared once as JSON Schemas:
 * each normalized event with the payload of its `eventType` (also the `events` of `content?include=events`), and
 * the closing `done` frame. The producer (task-events.ts, task-service.ts) is typed by them; the OpenAPI document
 * shows them as the `TaskStreamEvent` and `TaskStreamDone` components; a test validates what the stream sends.
 */
import { type Static, type TSchema, Type } from 'typebox';
import { CALL_KINDS } from '../../events/session-values.ts';
import { type FinishedPromptStatus, PROMPT_STATUSES } from './task-types.ts';

const literals = <T extends string>(values: readonly T[]) => Type.Unsafe<T>({ type: 'string', enum: [...values] });
const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);

const FINISHED: readonly FinishedPromptStatus[] = ['succeeded', 'failed', 'canceled'];

const event = <K extends string, P extends TSchema>(eventType: K, payload: P, description: string) =>
  Type.Object(
    {
      seq: Type.Integer({ minimum: 1, description: 'Numbered from 1 across the Task; the SSE frame id' }),
      timestamp: Type.String({ format: 'date-time' }),
      promptId: Type.String({ format: 'uuid' }),
      eventType: Type.Literal(eventType),
      payload,
    },
    { additionalProperties: false, description },
  );

export const TaskStreamEventSchema = Type.Union(
  [
    event(
      'init',
      Type.Object({ runId: Type.String(), agentId: Type.String() }),
      "The prompt's turn started: its Run (GET /v1/runs/{id}) and agent",
    ),
    event('text', Type.Object({ text: Type.String() }), "The assistant's text of one step"),
    event(
      'tool_use',
      Type.Object({
        callId: Nullable(Type.String()),
        name: Type.String(),
        arguments: Type.String({ description: 'JSON text' }),
        kind: literals(CALL_KINDS),
      }),
      'A tool call',
    ),
    event(
      'tool_result',
      Type.Object({
        callId: Nullable(Type.String()),
        name: Type.String(),
        output: Type.String(),
        isError: Type.Boolean(),
      }),
      "A tool call's output",
    ),
    event(
      'result',
      Type.Object({
        status: literals(FINISHED),
        result: Nullable(Type.String({ description: 'The final response text' })),
        error: Nullable(Type.Object({ code: Type.String(), message: Type.String() })),
        usage: Type.Object({ inputTokens: Type.Integer(), outputTokens: Type.Integer() }),
      }),
      'The prompt ended',
    ),
  ],
  {
    $id: 'TaskStreamEvent',
    description:
      "One normalized event of a Task's prompts: a data line of GET /v1/tasks/{id}/events (its seq is the frame id) and an item of content?include=events; payload is typed by eventType",
  },
);

/** A normalized event of a Task's prompts. */
export type TaskStreamEvent = Static<typeof TaskStreamEventSchema>;
/** An event without its place: what the producer says about a prompt. */
export type TaskStreamEventBody = TaskStreamEvent extends infer E
  ? E extends TaskStreamEvent
    ? Pick<E, 'eventType' | 'payload'>
    : never
  : never;

export const TaskStreamDoneSchema = Type.Object(
  {
    status: literals(PROMPT_STATUSES),
    lastSeq: Type.Integer({ minimum: -1, description: 'The last event sent; -1 when there were none' }),
    finalResult: Nullable(Type.String({ description: "The latest prompt's response text" })),
  },
  {
    $id: 'TaskStreamDone',
    description:
      "The data of the last frame of GET /v1/tasks/{id}/events (`event: done`), sent once the Task is no longer running: status is the latest prompt's",
  },
);

/** The closing frame's data. */
export type TaskStreamDone = Static<typeof TaskStreamDoneSchema>;
