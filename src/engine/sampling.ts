/**
 * A server's `sampling/createMessage` during a tool call, served by the agent's model when the agent's entry for
 * that server allows it (docs/mcp.md "Sampling"): refused when credits or a budget are spent, otherwise one call of
 * the agent's model without tools, its output capped by the entry's `samplingMaxTokens`, its usage and cost added
 * to the run (debited and counted under the budgets like a step's), traced as a `model_call` span marked sampling
 * under the call's span.
 */
import { debitCredits, requireCredits } from '../domain/billing/credits.ts';
import { insertSpans, openToolSpan, SPAN_BLOCK, spanSeq } from '../domain/runs/spans.ts';
import type { CallServer } from '../domain/turns/items.ts';
import { addCompactionUsage } from '../domain/turns/turn-store.ts';
import { AppError } from '../errors/app-error.ts';
import { newId } from '../lib/ids.ts';
import { storableText } from '../lib/storable-text.ts';
import { costMicros } from '../models/pricing.ts';
import type { ContextMessage, Usage } from '../models/types.ts';
import type { Executor } from '../storage/db.ts';
import { DEFAULT_SAMPLING_MAX_TOKENS, type McpServer, type SamplingOptIn } from '../tools/tool-config.ts';
import type { SamplingRequest, SamplingResult } from '../tools/types.ts';
import { admitCall, recordBudgetSpend } from './budget-gate.ts';
import { change, type Turn } from './turn-context.ts';

/** Sampling spans of a step take the upper half of its seq block, after its tool calls. */
const FIRST_SLOT = SPAN_BLOCK / 2;

/** The agent's entry for the server a call runs on, when it opts in to sampling. */
function optedIn(servers: McpServer[], server: CallServer): SamplingOptIn | undefined {
  const entry = servers.find((candidate) =>
    'type' in candidate
      ? candidate.name === server.label
      : candidate.kind === 'custom' && server.id !== null && candidate.serverId === server.id,
  );
  return entry !== undefined && 'allowSampling' in entry && entry.allowSampling === true ? entry : undefined;
}

/** A call's `sample` (ToolCallContext): none when the agent does not let this call's server sample (refused). */
export function samplerOf(
  turn: Turn,
  call: { callId: string; step: number; messageId: string; server: CallServer | undefined },
): { sample?: (request: SamplingRequest) => Promise<SamplingResult> } {
  const entry = call.server === undefined ? undefined : optedIn(turn.agent.mcpServers, call.server);
  if (entry === undefined || call.server === undefined) return {};
  const server = call.server;
  const cap = entry.samplingMaxTokens ?? DEFAULT_SAMPLING_MAX_TOKENS;
  const sample = async (request: SamplingRequest): Promise<SamplingResult> => {
    const { deps, agent, message } = turn;
    try {
      await requireCredits(deps.db, message.org_id, agent.model);
    } catch (error) {
      if (error instanceof AppError) throw new Error(`sampling refused: ${error.message}`);
      throw error;
    }
    const exceeded = await admitCall(turn);
    if (exceeded !== null) throw new Error(`sampling refused: ${exceeded.message}`);
    const startedAt = deps.clock.now();
    const maxTokens = Math.max(1, Math.min(request.maxTokens, cap));
    const context: ContextMessage[] = request.messages.map((entry) =>
      entry.role === 'user'
        ? { role: 'user', content: [{ type: 'text', text: entry.text }] }
        : { role: 'assistant', text: entry.text, toolCalls: [] },
    );
    let text = '';
    let usage: Usage = { inputTokens: 0, outputTokens: 0 };
    let cut = false;
    for await (const event of deps.models.adapter(agent.model).stream({
      model: agent.model,
      instructions: request.systemPrompt ?? '',
      context,
      tools: [],
      settings: { maxOutputTokens: maxTokens },
      signal: turn.signal,
    })) {
      if (event.type === 'text-delta') text += event.text;
      else if (event.type === 'finish') {
        usage = event.usage;
        cut = event.incomplete === 'max_output_tokens';
      }
    }
    text = storableText(text);
    const cost = costMicros(agent.model, usage);
    deps.metrics.modelCall({ model: agent.model, outcome: 'completed' }, deps.clock.now() - startedAt, {
      ...usage,
      costMicros: cost,
    });
    const input = request.messages.map((entry) => `${entry.role}: ${entry.text}`).join('\n');
    await change(turn, ['running'], async (trx, current, now) => {
      await insertSpans(trx, { orgId: current.org_id, runId: current.run_id }, [
        {
          id: newId(),
          kind: 'model_call',
          name: agent.model,
          status: 'completed',
          seq: await nextSlot(trx, current.run_id, call.step),
          parentId: (await openToolSpan(trx, call.messageId, call.callId))?.id ?? null,
          startedAt,
          endedAt: now,
          input,
          output: text,
          usage: { ...usage, costMicros: cost },
          attributes: {
            sampling: true,
            call_id: call.callId,
            server: server.label,
            server_id: server.id,
            max_tokens: maxTokens,
            finish: cut ? 'length' : 'stop',
          },
        },
      ]);
      await addCompactionUsage(trx, current, { ...usage, costMicros: cost }, now);
      await debitCredits(trx, current.org_id, cost);
      await recordBudgetSpend(turn, trx, { costMicros: cost, now, release: true });
      return [];
    });
    return { text, model: agent.model, stopReason: cut ? 'maxTokens' : 'endTurn' };
  };
  return { sample };
}

/** The next free sampling slot of `step` in the run. */
async function nextSlot(trx: Executor, runId: string, step: number): Promise<number> {
  const row = await trx
    .selectFrom('spans')
    .select((eb) => eb.fn.max('seq').as('seq'))
    .where('run_id', '=', runId)
    .where('seq', '>=', spanSeq(step, FIRST_SLOT))
    .where('seq', '<', spanSeq(step, SPAN_BLOCK - 1))
    .executeTakeFirst();
  const last = row?.seq === null || row?.seq === undefined ? null : Number(row.seq);
  return last === null ? spanSeq(step, FIRST_SLOT) : last + 1;
}
