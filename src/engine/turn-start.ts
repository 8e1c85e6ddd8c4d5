/**
 * A turn's start (`queued` → `running`, its agent version fixed on the run), written lazily: with the first step
 * when the model answers quickly (one transaction fewer), on its own after a short delay otherwise (so a slow turn
 * is seen `running` early, with its real start time), and with the turn's ending when it ends before either.
 */

import type { SessionEvent } from '../domain/outbox.ts';
import { startTurn } from '../domain/turns/transitions.ts';
import { loadMessage, markWorkspaceProvisioned } from '../domain/turns/turn-store.ts';
import type { Executor } from '../storage/db.ts';
import type { MessageRow } from '../storage/schema.ts';
import { change, type TurnContext, turnChange } from './turn-context.ts';

/** Writes a turn's start inside another transaction of the same turn; returns the start's events and the message after it. */
export type StartWrite = (
  trx: Executor,
  message: MessageRow,
) => Promise<{ events: SessionEvent[]; message: MessageRow }>;

/**
 * How long a started turn may stay `queued` in storage before its start is written on its own. A turn whose first
 * model call answers sooner writes its start with that step (one transaction fewer); a slower one is seen
 * `running` after this delay, with its real start time.
 */
const START_WRITE_DELAY_MS = 100;

export interface LazyStart {
  /** When the turn started (its `started_at`). */
  at: number;
  /** The start for the first step's transaction, unless it was written already (then null). */
  take(): StartWrite | null;
  /** Writes the start now unless a step took it; resolves with the message after it (null: no longer queued). */
  flush(): Promise<MessageRow | null>;
}

/** Starts the clock of a queued turn: its start is written by the first of its timer, a step, or its ending. */
export function lazyStart(turn: TurnContext, options: { version: number; provision: boolean }): LazyStart {
  const { deps } = turn;
  const at = deps.clock.now();
  const write: StartWrite = async (trx, current) => {
    if (options.provision) await markWorkspaceProvisioned(trx, current.agent_id, at);
    return startTurn(turnChange(turn, trx, current, at), options.version);
  };
  let written: Promise<MessageRow | null> | null = null;
  const writeAlone = () => {
    written ??= change(turn, ['queued'], async (trx, current) => (await write(trx, current)).events);
    return written;
  };
  const timer = setTimeout(() => {
    // Errors are seen by whoever waits for the start next (flush, or the step that finds it written).
    writeAlone().catch(() => undefined);
  }, START_WRITE_DELAY_MS);
  timer.unref();
  return {
    at,
    take() {
      clearTimeout(timer);
      return written === null ? write : null;
    },
    async flush() {
      clearTimeout(timer);
      const row = await writeAlone();
      // A step that took the start over may have run first; the message as it is now says where the turn is.
      return row ?? (await loadMessage(deps.db, turn.initial.id)) ?? null;
    },
  };
}

/** Writes the start now if a step has not written it yet; false when the turn is no longer there to run. */
export async function ensureStarted(turn: TurnContext): Promise<boolean> {
  if (turn.starter === null) return true;
  const row = await turn.starter.flush();
  turn.starter = null;
  if (row === null || row.status !== 'running') return false;
  turn.message = row;
  return true;
}

/**
 * The start for a step's own transaction, when no write of it began yet (then the turn no longer holds it).
 * Null when the turn was started already or its start is being written on its own.
 */
export function takeStart(turn: TurnContext): StartWrite | null {
  const start = turn.starter?.take() ?? null;
  if (start !== null) turn.starter = null;
  return start;
}
