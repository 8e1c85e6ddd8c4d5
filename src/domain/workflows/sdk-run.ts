/**
 * The older API's shapes of a tool run (gaps.md section 9): the Dust-style run object of blocking calls and status
 * reads, the contentOnly body, and the stream events `{type, content}` that end with `data: [DONE]` (their schemas:
 * sdk-run-schema.ts).
 */
import type { StreamHub } from '../../bus/live-hub.ts';
import { AGENT_BLOCK, type SdkRunBody, type SdkRunStatus, type ToolRunStreamEvent } from './sdk-run-schema.ts';
import type { ToolRunInput, WorkflowRun, WorkflowService } from './workflow-service.ts';

export { AGENT_BLOCK, type SdkRunBody, type SdkRunStatus, type ToolRunStreamEvent };

export function sdkStatusOf(run: WorkflowRun): SdkRunStatus {
  if (run.status === 'completed') return 'succeeded';
  if (run.status === 'failed' || run.status === 'cancelled') return 'errored';
  if (run.status === 'requires_action') return 'requires_action';
  return 'running';
}

function execution(run: WorkflowRun) {
  if (run.status === 'completed') return [[{ value: { role: 'assistant', content: run.output ?? '' }, error: null }]];
  if (run.status === 'failed' || run.status === 'cancelled') {
    return [
      [{ value: null, error: run.error?.message ?? `the run ${run.status === 'failed' ? 'failed' : 'was cancelled'}` }],
    ];
  }
  return null;
}

export function sdkRunBody(run: WorkflowRun): SdkRunBody {
  return {
    run: {
      run_id: run.id,
      app_id: run.agent_id,
      version: run.agent_version,
      thread_id: run.thread_id,
      status: { run: sdkStatusOf(run), workflow: run.status },
      created: run.created_at,
      completed: run.completed_at,
      results: execution(run),
      required_actions: run.required_actions,
      usage: run.usage,
    },
  };
}

/** contentOnly: just the reply (null until there is one), with the run id to poll. */
export function sdkContentBody(run: WorkflowRun) {
  return { run_id: run.id, status: sdkStatusOf(run), content: run.output };
}

/**
 * Starts a run and yields its stream events: `run_status` running, `tokens` per text delta, then, once the run
 * ends (or needs a function result), `block_execution` with the result, `run_status` with the outcome and
 * `final`. Subscribes to the run's session before the run is admitted, so no delta is missed. The first
 * `next()` throws when the run cannot be admitted (a 404 or 400 before any byte is sent).
 */
export async function* streamToolRun(
  deps: { workflows: WorkflowService; hub: StreamHub; timeoutMs: number },
  target: { orgId: string; projectId: string; agentId: string; sessionId: string },
  input: ToolRunInput,
  signal: AbortSignal,
): AsyncGenerator<ToolRunStreamEvent> {
  const queue: string[] = [];
  const tokens = (text: string): ToolRunStreamEvent => ({
    type: 'tokens',
    content: { block_name: AGENT_BLOCK, tokens: { text } },
  });
  let wake: (() => void) | null = null;
  const unsubscribe = deps.hub.subscribe(target.sessionId, (event) => {
    if (event.kind === 'message.delta') queue.push(event.data.text);
    wake?.();
  });
  try {
    const run = await deps.workflows.start(target.orgId, target.projectId, target.agentId, input, target.sessionId);
    yield { type: 'run_status', content: { status: 'running', run_id: run.id } };
    const deadline = Date.now() + deps.timeoutMs;
    for (;;) {
      for (let text = queue.shift(); text !== undefined; text = queue.shift()) yield tokens(text);
      const current = await deps.workflows.get(target.orgId, run.id);
      if (!['preparing', 'in_progress'].includes(current.status) || signal.aborted || Date.now() > deadline) {
        // Deltas that arrived while the state was read still come first.
        for (let text = queue.shift(); text !== undefined; text = queue.shift()) yield tokens(text);
        const body = sdkRunBody(current);
        yield { type: 'block_execution', content: { block_name: AGENT_BLOCK, execution: body.run.results ?? [] } };
        yield {
          type: 'run_status',
          content: {
            status: body.run.status.run,
            run_id: run.id,
            ...(current.required_actions.length > 0 ? { required_actions: current.required_actions } : {}),
          },
        };
        yield { type: 'final', content: body };
        return;
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 1000);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
        if (queue.length > 0) wake();
      });
      wake = null;
    }
  } finally {
    unsubscribe();
  }
}
