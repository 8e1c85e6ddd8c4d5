/**
 * Exports ended runs as OpenTelemetry GenAI spans, from the run's stored trace: the same record the Runs API
 * serves, written by the engine in the transactions of the steps it describes. A run is exported once it has
 * ended (completed, failed or cancelled), by whichever worker sees it first: `runs.exported_at` is claimed
 * before the spans are handed to the SDK, so across workers each run is exported at most once.
 *
 * The worker that ran a turn's end exports it at once (`poke`); a timer catches the rest (a turn cancelled
 * through the API while it waited, one completed by a client tool output, one whose worker died just after).
 */
import { SpanKind } from '@opentelemetry/api';
import type { Logger } from 'pino';
import { SPAN_BLOCK } from '../domain/runs/spans.ts';
import { TERMINAL_STATUSES } from '../domain/turns/message-types.ts';
import { claimRunExport } from '../domain/turns/turn-store.ts';
import { chatSpanId, type RunTrace, runTrace, toolSpanId } from '../lib/trace-context.ts';
import type { Executor } from '../storage/db.ts';
import { isStorageFull } from '../storage/errors.ts';
import type { RunRow, SpanRow } from '../storage/schema.ts';
import type { SpanSpec, Tracing } from './tracing.ts';

/** Runs that ended longer ago than this are left alone (tracing was off, or the backlog is stale). */
const LOOKBACK_MS = 3600_000;
const BATCH = 100;

/** `openai/gpt-5` → openai; the built-in scripted models → agentry. */
export function providerOf(model: string): string {
  const slash = model.indexOf('/');
  const provider = slash < 0 ? model : model.slice(0, slash);
  return provider === 'scripted' ? 'agentry' : provider;
}

const modelName = (model: string): string => {
  const slash = model.indexOf('/');
  return slash < 0 ? model : model.slice(slash + 1);
};

function parseObject(text: string | null): Record<string, unknown> {
  if (text === null) return {};
  try {
    const parsed: unknown = JSON.parse(text);
    return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? { ...parsed } : {};
  } catch {
    return {};
  }
}

function errorOf(text: string | null): { type: string; message: string } {
  const error = parseObject(text);
  return {
    type: typeof error.code === 'string' ? error.code : 'error',
    message: typeof error.message === 'string' ? error.message : '',
  };
}

const textMessage = (role: string, text: string) =>
  JSON.stringify([{ role, parts: [{ type: 'text', content: text }] }]);

interface RunFacts {
  run: RunRow;
  agentName: string;
  traceparent: string | null;
  spans: SpanRow[];
}

/** The GenAI spans of one ended run (exported: the spans the SDK recorded; a sampled-out run records none). */
export function exportRunSpans(tracing: Tracing, facts: RunFacts): number {
  const { run } = facts;
  const content = tracing.config.captureContent;
  const trace: RunTrace = runTrace(run.id, facts.traceparent);
  const end = run.completed_at ?? run.started_at ?? run.created_at;
  const common = {
    'gen_ai.provider.name': providerOf(run.model),
    'gen_ai.agent.id': run.agent_id,
    'gen_ai.agent.name': facts.agentName,
    'gen_ai.conversation.id': `conv_${run.session_id}`,
    'agentry.run.id': run.id,
  };
  const invoke: SpanSpec = {
    name: `invoke_agent ${facts.agentName}`,
    kind: SpanKind.INTERNAL,
    startTime: run.started_at ?? run.created_at,
    endTime: end,
    traceId: trace.traceId,
    spanId: trace.spanId,
    parent: trace.parent,
    attributes: {
      ...common,
      'gen_ai.operation.name': 'invoke_agent',
      'gen_ai.request.model': modelName(run.model),
      'gen_ai.usage.input_tokens': run.input_tokens,
      'gen_ai.usage.output_tokens': run.output_tokens,
      'agentry.message.id': run.message_id,
      'agentry.session.id': run.session_id,
      'agentry.source': run.source,
      'agentry.status': run.status,
      'agentry.cost_usd': run.cost_micros / 1_000_000,
      ...(run.agent_version === null ? {} : { 'gen_ai.agent.version': String(run.agent_version) }),
      ...(content ? { 'gen_ai.input.messages': textMessage('user', run.input_preview) } : {}),
      ...(content && run.output_preview !== null
        ? { 'gen_ai.output.messages': textMessage('assistant', run.output_preview) }
        : {}),
    },
    ...(run.status === 'failed' ? { error: errorOf(run.error) } : {}),
  };
  if (!tracing.record(invoke)) return 0;
  let recorded = 1;
  const parent = { traceId: trace.traceId, spanId: trace.spanId, flags: 1 };
  for (const span of facts.spans) {
    const attributes = parseObject(span.attributes);
    const spanEnd = span.ended_at ?? end;
    const failed = span.status === 'failed' ? { error: { type: 'error', message: '' } } : {};
    if (span.kind === 'model_call') {
      const step = Math.floor(span.seq / SPAN_BLOCK);
      const model = modelName(span.name);
      const error = attributes.error;
      const finish = typeof attributes.finish === 'string' ? [attributes.finish] : undefined;
      tracing.record({
        name: `chat ${model}`,
        kind: SpanKind.CLIENT,
        startTime: span.started_at,
        endTime: spanEnd,
        spanId: chatSpanId(run.id, step),
        parent,
        attributes: {
          ...common,
          'gen_ai.operation.name': 'chat',
          'gen_ai.provider.name': providerOf(span.name),
          'gen_ai.request.model': model,
          'gen_ai.response.model': model,
          'gen_ai.usage.input_tokens': span.input_tokens,
          'gen_ai.usage.output_tokens': span.output_tokens,
          'agentry.step': step,
          'agentry.status': span.status,
          'agentry.cost_usd': span.cost_micros / 1_000_000,
          ...(finish === undefined ? {} : { 'gen_ai.response.finish_reasons': finish }),
          ...(content && span.input_preview !== null
            ? { 'gen_ai.input.messages': textMessage('user', span.input_preview) }
            : {}),
          ...(content && span.output_preview !== null
            ? { 'gen_ai.output.messages': textMessage('assistant', span.output_preview) }
            : {}),
        },
        ...(span.status === 'failed'
          ? { error: typeof error === 'object' && error !== null ? errorOf(JSON.stringify(error)) : failed.error }
          : {}),
      });
      recorded += 1;
    } else if (span.kind === 'tool_call') {
      const callId = typeof attributes.call_id === 'string' ? attributes.call_id : span.id;
      const kind = typeof attributes.kind === 'string' ? attributes.kind : 'server';
      tracing.record({
        name: `execute_tool ${span.name}`,
        kind: SpanKind.INTERNAL,
        startTime: span.started_at,
        endTime: spanEnd,
        spanId: toolSpanId(run.id, callId),
        parent,
        attributes: {
          ...common,
          'gen_ai.operation.name': 'execute_tool',
          'gen_ai.tool.name': span.name,
          'gen_ai.tool.call.id': callId,
          'gen_ai.tool.type': kind === 'server' ? 'extension' : 'function',
          'agentry.tool.kind': kind,
          'agentry.step': Math.floor(span.seq / SPAN_BLOCK),
          'agentry.status': span.status,
          ...(typeof attributes.server === 'string' ? { 'agentry.tool.server': attributes.server } : {}),
          ...(typeof attributes.tool === 'string' ? { 'agentry.tool.server_tool': attributes.tool } : {}),
          ...(typeof attributes.attempts === 'number' ? { 'agentry.tool.attempts': attributes.attempts } : {}),
          ...(content && span.input_preview !== null ? { 'gen_ai.tool.call.arguments': span.input_preview } : {}),
          ...(content && span.output_preview !== null ? { 'gen_ai.tool.call.result': span.output_preview } : {}),
        },
        ...(span.status === 'failed'
          ? { error: { type: 'tool_error', message: content ? (span.output_preview ?? '') : 'the tool call failed' } }
          : {}),
      });
      recorded += 1;
    }
  }
  return recorded;
}

export interface RunExporter {
  /** Exports this run now if it has ended and nobody exported it yet. */
  exportRun(runId: string): Promise<void>;
  /** Looks for ended runs not exported yet (soon, in the background). */
  poke(): void;
  start(): void;
  /** Stops the timer and flushes what was recorded. */
  stop(): Promise<void>;
}

export interface RunExporterDeps {
  db: Executor;
  tracing: Tracing;
  logger: Logger;
  now: () => number;
  pollMs: number;
}

export function createRunExporter(deps: RunExporterDeps): RunExporter {
  const { db, tracing } = deps;
  let timer: NodeJS.Timeout | null = null;
  let sweeping = false;
  let again = false;

  async function exportRun(runId: string): Promise<void> {
    const claimed = await claimRunExport(db, runId, deps.now());
    if (claimed === undefined) return;
    const [message, agent, spans] = await Promise.all([
      db.selectFrom('messages').select('traceparent').where('id', '=', claimed.message_id).executeTakeFirst(),
      db.selectFrom('agents').select('name').where('id', '=', claimed.agent_id).executeTakeFirst(),
      db.selectFrom('spans').selectAll().where('run_id', '=', runId).orderBy('seq').execute(),
    ]);
    exportRunSpans(tracing, {
      run: claimed,
      agentName: agent?.name ?? claimed.agent_id,
      traceparent: message?.traceparent ?? null,
      spans,
    });
  }

  async function sweep(): Promise<void> {
    if (sweeping) {
      again = true;
      return;
    }
    sweeping = true;
    try {
      do {
        again = false;
        const rows = await db
          .selectFrom('runs')
          .select('id')
          .where('completed_at', '>=', deps.now() - LOOKBACK_MS)
          .where('exported_at', 'is', null)
          .where('status', 'in', TERMINAL_STATUSES)
          .orderBy('completed_at')
          .limit(BATCH)
          .execute();
        for (const row of rows) await exportRun(row.id);
        if (rows.length === BATCH) again = true;
      } while (again);
    } catch (error) {
      // A full disk (claiming a run is a write) is logged once per episode by storage/storage-space.ts.
      if (!isStorageFull(error)) deps.logger.warn({ err: error }, 'exporting ended runs as traces failed');
    } finally {
      sweeping = false;
    }
  }

  return {
    exportRun: async (runId) => {
      try {
        await exportRun(runId);
      } catch (error) {
        if (!isStorageFull(error)) deps.logger.warn({ err: error, runId }, 'exporting the run as a trace failed');
      }
    },
    poke: () => void sweep(),
    start() {
      timer ??= setInterval(() => void sweep(), deps.pollMs);
      timer.unref();
      void sweep();
    },
    async stop() {
      if (timer !== null) clearInterval(timer);
      timer = null;
      await tracing.forceFlush().catch(() => undefined);
    },
  };
}
