/**
 * What the features built on turns (schedules, the older tool-run API...) add to a turn's state changes. Each
 * registers a hook at the composition root (src/deps.ts); transitions.ts calls every hook in the transaction of
 * the change, so what a hook writes commits or rolls back with it. The turn wing imports no feature.
 */
import type { Executor } from '../../storage/db.ts';
import type { MessageRow } from '../../storage/schema.ts';
import type { WebhookEventData, WebhookEventInput } from '../outbox.ts';
import type { WebhookSubscriptions } from '../webhooks/subscriptions.ts';
import type { MessageError, RequiredAction } from './message-types.ts';
import type { StepUsage } from './turn-store.ts';

/** Where a turn's state changes report: the webhook types the organization receives, the features' hooks. */
export interface TurnListeners {
  /** Decides which of the change's webhook events are recorded (the organization's subscribed types). */
  subscriptions: WebhookSubscriptions;
  hooks: TurnHooks;
}

/** One change of a turn's state, in the caller's transaction. */
export interface TurnChange extends TurnListeners {
  trx: Executor;
  /** The message as it was before the change. */
  message: MessageRow;
  now: number;
  /** The usage of the model step that ends the turn, added to the message and run by the change's own update. */
  stepUsage?: StepUsage;
}

/** The state a change moved the turn to, with what the change knows about it. */
export type TurnTransition =
  | { status: 'running'; resumed: boolean }
  | { status: 'requires_action'; actions: RequiredAction[] }
  | { status: 'completed' }
  | { status: 'failed'; error: MessageError }
  | { status: 'cancelled' };

export interface TurnHook {
  /**
   * Called once the message, its run and the session are written and before the change's events are: may write
   * the feature's own rows (with their events, in the same transaction), and returns webhook events the change
   * records after its own.
   */
  changed?(
    change: TurnChange,
    transition: TurnTransition,
  ): readonly WebhookEventInput[] | Promise<readonly WebhookEventInput[]>;
  /** Fields the feature adds to the data of the turn's `agent.session.action_required` webhook. */
  actionRequired?(change: TurnChange): Promise<ActionRequiredFields | null>;
}

/** The fields of an `agent.session.action_required` webhook's data that features add (a schedule's ids). */
export type ActionRequiredFields = Omit<
  WebhookEventData<'agent.session.action_required'>,
  'id' | 'turn_id' | 'required_action' | 'required_actions_count'
>;

export type TurnHooks = readonly TurnHook[];
