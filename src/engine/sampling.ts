/**
 * A server's `sampling/createMessage` during a tool call, served by the agent's model when the agent's entry for
 * that server allows it (docs/mcp-auth.md "Sampling"): refused when credits or a budget are spent, otherwise one
 * call of the agent's model without tools, on the request's text, images and audio, its output capped by the
 * entry's `samplingMaxTokens`, its usage and cost added to the run (debited and counted under the budgets like a
 * step's), traced as a `model_call` span marked sampling under the call's span (media named, never their bytes).
 */
import { debitCredits, requireCredits } from '../domain/billing/credits.ts';
import { insertSpans, openToolSpan, SPAN_BLOCK, spanSeq } from '../domain/runs/spans.ts';
import type { CallServer } from '../domain/turns/items.ts';
import { addCompactionUsage } from '../domain/turns/turn-store.ts';
import { AppError } from '../errors/app-error.ts';
import { newId } from '../lib/ids.ts';
import { storableText } from '../lib/storable-text.ts';
import { costMicros } from '../models/pricing.ts';
import type { ContextMessage, Usage, UserPart } from '../models/types.ts';
import type { Executor } from '../storage/db.ts';
import { DEFAULT_SAMPLING_MAX_TOKENS, type McpServer, type SamplingOptIn } from '../tools/tool-config.ts';
import type { SamplingPart, SamplingRequest, SamplingResult } from '../tools/types.ts';
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

interface SamplingCall {
  callId: string;
  step: number;
  messageId: string;
  server: CallServer | undefined;
}

/** What one sampling call of the model answered. */
interface Sampled {
  text: string;
  usage: Usage;
  /** Cut at the output cap. */
  cut: boolean;
  startedAt: number;
  maxTokens: number;
}

/** A call's `sample` (ToolCallContext): none when the agent does not let this call's server sample (refused). */
export function samplerOf(
  turn: Turn,
  call: SamplingCall,
): { sample?: (request: SamplingRequest) => Promise<SamplingResult> } {
  const entry = call.server === undefined ? undefined : optedIn(turn.agent.mcpServers, call.server);
  if (entry === undefined || call.server === undefined) return {};
  const server = call.server;
  const cap = entry.samplingMaxTokens ?? DEFAULT_SAMPLING_MAX_TOKENS;
  const sample = async (request: SamplingRequest): Promise<SamplingResult> => {
    await admitSampling(turn);
    const sampled = await callModel(turn, request, Math.max(1, Math.min(request.maxTokens, cap)));
    await recordSampling(turn, { ...call, server }, request, sampled);
    return { text: sampled.text, model: turn.agent.model, stopReason: sampled.cut ? 'maxTokens' : 'endTurn' };
  };
  return { sample };
}

/** Refuses sampling once the organization's credits or a budget are spent, as a step would be. */
async function admitSampling(turn: Turn): Promise<void> {
  try {
    await requireCredits(turn.deps.db, turn.message.org_id, turn.agent.model);
  } catch (error) {
    if (error instanceof AppError) throw new Error(`sampling refused: ${error.message}`);
    throw error;
  }
  const exceeded = await admitCall(turn);
  if (exceeded !== null) throw new Error(`sampling refused: ${exceeded.message}`);
}

/** A part as the trace (and an assistant turn) shows it: media as their kind, type and size, never their bytes. */
function samplingPartText(part: SamplingPart): string {
  return part.type === 'text' ? part.text : `[${part.type} ${part.mediaType}, ${part.data.byteLength} bytes]`;
}

/** A server's part as the model takes it: images as images, audio as an audio file (a model without audio refuses). */
function userPart(part: SamplingPart): UserPart {
  if (part.type === 'text') return part;
  if (part.type === 'image') return { type: 'image', mediaType: part.mediaType, data: part.data };
  const extension = part.mediaType.slice(part.mediaType.indexOf('/') + 1) || 'audio';
  return { type: 'file', mediaType: part.mediaType, filename: `sampled.${extension}`, data: part.data };
}

/** One call of the agent's model, without tools, on the server's messages (images and audio included). */
async function callModel(turn: Turn, request: SamplingRequest, maxTokens: number): Promise<Sampled> {
  const { deps, agent } = turn;
  const startedAt = deps.clock.now();
  const context: ContextMessage[] = request.messages.map((entry) =>
    entry.role === 'user'
      ? { role: 'user', content: entry.content.map(userPart) }
      : { role: 'assistant', text: entry.content.map(samplingPartText).join('\n'), toolCalls: [] },
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
  return { text: storableText(text), usage, cut, startedAt, maxTokens };
}

/** The sampling span under the call's span, its usage on the run, debited and counted under the budgets. */
async function recordSampling(
  turn: Turn,
  call: SamplingCall & { server: CallServer },
  request: SamplingRequest,
  sampled: Sampled,
): Promise<void> {
  const { deps, agent } = turn;
  const { usage, text, startedAt } = sampled;
  const cost = costMicros(agent.model, usage);
  deps.metrics.modelCall({ model: agent.model, outcome: 'completed' }, deps.clock.now() - startedAt, {
    ...usage,
    costMicros: cost,
  });
  // The trace shows what was sent, media as their type and size (never their bytes).
  const input = request.messages
    .map((entry) => `${entry.role}: ${entry.content.map(samplingPartText).join('\n')}`)
    .join('\n');
  const media = (type: 'image' | 'audio') =>
    request.messages.reduce((sum, entry) => sum + entry.content.filter((part) => part.type === type).length, 0);
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
          server: call.server.label,
          server_id: call.server.id,
          max_tokens: sampled.maxTokens,
          finish: sampled.cut ? 'length' : 'stop',
          images: media('image'),
          audio: media('audio'),
        },
      },
    ]);
    await addCompactionUsage(trx, current, { ...usage, costMicros: cost }, now);
    await debitCredits(trx, current.org_id, cost);
    await recordBudgetSpend(turn, trx, { costMicros: cost, now, release: true });
    return [];
  });
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
