/**
 * Sends the task.* legacy webhooks (docs/legacy.md). It watches Tasks marked `notify_pending` (by create and by
 * each follow-up prompt), derives their state from the prompts, and moves `notified_state` along
 * created → running → completed|failed|canceled with a compare-and-set, so in a cluster exactly one process sends
 * each transition. Each event gets one attempt per subscribed webhook through the egress guard: no retry, by
 * contract. A transition that happened and finished between two looks still sends `task.running` first. The same
 * pass settles ended tool runs of the older API that no caller waited for (their reply goes to the thread).
 */
import type { Logger } from 'pino';
import type { Bus } from '../../bus/bus.ts';
import type { Clock } from '../../lib/clock.ts';
import { iso } from '../../lib/clock.ts';
import { postPinned, type Resolver } from '../../lib/egress.ts';
import { newId } from '../../lib/ids.ts';
import { createWakeLoop } from '../../lib/wake-loop.ts';
import type { TaskNotifiedState } from '../../storage/column-values.ts';
import type { Executor } from '../../storage/db.ts';
import { isStorageFull } from '../../storage/errors.ts';
import type { TaskRow } from '../../storage/schema.ts';
import type { WriteState } from '../../storage/storage-space.ts';
import type { WorkflowService } from '../workflows/workflow-service.ts';
import type { LegacyWebhookService } from './legacy-webhooks.ts';
import { promptStatusOf, type TaskEventType, taskStatusOf } from './task-types.ts';
import { taskWebhookEvent } from './task-webhook-events.ts';

export interface TaskNotifierDeps {
  db: Executor;
  clock: Clock;
  logger: Logger;
  webhooks: LegacyWebhookService;
  /** Ended tool runs whose reply nobody has appended to its thread yet are settled here. */
  workflows: WorkflowService;
  allowInsecureDestinations: boolean;
  resolver?: Resolver;
  /** Rings when changes that may need a notice commit (the bus's `outbox` topic). */
  bus: Pick<Bus, 'subscribe'>;
  /** The fallback poll. */
  pollMs: number;
  /** The shortest time between two passes that rings asked for. */
  minGapMs: number;
  timeoutMs: number;
  /** Whether writes work: while the disk is full the poll skips its passes. */
  space: WriteState;
}

export interface TaskNotifier {
  start(): void;
  stop(): Promise<void>;
  /** One pass over the Tasks waiting for a notification (tests drive it directly too). */
  tick(): Promise<void>;
}

const BATCH = 100;

/** The events that take a Task from what was last sent to where it is now, and whether it has settled. */
export function transitions(
  sent: TaskNotifiedState,
  status: ReturnType<typeof taskStatusOf>,
  latestStarted: boolean,
): { events: TaskEventType[]; state: TaskNotifiedState; settled: boolean } {
  const events: TaskEventType[] = [];
  let state = sent;
  if (state === 'none') {
    events.push('task.created');
    state = 'created';
  }
  if (state === 'created' && latestStarted) {
    events.push('task.running');
    state = 'running';
  }
  if (status !== 'running') {
    const terminal = status === 'completed' ? 'task.completed' : status === 'failed' ? 'task.failed' : 'task.canceled';
    events.push(terminal);
    state = status;
  }
  return { events, state, settled: status !== 'running' };
}

export function createTaskNotifier(deps: TaskNotifierDeps): TaskNotifier {
  const { db } = deps;
  async function send(task: TaskRow, type: TaskEventType, promptId: string | null): Promise<void> {
    const subscribers = await deps.webhooks.subscribers(task.org_id, type);
    if (subscribers.length === 0) return;
    const now = deps.clock.now();
    const event = taskWebhookEvent(type, task, promptId, {
      id: `evt_${newId().replaceAll('-', '')}`,
      createdAt: iso(now),
    });
    const body = JSON.stringify(event);
    await Promise.all(
      subscribers.map(async (hook) => {
        let ok = false;
        try {
          const secret = hook.secret();
          const response = await postPinned(hook.url, body, {
            headers: {
              'content-type': 'application/json',
              'user-agent': 'Agentry-Webhooks/1',
              'x-webhook-event': type,
              ...(secret === null ? {} : { 'x-webhook-secret': secret }),
            },
            timeoutMs: deps.timeoutMs,
            allowInsecure: deps.allowInsecureDestinations,
            resolver: deps.resolver,
            maxResponseBytes: 1024,
          });
          ok = response.status >= 200 && response.status <= 299;
        } catch (error) {
          deps.logger.info({ err: error, webhook: hook.id, type }, 'legacy webhook attempt failed (not retried)');
        }
        await deps.webhooks.recordAttempt(hook.id, ok, now);
      }),
    );
  }

  async function tick(): Promise<void> {
    for (const runId of await deps.workflows.unsettled(BATCH)) await deps.workflows.settle(runId);
    const tasks = await db.selectFrom('tasks').selectAll().where('notify_pending', '=', 1).limit(BATCH).execute();
    for (const task of tasks) {
      const prompts = await db
        .selectFrom('task_prompts as tp')
        .innerJoin('messages as m', 'm.id', 'tp.message_id')
        .select(['m.id', 'm.status', 'm.started_at'])
        .where('tp.task_id', '=', task.id)
        .orderBy('tp.seq')
        .execute();
      const statuses = prompts.map((prompt) => promptStatusOf(prompt.status));
      const latest = prompts.at(-1);
      const next = transitions(task.notified_state, taskStatusOf(statuses), latest?.started_at != null);
      if (next.events.length === 0) continue;
      const claimed = await db
        .updateTable('tasks')
        .set({ notified_state: next.state, notify_pending: next.settled ? 0 : 1 })
        .where('id', '=', task.id)
        .where('notified_state', '=', task.notified_state)
        .where('notify_pending', '=', 1)
        .executeTakeFirst();
      if (claimed.numUpdatedRows === 0n) continue;
      for (const type of next.events) {
        await send(task, type, latest?.id ?? null);
      }
    }
  }

  const loop = createWakeLoop(
    async () => {
      if (!deps.space.writable) return;
      await tick().catch((error: unknown) => {
        if (!isStorageFull(error)) deps.logger.error({ err: error }, 'task notifier pass failed');
      });
    },
    { pollMs: deps.pollMs, minGapMs: deps.minGapMs },
  );
  let unsubscribe: (() => void) | null = null;

  return {
    tick,
    start() {
      if (unsubscribe !== null) return;
      unsubscribe = deps.bus.subscribe('outbox', () => loop.ring());
      loop.start();
    },
    async stop() {
      unsubscribe?.();
      unsubscribe = null;
      await loop.stop();
    },
  };
}
