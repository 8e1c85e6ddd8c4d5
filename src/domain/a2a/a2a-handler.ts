/**
 * The SDK's request handler interface over our A2A service, for one organization's agent: the SDK's transports
 * (JSON-RPC and HTTP+JSON) parse and frame, this answers from the database. Our errors become the protocol's
 * (task not found, malformed request, not cancelable) so both bindings report them as A2A 1.0 defines.
 */
import {
  type AgentCard,
  type CancelTaskRequest,
  type DeleteTaskPushNotificationConfigRequest,
  type GetExtendedAgentCardRequest,
  type GetTaskPushNotificationConfigRequest,
  type GetTaskRequest,
  type ListTaskPushNotificationConfigsRequest,
  type ListTaskPushNotificationConfigsResponse,
  type ListTasksRequest,
  type ListTasksResponse,
  type Message,
  type SendMessageRequest,
  type StreamResponse,
  type SubscribeToTaskRequest,
  type Task,
  type TaskPushNotificationConfig,
  TaskState,
} from '@a2a-js/sdk';
import {
  A2AError,
  ExtendedAgentCardNotConfiguredError,
  RequestMalformedError,
  TaskNotCancelableError,
  TaskNotFoundError,
  UnsupportedOperationError,
} from '@a2a-js/sdk/errors';
import type { A2ARequestHandler, ServerCallContext } from '@a2a-js/sdk/server';
import { AppError } from '../../errors/app-error.ts';
import type { Message as TurnMessage } from '../turns/message-types.ts';
import { isTerminal } from '../turns/message-types.ts';
import type { A2aService, A2aTarget } from './a2a-service.ts';
import type { PushConfigInput, PushConfigs, PushConfigView, PushTask } from './push-configs.ts';
import { artifactsOf, endsStream, reportFiles, statusesOf, statusOf, type TurnFile, taskOf } from './task-view.ts';

/** The key of the request's AbortSignal in the call context's state (set by the route). */
export const SIGNAL_KEY = 'agentry.signal';

const DEFAULT_PAGE_SIZE = 50;

/**
 * Our errors in the protocol's terms. Anything else is reported (logged) and becomes an internal error that says
 * nothing of its cause: the transports echo an error's message.
 */
export function protocolError(error: unknown, report: (error: unknown) => void): A2AError {
  if (error instanceof A2AError) return error;
  if (!(error instanceof AppError)) {
    report(error);
    return new A2AError('internal error');
  }
  if (error.code === 'not_found') {
    return /^(task|push notification config) /.test(error.message)
      ? new TaskNotFoundError(error.message)
      : new RequestMalformedError(error.message);
  }
  if (error.code === 'action_not_waiting') return new UnsupportedOperationError(error.message);
  return new RequestMalformedError(`${error.code}: ${error.message}`);
}

function signalOf(context: ServerCallContext): AbortSignal {
  const signal = context.state.get(SIGNAL_KEY);
  return signal instanceof AbortSignal ? signal : new AbortController().signal;
}

function inputOf(config: TaskPushNotificationConfig): PushConfigInput {
  return {
    id: config.id,
    url: config.url,
    token: config.token,
    ...(config.authentication === undefined ? {} : { authentication: config.authentication }),
  };
}

function configOf(view: PushConfigView): TaskPushNotificationConfig {
  return {
    tenant: '',
    id: view.id,
    taskId: view.taskId,
    url: view.url,
    token: view.token,
    authentication: view.authentication,
  };
}

/** A2A page tokens are opaque: ours is the offset. */
function offsetOf(token: string): number {
  if (token === '') return 0;
  const offset = Number(Buffer.from(token, 'base64url').toString('utf8'));
  if (!Number.isSafeInteger(offset) || offset < 0)
    throw new RequestMalformedError('pageToken: not a token this server issued');
  return offset;
}

export function createA2aHandler(
  service: A2aService,
  target: A2aTarget,
  card: AgentCard,
  report: (error: unknown) => void,
  push: PushConfigs,
): A2ARequestHandler {
  const pushTask = (turn: TurnMessage): PushTask => ({
    orgId: target.orgId,
    agentId: target.agentId,
    baseUrl: card.provider?.url ?? '',
    id: turn.id,
    sessionId: turn.sessionId,
    status: turn.status,
  });
  const baseUrl = card.provider?.url ?? '';
  /** The reports the task's turn wrote, as files to download. */
  const filesOf = async (turn: TurnMessage): Promise<TurnFile[]> =>
    reportFiles(await service.reportsOf(target.orgId, turn.id), target.agentId, baseUrl);
  const view = async (turn: TurnMessage, historyLength?: number) => taskOf(turn, historyLength, await filesOf(turn));

  async function guarded<T>(work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (error) {
      throw protocolError(error, report);
    }
  }

  async function accept(params: SendMessageRequest) {
    const message = params.message;
    if (message === undefined) throw new RequestMalformedError('message is required');
    const config = params.configuration?.taskPushNotificationConfig;
    const field = 'configuration.taskPushNotificationConfig';
    if (config !== undefined) await guarded(() => push.check(inputOf(config), field));
    const accepted = await guarded(() =>
      service.send(target, {
        messageId: message.messageId,
        parts: message.parts,
        ...(message.contextId === '' ? {} : { contextId: message.contextId }),
        ...(message.taskId === '' ? {} : { taskId: message.taskId }),
      }),
    );
    if (config === undefined) return accepted;
    // Notifications start after the state the task was accepted in: a new task is submitted, an answered one resumes.
    const since = message.taskId === '' ? 'queued' : 'requires_action';
    await guarded(() => push.set(pushTask(accepted), inputOf(config), field, since));
    return accepted;
  }

  async function* events(taskId: string, signal: AbortSignal, first: boolean): AsyncGenerator<StreamResponse> {
    let sentTask = !first;
    const sentArtifacts = new Set<string>();
    for await (const turn of service.follow(target, taskId, signal)) {
      const files = await filesOf(turn);
      if (!sentTask) {
        sentTask = true;
        const task = taskOf(turn, undefined, files);
        for (const artifact of task.artifacts) sentArtifacts.add(artifact.artifactId);
        yield { payload: { $case: 'task', value: task } };
        if (endsStream(turn.status)) return;
        continue;
      }
      for (const artifact of artifactsOf(turn, files)) {
        if (sentArtifacts.has(artifact.artifactId)) continue;
        sentArtifacts.add(artifact.artifactId);
        yield {
          payload: {
            $case: 'artifactUpdate',
            value: {
              taskId: turn.id,
              contextId: turn.sessionId,
              artifact,
              append: false,
              lastChunk: true,
              metadata: undefined,
            },
          },
        };
      }
      yield {
        payload: {
          $case: 'statusUpdate',
          value: { taskId: turn.id, contextId: turn.sessionId, status: statusOf(turn), metadata: undefined },
        },
      };
    }
  }

  return {
    getAgentCard: async () => card,
    getAuthenticatedExtendedAgentCard: async (_params: GetExtendedAgentCardRequest) => {
      throw new ExtendedAgentCardNotConfiguredError('this agent has no extended card');
    },

    async sendMessage(params: SendMessageRequest, context: ServerCallContext): Promise<Message | Task> {
      const accepted = await accept(params);
      const historyLength = params.configuration?.historyLength;
      if (params.configuration?.returnImmediately === true || endsStream(accepted.status)) {
        return view(accepted, historyLength);
      }
      let last = accepted;
      for await (const turn of service.follow(target, accepted.id, signalOf(context))) last = turn;
      return view(last, historyLength);
    },

    async *sendMessageStream(params: SendMessageRequest, context: ServerCallContext) {
      const accepted = await accept(params);
      yield* events(accepted.id, signalOf(context), true);
    },

    async *resubscribe(params: SubscribeToTaskRequest, context: ServerCallContext) {
      const turn = await guarded(() => service.read(target, params.id));
      if (isTerminal(turn.status)) {
        throw new UnsupportedOperationError(`task ${turn.id} has ended (${turn.status}); read it with GetTask`);
      }
      yield* events(turn.id, signalOf(context), true);
    },

    async getTask(params: GetTaskRequest): Promise<Task> {
      if (params.historyLength !== undefined && params.historyLength < 0) {
        throw new RequestMalformedError('historyLength must be non-negative');
      }
      return view(await guarded(() => service.read(target, params.id)), params.historyLength);
    },

    async listTasks(params: ListTasksRequest): Promise<ListTasksResponse> {
      const pageSize = params.pageSize ?? DEFAULT_PAGE_SIZE;
      if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > 100) {
        throw new RequestMalformedError('pageSize must be between 1 and 100');
      }
      const offset = offsetOf(params.pageToken);
      let updatedAfter: number | undefined;
      if (params.statusTimestampAfter !== undefined && params.statusTimestampAfter !== '') {
        updatedAfter = Date.parse(params.statusTimestampAfter);
        if (Number.isNaN(updatedAfter)) throw new RequestMalformedError('statusTimestampAfter: not an ISO 8601 time');
      }
      const page = await guarded(() =>
        service.list(target, {
          ...(params.contextId === '' ? {} : { contextId: params.contextId }),
          ...(params.status === TaskState.TASK_STATE_UNSPECIFIED ? {} : { statuses: statusesOf(params.status) }),
          ...(updatedAfter === undefined ? {} : { updatedAfter }),
          limit: pageSize,
          offset,
        }),
      );
      const next = offset + page.tasks.length;
      return {
        tasks: await Promise.all(
          page.tasks.map(async (turn) =>
            params.includeArtifacts === true
              ? view(turn, params.historyLength ?? 0)
              : { ...taskOf(turn, params.historyLength ?? 0), artifacts: [] },
          ),
        ),
        nextPageToken: next < page.total ? Buffer.from(String(next)).toString('base64url') : '',
        pageSize,
        totalSize: page.total,
      };
    },

    async cancelTask(params: CancelTaskRequest): Promise<Task> {
      const before = await guarded(() => service.read(target, params.id));
      if (isTerminal(before.status)) {
        throw new TaskNotCancelableError(`task ${before.id} has already ended (${before.status})`);
      }
      return view(await guarded(() => service.cancel(target, params.id)));
    },

    async createTaskPushNotificationConfig(params: TaskPushNotificationConfig): Promise<TaskPushNotificationConfig> {
      const turn = await guarded(() => service.read(target, params.taskId));
      return configOf(await guarded(() => push.set(pushTask(turn), inputOf(params))));
    },
    async getTaskPushNotificationConfig(params: GetTaskPushNotificationConfigRequest) {
      const turn = await guarded(() => service.read(target, params.taskId));
      return configOf(await guarded(() => push.get(pushTask(turn), params.id)));
    },
    async listTaskPushNotificationConfigs(
      params: ListTaskPushNotificationConfigsRequest,
    ): Promise<ListTaskPushNotificationConfigsResponse> {
      const turn = await guarded(() => service.read(target, params.taskId));
      const configs = await guarded(() => push.list(pushTask(turn)));
      return { configs: configs.map(configOf), nextPageToken: '' };
    },
    async deleteTaskPushNotificationConfig(params: DeleteTaskPushNotificationConfigRequest) {
      const turn = await guarded(() => service.read(target, params.taskId));
      await guarded(() => push.delete(pushTask(turn), params.id));
    },
  };
}
