/**
 * How a turn reads as an A2A Task (docs/a2a.md): the task is the message, its context the session. The state
 * comes from the message's status; a turn waiting for the caller (a question, a tool approval, a client tool) is
 * `input-required` with a data part listing what it waits for; the reply is the `response` artifact and the last
 * message of the history. Everything here is derived from the stored message, so a restart changes nothing.
 */
import { type Artifact, type Message, type Part, Role, type Task, TaskState, type TaskStatus } from '@a2a-js/sdk';
import type { MessageStatus, Message as TurnMessage } from '../turns/message-types.ts';

export function taskStateOf(status: MessageStatus): TaskState {
  switch (status) {
    case 'queued':
      return TaskState.TASK_STATE_SUBMITTED;
    case 'running':
      return TaskState.TASK_STATE_WORKING;
    case 'requires_action':
      return TaskState.TASK_STATE_INPUT_REQUIRED;
    case 'completed':
      return TaskState.TASK_STATE_COMPLETED;
    case 'failed':
      return TaskState.TASK_STATE_FAILED;
    case 'cancelled':
      return TaskState.TASK_STATE_CANCELED;
  }
}

/** The message statuses a ListTasks `status` filter selects (none: the state never occurs here). */
export function statusesOf(state: TaskState): MessageStatus[] {
  switch (state) {
    case TaskState.TASK_STATE_SUBMITTED:
      return ['queued'];
    case TaskState.TASK_STATE_WORKING:
      return ['running'];
    case TaskState.TASK_STATE_INPUT_REQUIRED:
      return ['requires_action'];
    case TaskState.TASK_STATE_COMPLETED:
      return ['completed'];
    case TaskState.TASK_STATE_FAILED:
      return ['failed'];
    case TaskState.TASK_STATE_CANCELED:
      return ['cancelled'];
    default:
      return [];
  }
}

export { endsStream } from './task-end.ts';

export const textPart = (text: string): Part => ({
  content: { $case: 'text', value: text },
  metadata: undefined,
  filename: '',
  mediaType: 'text/plain',
});

const dataPart = (value: Record<string, unknown>): Part => ({
  content: { $case: 'data', value },
  metadata: undefined,
  filename: '',
  mediaType: 'application/json',
});

function agentMessage(turn: TurnMessage, id: string, parts: Part[]): Message {
  return {
    messageId: id,
    contextId: turn.sessionId,
    taskId: turn.id,
    role: Role.ROLE_AGENT,
    parts,
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

function replyText(turn: TurnMessage): string | null {
  if (turn.response === null) return null;
  const text = turn.response.parts.map((part) => part.text).join('\n');
  return text === '' ? null : text;
}

/** What an input-required task waits for, in words and as data the caller can answer from. */
function waitingMessage(turn: TurnMessage): Message {
  const questions = turn.requiredActions.flatMap((action) =>
    action.type === 'ask_user_question' ? [action.question] : [],
  );
  const text =
    questions.length > 0
      ? questions.join('\n')
      : 'The agent is waiting for input: see the data part for the actions to answer.';
  return agentMessage(turn, `${turn.id}-input`, [textPart(text), dataPart({ requiredActions: turn.requiredActions })]);
}

export function statusOf(turn: TurnMessage): TaskStatus {
  const timestamp = turn.completedAt ?? turn.startedAt ?? turn.createdAt;
  let message: Message | undefined;
  if (turn.status === 'requires_action') message = waitingMessage(turn);
  else if (turn.status === 'failed' && turn.error !== null) {
    message = agentMessage(turn, `${turn.id}-error`, [textPart(`${turn.error.code}: ${turn.error.message}`)]);
  }
  return { state: taskStateOf(turn.status), message, timestamp };
}

/** A report the turn wrote (build_report), as the task shows it: a file part with the URL to download it. */
export interface TurnFile {
  name: string;
  /** Relative to the agent's workspace (`reports/…`). */
  path: string;
  mediaType: string;
  bytes: number;
  /** Absolute; served with the same API key (scope agents:read). */
  url: string;
}

/** The reports a turn wrote (named by the A2A service) as files of the agent on `baseUrl`. */
export function reportFiles(
  reports: { name: string; path: string; format: 'markdown' | 'html'; bytes: number }[],
  agentId: string,
  baseUrl: string,
): TurnFile[] {
  return reports.map((report) => ({
    name: report.name,
    path: report.path,
    mediaType: report.format === 'html' ? 'text/html' : 'text/markdown',
    bytes: report.bytes,
    url: `${baseUrl}/v1/agents/${agentId}/reports/${encodeURIComponent(report.name)}`,
  }));
}

function fileArtifact(turn: TurnMessage, file: TurnFile): Artifact {
  return {
    artifactId: `${turn.id}-report-${file.name}`,
    name: file.name,
    description: `A report the agent wrote (${file.path}); download it with the same API key`,
    parts: [
      {
        content: { $case: 'url', value: file.url },
        metadata: undefined,
        filename: file.name,
        mediaType: file.mediaType,
      },
    ],
    metadata: { path: file.path, bytes: file.bytes },
    extensions: [],
  };
}

/** The reply (once completed) and the reports the turn wrote so far. */
export function artifactsOf(turn: TurnMessage, files: TurnFile[] = []): Artifact[] {
  const text = turn.status === 'completed' ? replyText(turn) : null;
  const artifacts = files.map((file) => fileArtifact(turn, file));
  if (text === null) return artifacts;
  return [
    {
      artifactId: `${turn.id}-response`,
      name: 'response',
      description: "The agent's reply",
      parts: [textPart(text)],
      metadata: undefined,
      extensions: [],
    },
    ...artifacts,
  ];
}

/** The task of a turn; `historyLength` keeps the newest messages of its history (0: none). */
export function taskOf(turn: TurnMessage, historyLength?: number, files: TurnFile[] = []): Task {
  const history: Message[] = [
    {
      messageId: `${turn.id}-request`,
      contextId: turn.sessionId,
      taskId: turn.id,
      role: Role.ROLE_USER,
      parts: turn.parts.flatMap((part) => (part.type === 'text' ? [textPart(part.text)] : [])),
      metadata: undefined,
      extensions: [],
      referenceTaskIds: [],
    },
  ];
  const reply = turn.status === 'completed' ? replyText(turn) : null;
  if (reply !== null) history.push(agentMessage(turn, `${turn.id}-reply`, [textPart(reply)]));
  return {
    id: turn.id,
    contextId: turn.sessionId,
    status: statusOf(turn),
    artifacts: artifactsOf(turn, files),
    history: historyLength === undefined ? history : historyLength === 0 ? [] : history.slice(-historyLength),
    metadata: { runId: turn.runId, usage: turn.usage },
  };
}
