/**
 * The turn's reads and writes that are neither a state transition (transitions.ts) nor a log append (item-store.ts):
 * loading the message, the agent version a turn runs with, and a step's usage counters. The engine reaches the
 * database only through this folder, so every write to messages, runs, items and session status is made here.
 */
import { type ExpressionBuilder, PostgresAdapter } from 'kysely';
import { deepFreeze } from '../../lib/freeze.ts';
import type { Executor } from '../../storage/db.ts';
import { prepare } from '../../storage/prepared.ts';
import type { Database, MessageRow, RunRow } from '../../storage/schema.ts';
import { agentFromRow, findAgentVersion } from '../agents/agent-repo.ts';
import type { AgentConfig } from '../agents/agent-types.ts';
import { storedWarnings, TERMINAL_STATUSES, type Warning, warningsOf } from './message-types.ts';

const messageById = prepare((db, p: { id: string }) => db.selectFrom('messages').selectAll().where('id', '=', p.id));

const agentById = prepare((db, p: { id: string }) => db.selectFrom('agents').selectAll().where('id', '=', p.id));

export async function loadMessage(db: Executor, messageId: string): Promise<MessageRow | undefined> {
  return messageById.first(db, { id: messageId });
}

/** Configs of agent versions read by turns, per database handle; a version never changes once written. */
const versionConfigs = new WeakMap<Executor, Map<string, AgentConfig>>();
const VERSION_CACHE_MAX = 1000;

async function versionConfig(db: Executor, agentId: string, version: number): Promise<AgentConfig | undefined> {
  let cache = versionConfigs.get(db);
  if (cache === undefined) {
    cache = new Map();
    versionConfigs.set(db, cache);
  }
  const key = `${agentId}@${version}`;
  const cached = cache.get(key);
  if (cached !== undefined) return cached;
  const config = await findAgentVersion(db, agentId, version);
  if (config === undefined) return undefined;
  if (cache.size >= VERSION_CACHE_MAX) cache.clear();
  cache.set(key, deepFreeze(config));
  return config;
}

/**
 * The agent as the message's run fixed it (its pinned version), or the current one before the turn started. The
 * config is shared and frozen: callers copy what they change.
 */
export async function agentForTurn(db: Executor, message: MessageRow): Promise<AgentConfig> {
  if (message.agent_version !== null) {
    const config = await versionConfig(db, message.agent_id, message.agent_version);
    if (config !== undefined) return config;
  }
  const row = await agentById.first(db, { id: message.agent_id });
  if (row === undefined) throw new Error(`agent ${message.agent_id} of message ${message.id} not found`);
  return agentFromRow(row);
}

/** The agent's workspace exists from its first turn on; skills and network policy are fixed from then. */
export async function markWorkspaceProvisioned(trx: Executor, agentId: string, now: number): Promise<void> {
  await trx
    .updateTable('agents')
    .set({ workspace_provisioned_at: now })
    .where('id', '=', agentId)
    .where('workspace_provisioned_at', 'is', null)
    .execute();
}

/** What a step adds to its message: one more step, its tokens and cost. */
export const messageUsageFields =
  (p: StepUsage & { now: number }) => (eb: ExpressionBuilder<Database, 'messages'>) => ({
    step_count: eb('step_count', '+', 1),
    input_tokens: eb('input_tokens', '+', p.inputTokens),
    cached_input_tokens: eb('cached_input_tokens', '+', p.cachedInputTokens),
    output_tokens: eb('output_tokens', '+', p.outputTokens),
    cost_micros: eb('cost_micros', '+', p.costMicros),
    updated_at: p.now,
  });

/** What a step adds to its run: its tokens and cost. */
export const runUsageFields = (p: StepUsage) => (eb: ExpressionBuilder<Database, 'runs'>) => ({
  input_tokens: eb('input_tokens', '+', p.inputTokens),
  cached_input_tokens: eb('cached_input_tokens', '+', p.cachedInputTokens),
  output_tokens: eb('output_tokens', '+', p.outputTokens),
  cost_micros: eb('cost_micros', '+', p.costMicros),
});

const messageUsage = prepare((db, p: StepUsage & { id: string; now: number }) =>
  db.updateTable('messages').set(messageUsageFields(p)).where('id', '=', p.id),
);

const runUsage = prepare((db, p: StepUsage & { id: string }) =>
  db.updateTable('runs').set(runUsageFields(p)).where('id', '=', p.id),
);

/** Both on Postgres: the message's update a data-modifying CTE of the run's, one round trip. */
const stepUsage = prepare((db, p: StepUsage & { messageId: string; runId: string; now: number }) =>
  db
    .with('message', (qb) =>
      qb.updateTable('messages').set(messageUsageFields(p)).where('id', '=', p.messageId).returning('id'),
    )
    .updateTable('runs')
    .set(runUsageFields(p))
    .where('id', '=', p.runId),
);

/** A step's usage as a provider reported it, with every field (prepared statements bind every parameter). */
export function stepUsageOf(
  reported: Omit<StepUsage, 'cachedInputTokens'> & { cachedInputTokens?: number },
): StepUsage {
  // A provider that reports no cached tokens adds 0.
  return { ...reported, cachedInputTokens: reported.cachedInputTokens ?? 0 };
}

export interface StepUsage {
  inputTokens: number;
  /** Of inputTokens, those read from the provider's prompt cache. */
  cachedInputTokens: number;
  outputTokens: number;
  costMicros: number;
}

/**
 * Adds one step's tokens and cost to its message (which also counts the step) and to its run: in one statement on
 * Postgres, two on SQLite (where a statement costs no round trip).
 */
export async function addStepUsage(
  trx: Executor,
  message: Pick<MessageRow, 'id' | 'run_id'>,
  reported: Omit<StepUsage, 'cachedInputTokens'> & { cachedInputTokens?: number },
  now: number,
): Promise<void> {
  const usage = stepUsageOf(reported);
  if (trx.getExecutor().adapter instanceof PostgresAdapter) {
    await stepUsage.run(trx, { messageId: message.id, runId: message.run_id, ...usage, now });
    return;
  }
  await messageUsage.run(trx, { id: message.id, ...usage, now });
  await runUsage.run(trx, { id: message.run_id, ...usage });
}

/**
 * Adds the tokens and cost of a compaction's (or a sampling request's) model calls to its message and run (billed
 * like a step's, without counting a step: maxSteps counts the agent's own steps).
 */
export async function addCompactionUsage(
  trx: Executor,
  message: Pick<MessageRow, 'id' | 'run_id'>,
  usage: Omit<StepUsage, 'cachedInputTokens'>,
  now: number,
): Promise<void> {
  const fields = { ...usage, cachedInputTokens: 0 };
  await trx
    .updateTable('messages')
    .set((eb) => {
      const { step_count: _counted, ...messageFields } = messageUsageFields({ ...fields, now })(eb);
      return messageFields;
    })
    .where('id', '=', message.id)
    .execute();
  await trx.updateTable('runs').set(runUsageFields(fields)).where('id', '=', message.run_id).execute();
}

/**
 * Adds a warning to the message and its run (the message row as read in this transaction, under the lease: the
 * calls of a step end one fenced transaction at a time, so none overwrites another's warning).
 */
export async function addWarning(
  trx: Executor,
  message: Pick<MessageRow, 'id' | 'run_id' | 'warnings'>,
  warning: Warning,
  now: number,
): Promise<void> {
  const warnings = storedWarnings([...warningsOf(message.warnings, 'messages.warnings'), warning]);
  await trx.updateTable('messages').set({ warnings, updated_at: now }).where('id', '=', message.id).execute();
  await trx.updateTable('runs').set({ warnings }).where('id', '=', message.run_id).execute();
}

/** Marks an ended run exported (once, across processes); the run, or undefined when it was taken or is not ended. */
export async function claimRunExport(db: Executor, runId: string, now: number): Promise<RunRow | undefined> {
  return db
    .updateTable('runs')
    .set({ exported_at: now })
    .where('id', '=', runId)
    .where('exported_at', 'is', null)
    .where('status', 'in', TERMINAL_STATUSES)
    .returningAll()
    .executeTakeFirst();
}
