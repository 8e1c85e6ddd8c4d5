/**
 * Stopping turns and removing what holds them: interrupt a session's active turn, cancel one message's turn, delete
 * a Response, forget a `store: false` Response, delete a session. A running turn is stopped through the worker
 * that runs it (an `interrupt` on the bus after commit); a queued or waiting one is cancelled in the transaction.
 */
import { notFound } from '../../errors/app-error.ts';
import type { Executor } from '../../storage/db.ts';
import type { MessageRow } from '../../storage/schema.ts';
import { afterCommit, type SessionEvent } from '../outbox.ts';
import { clearSpanPreviews } from '../runs/spans.ts';
import { loadMessageItems } from './item-store.ts';
import { turnText } from './items.ts';
import { lockOwnSession, type MessageContext, openTurns } from './message-context.ts';
import { isTerminal } from './message-types.ts';
import { deleteSessionRow, markWorkPending } from './session-rows.ts';
import { cancelTurn } from './transitions.ts';

/** Interrupts the session's active turn: at once when no worker runs it, else through the worker. */
export async function interruptSession(
  ctx: MessageContext,
  orgId: string,
  sessionId: string,
): Promise<{ status: 'interrupting' | 'no_turn' }> {
  const { clock, listeners } = ctx;
  let events: SessionEvent[] = [];
  /** The running turn a worker is to stop; a waiting or queued turn is cancelled here and needs no worker. */
  let running: string | undefined;
  const status = await ctx.db.transaction().execute(async (trx) => {
    const now = clock.now();
    await lockOwnSession(trx, orgId, sessionId, now);
    const active = await openTurns(trx, sessionId).limit(1).executeTakeFirst();
    if (active === undefined || isTerminal(active.status)) return 'no_turn' as const;
    if (active.status === 'running') {
      await trx.updateTable('messages').set({ cancel_requested: 1 }).where('id', '=', active.id).execute();
      running = active.id;
      return 'interrupting' as const;
    }
    events = await cancelTurn(
      { trx, message: active, now, ...listeners },
      turnText(await loadMessageItems(trx, active.id)) || null,
    );
    // Turns queued behind the cancelled one can run now.
    await markWorkPending(trx, { sessionId });
    return 'interrupting' as const;
  });
  afterCommit(ctx.bus, sessionId, events, true);
  if (running !== undefined) ctx.bus.publish('interrupt', { sessionId, messageId: running });
  return { status };
}

/**
 * Cancels one message's turn (POST /v1/responses/{id}/cancel): a running turn through its worker, a queued or
 * waiting one at once. A finished turn is left as it is. Returns the message's status after the request.
 */
export async function cancelMessage(ctx: MessageContext, orgId: string, messageId: string): Promise<string> {
  const { clock, listeners } = ctx;
  let events: SessionEvent[] = [];
  let sessionId = '';
  const status = await ctx.db.transaction().execute(async (trx) => {
    const found = await trx
      .selectFrom('messages')
      .select(['session_id'])
      .where('id', '=', messageId)
      .where('org_id', '=', orgId)
      .where('deleted_at', 'is', null)
      .executeTakeFirst();
    if (found === undefined) throw notFound('response', `resp_${messageId}`);
    sessionId = found.session_id;
    const now = clock.now();
    await lockOwnSession(trx, orgId, sessionId, now);
    const message = await trx.selectFrom('messages').selectAll().where('id', '=', messageId).executeTakeFirstOrThrow();
    if (isTerminal(message.status)) return message.status;
    if (message.status === 'running') {
      await trx.updateTable('messages').set({ cancel_requested: 1 }).where('id', '=', messageId).execute();
      return 'cancelling';
    }
    events = await cancelTurn(
      { trx, message, now, ...listeners },
      turnText(await loadMessageItems(trx, messageId)) || null,
    );
    await markWorkPending(trx, { sessionId });
    return 'cancelled';
  });
  afterCommit(ctx.bus, sessionId, events, status === 'cancelled');
  if (status === 'cancelling') ctx.bus.publish('interrupt', { sessionId, messageId });
  return status;
}

/**
 * Removes a Response from the Responses surface (DELETE /v1/responses/{id}): its turn is cancelled first when
 * unfinished; the message and its items stay in the session's log.
 */
export async function deleteResponse(ctx: MessageContext, orgId: string, messageId: string): Promise<void> {
  await cancelMessage(ctx, orgId, messageId);
  await ctx.db
    .updateTable('messages')
    .set({ deleted_at: ctx.clock.now() })
    .where('id', '=', messageId)
    .where('org_id', '=', orgId)
    .execute();
}

/**
 * Forgets a Response created with `store: false` once its request is over: its conversation (the session, with its
 * messages, items and events) is deleted, an unfinished turn cancelled first. Its run stays, for usage and billing,
 * without content: the previews of the run and of its spans are cleared.
 */
export async function forgetResponse(
  ctx: MessageContext,
  orgId: string,
  message: Pick<MessageRow, 'session_id' | 'run_id'>,
): Promise<void> {
  await ctx.db.transaction().execute(async (trx) => {
    await cancelOpenTurns(ctx, trx, orgId, message.session_id);
    await trx
      .updateTable('runs')
      .set({ input_preview: '', output_preview: null })
      .where('id', '=', message.run_id)
      .where('org_id', '=', orgId)
      .execute();
    await clearSpanPreviews(trx, message.run_id);
    await deleteSessionRow(trx, orgId, message.session_id);
  });
  ctx.bus.publish('interrupt', { sessionId: message.session_id });
}

/**
 * Deletes a session, cancelling its unfinished turns first (their turn.cancelled webhooks outlive it). A worker
 * still running its turn loses its lease with the row and stops at its next write.
 */
export async function deleteSession(ctx: MessageContext, orgId: string, sessionId: string): Promise<void> {
  await ctx.db.transaction().execute(async (trx) => {
    await cancelOpenTurns(ctx, trx, orgId, sessionId);
    await deleteSessionRow(trx, orgId, sessionId);
  });
  ctx.bus.publish('interrupt', { sessionId });
}

/** Locks the session and cancels its unfinished turns, oldest first (before the session is deleted). */
async function cancelOpenTurns(ctx: MessageContext, trx: Executor, orgId: string, sessionId: string): Promise<void> {
  const now = ctx.clock.now();
  await lockOwnSession(trx, orgId, sessionId, now);
  const open = await openTurns(trx, sessionId).execute();
  for (const message of open) await cancelTurn({ trx, message, now, ...ctx.listeners }, null);
}
