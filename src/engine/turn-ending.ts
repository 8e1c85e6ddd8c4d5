/**
 * How a turn ends when something stops it between or during steps: an interrupt cancels it, a model or internal
 * error fails it (both keep the text produced, and write the model call in flight as a cancelled or failed step);
 * a lost lease or a shutdown leaves everything to the next worker; a full disk or an unreachable database is no
 * fault of the turn and goes back to the engine, which resumes it from its last persisted step.
 */

import type { SessionEvent } from '../domain/outbox.ts';
import { loadContextItems } from '../domain/turns/item-store.ts';
import { ownItems } from '../domain/turns/items.ts';
import { LeaseLostError } from '../domain/turns/leases.ts';
import { turnText } from '../domain/turns/message-service.ts';
import { type MessageError, OPEN_STATUSES } from '../domain/turns/message-types.ts';
import { cancelTurn, failTurn } from '../domain/turns/transitions.ts';
import { storableText } from '../lib/storable-text.ts';
import { ModelError } from '../models/types.ts';
import type { Executor } from '../storage/db.ts';
import { isDatabaseUnavailable, isStorageFull } from '../storage/errors.ts';
import type { MessageRow } from '../storage/schema.ts';
import { writeUnfinishedStep } from './spans.ts';
import { abortReason, change, TurnAbort, type TurnContext, turnChange } from './turn-context.ts';
import type { StartWrite } from './turn-start.ts';

function errorOf(error: unknown): MessageError {
  if (error instanceof ModelError) return { code: error.code, message: storableText(error.message) };
  return { code: 'internal_error', message: 'The turn failed because of an internal error' };
}

/** Ends the turn that `error` stopped, or rethrows it for the engine to resume the turn (see above). */
export async function endTurn(turn: TurnContext, error: unknown): Promise<void> {
  const { deps, inFlight } = turn;
  const reason = error instanceof TurnAbort ? error.reason : abortReason(turn.signal);
  if (inFlight !== null) {
    const outcome = reason === null ? 'failed' : 'cancelled';
    const none = { inputTokens: 0, outputTokens: 0, costMicros: 0 };
    deps.metrics.modelCall({ model: inFlight.model, outcome }, deps.clock.now() - inFlight.startedAt, none);
  }
  // Another process holds the session now: nothing more may be written, nor the turn begun again here (its model
  // call would be made again for nothing). The session worker stops (session-worker.ts).
  if (error instanceof LeaseLostError) throw error;
  if (reason === 'lease_lost' || reason === 'shutdown') return;
  // The disk is full: the turn is not at fault and must not end failed. The engine waits for space and resumes it.
  if (isStorageFull(error)) throw error;
  // The database could not be reached: nothing is wrong with the turn. The engine tries it again, from its last
  // persisted step, once the database answers (failing it here could succeed on a new connection, and lose it).
  if (reason === null && !(error instanceof ModelError) && isDatabaseUnavailable(error)) throw error;
  const start = await startForEnding(turn);
  if (reason === 'interrupt') {
    await cancel(turn, start);
    return;
  }
  if (!(error instanceof ModelError))
    deps.logger.error({ err: error, messageId: turn.initial.id }, 'turn failed unexpectedly');
  await fail(turn, start, errorOf(error));
}

/** A turn that ends before its first step was written still records that it started, in its last write. */
async function startForEnding(turn: TurnContext): Promise<StartWrite | null> {
  const { starter } = turn;
  if (starter === null) return null;
  turn.starter = null;
  const start = starter.take();
  if (start === null) await starter.flush().catch(() => null);
  return start;
}

/** The ending's message after the start, when the start goes with the ending (then its events come first). */
async function withStart(
  trx: Executor,
  start: StartWrite | null,
  found: MessageRow,
): Promise<{ events: SessionEvent[]; current: MessageRow }> {
  if (start === null || found.status !== 'queued') return { events: [], current: found };
  const { events, message } = await start(trx, found);
  return { events, current: message };
}

/** The text the turn produced so far (the ending keeps it), null when none. */
async function partialText(trx: Executor, turn: TurnContext): Promise<string | null> {
  const items = await loadContextItems(trx, turn.lease.sessionId, turn.message.seq);
  const text = turnText(ownItems(items, turn.initial.id));
  return text === '' ? null : text;
}

async function cancel(turn: TurnContext, start: StartWrite | null): Promise<void> {
  await change(turn, OPEN_STATUSES, async (trx, found, now) => {
    const { events, current } = await withStart(trx, start, found);
    await writeUnfinishedStep(trx, current, turn.inFlight, { status: 'cancelled' }, now);
    const ended = await cancelTurn(turnChange(turn, trx, current, now), await partialText(trx, turn));
    return [...events, ...ended];
  });
}

async function fail(turn: TurnContext, start: StartWrite | null, error: MessageError): Promise<void> {
  await change(turn, ['queued', 'running'], async (trx, found, now) => {
    const { events, current } = await withStart(trx, start, found);
    await writeUnfinishedStep(trx, current, turn.inFlight, { status: 'failed', error }, now);
    const ended = await failTurn(turnChange(turn, trx, current, now), error, await partialText(trx, turn));
    return [...events, ...ended];
  });
}
