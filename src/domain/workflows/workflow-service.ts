/**
 * Tool runs of the older API (`POST /api/sdk/p/<project_id>/a/<agent_id>/r`) as Workflow Runs (spec 4.7 and 4.8,
 * docs/legacy.md). Each call is one turn of a hidden Session of the agent, accepted with source `sdk` and the
 * selected agent version pinned; a thread's messages are its history, its input is appended to the thread at
 * once and the reply when the run ends (`settle`, idempotent: the blocking caller, a status read or the notifier
 * may each get there first). workflow.run.* webhooks come from the turn's own transitions, through
 * `workflowTurnHook`. This module is the one writer of `workflow_runs`.
 */
import type { Bus } from '../../bus/bus.ts';
import type { StreamHub } from '../../bus/live-hub.ts';
import { AppError, notFound, validationError } from '../../errors/app-error.ts';
import { type Clock, unixSeconds } from '../../lib/clock.ts';
import { isUuid, newId } from '../../lib/ids.ts';
import type { ModelRegistry } from '../../models/registry.ts';
import type { Executor } from '../../storage/db.ts';
import type { MessageRow, WorkflowRunRow } from '../../storage/schema.ts';
import { findAgentVersion } from '../agents/agent-repo.ts';
import type { Agent } from '../agents/agent-types.ts';
import { afterCommit, type SessionEvent, type WebhookEventInput, writeEvents } from '../outbox.ts';
import { storedError } from '../tasks/task-events.ts';
import type { ThreadService } from '../threads/thread-service.ts';
import { acceptMessage, type ToolWarnings } from '../turns/accept.ts';
import type { HistoryItem } from '../turns/history-items.ts';
import type { Attachment } from '../turns/items.ts';
import type { MessageService } from '../turns/message-service.ts';
import { isTerminal, type MessageStatus, TERMINAL_STATUSES } from '../turns/message-types.ts';
import { messagesWithActions } from '../turns/message-view.ts';
import { createHiddenSession } from '../turns/session-rows.ts';
import type { TurnHook } from '../turns/turn-hooks.ts';
import type { WebhookSubscriptions } from '../webhooks/subscriptions.ts';

export const WORKFLOW_RUN_STATUSES = [
  'preparing',
  'in_progress',
  'requires_action',
  'completed',
  'failed',
  'cancelled',
] as const;
export type WorkflowRunStatus = (typeof WORKFLOW_RUN_STATUSES)[number];

/**
 * Tool-run turns (source `sdk`) are Workflow Runs: each change of their state adds a workflow.run.* webhook whose
 * data.id is the run id (registered in src/deps.ts).
 */
export const workflowTurnHook: TurnHook = {
  changed({ message }, transition): WebhookEventInput[] {
    if (message.source !== 'sdk') return [];
    const id = message.run_id;
    switch (transition.status) {
      case 'running':
        return [{ type: 'workflow.run.in_progress', data: { id } }];
      case 'requires_action': {
        const first = transition.actions[0];
        if (first?.type !== 'function_call') return [];
        return [
          {
            type: 'workflow.run.action_required',
            data: { id, required_action: { type: 'function_call', call_id: first.callId, name: first.name } },
          },
        ];
      }
      case 'completed':
        return [{ type: 'workflow.run.completed', data: { id } }];
      case 'failed':
        return [{ type: 'workflow.run.failed', data: { id, error: transition.error } }];
      case 'cancelled':
        return [{ type: 'workflow.run.cancelled', data: { id } }];
    }
  },
};

export function workflowStatusOf(status: MessageStatus): WorkflowRunStatus {
  if (status === 'queued') return 'preparing';
  if (status === 'running') return 'in_progress';
  return status;
}

export interface WorkflowRun {
  id: string;
  object: 'workflow_agent.run';
  status: WorkflowRunStatus;
  agent_id: string;
  agent_version: number;
  thread_id: string | null;
  output: string | null;
  error: { code: string; message: string } | null;
  required_actions: { type: 'function_call'; call_id: string; name: string; arguments: string }[];
  usage: { input_tokens: number; output_tokens: number; total_tokens: number };
  created_at: number;
  started_at: number | null;
  completed_at: number | null;
}

export interface ToolRunInput {
  version?: number | 'latest';
  config?: Record<string, unknown>;
  inputs?: unknown[];
  thread_id?: string;
  blocking?: boolean;
  stream?: boolean;
  contentOnly?: boolean;
}

export interface WorkflowServiceDeps {
  db: Executor;
  clock: Clock;
  bus: Bus;
  live: StreamHub;
  models: ModelRegistry;
  threads: ThreadService;
  messages: MessageService;
  agentOf(orgId: string, agentId: string, db: Executor): Promise<Agent>;
  toolWarnings: ToolWarnings;
  checkAttachment(trx: Executor, orgId: string, attachment: Attachment, param: string): Promise<'image' | 'file'>;
  subscriptions: WebhookSubscriptions;
}

/** How often a waiting caller looks again when no live event woke it (a turn on another process). */
const WAIT_POLL_MS = 1000;

function text(value: unknown): string | null {
  return typeof value === 'string' ? value : null;
}

/**
 * The user input of `inputs`: strings as they are, `{messages:[{role, content}]}` as their last user message
 * (earlier ones become history), other objects as their `text`/`input`/`question`/`content` field or as JSON.
 */
export function inputOf(inputs: unknown[]): { text: string; history: HistoryItem[]; fileIds: string[] } {
  const texts: string[] = [];
  const history: HistoryItem[] = [];
  const fileIds: string[] = [];
  const collectFiles = (value: unknown) => {
    if (Array.isArray(value)) for (const id of value) if (typeof id === 'string') fileIds.push(id);
  };
  for (const input of inputs) {
    if (typeof input === 'string') {
      texts.push(input);
      continue;
    }
    if (typeof input === 'object' && input !== null && !Array.isArray(input)) {
      const record = input as Record<string, unknown>;
      collectFiles(record.file_ids);
      if (Array.isArray(record.messages)) {
        const messages = record.messages.flatMap((entry: unknown) => {
          if (typeof entry !== 'object' || entry === null) return [];
          const item = entry as Record<string, unknown>;
          if (item.role !== 'assistant') collectFiles(item.file_ids);
          const content = text(item.content);
          return content === null ? [] : [{ role: item.role === 'assistant' ? 'assistant' : 'user', content }];
        });
        const lastUser = messages.map((message) => message.role).lastIndexOf('user');
        messages.forEach((message, index) => {
          if (index === lastUser) texts.push(message.content);
          else
            history.push(
              message.role === 'assistant'
                ? { type: 'assistant_message', text: message.content }
                : { type: 'user_message', text: message.content },
            );
        });
        continue;
      }
      const field = text(record.text) ?? text(record.input) ?? text(record.question) ?? text(record.content);
      texts.push(field ?? JSON.stringify(input));
      continue;
    }
    texts.push(JSON.stringify(input));
  }
  return { text: texts.join('\n'), history, fileIds: [...new Set(fileIds)] };
}

/** The model `config` asks for: `{<action>: {model_id, provider_id?}}` or `{<action>: {model}}`; one at most. */
export function modelOf(config: Record<string, unknown> | undefined, models: ModelRegistry): string | null {
  let chosen: string | null = null;
  for (const [action, value] of Object.entries(config ?? {})) {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      throw validationError(`config.${action}`, `config.${action} must be an object of settings for that action`);
    }
    const settings = value as Record<string, unknown>;
    const modelId = text(settings.model_id) ?? text(settings.model);
    if (modelId === null) continue;
    const provider = text(settings.provider_id);
    const model =
      provider === null || modelId.includes('/') || modelId === 'scripted' ? modelId : `${provider}/${modelId}`;
    const param = `config.${action}.${settings.model_id === undefined ? 'model' : 'model_id'}`;
    const problem = models.problem(model);
    if (problem !== null) throw validationError(param, `${param}: ${problem}`);
    if (chosen !== null && chosen !== model) {
      throw validationError(param, `${param}: every action of the agent runs on one model; give the same one`);
    }
    chosen = model;
  }
  return chosen;
}

export function createWorkflowService(deps: WorkflowServiceDeps) {
  const { db, clock, bus } = deps;

  async function findRun(orgId: string, id: string): Promise<{ run: WorkflowRunRow; message: MessageRow }> {
    if (!isUuid(id)) throw notFound('run', id);
    const run = await db
      .selectFrom('workflow_runs')
      .selectAll()
      .where('org_id', '=', orgId)
      .where('id', '=', id.toLowerCase())
      .executeTakeFirst();
    if (run === undefined) throw notFound('run', id);
    const message = await db
      .selectFrom('messages')
      .selectAll()
      .where('id', '=', run.message_id)
      .executeTakeFirstOrThrow();
    return { run, message };
  }

  async function view(run: WorkflowRunRow, message: MessageRow): Promise<WorkflowRun> {
    const [withActions] = await messagesWithActions(db, [message]);
    const status = workflowStatusOf(message.status);
    return {
      id: run.id,
      object: 'workflow_agent.run',
      status,
      agent_id: run.agent_id,
      agent_version: message.agent_version ?? run.version,
      thread_id: run.thread_id,
      output: status === 'completed' ? message.response_text : null,
      error: storedError(message.error),
      required_actions: (withActions?.requiredActions ?? []).flatMap((action) =>
        action.type === 'function_call'
          ? [{ type: 'function_call' as const, call_id: action.callId, name: action.name, arguments: action.arguments }]
          : [],
      ),
      usage: {
        input_tokens: message.input_tokens,
        output_tokens: message.output_tokens,
        total_tokens: message.input_tokens + message.output_tokens,
      },
      created_at: unixSeconds(run.created_at),
      started_at: message.started_at === null ? null : unixSeconds(message.started_at),
      completed_at: message.completed_at === null ? null : unixSeconds(message.completed_at),
    };
  }

  /** Appends the reply of an ended run to its thread, once. */
  async function settle(runId: string): Promise<void> {
    await db.transaction().execute(async (trx) => {
      const claimed = await trx
        .updateTable('workflow_runs')
        .set({ settled: 1 })
        .where('id', '=', runId)
        .where('settled', '=', 0)
        .where((eb) =>
          eb.exists(
            eb
              .selectFrom('messages')
              .select('messages.id')
              .whereRef('messages.id', '=', 'workflow_runs.message_id')
              .where('messages.status', 'in', TERMINAL_STATUSES),
          ),
        )
        .returningAll()
        .executeTakeFirst();
      if (claimed === undefined || claimed.thread_id === null) return;
      const message = await trx
        .selectFrom('messages')
        .selectAll()
        .where('id', '=', claimed.message_id)
        .executeTakeFirstOrThrow();
      if (message.status !== 'completed') return;
      const agent = await trx.selectFrom('agents').select('name').where('id', '=', claimed.agent_id).executeTakeFirst();
      await deps.threads.append(trx, { id: claimed.thread_id, orgId: claimed.org_id }, [
        {
          role: 'assistant',
          content: message.response_text ?? '',
          agent_id: claimed.agent_id,
          name: agent?.name ?? 'agent',
          run_id: claimed.id,
        },
      ]);
    });
  }

  return {
    settle,

    /** Unsettled runs whose turn ended (for the notifier's sweep), oldest first. */
    async unsettled(limit: number): Promise<string[]> {
      const rows = await db
        .selectFrom('workflow_runs as w')
        .innerJoin('messages as m', 'm.id', 'w.message_id')
        .select('w.id')
        .where('w.settled', '=', 0)
        .where('m.status', 'in', TERMINAL_STATUSES)
        .orderBy('w.created_at')
        .limit(limit)
        .execute();
      return rows.map((row) => row.id);
    },

    /**
     * Admits a tool run: checks the project, agent, version, config and thread (each a clear 404 or 400), then in
     * one transaction makes the hidden Session, accepts the turn, records the run with its workflow.run.created
     * event and appends the input to the thread.
     */
    async start(
      orgId: string,
      projectId: string,
      agentIdParam: string,
      input: ToolRunInput,
      presetSessionId?: string,
    ): Promise<WorkflowRun> {
      const org = await db.selectFrom('orgs').select('project_id').where('id', '=', orgId).executeTakeFirstOrThrow();
      if (String(org.project_id) !== projectId) throw notFound('project', projectId);
      if (!isUuid(agentIdParam)) throw notFound('agent', agentIdParam);
      const agent = await deps.agentOf(orgId, agentIdParam.toLowerCase(), db);
      const version = input.version === undefined || input.version === 'latest' ? agent.version : input.version;
      if (version > agent.version || (await findAgentVersion(db, agent.id, version)) === undefined) {
        throw new AppError('not_found', `agent ${agent.id} has no version ${version} (latest is ${agent.version})`, {
          param: 'version',
        });
      }
      const model = modelOf(input.config, deps.models);
      const { text: userText, history, fileIds } = inputOf(input.inputs ?? []);
      if (userText.trim() === '') {
        throw validationError('inputs', 'inputs must hold the user input (a string, or {messages:[{role, content}]})');
      }
      let sessionId = '';
      let events: SessionEvent[] = [];
      const runId = await db.transaction().execute(async (trx) => {
        const now = clock.now();
        const threadHistory: HistoryItem[] = [];
        if (input.thread_id !== undefined) {
          for (const message of await deps.threads.messages(orgId, input.thread_id, trx)) {
            threadHistory.push(
              message.role === 'assistant'
                ? { type: 'assistant_message', text: message.content }
                : { type: 'user_message', text: message.content },
            );
          }
        }
        const attachments: Attachment[] = [];
        for (const fileId of fileIds) {
          const attachment: Attachment = { kind: 'file', fileId: fileId.toLowerCase() };
          if (!isUuid(fileId)) throw notFound('file', fileId);
          attachment.kind = await deps.checkAttachment(trx, orgId, attachment, 'inputs.file_ids');
          attachments.push(attachment);
        }
        sessionId = presetSessionId ?? newId();
        await createHiddenSession(trx, { id: sessionId, orgId, agentId: agent.id, title: null, now });
        const accepted = await acceptMessage(
          trx,
          { orgId, sessionId, now },
          {
            parts: [{ type: 'text', text: userText }],
            text: userText,
            source: 'sdk',
            history: [...threadHistory, ...history],
            ...(attachments.length === 0 ? {} : { attachments }),
            agentVersion: version,
            ...(model === null ? {} : { options: { model } }),
          },
          (executor, id) => deps.agentOf(orgId, id, executor),
          deps.toolWarnings,
        );
        const id = accepted.row.run_id;
        await trx
          .insertInto('workflow_runs')
          .values({
            id,
            org_id: orgId,
            agent_id: agent.id,
            session_id: sessionId,
            message_id: accepted.row.id,
            thread_id: input.thread_id ?? null,
            version,
            blocking: input.blocking === false ? 0 : 1,
            stream: input.stream === true ? 1 : 0,
            created_at: now,
          })
          .execute();
        await writeEvents(trx, { orgId, sessionId, now }, [], {
          subscriptions: deps.subscriptions,
          events: [{ type: 'workflow.run.created', data: { id } }],
        });
        if (input.thread_id !== undefined) {
          await deps.threads.append(trx, { id: input.thread_id, orgId }, [{ role: 'user', content: userText }]);
        }
        events = accepted.events;
        return id;
      });
      afterCommit(bus, sessionId, events, true);
      const found = await findRun(orgId, runId);
      return view(found.run, found.message);
    },

    async get(orgId: string, id: string): Promise<WorkflowRun> {
      const { run, message } = await findRun(orgId, id);
      if (run.settled === 0 && isTerminal(message.status)) await settle(run.id);
      return view(run, message);
    },

    /** The run of a tool-run URL: the project and agent of the path must be those of the run. */
    async getFor(orgId: string, projectId: string, agentId: string, id: string): Promise<WorkflowRun> {
      const org = await db.selectFrom('orgs').select('project_id').where('id', '=', orgId).executeTakeFirstOrThrow();
      if (String(org.project_id) !== projectId) throw notFound('project', projectId);
      const run = await this.get(orgId, id);
      if (run.agent_id !== agentId.toLowerCase()) throw notFound('run', id);
      return run;
    },

    /**
     * Waits until the run ends or needs a function result (or `timeoutMs` passes), then returns it. Woken by the
     * live events of its session; polls besides.
     */
    async wait(orgId: string, id: string, timeoutMs: number, signal?: AbortSignal): Promise<WorkflowRun> {
      const { run } = await findRun(orgId, id);
      const deadline = clock.now() + timeoutMs;
      let wake: (() => void) | null = null;
      const unsubscribe = deps.live.subscribe(run.session_id, () => wake?.());
      try {
        for (;;) {
          const current = await this.get(orgId, id);
          const done = !['preparing', 'in_progress'].includes(current.status);
          if (done || clock.now() >= deadline || signal?.aborted === true) return current;
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, Math.min(WAIT_POLL_MS, Math.max(0, deadline - clock.now())));
            wake = () => {
              clearTimeout(timer);
              resolve();
            };
          });
          wake = null;
        }
      } finally {
        unsubscribe();
      }
    },

    /** The session whose live events carry this run's text deltas (for streaming). */
    async sessionOf(orgId: string, id: string): Promise<string> {
      return (await findRun(orgId, id)).run.session_id;
    },

    /** Cancels an unfinished run: at once when queued or waiting, through its worker when running. */
    async cancel(orgId: string, id: string): Promise<WorkflowRun> {
      const { run, message } = await findRun(orgId, id);
      if (!isTerminal(message.status)) await deps.messages.cancelMessage(orgId, run.message_id);
      return this.get(orgId, id);
    },

    /** Function results for a run that requires action, through the session's client-output protocol. */
    async submitOutputs(
      orgId: string,
      id: string,
      outputs: { call_id: string; output: string }[],
    ): Promise<WorkflowRun> {
      const { run } = await findRun(orgId, id);
      await deps.messages.recordClientOutputs(
        orgId,
        run.session_id,
        outputs.map((output) => ({ callId: output.call_id, output: output.output })),
        'continue',
      );
      return this.get(orgId, id);
    },
  };
}

export type WorkflowService = ReturnType<typeof createWorkflowService>;
