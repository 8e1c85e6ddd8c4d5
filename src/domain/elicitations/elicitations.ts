/**
 * Elicitations of MCP servers (docs/mcp-auth.md "Elicitation"): a server asks a person for input during a tool
 * call. The request is an `elicitation` item of the call (written by the engine, which then suspends the turn);
 * the one answer is an `elicitation_response` item, written here, whoever sends it (the answer route, or a
 * Responses input item). The call then runs again and gets the stored answer when the server asks again. Every
 * function runs in the caller's transaction, with the session locked.
 */
import { AppError, validationError } from '../../errors/app-error.ts';
import type { ElicitationAction } from '../../events/session-values.ts';
import { compileOutputSchema, OutputSchemaError } from '../../lib/output-schema.ts';
import type { Executor } from '../../storage/db.ts';
import type { MessageRow } from '../../storage/schema.ts';
import { type SessionEvent, writeEvents } from '../outbox.ts';
import { appendItems } from '../turns/item-store.ts';
import { type Item, itemFromRow } from '../turns/items.ts';
import { requiredActionsOf } from '../turns/message-view.ts';
import { pendingCalls, waitingElicitation } from '../turns/pending-calls.ts';
import { resumeTurn } from '../turns/transitions.ts';
import type { TurnListeners } from '../turns/turn-hooks.ts';

export interface ElicitationAnswer {
  action: ElicitationAction;
  content: Record<string, unknown> | null;
}

type ElicitationItem = Extract<Item['content'], { type: 'elicitation' }>;

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** The field a schema violation is about, as a parameter name under `param`. */
function violationParam(param: string, error: { instancePath: string; params: Record<string, unknown> }): string {
  const named = error.params.missingProperty ?? error.params.additionalProperty;
  const path = error.instancePath
    .split('/')
    .slice(1)
    .map((part) => part.replaceAll('~1', '/').replaceAll('~0', '~'));
  if (typeof named === 'string') path.push(named);
  return [param, ...path].join('.');
}

/**
 * Reads `{action: "accept", content?}` or `{action: "decline"|"cancel"}` for `asked`: a form's content must fit its
 * requested schema (400 naming the field that does not); a URL-mode request is accepted without content.
 */
export function parseElicitationAnswer(asked: ElicitationItem, answer: unknown, param = 'answer'): ElicitationAnswer {
  if (!isObject(answer)) {
    throw validationError(
      param,
      `${param} must be an object {action: "accept"|"decline"|"cancel", content?} for an MCP elicitation`,
    );
  }
  for (const key of Object.keys(answer)) {
    if (key !== 'action' && key !== 'content') {
      throw validationError(`${param}.${key}`, `${param}.${key} is not a recognised field (action, content)`);
    }
  }
  const action = answer.action;
  if (action !== 'accept' && action !== 'decline' && action !== 'cancel') {
    throw validationError(`${param}.action`, `${param}.action must be one of accept, decline, cancel`);
  }
  const content = answer.content;
  if (action !== 'accept' || asked.mode === 'url') {
    if (content !== undefined && content !== null) {
      throw validationError(
        `${param}.content`,
        `${param}.content is only accepted with action "accept" of a form-mode elicitation`,
      );
    }
    return { action, content: null };
  }
  if (!isObject(content)) throw validationError(`${param}.content`, `${param}.content must be an object`);
  const schema = asked.requestedSchema ?? { type: 'object' };
  let validate: ReturnType<typeof compileOutputSchema>;
  try {
    validate = compileOutputSchema(schema);
  } catch (error) {
    if (!(error instanceof OutputSchemaError)) throw error;
    // The server's schema cannot be checked: the content goes to the server, which checks it itself.
    return { action, content };
  }
  if (!validate(content)) {
    const first = validate.errors?.[0];
    const where = first === undefined ? `${param}.content` : violationParam(`${param}.content`, first);
    throw validationError(where, `${where} ${first?.message ?? 'does not match the requested schema'}`);
  }
  return { action, content };
}

/** The elicitation of `items` that took the action id `actionId`, if any. */
export function elicitationItem(items: Item[], actionId: number): (Item & { content: ElicitationItem }) | undefined {
  return items.find(
    (item): item is Item & { content: ElicitationItem } =>
      item.content.type === 'elicitation' && item.content.actionId === actionId,
  );
}

/** The elicitation `elicitationId` (an `mcp_elicitation_request` id) of the session, if any. */
export async function findElicitation(
  db: Executor,
  sessionId: string,
  elicitationId: string,
): Promise<(Item & { content: ElicitationItem }) | undefined> {
  const rows = await db
    .selectFrom('items')
    .selectAll()
    .where('session_id', '=', sessionId)
    .where('type', '=', 'elicitation')
    .orderBy('seq')
    .execute();
  return rows
    .map(itemFromRow)
    .find(
      (item): item is Item & { content: ElicitationItem } =>
        item.content.type === 'elicitation' && item.content.elicitationId === elicitationId,
    );
}

export interface ElicitationTarget {
  orgId: string;
  sessionId: string;
  now: number;
}

/** An elicitation being answered: its item, its message and that message's items, as read with the session locked. */
export interface AskedElicitation {
  message: MessageRow;
  items: Item[];
  asked: Item & { content: ElicitationItem };
}

/**
 * Answers the elicitation `asked` of `message` (whose items are `items`): 409 action_not_waiting unless it is the
 * one its call waits for. The turn resumes once nothing else waits. Returns the events and whether it resumed.
 */
export async function answerElicitation(
  trx: Executor,
  target: ElicitationTarget & { listeners: TurnListeners },
  { message, items, asked }: AskedElicitation,
  answer: ElicitationAnswer,
  by: 'answer' | 'responses',
): Promise<{ events: SessionEvent[]; resumed: boolean }> {
  const call = pendingCalls(items).find((pending) => pending.callId === asked.callId);
  const open = message.status === 'requires_action' || message.status === 'running';
  if (!open || call === undefined || waitingElicitation(call)?.id !== asked.content.elicitationId) {
    throw new AppError('action_not_waiting', `action ${asked.content.actionId} is no longer waiting for an answer`, {
      param: 'actionId',
    });
  }
  const { orgId, sessionId, now } = target;
  const where = { orgId, sessionId, now };
  await appendItems(trx, where, [
    {
      messageId: asked.messageId,
      step: asked.step,
      callId: call.callId,
      content: {
        type: 'elicitation_response',
        elicitationId: asked.content.elicitationId,
        action: answer.action,
        content: answer.content,
        by,
      },
    },
  ]);
  const events = await writeEvents(trx, where, [
    {
      kind: 'message.event',
      messageId: message.id,
      runId: message.run_id,
      data: {
        type: 'elicitation_answered',
        sourceType: 'mcp_elicitation',
        actionId: asked.content.actionId,
        callId: call.callId,
        elicitationId: asked.content.elicitationId,
        action: answer.action,
      },
    },
  ]);
  if (message.status !== 'requires_action') return { events, resumed: false };
  const others = pendingCalls(items).filter((pending) => pending.callId !== call.callId);
  if (requiredActionsOf(others).length > 0) return { events, resumed: false };
  events.push(...(await resumeTurn({ trx, message, now, ...target.listeners })));
  return { events, resumed: true };
}
