/**
 * The compaction policy (docs/context.md): once the conversation a step would send passes the threshold, its older
 * part is summarised by the agent's model into a compaction item of the log, and the steps after it send the
 * summary and the items it kept instead. The summary is written in chunks that each fit the window (the running
 * summary, then the next part of the conversation), so it never overflows; a compaction that fails (an error, a
 * refusal, the timeout) leaves the step to the truncation policy. Units go whole: a step with its tool calls and
 * their outputs is kept or summarised together, and the newest unit (the one a pending call belongs to) is kept.
 * The item, the compaction's span, its usage and cost, and its event are written in one transaction: a step that
 * starts again after a crash finds the compaction done (the log ends with it) or not started, never half.
 */

import { debitCredits } from '../domain/billing/credits.ts';
import { writeEvents } from '../domain/outbox.ts';
import { insertSpans, type NewSpan, SPAN_BLOCK, spanSeq } from '../domain/runs/spans.ts';
import { type ContextBuilder, summaryMessage } from '../domain/turns/context-builder.ts';
import { appendItems } from '../domain/turns/item-store.ts';
import type { CompactionReason, Item, NewItem } from '../domain/turns/items.ts';
import { addCompactionUsage } from '../domain/turns/turn-store.ts';
import { newId } from '../lib/ids.ts';
import { contextTokens, fixedTokens, messageTokens, unitStart } from '../models/context-fit.ts';
import { costMicros } from '../models/pricing.ts';
import { type Summary, summariseConversation } from '../models/summarise.ts';
import type { ContextMessage } from '../models/types.ts';
import { attachedFiles } from './attached-files.ts';
import { recordBudgetSpend } from './budget-gate.ts';
import { contextRoom, type StepFrame } from './context-window.ts';
import { compactionEvent } from './step-events.ts';
import { change, type Turn } from './turn-context.ts';
import { ensureStarted } from './turn-start.ts';

/** The share of the window (less the output reserved) past which the conversation is compacted by default. */
const DEFAULT_THRESHOLD_SHARE = 0.8;
/** The share of the threshold the newest units kept as they are may take. */
const KEPT_SHARE = 0.3;

/** The conversation tokens past which a step compacts: the agent's `compactThreshold`, else 80 % of the room. */
export function compactionThreshold(turn: Turn, frame: StepFrame): number {
  const room = contextRoom(turn, frame) ?? Number.MAX_SAFE_INTEGER;
  const fixed = fixedTokens(frame.instructions, frame.tools);
  const configured = turn.agent.compactThreshold;
  const threshold =
    configured === null ? Math.floor((room + fixed) * DEFAULT_THRESHOLD_SHARE) - fixed : configured - fixed;
  return Math.max(1, Math.min(threshold, room));
}

/** What a compaction summarises and what it keeps. */
interface Plan {
  summarised: ContextMessage[];
  kept: ContextMessage[];
  keptFrom: string | null;
  tokensBefore: number;
}

/**
 * The older units of `whole` to summarise, keeping the newest whole units within `keep` tokens (the newest one
 * whatever it costs). Null when there is nothing to summarise (one unit, or only an earlier summary).
 */
function planOf(whole: ContextMessage[], ids: string[], keep: number): Plan | null {
  let start = whole.length;
  let kept = 0;
  while (start > 0) {
    const unit = unitStart(whole, start);
    const tokens = contextTokens(whole.slice(unit, start));
    if (start < whole.length && kept + tokens > keep) break;
    kept += tokens;
    start = unit;
  }
  const onlySummary = start === 1 && ids[0]?.startsWith('cmp_') === true;
  if (start === 0 || onlySummary) return null;
  return {
    summarised: whole.slice(0, start),
    kept: whole.slice(start),
    keptFrom: ids[start] ?? null,
    tokensBefore: contextTokens(whole),
  };
}

/** The summary of `plan`, written by the agent's model within the turn's signal. */
function summarise(turn: Turn, plan: Plan, room: number): Promise<Summary> {
  const { deps, agent } = turn;
  const by = {
    adapter: deps.models.adapter(agent.model),
    model: agent.model,
    signal: turn.signal,
    now: () => deps.clock.now(),
  };
  return summariseConversation(by, plan.summarised, room);
}

/** The compaction's span: before the agent_step of the step it precedes, with its calls' usage and cost. */
function compactionSpan(turn: Turn, done: Done, at: { step: number; now: number }): NewSpan {
  const { plan, summary, reason, tokensAfter } = done;
  return {
    id: newId(),
    kind: 'compaction',
    name: `compaction (${reason})`,
    status: 'completed',
    seq: spanSeq(at.step, SPAN_BLOCK - 1),
    parentId: null,
    startedAt: summary.startedAt,
    endedAt: at.now,
    input: `${plan.summarised.length} messages (${plan.tokensBefore} tokens estimated) summarised`,
    output: summary.text,
    usage: { ...summary.usage, costMicros: costMicros(turn.agent.model, summary.usage) },
    attributes: {
      reason,
      model: turn.agent.model,
      tokens_before: plan.tokensBefore,
      tokens_after: tokensAfter,
      summarised_messages: plan.summarised.length,
      kept_messages: plan.kept.length,
      model_calls: summary.calls,
    },
  };
}

interface Done {
  plan: Plan;
  summary: Summary;
  reason: CompactionReason;
  tokensAfter: number;
}

/**
 * Writes the compaction in one fenced transaction: the item, its span, its usage and cost (debited), its event.
 * False when the turn is no longer running.
 */
async function record(turn: Turn, done: Done): Promise<boolean> {
  if (!(await ensureStarted(turn))) return false;
  const cost = costMicros(turn.agent.model, done.summary.usage);
  const after = await change(turn, ['running'], async (trx, current, now) => {
    const target = { orgId: current.org_id, sessionId: current.session_id, now };
    const item: NewItem = {
      messageId: current.id,
      step: current.step_count,
      content: {
        type: 'compaction',
        summary: done.summary.text,
        keptFrom: done.plan.keptFrom,
        reason: done.reason,
        tokensBefore: done.plan.tokensBefore,
        tokensAfter: done.tokensAfter,
      },
    };
    const [created] = await appendItems(trx, target, [item]);
    const span = compactionSpan(turn, done, { step: current.step_count, now });
    await insertSpans(trx, { orgId: current.org_id, runId: current.run_id }, [span]);
    await addCompactionUsage(trx, current, { ...done.summary.usage, costMicros: cost }, now);
    await debitCredits(trx, current.org_id, cost);
    await recordBudgetSpend(turn, trx, { costMicros: cost, now, release: false });
    return created === undefined ? [] : writeEvents(trx, target, [compactionEvent(current, created)]);
  });
  if (after === null) return false;
  turn.message = after;
  return after.status === 'running';
}

/**
 * Compacts the log of the turn now, for `reason`, when it has something to summarise and its last item is not
 * already a compaction. Returns the log read again after it, or null when nothing was compacted (nothing to
 * summarise, or the compaction failed: the step is then left to truncation).
 */
export async function compactLog(
  turn: Turn,
  frame: StepFrame,
  items: Item[],
  reason: CompactionReason,
): Promise<Item[] | null> {
  if (items.at(-1)?.content.type === 'compaction') return null;
  const builder: ContextBuilder = turn.log.contextOf(items);
  const room = contextRoom(turn, frame) ?? Number.MAX_SAFE_INTEGER;
  const keep = Math.floor(compactionThreshold(turn, frame) * KEPT_SHARE);
  // The summary reads the attached files as the step would send them.
  const whole = builder.build(await attachedFiles(turn, builder.attachmentIds()));
  const plan = planOf(whole, builder.entryItemIds(), keep);
  if (plan === null) return null;
  let summary: Summary;
  try {
    summary = await summarise(turn, plan, room);
  } catch (error) {
    if (turn.signal.aborted) throw turn.signal.reason;
    turn.deps.logger.warn({ err: error, reason }, 'compaction failed: this step falls back to truncation');
    return null;
  }
  const tokensAfter = messageTokens(summaryMessage(summary.text)) + contextTokens(plan.kept);
  if (!(await record(turn, { plan, summary, reason, tokensAfter }))) return null;
  return turn.log.load(turn.deps.db, turn.message.seq);
}

/** Compacts the log before a step when the turn's policy is compaction and its conversation passes the threshold. */
export async function compactIfDue(turn: Turn, frame: StepFrame, items: Item[]): Promise<Item[] | null> {
  if (turn.contextPolicy !== 'compaction') return null;
  const builder = turn.log.contextOf(items);
  const whole = builder.build(await attachedFiles(turn, builder.attachmentIds()));
  if (contextTokens(whole) <= compactionThreshold(turn, frame)) return null;
  return compactLog(turn, frame, items, 'threshold');
}
